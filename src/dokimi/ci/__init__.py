"""dokimi in pull requests: the logic of the GitHub Action (`action.yml` at the repository root, docs/ci.md).

The action is a thin composite: it installs dokimi and runs ``dokimi ci pull-request``, which does everything
here, so the same code runs in a test against a local git remote and a local stand-in for GitHub's API:

- :mod:`dokimi.ci.event`: the pull request the workflow runs for (its number, base, labels), from GitHub's
  event file, or from the API for a dispatch that names it;
- :mod:`dokimi.ci.scan`: the L0 scan of the head and of the base, the claims that fail now and did not
  before, SARIF for code scanning, and the comment that sums them up;
- :mod:`dokimi.ci.pilot`: on a label or a dispatch, the pilot A/B of the pull request's guidance
  (``guidance:tree`` at the head) against the base's (``guidance:at=BASE``) on the manifest's ``pilot`` tasks,
  and the comment with its compare table and power verdict;
- :mod:`dokimi.ci.action`: which of the two runs, the comments posted (one per kind, updated in place), the
  step's outputs and summary.

Floor: interface (docs/architecture.md), beside ``cli``: it may use every library floor, and ``cli`` only
calls it.
"""

from __future__ import annotations
