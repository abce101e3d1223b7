"""``repo export BATCH --format inspect``: the batch as Inspect AI eval logs, for ``inspect view``.

One log per (arm, model, effort, mode) of the batch, named after its arm where Inspect's viewer shows a log
(task ``dokimi/<manifest id>/<arm>``, display name ``<manifest id>: <arm>``, the arm as a tag and a task
argument). Each finished cell is one sample: its task is the
sample id and its rep the epoch; the input is the task's prompt; the messages are the prompt, the agent's
tool calls with their outputs (events.jsonl: a command is a ``bash`` call, a read ``read``, an edit
``edit``, a tool its own name) and the final answer; the score is the gate (1 pass, 0 fail) or the task's
score, with grade.json's metrics and the grader's error as its metadata and explanation; the sample's
metadata keeps dokimi's result (cost, turns, duration, harness), and its model usage the cell's tokens
(:func:`dokimi.analysis.tokens.cell_tokens`: the gateway's, or a dry run's simulated ones, which the log's
display name and tags say). Every log asks the viewer to show its content as plain text
(``ViewerConfig(trust_content=False)``): an agent's prompt, commands and answers are text, never Markdown or
HTML to render (``__reversed__`` stays as written). Missing and invalid cells are not samples:
the log's metadata counts them, and so are cells whose evidence cannot be read at all (``unreadable``);
lines of events.jsonl that are no event (not JSON, or nested past what dokimi reads) are left out of their
sample and counted in its metadata (``unreadable_event_lines``).

The logs are written with Inspect's own writer (``inspect_ai.log.write_eval_log``), so any Inspect version
that writes them reads them. inspect-ai is an optional dependency (``pip install inspect-ai``); the command
says so when it is missing. Cell files are hostile: read through :mod:`dokimi.safefs`, capped.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dokimi.analysis.tokens import cell_tokens
from dokimi.batch import Batch, Cell
from dokimi.errors import DokimiError, PrerequisiteError
from dokimi.grading.verdict import read_cell
from dokimi.rundir import ANSWER_TXT, EVENTS_JSONL, GRADE_JSON, TASK_JSON, RunDir
from dokimi.safefs import read_bytes
from dokimi.schemas._base import load_json, make_output_dir

if TYPE_CHECKING:
    from dokimi.schemas.result import Result

__all__ = ["ExportedLog", "export_inspect"]

READ_LIMIT = 16 * 1024 * 1024
OUTPUT_LIMIT = 64 * 1024
SCORER = "dokimi"


@dataclass(frozen=True)
class ExportedLog:
    path: Path
    arm: str
    model: str
    effort: str | None
    mode: str | None
    samples: int


def _require_inspect() -> None:
    try:
        # inspect-ai is an extra and slow to import
        import inspect_ai  # noqa: F401
    except ImportError:
        raise PrerequisiteError(
            "exporting Inspect logs needs the inspect-ai package",
            hint="pip install inspect-ai (or pip install 'dokimi-eval[inspect]')",
        ) from None


def _read(cell: Cell, name: str) -> str | None:
    try:
        return read_bytes(cell.dir / name, trusted=cell.dir, limit=READ_LIMIT).decode("utf-8", "replace")
    except (FileNotFoundError, DokimiError, OSError):
        return None


def _json(cell: Cell, name: str) -> Any:
    text = _read(cell, name)
    if text is None:
        return None
    try:
        return load_json(text)
    except ValueError:
        return None


def _cap(text: str) -> str:
    return text if len(text) <= OUTPUT_LIMIT else text[:OUTPUT_LIMIT] + f"\n... ({len(text)} characters)"


def _events(cell: Cell) -> tuple[list[dict[str, Any]], int]:
    """The events of the cell, and how many non-blank lines of events.jsonl are not one (not JSON, or
    nested past what dokimi reads): those are left out of the sample and counted in its metadata."""
    text = _read(cell, EVENTS_JSONL) or ""
    out = []
    unreadable = 0
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            event = load_json(line)
        except ValueError:
            unreadable += 1
            continue
        if isinstance(event, dict):
            out.append(event)
        else:
            unreadable += 1
    return out, unreadable


def _tool_call(event: dict[str, Any]) -> tuple[str, dict[str, Any], str]:
    """(function, arguments, output) of one dokimi event."""
    kind = str(event.get("kind"))
    if kind == "command":
        return "bash", {"cmd": str(event.get("text", ""))}, str(event.get("output") or "")
    if kind in ("read", "edit"):
        return kind, {"path": str(event.get("path", ""))}, str(event.get("output") or event.get("diff") or "")
    name = str(event.get("name") or kind)
    arguments = event.get("input") if isinstance(event.get("input"), dict) else {}
    return (
        re.sub(r"[^A-Za-z0-9_]", "_", name) or "tool",
        dict(arguments or {}),
        str(event.get("output") or ""),
    )


def _messages(prompt: str, events: list[dict[str, Any]], answer: str) -> list[Any]:
    # inspect-ai is an extra and slow to import
    from inspect_ai.model import ChatMessageAssistant, ChatMessageTool, ChatMessageUser
    from inspect_ai.tool import ToolCall

    messages: list[Any] = [ChatMessageUser(content=prompt)]
    for n, event in enumerate(events):
        function, arguments, output = _tool_call(event)
        call_id = f"call_{n}"
        messages.append(
            ChatMessageAssistant(
                content="", tool_calls=[ToolCall(id=call_id, function=function, arguments=arguments)]
            )
        )
        rc = event.get("rc")
        content = _cap(output) + (f"\n(exit code {rc})" if rc not in (None, 0) else "")
        messages.append(
            ChatMessageTool(content=content or "(no output)", tool_call_id=call_id, function=function)
        )
    messages.append(ChatMessageAssistant(content=answer or "(no final answer)"))
    return messages


def _usage(result: Result) -> Any:
    """Inspect's ModelUsage of the cell's tokens, or None when it has none."""
    # inspect-ai is an extra and slow to import
    from inspect_ai.model import ModelUsage

    tokens = cell_tokens(result)
    if tokens is None:
        return None
    return ModelUsage(
        input_tokens=tokens.input,
        output_tokens=tokens.output,
        total_tokens=tokens.total,
        input_tokens_cache_write=tokens.cache_write,
        input_tokens_cache_read=tokens.cache_read,
    )


def _sample(cell: Cell) -> Any:
    # inspect-ai is an extra and slow to import
    from inspect_ai.log import EvalSample
    from inspect_ai.model import ModelOutput
    from inspect_ai.scorer import Score

    result = cell.result
    assert result is not None
    task = _json(cell, TASK_JSON)
    prompt = str(task.get("prompt", "")) if isinstance(task, dict) else ""
    answer = _read(cell, ANSWER_TXT) or ""
    grade = _json(cell, GRADE_JSON)
    if result.gated:
        value: float = 1.0 if read_cell(result).passed else 0.0
    else:
        value = float(result.score) if result.score is not None else 0.0
    explanation = result.grader_error or ", ".join(
        f"{k}: {v}" for k, v in sorted(result.gate_results.items())
    )
    score = Score(
        value=value,
        answer=_cap(answer),
        explanation=explanation or None,
        reason="grader_failed" if result.grader_failure else None,
        metadata={"metrics": dict(result.metrics), "grade": grade if isinstance(grade, dict) else None},
    )
    metadata = result.model_dump(mode="json", by_alias=True)
    metadata["cell"] = cell.rel
    events, unreadable = _events(cell)
    if unreadable:
        metadata["unreadable_event_lines"] = unreadable
    usage = _usage(result)
    output = ModelOutput.from_content(result.model, _cap(answer))
    output.usage = usage
    return EvalSample(
        id=result.task,
        epoch=result.rep + 1,
        input=prompt,
        target="pass" if result.gated else "",
        messages=_messages(prompt, events, answer),
        output=output,
        model_usage={result.model: usage} if usage is not None else {},
        scores={SCORER: score},
        metadata=metadata,
        total_time=result.duration_s,
        working_time=result.duration_s,
    )


def _readable_sample(cell: Cell) -> Any:
    """The cell's sample, or None when its evidence cannot be read at all (the log counts it as
    ``unreadable``; the other cells are exported as usual)."""
    try:
        return _sample(cell)
    except (DokimiError, OSError, ValueError, RecursionError):
        return None


def _total_usage(model: str, samples: list[Any]) -> dict[str, Any]:
    """The log's model usage: its samples' summed."""
    # inspect-ai is an extra and slow to import
    from inspect_ai.model import ModelUsage

    usages = [s.model_usage[model] for s in samples if model in s.model_usage]
    if not usages:
        return {}
    total = ModelUsage()
    for usage in usages:
        total = total + usage
    return {model: total}


def _stamp(cells: list[Cell]) -> tuple[str, str]:
    """When the group's cells finished, first and last (result.json's modification times, UTC)."""
    times = []
    for cell in cells:
        try:
            times.append(RunDir(cell.dir).result_json.lstat().st_mtime)
        except OSError:
            continue
    if not times:
        return "", ""
    first, last = (datetime.fromtimestamp(t, UTC).isoformat() for t in (min(times), max(times)))
    return first, last


def _file_name(batch_name: str, arm: str, model: str, effort: str | None, mode: str | None) -> str:
    parts = [batch_name, arm, model, *([effort] if effort else []), *([mode] if mode else [])]
    return "_".join(re.sub(r"[^A-Za-z0-9.=+-]", "-", p) for p in parts) + ".eval"


def export_inspect(batch: Batch, out_dir: Path) -> list[ExportedLog]:
    """Write one Inspect eval log per (arm, model, effort, mode) of ``batch`` into ``out_dir``."""
    _require_inspect()
    # inspect-ai is an extra and slow to import
    from inspect_ai.log import (
        EvalConfig,
        EvalDataset,
        EvalLog,
        EvalMetric,
        EvalResults,
        EvalScore,
        EvalSpec,
        EvalStats,
        write_eval_log,
    )
    from inspect_ai.viewer import ViewerConfig

    groups: dict[tuple[str, str, str | None, str | None], list[Cell]] = defaultdict(list)
    not_counted: dict[tuple[str, str, str | None, str | None], dict[str, int]] = defaultdict(
        lambda: {"missing": 0, "invalid": 0, "unreadable": 0}
    )
    for cell in batch.cells:
        if cell.status == "finished" and cell.result is not None:
            r = cell.result
            groups[(r.arm, r.model, r.effort, r.mode)].append(cell)
        elif cell.key is not None and cell.status in ("missing", "invalid"):
            not_counted[(cell.key.arm, cell.key.model, cell.key.effort, None)][cell.status] += 1
    manifest_id = batch.pin.manifest_id if batch.pin is not None else batch.root.name
    make_output_dir(out_dir)
    written = []
    for (arm, model, effort, mode), cells in sorted(
        groups.items(), key=lambda kv: tuple(str(k) for k in kv[0])
    ):
        cells.sort(key=lambda c: c.rel)
        samples = []
        for cell in list(cells):
            sample = _readable_sample(cell)
            if sample is None:
                not_counted[(arm, model, effort, None)]["unreadable"] += 1
                cells.remove(cell)
            else:
                samples.append(sample)
        if not samples:
            continue
        tasks = sorted({s.id for s in samples})
        started, completed = _stamp(cells)
        values = [float(s.scores[SCORER].value) for s in samples]
        harness = cells[0].result.harness if cells[0].result is not None else "harness"
        dry = any(c.result is not None and c.result.dry_run for c in cells)
        spec = EvalSpec(
            created=started or datetime.now(UTC).isoformat(),
            task=f"dokimi/{manifest_id}/{arm}",
            task_display_name=f"{manifest_id}: {arm}"
            + (" (dry run: scripted model, simulated tokens)" if dry else ""),
            task_id=f"{batch.root.name}/{arm}",
            task_args={"arm": arm, "effort": effort, "mode": mode},
            tags=[arm, *(["dry run"] if dry else [])],
            viewer=ViewerConfig(trust_content=False),
            dataset=EvalDataset(name=manifest_id, samples=len(tasks), sample_ids=tasks),
            model=model,
            solver=harness,
            config=EvalConfig(epochs=max(int(s.epoch) for s in samples)),
            metadata={
                "dokimi": {
                    "batch": batch.root.name,
                    "arm": arm,
                    "effort": effort,
                    "mode": mode,
                    "pin": batch.pin.model_dump(mode="json", by_alias=True)
                    if batch.pin is not None
                    else None,
                    "not_counted": not_counted.get(
                        (arm, model, effort, None), {"missing": 0, "invalid": 0, "unreadable": 0}
                    ),
                }
            },
        )
        results = EvalResults(
            total_samples=len(samples),
            completed_samples=len(samples),
            scores=[
                EvalScore(
                    name=SCORER,
                    scorer=SCORER,
                    scored_samples=len(samples),
                    metrics={"accuracy": EvalMetric(name="accuracy", value=sum(values) / len(values))},
                )
            ],
        )
        log = EvalLog(
            status="success",
            eval=spec,
            results=results,
            stats=EvalStats(
                started_at=started, completed_at=completed, model_usage=_total_usage(model, samples)
            ),
            samples=samples,
        )
        path = out_dir / _file_name(batch.root.name, arm, model, effort, mode)
        write_eval_log(log, str(path))
        written.append(ExportedLog(path, arm, model, effort, mode, len(samples)))
    return written
