"""Commands in shell fences and code spans: splitting, continuations, heredocs, expansions, cd semantics."""

from __future__ import annotations

import random
from pathlib import Path

from dokimi.checks.scan.shell import Command, parsed_commands, plain_commands, split_fence
from tests.checks.scan._util import find, rows, scan_files

FENCE = """\
# Shell
```bash
# a comment line
make build && make tset | tee log.txt > out.txt 2>&1; make check
make build \\
  tset2
make build \\
# a comment ends the continuation
make check
cat <<EOF > notes.txt
make not-a-command
EOF
make VAR=$(nproc) JOBS=4 $TARGET ${OTHER} "$(echo x)"
python scripts/run.py --flag
python scripts/gone.py
cd sub && python tool.py
python tool.py
```

```bash
( cd sub && python tool.py ) && python scripts/run.py
cd nowhere && python scripts/run.py
```

```sh
cd "$HOME" && python scripts/run.py
```

```sh
pushd sub && python tool.py
```

```sh
false || cd sub && python tool.py
```

```sh
cd sub | cat && python scripts/run.py
```

```console
$ make build
make: nothing to be done for build
$ python scripts/run.py
```

`cd sub && python tool.py` and `python tool.py`.
"""

MAKEFILE = "build:\n\techo b\ncheck:\n\techo c\nVAR ?= 1\n"


def test_shell_rules_give_the_expected_status_for_every_claim(tmp_path: Path) -> None:
    result = scan_files(
        tmp_path,
        {"AGENTS.md": FENCE, "Makefile": MAKEFILE, "scripts/run.py": "", "sub/tool.py": ""},
        build_systems=["make"],
    )
    assert rows(result) == [
        (4, "make_target", "build", "ok"),
        (4, "make_target", "check", "ok"),
        (4, "make_target", "tset", "fail"),
        (5, "make_target", "build", "ok"),
        (5, "make_target", "tset2", "fail"),
        (7, "make_target", "build", "ok"),
        (9, "make_target", "check", "ok"),
        (13, "make_var", "JOBS", "unresolved"),
        (13, "make_var", "VAR", "ok"),
        (14, "python_script", "scripts/run.py", "ok"),
        (15, "python_script", "scripts/gone.py", "fail"),
        (16, "cd", "sub", "ok"),
        (16, "python_script", "tool.py", "ok"),
        (17, "python_script", "tool.py", "ok"),
        (21, "python_script", "scripts/run.py", "ok"),
        (21, "cd", "sub", "ok"),
        (21, "python_script", "tool.py", "ok"),
        (22, "cd", "nowhere", "unresolved"),
        (22, "python_script", "scripts/run.py", "unresolved"),
        (26, "python_script", "scripts/run.py", "unresolved"),
        (30, "cd", "sub", "ok"),
        (30, "python_script", "tool.py", "unresolved"),
        (34, "cd", "sub", "ok"),
        (34, "python_script", "tool.py", "unresolved"),
        (38, "python_script", "scripts/run.py", "unresolved"),
        (38, "cd", "sub", "ok"),
        (42, "make_target", "build", "ok"),
        (44, "python_script", "scripts/run.py", "ok"),
        (47, "cd", "sub", "ok"),
        (47, "python_script", "tool.py", "ok"),
        (47, "python_script", "tool.py", "ok_basename"),
    ]
    whys = {d.why for d in (x.verdict for x in result.drafts if x.claim == "scripts/run.py")}
    assert any("after cd nowhere" in why for why in whys)
    assert any("non-literal" in why for why in whys)
    assert any("follows || or |" in why for why in whys)


def test_a_continued_command_is_one_command_at_its_first_line() -> None:
    items = split_fence(["make a \\", "  b \\", "  c", "make d"], 10)
    commands = [i for i in items if isinstance(i, Command)]
    assert [(c.line, c.argv) for c in commands] == [(10, ["make", "a", "b", "c"]), (13, ["make", "d"])]


def test_a_heredoc_body_is_not_a_command() -> None:
    items = split_fence(["cat <<-'END' > f", "\tmake x", "\tEND", "make y"], 1)
    assert [(i.line, i.argv) for i in items if isinstance(i, Command)] == [(1, ["cat"]), (4, ["make", "y"])]


def test_words_with_expansions_are_marked_and_the_literal_key_of_an_assignment_stays() -> None:
    items = split_fence(["make A=$(x) $T ${U} `v` ~/w plain"], 1)
    command = items[0]
    assert isinstance(command, Command)
    assert [(w.text, w.literal) for w in command.words] == [
        ("make", True),
        ("A=$(x)", False),
        ("$T", False),
        ("${U}", False),
        ("`v`", False),
        ("~/w", False),
        ("plain", True),
    ]


