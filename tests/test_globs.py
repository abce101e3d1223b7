"""The glob dialect (mergeability §2), tested as properties with hypothesis.

``**`` crosses ``/``; ``*`` and ``?`` do not; there is no extglob and no brace expansion. Beside the
rule-by-rule properties, :func:`reference_match` is an independent, segment-by-segment statement of the
dialect, and :func:`dokimi.globs.match_glob` must agree with it on every generated pattern and path.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dokimi.globs import filter_paths, is_glob, literal_prefix, match_any, match_glob

# --- generators -------------------------------------------------------------------------------------------

#: Characters of path segments: letters, a dot (dot files are files like any other) and a dash.
SEGMENT = st.text(alphabet="ab.-", min_size=1, max_size=4).filter(lambda s: s not in (".", ".."))
PATH = st.lists(SEGMENT, min_size=1, max_size=5).map("/".join)

#: Pieces of one pattern segment: literals, ``*``, ``?`` and character classes.
PIECE = st.sampled_from(["a", "b", ".", "-", "*", "?", "[ab]", "[!a]"])
PATTERN_SEGMENT = st.one_of(
    st.lists(PIECE, min_size=1, max_size=4).map("".join),
    st.just("**"),
)
PATTERN = st.lists(PATTERN_SEGMENT, min_size=1, max_size=5).map("/".join)


# --- an independent statement of the dialect --------------------------------------------------------------


def _segment_regex(segment: str) -> re.Pattern[str]:
    """One pattern segment as a regex over one path segment: ``*`` is any run of characters, ``?`` one
    character, ``[...]`` a class (``[!...]`` negated); a ``**`` inside a segment is just ``*``."""
    out = ""
    i = 0
    while i < len(segment):
        ch = segment[i]
        if ch == "*":
            out += ".*"
        elif ch == "?":
            out += "."
        elif ch == "[":
            end = segment.index("]", i + 2)
            body = segment[i + 1 : end]
            out += "[^" + re.escape(body[1:]) + "]" if body.startswith("!") else "[" + re.escape(body) + "]"
            i = end
        else:
            out += re.escape(ch)
        i += 1
    return re.compile(out, re.DOTALL)


def reference_match(pattern: str, path: str) -> bool:
    """``**`` as a whole segment matches zero or more path segments (one or more when it is the last
    segment: ``a/**`` is everything under ``a``, not ``a`` itself); any other segment matches exactly one
    path segment, so ``*`` and ``?`` never cross ``/``."""
    pat = pattern.split("/")
    segs = path.split("/")

    def match(i: int, j: int) -> bool:
        if i == len(pat):
            return j == len(segs)
        if pat[i] == "**":
            least = 1 if i == len(pat) - 1 else 0
            return any(match(i + 1, k) for k in range(j + least, len(segs) + 1))
        return j < len(segs) and bool(_segment_regex(pat[i]).fullmatch(segs[j])) and match(i + 1, j + 1)

    return match(0, 0)


# --- the dialect agrees with its statement ----------------------------------------------------------------


@pytest.mark.slow
@settings(max_examples=600)
@given(PATTERN, PATH)
@example("**/AGENTS.md", "AGENTS.md")
@example("a/**", "a")
@example("a/**/b", "a/b")
@example("*", ".hidden")
def test_match_glob_agrees_with_the_segment_by_segment_statement_of_the_dialect(
    pattern: str, path: str
) -> None:
    assert match_glob(pattern, path) == reference_match(pattern, path)


# --- rule by rule -----------------------------------------------------------------------------------------


@pytest.mark.slow
@given(st.lists(SEGMENT, min_size=1, max_size=6))
def test_double_star_crosses_slashes_at_any_depth(segments: list[str]) -> None:
    path = "/".join(segments)
    assert match_glob("**", path)
    assert match_glob("top/**", f"top/{path}")
    assert match_glob(f"**/{segments[-1]}", path)  # at any depth, the root included
    assert match_glob(f"top/**/{segments[-1]}", f"top/{path}")


@pytest.mark.slow
@given(
    st.lists(SEGMENT, min_size=2, max_size=6),
    st.text(alphabet="*?", min_size=1, max_size=6).filter(lambda w: w != "**"),
)
def test_star_and_question_mark_never_cross_a_slash(segments: list[str], wildcards: str) -> None:
    path = "/".join(segments)
    assert not match_glob(wildcards, path)
    assert not match_glob(f"{segments[0]}/*", "/".join([segments[0], *segments[1:], "x"]))


@given(SEGMENT)
def test_star_matches_exactly_one_segment_and_question_mark_one_character(segment: str) -> None:
    assert match_glob("*", segment)
    assert match_glob("?" * len(segment), segment)
    assert not match_glob("?" * (len(segment) + 1), segment)
    assert match_glob("d/*", f"d/{segment}")
    assert not match_glob("*", f"d/{segment}")


@pytest.mark.slow
@given(st.lists(SEGMENT, min_size=1, max_size=3))
def test_a_trailing_double_star_is_everything_under_a_directory_but_not_the_directory(
    segments: list[str],
) -> None:
    directory = "/".join(segments)
    assert not match_glob(f"{directory}/**", directory)
    assert match_glob(f"{directory}/**", f"{directory}/f")
    assert not match_glob(f"{directory}/**", f"{directory}x/f")


@given(
    st.sampled_from(["!(a|b)", "@(a|b)", "+(a)", "*(a)", "?(a)"]),
    st.sampled_from(["a", "b", "ab", "c"]),
)
def test_there_is_no_extglob(pattern: str, path: str) -> None:
    assert not match_glob(pattern, path)


@given(st.sampled_from(["{a,b}", "x.{py,md}", "{a,b}/c"]), st.sampled_from(["a", "b", "x.py", "x.md", "a/c"]))
def test_there_is_no_brace_expansion(pattern: str, path: str) -> None:
    assert not match_glob(pattern, path)
    assert match_glob(pattern, pattern)  # braces are literal characters


def test_a_leading_bang_is_not_a_negation() -> None:
    assert not match_glob("!a", "b")
    assert match_glob("!a", "!a")


@pytest.mark.slow
@given(PATH)
def test_a_pattern_without_wildcards_matches_only_itself(path: str) -> None:
    assert not is_glob(path)
    assert match_glob(path, path)
    assert not match_glob(path, path + "x")
    assert not match_glob(path, "x/" + path)


@pytest.mark.slow
@given(PATTERN, st.lists(PATH, max_size=8))
def test_filter_paths_and_match_any_are_match_glob_over_many_paths(pattern: str, paths: list[str]) -> None:
    assert filter_paths(pattern, paths) == [p for p in paths if match_glob(pattern, p)]
    for path in paths:
        assert match_any([pattern, "nothing/at/all"], path) == match_glob(pattern, path)


@pytest.mark.slow
@given(PATTERN, PATH)
def test_every_match_lies_under_the_literal_prefix(pattern: str, path: str) -> None:
    prefix = literal_prefix(pattern)
    assert not is_glob(prefix)
    if prefix and match_glob(pattern, path):
        assert path.startswith(prefix + "/")


def test_fnmatch_would_have_crossed_the_slash_this_dialect_does_not() -> None:
    """The prototype's bug (mergeability §2): fnmatch's ``*`` crosses ``/`` and rejected a real fix."""
    import fnmatch

    assert fnmatch.fnmatchcase("cpp/oneapi/dal/algo/df/x.cpp", "cpp/*.cpp")
    assert not match_glob("cpp/*.cpp", "cpp/oneapi/dal/algo/df/x.cpp")
    assert match_glob("cpp/**/*.cpp", "cpp/oneapi/dal/algo/df/x.cpp")


def test_any_directory_globs_match_exactly_as_the_glob_engine_does() -> None:
    """``**/NAME`` is matched without wcmatch (the default guidance globs); on generated paths, with dot
    directories, ``.`` and ``..`` parts, empty parts and trailing slashes, it matches what wcmatch matches."""
    import random

    from wcmatch import glob as wc

    from dokimi.globs import _AnyDirectory, _compiled, filter_paths

    flags = wc.GLOBSTAR | wc.DOTGLOB | wc.FORCEUNIX
    rng = random.Random(3)
    parts = [
        "a",
        ".h",
        ".",
        "..",
        "",
        "AGENTS.md",
        "xAGENTS.md",
        "AGENTS.mdx",
        "CLAUDE.md",
        "b c",
        "*",
        "[x]",
    ]
    paths = sorted({"/".join(rng.choice(parts) for _ in range(n)) for n in range(1, 6) for _ in range(2000)})
    for pattern in ("**/AGENTS.md", "**/CLAUDE.md", "**/b c", "**/.h"):
        assert isinstance(_compiled(pattern), _AnyDirectory)
        assert filter_paths(pattern, paths) == [p for p in paths if wc.globmatch(p, pattern, flags=flags)]


@pytest.mark.slow
def test_simple_globs_match_exactly_as_the_glob_engine_does() -> None:
    """Literal parts, ``*`` in parts and whole ``**`` parts (``docs/**/*.md``) are matched by a regex of
    dokimi's own; on generated patterns and paths (with dot directories, ``.`` and ``..`` parts, empty parts
    and trailing slashes), it matches what wcmatch matches."""
    import random

    from wcmatch import glob as wc

    from dokimi.globs import _compiled, _Simple

    flags = wc.GLOBSTAR | wc.DOTGLOB | wc.FORCEUNIX
    rng = random.Random(7)
    path_parts = ["a", "b", ".h", ".", "..", "", "x.md", ".md", "a.b.md", "b c", "(a)", "!a"]
    paths = sorted(
        {"/".join(rng.choice(path_parts) for _ in range(n)) for n in range(1, 6) for _ in range(600)}
    )
    pieces = ["a", "b", ".", "*", "x", ".md", "(a)", "!", "{a,b}", " c"]
    simple = 0
    for _ in range(300):
        parts = [
            "**" if rng.random() < 0.25 else "".join(rng.choice(pieces) for _ in range(rng.randint(1, 3)))
            for _ in range(rng.randint(1, 4))
        ]
        pattern = "/".join(parts)
        simple += isinstance(_compiled(pattern), _Simple)
        expected = [p for p in paths if wc.globmatch(p, pattern, flags=flags)]
        assert filter_paths(pattern, paths) == expected, pattern
    assert simple > 150  # most generated patterns took the regex, not wcmatch
    paths = ["a/x.md", "a/.h/b/a.b.md", "a", "b/x.md", "a/./x.md", "a/y.md/"]
    assert filter_paths("a/**/*.md", paths) == ["a/x.md", "a/.h/b/a.b.md", "a/y.md/"]
