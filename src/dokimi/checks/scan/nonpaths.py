"""Words with a slash that are not paths: branch names, git refs, URLs without their scheme, owner/repo names,
media types, URL routes, word pairs. Such a code span is no path claim, so it is never fail.

:func:`not_a_path` asks the rules in order, each a named function; a path the tree holds is always a path,
and only the words around it (``branch``) can make a span under an existing directory a non-path
(``docs/<name>`` as a branch name). Measured on labelled guidance lines: tests/checks/scan/test_not_paths.py.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from dokimi.checks.scan.paths import Tree, join

#: A file extension on the last part (``x.py``): a file, so a path, unless a rule about the first part says
#: otherwise (a host name).
EXTENSION = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,9}$")
#: Words that make the span in their line a branch or a ref.
BRANCH_WORDS = re.compile(r"\b(branch(es)?|check(ed|s)? out|checkout|rebase|switch to|push(ed)? to)\b", re.I)
#: Words that make an ``owner/name`` in their line a repository, an image, a chart or a model.
OWNER_WORDS = re.compile(
    r"\b(github|gitlab|repo|repository|fork|clone|upstream|project|action|image|docker|chart|formula|tap|"
    r"model|hugging ?face|owner|org|organi[sz]ation)\b",
    re.I,
)
#: Words that make a slashed span in their line a URL route.
ROUTE_WORDS = re.compile(r"\b(endpoints?|routes?|GET|POST|PUT|PATCH|DELETE)\b")
#: Conventional first parts of branch names (git-flow, GitHub's bots, per-user branches).
BRANCH_PREFIXES = frozenset(
    """feature features feat fix fixes bugfix hotfix release releases chore chores refactor topic wip
    experiment experiments dependabot renovate users user""".split()
)
REMOTES = frozenset({"origin", "upstream"})
MEDIA_TYPES = frozenset(
    {"application", "text", "image", "audio", "video", "multipart", "font", "model", "message"}
)
HOST = re.compile(
    r"^[a-z0-9-]+(\.[a-z0-9-]+)*\.(com|org|net|io|dev|ai|co|edu|gov|app|sh|cloud|me|us|uk|de|eu|xyz|info|so|"
    r"gg|tv|fm|to|in|jp|cn|ru|rs|ly|tech|site)$"
)
VERSION = re.compile(r"^v?\d+(\.\d+)*$")
#: Two short words (``n/a``, ``I/O``, ``km/h``, ``and/or``): at most four letters each.
WORD_PAIR = re.compile(r"^[A-Za-z]{1,4}/[A-Za-z]{1,4}$")
#: An owner and a name as GitHub, Docker Hub, Helm and Hugging Face spell them.
OWNER_NAME = re.compile(r"^[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*$")
PAIRS = frozenset({"true/false", "yes/no", "on/off", "read/write", "input/output", "client/server"})


def not_a_path(location: str, line: str, bases: list[str], tree: Tree) -> str | None:
    """Why the span ``location`` (a path or glob as the scan would check it) in guidance ``line`` is not a
    path, or None when it is one."""
    if exists(location, bases, tree):
        return None
    first = location.split("/", 1)[0]
    extension = EXTENSION.search(location.rstrip("/").rsplit("/", 1)[-1]) is not None
    for rule in CONTEXT_RULES:  # the words around it decide, even under a directory of the tree
        reason = rule(location, first, extension, line)
        if reason:
            return reason
    if any(tree.is_dir(join(base, first)) for base in bases):
        return None  # under a directory of the tree: a path, missing or not
    for rule in RULES:
        reason = rule(location, first, extension, line)
        if reason:
            return reason
    return None


def exists(location: str, bases: list[str], tree: Tree) -> bool:
    """The literal path is in the tree at one of the bases."""
    rel = location.rstrip("/")
    return any(tree.resolve(join(base, rel)) is not None for base in bases)


def branch_words(location: str, first: str, extension: bool, line: str) -> str | None:
    """``docs/<name>`` in "create a branch `docs/<name>`": the line speaks of branches, and the span names no
    file (no extension)."""
    if not extension and BRANCH_WORDS.search(line):
        return "a branch name (the line speaks of branches), not a path"
    return None


def release_version(location: str, first: str, extension: bool, line: str) -> str | None:
    """``release/1.4``, ``hotfix/v2.1``: a branch prefix and a version, even beside a ``release/``
    directory."""
    if first.lower() in BRANCH_PREFIXES and VERSION.match(location.rstrip("/").rsplit("/", 1)[-1]):
        return "a release branch (a branch prefix and a version), not a path"
    return None


def host_name(location: str, first: str, extension: bool, line: str) -> str | None:
    """``github.com/o/r``, ``ghcr.io/o/img``, ``golang.org/x/tools``: a URL without its scheme."""
    return "a URL without its scheme, not a path" if HOST.match(first.lower()) else None


def git_ref(location: str, first: str, extension: bool, line: str) -> str | None:
    """``origin/main``, ``upstream/develop``, ``refs/tags/v1.2.0``."""
    if first in REMOTES or location.startswith(("refs/heads/", "refs/tags/", "refs/remotes/")):
        return "a git ref, not a path"
    return None


def branch_prefix(location: str, first: str, extension: bool, line: str) -> str | None:
    """``feature/x``, ``fix/issue-1``, ``release/1.4``, ``dependabot/pip/x``: a conventional branch name."""
    if first.lower() in BRANCH_PREFIXES and not extension:
        return "a branch name (its first part is a branch prefix), not a path"
    return None


def version_last(location: str, first: str, extension: bool, line: str) -> str | None:
    """``stable/1.4``, ``lts/v2``: a version, a tag or a release branch."""
    return "a version or release name, not a path" if VERSION.match(location.rsplit("/", 1)[-1]) else None


def media_type(location: str, first: str, extension: bool, line: str) -> str | None:
    """``application/json``, ``text/plain``, ``multipart/form-data``."""
    parts = location.split("/")
    if len(parts) == 2 and first in MEDIA_TYPES and not extension:
        return "a media type, not a path"
    return None


def word_pair(location: str, first: str, extension: bool, line: str) -> str | None:
    """``and/or``, ``n/a``, ``I/O``, ``km/h``, ``true/false``: two words, not a path."""
    if location.lower() in PAIRS or WORD_PAIR.match(location):
        return "two words, not a path"
    return None


def owner_name(location: str, first: str, extension: bool, line: str) -> str | None:
    """``pallets/flask`` in a line about a repository, ``bitnami/postgresql`` about a chart, an image or a
    model: an owner and a name (two names: not a directory ``tasks/``, a dotfile ``.git/config`` or a
    placeholder ``{run_dir}/ob``)."""
    if OWNER_NAME.match(location) and not extension and OWNER_WORDS.search(line):
        return "an owner/name of a repository, image, chart or model, not a path"
    return None


def url_route(location: str, first: str, extension: bool, line: str) -> str | None:
    """``api/v2/orders`` in a line about an endpoint or a request: a URL route."""
    if not extension and ROUTE_WORDS.search(line):
        return "a URL route (the line speaks of endpoints or requests), not a path"
    return None


Rule = Callable[[str, str, bool, str], "str | None"]
#: Rules the words of the line decide: they apply under a directory of the tree too.
CONTEXT_RULES: tuple[Rule, ...] = (branch_words, release_version, url_route)
#: Rules for a span whose first part is no directory of the tree.
RULES: tuple[Rule, ...] = (host_name, git_ref, branch_prefix, version_last, media_type, word_pair, owner_name)