def test_an_unparsable_line_falls_back_to_shlex_and_says_so(tmp_path: Path) -> None:
    result = scan_files(
        tmp_path,
        {"AGENTS.md": "```bash\npython scripts/run.py 'unterminated\n```\n", "scripts/run.py": ""},
        build_systems=["none"],
    )
    claim = find(result, "scripts/run.py")
    assert claim.verdict.status == "ok"  # type: ignore[attr-defined]
    assert "shlex" in claim.verdict.why  # type: ignore[attr-defined]


PLAIN_WORDS = [
    "make",
    "python",
    "cd",
    "ls",
    "pkg/mod.py",
    "./run.sh",
    "../x",
    "-v",
    "--flag",
    "%1",
    "@x",
    "a:b",
    "+x",
    ",",
    ".",
    "-",
    "x,y",
    "1",
    "a.b/c",
    "in",
    "time",
    "done",
    "if",
    "fi",
    "do",
    "for",
    "while",
    "then",
    "coproc",
    "inside",
    "timeout",
    "pytest",
    "tests/t.py::test_a",
    "A_B",
    "2",
    "end",
]
PLAIN_SEPARATORS = [" && ", "&&", " || ", "||", " | ", "|", " ; ", ";", "; ", " ", "\t", "  "]


def generated_lines(count: int) -> list[str]:
    rng = random.Random(8)
    lines = []
    for _ in range(count):
        parts = [rng.choice(PLAIN_WORDS)]
        for _ in range(rng.randrange(0, 7)):
            parts += [rng.choice(PLAIN_SEPARATORS), rng.choice(PLAIN_WORDS)]
        if rng.random() < 0.1:
            parts.append(rng.choice(PLAIN_SEPARATORS))
        if rng.random() < 0.1:
            parts.insert(0, rng.choice(PLAIN_SEPARATORS))
        lines.append("".join(parts))
    return lines


def test_a_plain_line_splits_without_the_parser_exactly_as_the_parser_splits_it() -> None:
    taken = 0
    for text in generated_lines(3000):
        plain = plain_commands(text, 7)
        if plain is None:
            continue
        taken += 1
        assert plain == parsed_commands(text, 7), text
        assert all(isinstance(item, Command) and item.note is None for item in plain), text
    assert taken > 500  # many generated lines are plain: the comparison covers the fast path


def test_a_line_bash_reads_otherwise_is_left_to_the_parser() -> None:
    for text in [
        "make a=1",
        "FOO=1 make",
        "echo $HOME",
        "ls *.py",
        "cat <x",
        "a & b",
        "(cd x)",
        "a # c",
        "echo 'q'",
        "{ a; }",
        "! a",
        "if x; then y; fi",
        "time make",
        "a &&",
        "; a",
        "a;",
        "",
        "   ",
        "ls ~/x",
        "a\\ b",
        "echo `x`",
        "a |& b",
        "for x in a; do b; done",
    ]:
        assert plain_commands(text, 1) is None, text


def commands_of(text: str) -> list[tuple[list[str], str | None, bool]]:
    return [(c.argv, c.after, c.piped) for c in parsed_commands(text, 1) if isinstance(c, Command)]


def test_quotes_are_removed_from_words_as_the_shell_removes_them() -> None:
    assert commands_of("""make "a b" 'c $d' e"f"g h\\ i 'x\\ny'""") == [
        (["make", "a b", "c $d", "efg", "h i", "x\\ny"], None, False)
    ]


def test_a_pipe_binds_tighter_than_and_or() -> None:
    """The grammar nests ``b || c`` inside the pipeline; bash runs ``(a | b) || c``: c is not piped."""
    assert commands_of("a | b | c || d && e") == [
        (["a"], None, True),
        (["b"], "|", True),
        (["c"], "|", True),
        (["d"], "||", False),
        (["e"], "&&", False),
    ]


def test_words_after_a_redirection_target_are_arguments() -> None:
    # <batch> is a read from "batch" and a write to the next word, FILE
    assert commands_of("dokimi repo report <batch> FILE --json > out.txt more") == [
        (["dokimi", "repo", "report", "--json", "more"], None, False)
    ]


def test_blocks_give_their_inner_commands_and_declarations_their_words() -> None:
    assert commands_of("case $x in a) make y;; esac; export A=1; for f in a b; do make $f; done") == [
        (["make", "y"], None, False),
        (["export", "A=1"], ";", False),
        (["make", "$f"], ";", False),
    ]


def test_a_syntax_error_names_where_the_grammar_stopped() -> None:
    (command,) = parsed_commands("python run.py 'unterminated", 3)
    assert isinstance(command, Command)
    assert command.note is not None and "bash grammar could not parse" in command.note
