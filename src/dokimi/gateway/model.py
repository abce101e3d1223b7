"""The model gateway: the agent container's only route to its model (contract, network section).

A host-side reverse proxy, one per batch, listening on the batch network's bridge address. Each cell is opened
on it with :meth:`ModelGateway.open_cell`, which gives the cell

- a dummy credential per credential variable of the harness profile (``credential_env``), to put in the
  container instead of the real one: ``dokimi-gw-`` and 32 hex digits, different for every cell;
- the file its requests are recorded to (``gateway.jsonl`` in the run directory).

For every request the gateway (rules, one function each):

* :func:`find_cell_key` finds the dummy credential in a header value or the query string; a request with
  none, or with the keys of two cells, is refused (401) and never forwarded, so nothing but a cell of this
  batch can spend through it;
* :func:`swap_credentials` replaces each dummy with the real value of its variable, read from the host's
  environment when the batch started; the real credential therefore never enters a container, and is never
  recorded (headers are recorded through the capture proxy's allow-list);
* :func:`cap_refusal`: once the cell's priced spend has reached its cap (``--budget``), further requests are
  refused (429) without being forwarded. The harness stops itself at that cap; this holds a command the
  agent runs with the dummy key to it too, so the batch budget's reservation of the cap is a real bound;
* forwards the request to the upstream (the profile's endpoint variable as set on the host, else the vendor's
  default URL) and streams the answer back (:class:`dokimi.gateway.capture_proxy.CaptureProxy` does the
  relaying);
* records the request and the response, with the tokens the response reports (:mod:`dokimi.gateway.usage`)
  and their price (:mod:`dokimi.gateway.prices`), and adds them to the cell's :class:`CellUsage`.

:class:`CellUsage` is the authoritative account of a cell: tokens, cost, model turns, and the statuses of
everything the model API answered, from which :func:`infra_error_reason` decides whether the cell ever reached
its model.
"""

from __future__ import annotations

import json
import re
import secrets
import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from dokimi.gateway.capture_proxy import Admission, CaptureProxy, ProxiedRequest, Refusal
from dokimi.gateway.prices import Usage, cost_of, price_for
from dokimi.gateway.usage import response_model, response_usage

__all__ = [
    "DUMMY_PATTERN",
    "INFRA_STATUSES",
    "CellUsage",
    "GatewayCell",
    "ModelGateway",
    "find_cell_key",
    "infra_error_reason",
    "swap_credentials",
]

DUMMY_PREFIX = "dokimi-gw-"
DUMMY_PATTERN = re.compile(r"dokimi-gw-[0-9a-f]{32}")
"""A per-cell dummy credential."""

INFRA_STATUSES = frozenset({408, 429, 500, 502, 503, 504, 529})
"""Statuses that say the API (or the way to it) failed, not the request: rate limits, overload, server
errors, and the gateway's own 502 for an upstream it could not reach."""

RECORD_FILE = "gateway.jsonl"
RECORD_BODY_LIMIT = 8 * 1024 * 1024
"""The most of one request or response body a record keeps whole; a larger one keeps its head."""
CELL_RECORD_LIMIT = 512 * 1024 * 1024
"""The most a cell's gateway.jsonl grows to with bodies; past it, records keep everything but the bodies
(a command of the agent could otherwise fill the host's disk with requests)."""
HEAD_BYTES = 64 * 1024


def new_dummy() -> str:
    return DUMMY_PREFIX + secrets.token_hex(16)


def find_cell_key(path: str, headers: Sequence[tuple[str, str]]) -> set[str]:
    """Every dummy credential a request carries, in any header value or in the query string."""
    found = {m.group(0) for _, value in headers for m in DUMMY_PATTERN.finditer(value)}
    query = urlsplit(path).query
    if query:
        found |= {m.group(0) for m in DUMMY_PATTERN.finditer(query)}
    return found


def swap_credentials(
    path: str, headers: Sequence[tuple[str, str]], real: Mapping[str, str]
) -> tuple[str, list[tuple[str, str]]]:
    """The request's path and headers with every dummy in ``real`` replaced by its real value. A dummy whose
    variable has no real value on the host stays as it is (the upstream then refuses it, or ignores it)."""

    def swap(text: str) -> str:
        return DUMMY_PATTERN.sub(lambda m: real.get(m.group(0), m.group(0)), text)

    new_headers = [(name, swap(value)) for name, value in headers]
    parts = urlsplit(path)
    if parts.query and DUMMY_PATTERN.search(parts.query):
        pairs = [(k, swap(v)) for k, v in parse_qsl(parts.query, keep_blank_values=True)]
        path = f"{parts.path}?{urlencode(pairs, safe='/:')}"
    return path, new_headers


