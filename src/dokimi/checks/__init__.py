"""Checks: of a repository's evaluation files (``validate``), of its guidance (``scan``, ``reach``), and of an
agent's change beyond its grade (``merge``: mergeability; ``perf``: the performance protocol)."""
