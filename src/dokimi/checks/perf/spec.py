"""The task's ``perf`` object: what the framework's protocol and the repository's ``perf``
entry point measure for one task.

task.json keeps keys the framework does not read for the repository, so ``perf`` is read from the task's
extra keys here (:func:`task_perf`). The framework reads ``metric``, ``baseline``, ``tolerance``,
``repeats``, ``rounds`` and ``sizes``; ``target``, ``threads`` and any other key are the benchmark's, handed
to the command through the environment (:func:`perf_env`) and through {run_dir}/task.json.
"""

from __future__ import annotations

import json
import math
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationError,
    field_validator,
)

from dokimi.errors import DocumentError
from dokimi.schemas._base import format_loc
from dokimi.schemas.task import Task

PERF_KEY = "perf"

SizeValue = StrictInt | float | StrictStr | StrictBool


class TaskPerf(BaseModel):
    """task.json ``perf``: one benchmark, its baseline, tolerance and repetitions."""

    model_config = ConfigDict(extra="allow", use_attribute_docstrings=True)

    target: str | None = None
    """What to measure, in the benchmark's own terms (a Bazel target, an asv benchmark name); passed to the
    command as DOKIMI_PERF_TARGET."""
    metric: str = Field(min_length=1)
    """The metric the command reports (repo_perf.v1 ``metric`` must equal it). A cost: lower is better."""
    baseline: Literal["oracle"] = "oracle"
    """The baseline: the oracle build, run on the same machine in the same session."""
    tolerance: float = Field(ge=1.0, allow_inf_nan=False)
    """The largest acceptable median candidate/baseline ratio (1.5: up to 50% slower)."""
    repeats: int = Field(default=5, ge=1)
    """Repetitions per invocation; each repo_perf.v1 document has exactly this many values."""
    rounds: int = Field(default=3, ge=1)
    """Rounds of (candidate, oracle, oracle control) in shuffled order."""
    threads: int | None = Field(default=None, ge=1)
    """Threads the benchmark should use (DOKIMI_PERF_THREADS); the framework does not enforce it."""
    sizes: list[dict[str, SizeValue]] | None = Field(default=None, min_length=1)
    """Input sizes, smallest first; each is measured in every round. With two or more, a ratio that grows with
    size flags a complexity regression."""

    @field_validator("sizes")
    @classmethod
    def _non_empty_sizes(cls, sizes: list[dict[str, SizeValue]] | None) -> list[dict[str, SizeValue]] | None:
        if sizes is not None:
            for size in sizes:
                if not size:
                    raise ValueError('a size is an object with at least one key, for example {"p": 20000}')
                for value in size.values():
                    if isinstance(value, float) and not math.isfinite(value):
                        raise ValueError("size values must be finite")
        return sizes

    @property
    def size_indices(self) -> list[int | None]:
        """The sizes to measure, by index; ``[None]`` for a task without sizes."""
        return list(range(len(self.sizes))) if self.sizes else [None]


def perf_problems(data: object) -> list[tuple[tuple[str | int, ...], str]]:
    """Every problem of a task.json ``perf`` value: (location from the task's root, message)."""
    try:
        TaskPerf.model_validate(data)
    except ValidationError as exc:
        out: list[tuple[tuple[str | int, ...], str]] = []
        for err in exc.errors(include_url=False):
            loc = tuple(p for p in err["loc"] if isinstance(p, (str, int)))
            message = "required key is missing" if err["type"] == "missing" else err["msg"]
            out.append(((PERF_KEY, *loc), message))
        return out
    return []


def parse_perf(data: object, *, path: str | None = None) -> TaskPerf:
    """``perf`` of a task.json; a DocumentError naming the first bad key when it is malformed."""
    problems = perf_problems(data)
    if problems:
        loc, message = problems[0]
        raise DocumentError(message, path=path, key=format_loc(loc))
    return TaskPerf.model_validate(data)


def task_perf(task: Task) -> TaskPerf | None:
    """The task's perf object, or None when the task has none."""
    extra = task.model_extra or {}
    if extra.get(PERF_KEY) is None:
        return None
    return parse_perf(extra[PERF_KEY])


def perf_env(perf: TaskPerf, *, variant: str, size_index: int | None) -> dict[str, str]:
    """The environment of one invocation: the variant, the metric, the repetitions, and the size (JSON)."""
    env = {
        "DOKIMI_PERF_VARIANT": variant,
        "DOKIMI_PERF_METRIC": perf.metric,
        "DOKIMI_PERF_REPEATS": str(perf.repeats),
    }
    if perf.target is not None:
        env["DOKIMI_PERF_TARGET"] = perf.target
    if perf.threads is not None:
        env["DOKIMI_PERF_THREADS"] = str(perf.threads)
    if size_index is not None and perf.sizes is not None:
        env["DOKIMI_PERF_SIZE"] = json.dumps(perf.sizes[size_index], sort_keys=True)
        env["DOKIMI_PERF_SIZE_INDEX"] = str(size_index)
    return env