@dataclass
class CellUsage:
    """What the gateway saw of one cell: the authoritative tokens, cost and turns."""

    requests: int = 0
    """Every request the cell's harness sent through the gateway."""
    turns: int = 0
    """Model responses: answers with status 2xx that carry a usage object (a model produced them)."""
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0
    """The priced part of the cost; see ``unpriced_models``."""
    unpriced_models: set[str] = field(default_factory=set)
    """Models the price table does not know; their responses have no gateway cost."""
    models: set[str] = field(default_factory=set)
    statuses: Counter[int] = field(default_factory=Counter)
    """Status per request as the harness got it (502: the gateway could not reach the upstream)."""
    upstream_errors: list[str] = field(default_factory=list)
    """Why the upstream could not be reached (first few)."""
    first_response_s: float | None = None
    """Seconds from the cell's opening to its first model response."""

    @property
    def priced(self) -> bool:
        """Every model response was priced, so ``cost_usd`` is the whole cost."""
        return not self.unpriced_models

    def to_json(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "turns": self.turns,
            "input_tokens": self.usage.input,
            "output_tokens": self.usage.output,
            "cache_write_tokens": self.usage.cache_write,
            "cache_read_tokens": self.usage.cache_read,
            "cost_usd": round(self.cost_usd, 6) if self.priced else None,
            "models": sorted(self.models),
            "unpriced_models": sorted(self.unpriced_models),
            "statuses": {str(k): v for k, v in sorted(self.statuses.items())},
        }


def cap_refusal(usage: CellUsage, cap_usd: float | None) -> str | None:
    """Why a cell's next request is refused: its priced spend has reached its cap. None: it may go on."""
    if cap_usd is not None and usage.cost_usd >= cap_usd:
        return (
            f"the cell's budget of ${cap_usd:g} is spent (${usage.cost_usd:.4f} at the price table's rates); "
            "the model gateway forwards no more of its requests"
        )
    return None


def infra_error_reason(usage: CellUsage, *, agent_rc: int | None, timed_out: bool) -> str | None:
    """Why a cell never reached its model, or None when it did (at least one model response).

    The boundary: a cell that got one model response was reached, and whatever it did next is the agent's
    (a failure when it did badly). A cell with none never ran as an agent: the harness found no way to the
    model, the API answered only errors (after the harness's own retries), or the harness died first.
    """
    if usage.turns > 0:
        return None
    how = "timed out" if timed_out else ("was stopped" if agent_rc is None else f"exited {agent_rc}")
    if usage.requests == 0:
        return f"the harness {how} without sending any request to the model gateway"
    shown = ", ".join(f"{n}x {status}" for status, n in sorted(usage.statuses.items()))
    if usage.statuses and set(usage.statuses) == {502} and usage.upstream_errors:
        return f"the model API could not be reached ({usage.upstream_errors[0]}); the harness {how}"
    if set(usage.statuses) - {200, 204} <= INFRA_STATUSES and set(usage.statuses) & INFRA_STATUSES:
        return f"the model API answered only errors ({shown}); the harness {how} after its retries"
    if any(400 <= s < 500 for s in usage.statuses):
        return f"the model API refused every request ({shown}); the harness {how}"
    return f"no model response among {usage.requests} request(s) ({shown}); the harness {how}"


