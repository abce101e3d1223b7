"""Checks: of a repository's evaluation files (``validate``), of its guidance (``scan``, ``reach``), of an
agent's change beyond its grade (``merge``: mergeability; ``perf``: the performance protocol), and of this
machine (``doctor``: docker, git, the harness CLIs, sealed runs, disk)."""
