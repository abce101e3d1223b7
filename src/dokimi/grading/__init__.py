"""Grading a finished run directory: the floor between the agent's run and the verdict.

- :mod:`dokimi.grading.environment`: :class:`GradeEnvironment`, what every grade container of a batch shares,
  built once per batch and passed whole;
- :mod:`dokimi.grading.entrypoints`: the repository's entry points (grade, oracle, static) in a grade
  container, and grade.json read as untrusted input; each takes ``(environment, run_dir, task)``;
- :mod:`dokimi.grading.egress`: a task's egress hosts for its entry points, through a sealed run's proxy;
- :mod:`dokimi.grading.gate`: the gate, a pure function from a task and its grade to a verdict;
- :mod:`dokimi.grading.checks`: the framework's own checks of a cell, one protocol, kept by:
- :mod:`dokimi.grading.merge`: mergeability inside a cell (diff, scope, judge, test integrity, merge.json);
- :mod:`dokimi.grading.perf`: the perf check against the oracle variant (perf/check.json);
- :mod:`dokimi.grading.verdict`: the gate once over grade.json and the checks' documents, and the one reading
  of a result.json;
- :mod:`dokimi.grading.grade`: the steps of grading one cell, in the spec's order (:func:`grade_cell`);
- :mod:`dokimi.grading.finished`: a finished batch opened for grading again;
- :mod:`dokimi.grading.regrade`: ``repo regrade``.

The run-directory layout these read and write is :mod:`dokimi.rundir`.
"""

from __future__ import annotations