class GatewayCell:
    """One cell opened on the gateway: its dummy credentials, its record file and its account."""

    def __init__(
        self, name: str, record_path: Path, credential_vars: Sequence[str], cap_usd: float | None = None
    ) -> None:
        self.name = name
        self.cap_usd = cap_usd
        """The cell's cost cap; None: no cap at the gateway."""
        self.record_path = record_path
        self.env: dict[str, str] = {var: new_dummy() for var in credential_vars}
        """Credential variable -> this cell's dummy: what the agent's container gets instead."""
        self.usage = CellUsage()
        self.recorded_bytes = 0
        self.opened = time.monotonic()
        self.closed = False
        self._file: IO[str] | None = None

    def _write(self, record: Mapping[str, Any]) -> None:
        if self._file is None:
            self.record_path.parent.mkdir(parents=True, exist_ok=True)
            self._file = self.record_path.open("a", encoding="utf-8")
        line = json.dumps(record, sort_keys=True) + "\n"
        self.recorded_bytes += len(line)
        self._file.write(line)
        self._file.flush()

    def _close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def _bounded(raw: bytes, cell: GatewayCell) -> dict[str, Any] | None:
    """What a record keeps of a body too large to keep whole (or of any body once the cell's record is at
    its limit); None when the body may be kept whole."""
    if len(raw) <= RECORD_BODY_LIMIT and cell.recorded_bytes + len(raw) <= CELL_RECORD_LIMIT:
        return None
    why = "body over the record limit" if len(raw) > RECORD_BODY_LIMIT else "the cell's record is full"
    head = b"" if cell.recorded_bytes >= CELL_RECORD_LIMIT else raw[:HEAD_BYTES]
    return {"omitted": why, "bytes": len(raw), "head": head.decode("utf-8", "replace")}


def _response_json(req: ProxiedRequest) -> Any:
    """The response body for the record: JSON, the list of an event stream's data payloads, or text."""
    if req.response is None or not req.response:
        return None
    raw = bytes(req.response)
    text = raw.decode("utf-8", "replace")
    if "event-stream" in (req.response_type or ""):
        from dokimi.gateway.usage import sse_payloads

        return list(sse_payloads(text))
    try:
        return json.loads(text)
    except ValueError:
        return text


def _request_model(req: ProxiedRequest) -> str | None:
    body = req.body
    if isinstance(body, Mapping) and isinstance(body.get("model"), str):
        return str(body["model"])
    match = re.search(r"/models/([^/:?]+)", req.path)  # Gemini names the model in the path
    return match.group(1) if match else None


class _CapRefusal(Refusal):
    """A request of a cell whose budget is spent: answered 429 by the gateway, recorded in the cell."""

    def __init__(self, cell: GatewayCell, message: str) -> None:
        super().__init__(429, message)
        self.cell = cell


def _known(cells: set[GatewayCell]) -> set[str]:
    return {dummy for cell in cells for dummy in cell.env.values()}


