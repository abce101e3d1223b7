"""The one identifier grep reports what one ``git grep -F -w -o`` pattern per word reports, for any words.

The scan asks git for all words as ONE pattern (a Perl regex built as a trie; without PCRE an extended regex,
or one -F pattern per word when a dotted name is among them): git tries each of many patterns on every line,
which made a grep for hundreds of words ten times slower. The words here overlap in every way that can make
the two differ: prefixes, dotted names that start or end with another word, a word inside a dotted name.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from dokimi.checks.scan.identifiers import TRIE_WORD_LIMIT, grep_pattern, search_words
from dokimi.source import open_source
from tests.helpers.git import git, git_repo, head

TOKENS = ["ab", "ab.c", "abc", "a_b", "c", "ab.cd", "x.ab", "AB", "ab_c", "ab.c.d", "1ab", "_ab", "cd", "b"]
GLUE = [" ", ".", "(", ")", "", "-", ", ", "::"]
WORDS = ["ab", "abc", "ab.c", "c", "ab.c.d", "a_b", "AB", "x.ab", "cd", "b", "_ab", "ab_c", "ab.cd", "c.d"]


def reference(repo: Path, words: list[str]) -> dict[str, set[str]]:
    """One -F pattern per word: what the scan asked git before."""
    out = git(
        repo, "grep", "-a", "-z", "-o", "-F", "-w", "-H", "-f", "-", "HEAD", input="\n".join(words) + "\n"
    )
    found: dict[str, set[str]] = {w: set() for w in words}
    for record in out.split("\n"):
        if record:
            path, _, match = record.partition("\0")
            found[match].add(path.removeprefix("HEAD:"))
    return found


@pytest.mark.slow
def test_one_pattern_for_all_words_finds_what_one_pattern_per_word_finds(tmp_path: Path) -> None:
    rng = random.Random(11)
    files = {
        f"f{n}.txt": "\n".join(
            "".join(rng.choice(TOKENS) + rng.choice(GLUE) for _ in range(rng.randrange(1, 9)))
            for _ in range(rng.randrange(1, 5))
        )
        + "\n"
        for n in range(60)
    }
    repo = git_repo(tmp_path / "repo", files)
    syntaxes = set()
    with open_source(f"{repo}@{head(repo)}") as source:
        snapshot = source.eval_snapshot()
        try:
            for _ in range(40):
                words = sorted(set(rng.sample(WORDS, rng.randrange(1, 8))))
                expected = reference(repo, words)
                for perl in (True, False):
                    syntaxes.add(grep_pattern(words, perl=perl)[0])
                    assert search_words(snapshot, words, exclude=[], perl=perl) == expected, (words, perl)
        finally:
            snapshot.close()
    assert syntaxes == {"-E", "-F", "-P"}  # every kind of pattern was compared


def test_the_trie_pattern_prefers_the_longest_whole_word_and_keeps_long_words() -> None:
    long_word = "a" * (TRIE_WORD_LIMIT + 1)
    pattern = grep_pattern(["ab", "ab.c", "ab.cd", "abc", long_word])[1].decode().strip()
    # the same leftmost-longest whole words Python finds with a list of alternatives, longest first
    flat = re.compile(r"(?<![A-Za-z0-9_])(?:ab\.cd|ab\.c|abc|ab|" + long_word + r")(?![A-Za-z0-9_])")
    for text in ["ab.cd", "ab.c.d ab.cde abc", "abcd ab", "x.ab.c", long_word, "ab.c" + long_word]:
        assert re.findall(pattern, text) == flat.findall(text), text


def test_grep_records_are_those_a_scan_for_records_finds() -> None:
    """The output of ``git grep -z -o -H`` read by cutting at newlines gives the distinct records a scan for
    ``path NUL match newline`` finds, the commit prefix cut, also around a path holding a newline."""
    from dokimi.checks.scan.identifiers import grep_records

    def scanned(out: bytes, prefix: str) -> set[tuple[str, str]]:
        record = "([^\0\n]*)\0([^\n]*)\n"
        pattern = re.compile(f"(?:{re.escape(prefix)})?{record}" if prefix else record)
        return set(pattern.findall(out.decode("utf-8", "surrogateescape")))

    rng = random.Random(11)
    pieces = ["a.py", "src/b.md", "c\nd.txt", "\xe9.py", "x", "load_config", "pkg.mod", "\0", ""]
    for prefix in ("", "0123abcd:"):
        for _ in range(300):
            lines = []
            for _ in range(rng.randint(0, 6)):
                path = rng.choice(pieces[:5])
                lines.append((rng.choice([prefix, ""]) + path + "\0" + rng.choice(pieces[4:8])).encode())
            out = b"\n".join(lines) + rng.choice([b"\n", b"", b"\ntrailing"])
            assert grep_records(out, prefix) == scanned(out, prefix), out
