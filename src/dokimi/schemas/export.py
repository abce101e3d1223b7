"""JSON Schema export of every registered document, for editors and for graders written in other languages.

File names follow one rule, :func:`schema_file_name`: the registry name without a trailing ``.json`` or
``.jsonl``, plus ``.schema.json`` (``repo_grade.v1`` -> ``repo_grade.v1.schema.json``, ``task.json`` ->
``task.schema.json``, ``events.jsonl`` -> ``events.schema.json``). The committed ``schemas/`` directory at
the repository root is ``export_all`` of the registry; a test keeps it from going stale. Run ``python -m
dokimi.schemas.export [DIR]`` (or ``scripts/export-schemas.py``) after changing a model.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dokimi.schemas import SCHEMAS, model_for
from dokimi.schemas._base import write_text_atomic

JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


def schema_file_name(name: str) -> str:
    """``<name without .json/.jsonl>.schema.json``."""
    for suffix in (".jsonl", ".json"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    return f"{name}.schema.json"


def resolve_name(name: str) -> str | None:
    """The registry name for ``name``, which may also be a file stem (``task``, ``events``) or a file name
    (``task.schema.json``); None when nothing matches."""
    if name in SCHEMAS:
        return name
    for known in SCHEMAS:
        if name in (schema_file_name(known), schema_file_name(known).removesuffix(".schema.json")):
            return known
    return None


def json_schema(name: str) -> dict[str, Any]:
    """The JSON Schema of a registered document (validation mode: what a reader accepts)."""
    schema = model_for(name).model_json_schema(by_alias=True)
    schema["$schema"] = JSON_SCHEMA_DIALECT
    schema["$comment"] = f"dokimi document {name}; generated from {SCHEMAS[name]}, do not edit"
    return schema


def schema_text(name: str) -> str:
    """Deterministic text of :func:`json_schema`: sorted keys, two-space indent, trailing newline."""
    return json.dumps(json_schema(name), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


@dataclass
class ExportResult:
    """What :func:`export_all` did."""

    written: list[Path] = field(default_factory=list)
    """Files written (or, with ``check``, files that are up to date)."""
    stale: list[Path] = field(default_factory=list)
    """With ``check``: files missing or different from a fresh export."""
    skipped: dict[str, str] = field(default_factory=dict)
    """Registry names whose module does not exist yet, with the reason."""
    extra: list[Path] = field(default_factory=list)
    """``*.schema.json`` files in the directory that no registry name produces."""


def export_all(dest: Path, *, check: bool = False) -> ExportResult:
    """Write every registered document's schema to ``dest`` (or, with ``check``, compare without writing).

    A registry entry whose module is not built yet is skipped and named in ``skipped``; any other import
    error propagates."""
    result = ExportResult()
    expected: set[str] = set()
    for name in sorted(SCHEMAS):
        module_name = SCHEMAS[name].split(":")[0]
        try:
            text = schema_text(name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            result.skipped[name] = f"module {module_name} does not exist yet"
            continue
        target = dest / schema_file_name(name)
        expected.add(target.name)
        if check:
            current = target.read_text(encoding="utf-8") if target.is_file() else None
            (result.written if current == text else result.stale).append(target)
        else:
            write_text_atomic(target, text)
            result.written.append(target)
    if dest.is_dir():
        result.extra = sorted(p for p in dest.glob("*.schema.json") if p.name not in expected)
    return result


def default_directory() -> Path:
    """``schemas/`` at the root of the source checkout this module runs from."""
    return Path(__file__).resolve().parents[3] / "schemas"


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m dokimi.schemas.export [--check] [DIR]``: 0 done / up to date, 1 stale (with --check)."""
    parser = argparse.ArgumentParser(
        prog="python -m dokimi.schemas.export", description="Write every registered document's JSON Schema."
    )
    parser.add_argument("dir", nargs="?", type=Path, default=None, help="output directory (default schemas/)")
    parser.add_argument("--check", action="store_true", help="compare with a fresh export, write nothing")
    args = parser.parse_args(argv)
    dest = args.dir or default_directory()
    result = export_all(dest, check=args.check)
    for name, reason in result.skipped.items():
        sys.stderr.write(f"skipped {name}: {reason}\n")
    for path in result.extra:
        sys.stderr.write(f"not produced by any registry name: {path}\n")
    if args.check:
        for path in result.stale:
            sys.stderr.write(f"stale: {path}\n")
        if result.stale or result.extra:
            sys.stderr.write("run: python -m dokimi.schemas.export\n")
            return 1
        return 0
    sys.stderr.write(f"wrote {len(result.written)} schemas to {dest}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