class ModelGateway(CaptureProxy):
    """The batch's model gateway (see the module docstring). ``credentials``: credential variable -> the
    real value on the host (only the variables that are set)."""

    def __init__(
        self,
        upstream: str,
        *,
        credential_vars: Sequence[str],
        credentials: Mapping[str, str],
        host: str = "127.0.0.1",
        port: int = 0,
        unattributed_path: Path | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(upstream, host=host, port=port, **kwargs)
        self.keep_requests = False
        self.keep_responses = True
        self.credential_vars = tuple(credential_vars)
        self._credentials = dict(credentials)
        self._cells: dict[str, GatewayCell] = {}
        self._cells_lock = threading.Lock()
        self.unattributed_path = unattributed_path
        self.refused = 0
        self._in_flight_by_cell: dict[str, int] = {}

    def open_cell(self, name: str, record_path: Path, *, cap_usd: float | None = None) -> GatewayCell:
        """Register a cell; its ``env`` holds the dummy credentials to give its container. The variables are
        those of ``credential_vars`` set on the host, or the first one when none is (so the harness starts;
        the upstream then gets the dummy). ``cap_usd``: refuse its requests once it has spent that much."""
        chosen = [v for v in self.credential_vars if v in self._credentials] or list(self.credential_vars[:1])
        cell = GatewayCell(name, record_path, chosen, cap_usd)
        with self._cells_lock:
            for dummy in cell.env.values():
                self._cells[dummy] = cell
        return cell

    def close_cell(self, cell: GatewayCell, *, settle: float = 5.0) -> CellUsage:
        """Stop serving the cell (its keys are refused from now on), wait up to ``settle`` seconds for its
        requests still in flight, close its record and return its account."""
        with self._cells_lock:
            for dummy in cell.env.values():
                self._cells.pop(dummy, None)
        with self._settled:
            self._settled.wait_for(lambda: self._cell_in_flight(cell) == 0, timeout=settle)
            cell.closed = True
            cell._close()
        return cell.usage

    def _cell_in_flight(self, cell: GatewayCell) -> int:
        return self._in_flight_by_cell.get(cell.name, 0)

    # --- CaptureProxy hooks ---------------------------------------------------------------------------

    def _admit(self, method: str, path: str, headers: Sequence[tuple[str, str]]) -> Admission:
        keys = find_cell_key(path, headers)
        with self._cells_lock:
            cells = {self._cells[k] for k in keys if k in self._cells}
        if not keys:
            raise Refusal(
                401, "the model gateway serves dokimi's cells only: this request carries no cell key"
            )
        if len(cells) != 1 or not keys <= _known(cells):  # an ended cell, or the keys of two cells
            raise Refusal(401, "the model gateway does not know this cell key (the cell has ended)")
        (cell,) = cells
        with self._lock:
            over = cap_refusal(cell.usage, cell.cap_usd)
        if over is not None:
            raise _CapRefusal(cell, over)
        real = {dummy: self._credentials[var] for var, dummy in cell.env.items() if var in self._credentials}
        new_path, new_headers = swap_credentials(path, headers, real)
        with self._lock:
            self._in_flight_by_cell[cell.name] = self._in_flight_by_cell.get(cell.name, 0) + 1
        return Admission(new_path, new_headers, tag=cell)

    def _refused(self, method: str, path: str, refusal: Refusal) -> None:
        if isinstance(refusal, _CapRefusal):
            self._record_cap_refusal(method, path, refusal)
            return
        with self._lock:
            self.refused += 1
            if self.unattributed_path is not None:
                from dokimi.gateway.capture_proxy import redacted_path

                self.unattributed_path.parent.mkdir(parents=True, exist_ok=True)
                with self.unattributed_path.open("a", encoding="utf-8") as f:
                    f.write(
                        json.dumps(
                            {
                                "method": method,
                                "path": redacted_path(path),
                                "status": refusal.status,
                                "reason": refusal.message,
                            },
                            sort_keys=True,
                        )
                        + "\n"
                    )

    def _record_cap_refusal(self, method: str, path: str, refusal: _CapRefusal) -> None:
        from dokimi.gateway.capture_proxy import redacted_path
        from dokimi.schemas.gateway import GatewayRecord

        cell = refusal.cell
        with self._lock:
            cell.usage.requests += 1
            cell.usage.statuses[429] += 1
            if cell.closed:
                return
            t = round(time.monotonic() - cell.opened, 3)
            record = GatewayRecord(
                index=0, t=t, duration_s=0.0, method=method, path=redacted_path(path), headers={},
                status=429, error=refusal.message,
            )  # fmt: skip
            cell._write(record.model_dump(mode="json"))

    def _completed(self, req: ProxiedRequest) -> None:
        cell = req.tag
        if not isinstance(cell, GatewayCell):
            return
        self._in_flight_by_cell[cell.name] = self._in_flight_by_cell.get(cell.name, 1) - 1
        body = bytes(req.response or b"")
        status = req.status or 0
        usage = response_usage(body, req.response_type) if 200 <= status < 300 else None
        model = _request_model(req) or response_model(body, req.response_type)
        cost = cost_of(model, usage) if usage is not None else None
        account = cell.usage
        account.requests += 1
        account.statuses[status] += 1
        if req.error and status == 502 and len(account.upstream_errors) < 5:
            account.upstream_errors.append(req.error)
        if usage is not None:
            account.turns += 1
            account.usage = account.usage + usage
            if model:
                account.models.add(model)
            if cost is None:
                account.unpriced_models.add(model or "(no model named)")
            else:
                account.cost_usd += cost
            if account.first_response_s is None:
                account.first_response_s = round(req.started - cell.opened + (req.duration_s or 0.0), 3)
        if cell.closed:
            return
        request_cut = _bounded(req.raw, cell)
        response_cut = _bounded(body, cell)
        record = {
            **req.to_json(),
            **({"body": request_cut} if request_cut is not None else {}),
            "t": round(req.started - cell.opened, 3),
            "duration_s": round(req.duration_s or 0.0, 3),
            "response": _response_json(req) if response_cut is None else response_cut,
            "response_type": req.response_type,
            "model": model,
            "priced_as": (price_for(model) or (None,))[0],
            "usage": None
            if usage is None
            else {
                "input_tokens": usage.input,
                "output_tokens": usage.output,
                "cache_write_tokens": usage.cache_write,
                "cache_read_tokens": usage.cache_read,
            },
            "cost_usd": None if cost is None else round(cost, 8),
        }
        from dokimi.schemas.gateway import GatewayRecord

        cell._write(GatewayRecord.model_validate(record).model_dump(mode="json"))
