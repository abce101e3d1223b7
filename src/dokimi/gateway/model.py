"""The model gateway: the agent container's only route to its model (docs/network.md).

A host-side reverse proxy, one per batch, listening on the batch network's bridge address. Each cell is opened
on it with :meth:`ModelGateway.open_cell`, which gives the cell

- a dummy credential per credential variable of the harness profile (``credential_env``), to put in the
  container instead of the real one: ``dokimi-gw-`` and 32 hex digits, different for every cell;
- a :class:`dokimi.gateway.budget.Budget` under the batch's, holding it to its cap;
- the file its requests are recorded to (``gateway.jsonl`` in the run directory).

For every request the gateway (rules, one function each), before it reads the body:

* its head is within the bounds of :class:`dokimi.gateway.capture_proxy.BoundedRequestHandler` (request
  line, header lines; 414 or 431 beyond), and its target is a path (400 for an absolute URL: the gateway
  is no proxy);
* :func:`find_cell_key` finds the dummy credential in the credential headers of the profile's APIs (and
  Gemini's ``key`` query parameter) only; a request with none, or with the keys of two cells, is refused
  (401) and never forwarded, so nothing but a cell of this batch can spend through it;
* :func:`credential_problem`: each credential header holds this cell's dummy and nothing else (``Bearer``
  and the dummy for ``Authorization``);
* :func:`dokimi.gateway.apis.route_of`: only the paths the profile's APIs use for a model turn or a token
  count are forwarded; batches, files, admin paths and the rest are refused (403) and recorded;

and once its body is read (at most 32 MB, strictly framed: :mod:`dokimi.gateway.capture_proxy`):

* :func:`request_object`: the body is a JSON object the gateway's bounded reader reads
  (:func:`dokimi.gateway.usage.read_json`: 64 levels deep, a million values, integers of 20 digits at most);
  otherwise it is refused (400) with the reason;
* :func:`request_model`: a model turn names its model, and the price table (with ``--price``) knows it;
  otherwise it is refused (400): the gateway never forwards what it cannot count;
* it reserves the request's worst case on the cell's budget (:func:`worst_case_usd`, the rule in
  :mod:`dokimi.gateway.budget`), waiting for its turn or refused (429) once the money is spent;
* :func:`swap_credentials` puts the real value of the dummy's variable, read from the host's environment when
  the batch started, in the credential headers only, and asks the upstream for an uncompressed answer;
* forwards the request to the upstream (the profile's endpoint variable as set on the host, else the vendor's
  default URL) and streams the answer back (:class:`dokimi.gateway.capture_proxy.CaptureProxy` does the
  relaying), decoded when the upstream compressed it anyway and scrubbed of the real credential
  (:mod:`dokimi.gateway.relay`), its usage read as it passes (:class:`dokimi.gateway.usage.UsageMeter`);
* settles the reservation with what the answer cost (its worst case when a 2xx answer's usage cannot be read,
  its JSON is over the reader's limits, or it was cut short), and records the request and the response in
  the cell's :class:`CellUsage` and gateway.jsonl, scrubbed of the real credential as a last line of defence.

:class:`CellUsage` is the authoritative account of a cell: tokens, cost, model turns, and the statuses of
everything the model API answered. Whether a cell that got no model response is an infra error or its own
failure is decided from its gateway.jsonl by :func:`dokimi.gateway.boundary.infra_only_when_upstream_failed`.
"""

from __future__ import annotations

import http.client
import json
import re
import secrets
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from dokimi.gateway.apis import API_NAMES, GENERATE, Api, Route, apis_named, route_of
from dokimi.gateway.budget import Budget, BudgetSpent, Hold
from dokimi.gateway.capture_proxy import (
    LOGGED_PATH_CHARS,
    REFUSAL_LOG_BYTES,
    Admission,
    CaptureProxy,
    ProxiedRequest,
    Refusal,
    redacted_path,
    unlogged,
)
from dokimi.gateway.prices import PRICES, Price, Usage, price_for, price_of, worst_cost
from dokimi.gateway.relay import Decoder, Scrubber, UnreadableEncoding, scrub_text
from dokimi.gateway.usage import UsageMeter, read_json, sse_payloads
from dokimi.rundir import GATEWAY_JSONL
from dokimi.schemas.gateway import GatewayRecord

__all__ = [
    "DUMMY_PATTERN",
    "CellUsage",
    "GatewayCell",
    "ModelGateway",
    "credential_problem",
    "find_cell_key",
    "input_estimate",
    "request_model",
    "request_object",
    "swap_credentials",
    "worst_case_usd",
]

DUMMY_PREFIX = "dokimi-gw-"
DUMMY_PATTERN = re.compile(r"dokimi-gw-[0-9a-f]{32}")
"""A per-cell dummy credential."""
_BEARER = re.compile(r"bearer\s+(\S+)", re.IGNORECASE)

RECORD_FILE = GATEWAY_JSONL
RECORD_BODY_LIMIT = 8 * 1024 * 1024
"""The most of one request or response body a record keeps whole; a larger one keeps its head."""
CELL_RECORD_LIMIT = 512 * 1024 * 1024
"""The most a cell's gateway.jsonl grows to with bodies; past it, records keep everything but the bodies
(a command of the agent could otherwise fill the host's disk with requests)."""
HEAD_BYTES = 64 * 1024

DEFAULT_MAX_OUTPUT_TOKENS = 128_000
"""The output a request that sets no limit is reserved for (the largest output limit of current models)."""
MEDIA_TOKENS = 1_000_000
"""What each image, document, file or inline-data block of a request is reserved as, in input tokens: a
small file (a PDF's pages, a long audio clip) can cost far more tokens than its bytes."""
_MEDIA = re.compile(
    rb'"type"\s*:\s*"(?:image|image_url|input_image|document|file|input_file|input_audio)"'
    rb'|"(?:inline_data|inlineData|file_data|fileData)"'
)
CUT_SETTLE_S = 2.0
"""How long a closing cell waits for its requests whose upstream connection it cut."""


def new_dummy() -> str:
    return DUMMY_PREFIX + secrets.token_hex(16)


# --- the rules ---------------------------------------------------------------------------------------------


def _credential_values(
    apis: Sequence[Api], query: Sequence[tuple[str, str]], headers: Sequence[tuple[str, str]]
) -> Iterator[tuple[str, str]]:
    """(where, value) of every credential header and query parameter of ``apis`` a request carries."""
    names = {name for api in apis for name in api.credential_headers}
    params = {name for api in apis for name in api.credential_query}
    for name, value in headers:
        if name.lower() in names:
            yield name.lower(), value
    for name, value in query:
        if name in params:
            yield f"?{name}", value


def _query(path: str) -> list[tuple[str, str]]:
    return parse_qsl(urlsplit(path).query, keep_blank_values=True)


def find_cell_key(apis: Sequence[Api], path: str, headers: Sequence[tuple[str, str]]) -> set[str]:
    """Every dummy credential a request carries in the credential headers (or query parameters) of
    ``apis``; a dummy anywhere else does not count, and is never swapped."""
    return {
        m.group(0) for _, value in _credential_values(apis, _query(path), headers)
        for m in DUMMY_PATTERN.finditer(value)
    }  # fmt: skip


def _token(where: str, value: str) -> str:
    """The credential in a header value: ``Bearer X`` in Authorization, the whole value elsewhere."""
    if where == "authorization":
        match = _BEARER.fullmatch(value.strip())
        return match.group(1) if match else value.strip()
    return value.strip()


def credential_problem(
    apis: Sequence[Api], path: str, headers: Sequence[tuple[str, str]], dummies: Sequence[str]
) -> str | None:
    """Why a request's credentials are not exactly one of the cell's ``dummies`` each (an empty header is
    ignored), or None."""
    for where, value in _credential_values(apis, _query(path), headers):
        if value.strip() and _token(where, value) not in dummies:
            return f"{where} must hold this cell's key ({DUMMY_PREFIX}...) and nothing else"
    return None


def swap_credentials(
    apis: Sequence[Api], path: str, headers: Sequence[tuple[str, str]], real: Mapping[str, str]
) -> tuple[str, list[tuple[str, str]]]:
    """The request's path and headers for the upstream: each credential header (and query parameter) of
    ``apis`` that holds a dummy in ``real`` gets that dummy's real value instead (``Bearer`` kept for
    Authorization), empty ones are dropped, and the upstream is asked for an uncompressed answer. Nothing
    else is changed: a dummy elsewhere stays a dummy. A dummy whose variable has no real value on the host
    stays as it is (the upstream then refuses it)."""
    names = {name for api in apis for name in api.credential_headers}
    params = {name for api in apis for name in api.credential_query}
    out: list[tuple[str, str]] = []
    for name, value in headers:
        low = name.lower()
        if low == "accept-encoding":
            continue
        if low in names:
            if not value.strip():
                continue
            token = _token(low, value)
            value = ("Bearer " if low == "authorization" else "") + real.get(token, token)
        out.append((name, value))
    out.append(("Accept-Encoding", "identity"))
    parts = urlsplit(path)
    pairs = _query(path)
    if any(k in params for k, _ in pairs):
        swapped = [(k, real.get(v, v) if k in params else v) for k, v in pairs]
        path = f"{parts.path}?{urlencode(swapped, safe='/:')}"
    return path, out


def request_model(route: Route, body: Mapping[str, Any]) -> str | None:
    """The model a request names: in its path (Gemini) or its body's ``model``."""
    model = route.path_model or body.get("model")
    return model.strip() if isinstance(model, str) and model.strip() else None


def input_estimate(body: bytes) -> int:
    """At most how many input tokens a request can be billed: one per byte of its body (a token is at least
    one byte of text) and :data:`MEDIA_TOKENS` more per media block."""
    return len(body) + MEDIA_TOKENS * len(_MEDIA.findall(body))


def worst_case_usd(price: Price, api: Api, body: bytes, payload: Mapping[str, Any]) -> float:
    """The most a model request can cost (what it reserves on its cell's budget before it is forwarded):
    :func:`input_estimate` and its output limit (:data:`DEFAULT_MAX_OUTPUT_TOKENS` when it sets none)."""
    limit = api.max_output(payload)
    return worst_cost(price, input_estimate(body), DEFAULT_MAX_OUTPUT_TOKENS if limit is None else limit)


def request_object(body: bytes) -> dict[str, Any]:
    """A request's body, which must be a JSON object the gateway's bounded reader reads
    (:func:`dokimi.gateway.usage.read_json`); a ValueError says why it is not."""
    try:
        value = read_json(body)
    except ValueError as e:  # not UTF-8, not JSON, or over one of the reader's limits
        raise ValueError(f"the body is not JSON the gateway reads: {str(e)[:200]}") from None
    if not isinstance(value, dict):
        raise ValueError("the body is JSON, but not an object")
    return value


# --- the account -------------------------------------------------------------------------------------------


@dataclass
class CellUsage:
    """What the gateway saw of one cell: the authoritative tokens, cost and turns."""

    requests: int = 0
    """Every request of the cell the gateway answered or forwarded (refused ones included)."""
    turns: int = 0
    """Model responses: 2xx answers to a model-turn request, relayed to the harness."""
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0
    """What the cell's requests cost at the price table's rates (worst cases included, see ``worst_case``)."""
    refused: int = 0
    """Requests the gateway answered itself: a path it does not forward, a model it cannot price, the cap
    spent, a malformed request."""
    worst_case: int = 0
    """Answers charged at their reservation: their usage could not be read, they were cut short, or they were
    still running when the cell ended."""
    models: set[str] = field(default_factory=set)
    statuses: Counter[int] = field(default_factory=Counter)
    """Status per request as the harness got it (502: the gateway could not reach the upstream)."""
    upstream_errors: list[str] = field(default_factory=list)
    """Why the upstream could not be reached (first few)."""
    first_response_s: float | None = None
    """Seconds from the cell's opening to its first model response."""

    def to_json(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "turns": self.turns,
            "input_tokens": self.usage.input,
            "output_tokens": self.usage.output,
            "cache_write_tokens": self.usage.cache_write,
            "cache_read_tokens": self.usage.cache_read,
            "cost_usd": round(self.cost_usd, 6),
            "refused": self.refused,
            "worst_case": self.worst_case,
            "models": sorted(self.models),
            "statuses": {str(k): v for k, v in sorted(self.statuses.items())},
        }


class GatewayCell:
    """One cell opened on the gateway: its dummy credentials, its budget, its record file and its account."""

    def __init__(
        self,
        name: str,
        record_path: Path,
        credential_vars: Sequence[str],
        budget: Budget,
        scrub: Callable[[str], str],
    ) -> None:
        self.name = name
        self.budget = budget
        self.record_path = record_path
        self.env: dict[str, str] = {var: new_dummy() for var in credential_vars}
        """Credential variable -> this cell's dummy: what the agent's container gets instead."""
        self.usage = CellUsage()
        self.recorded_bytes = 0
        self.opened = time.monotonic()
        self.ending = False
        """Set when the cell is being closed: nothing more is admitted."""
        self.closed = False
        """Set once its record is closed: late answers are no longer recorded."""
        self.in_flight: set[_Ticket] = set()
        self._scrub = scrub
        self._file: IO[str] | None = None

    @property
    def cap_usd(self) -> float | None:
        return self.budget.cap_usd

    def _write(self, record: Mapping[str, Any]) -> None:
        if self._file is None:
            self.record_path.parent.mkdir(parents=True, exist_ok=True)
            self._file = self.record_path.open("a", encoding="utf-8")
        line = self._scrub(json.dumps(record, sort_keys=True)) + "\n"
        self.recorded_bytes += len(line)
        self._file.write(line)
        self._file.flush()

    def _close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


@dataclass(eq=False)
class _Ticket:
    """One request admitted for a cell, from its admission to its settlement."""

    cell: GatewayCell
    route: Route
    model: str | None
    priced_as: str | None
    price: Price | None
    hold: Hold | None
    meter: UsageMeter | None = None
    unreadable: str | None = None
    """Why its (2xx) answer could not be relayed: an encoding the gateway cannot read."""
    conn: http.client.HTTPConnection | None = None


@dataclass(frozen=True)
class _Screened:
    cell: GatewayCell
    route: Route


class _AnswerFilter:
    """An answer on its way to the harness: decoded, metered, scrubbed."""

    def __init__(self, decoder: Decoder, meter: UsageMeter | None, scrubber: Scrubber) -> None:
        self.decoder, self.meter, self.scrubber = decoder, meter, scrubber

    def _pass(self, pieces: Iterator[bytes]) -> Iterator[bytes]:
        for piece in pieces:
            if self.meter is not None:
                self.meter.feed(piece)
            yield self.scrubber.feed(piece)

    def feed(self, data: bytes) -> Iterator[bytes]:
        return self._pass(self.decoder.feed(data))

    def end(self) -> Iterator[bytes]:
        yield from self._pass(self.decoder.end())
        yield self.scrubber.end()


def _bounded(size: int, head: bytes, cell: GatewayCell) -> dict[str, Any] | None:
    """What a record keeps of a body too large to keep whole (or of any body once the cell's record is at
    its limit); None when the body may be kept whole."""
    if size <= RECORD_BODY_LIMIT and cell.recorded_bytes + size <= CELL_RECORD_LIMIT:
        return None
    why = "body over the record limit" if size > RECORD_BODY_LIMIT else "the cell's record is full"
    kept = b"" if cell.recorded_bytes >= CELL_RECORD_LIMIT else head[:HEAD_BYTES]
    return {"omitted": why, "bytes": size, "head": kept.decode("utf-8", "replace")}


def _response_json(req: ProxiedRequest) -> Any:
    """The response body for the record: JSON, the list of an event stream's data payloads, or text."""
    if not req.response:
        return None
    text = bytes(req.response).decode("utf-8", "replace")
    try:
        if "event-stream" in (req.response_type or ""):
            return list(sse_payloads(text))
        return read_json(text)
    except ValueError:  # not JSON, or over the reader's limits: kept as text
        return text


def _known(cells: set[GatewayCell]) -> set[str]:
    return {dummy for cell in cells for dummy in cell.env.values()}


class ModelGateway(CaptureProxy):
    """The batch's model gateway (see the module docstring). ``credentials``: credential variable -> the
    real value on the host (only the variables that are set); ``apis``: the APIs of the harness profile;
    ``prices``: the price table (with the batch's ``--price`` rows); ``budget``: the batch's budget, parent
    of every cell's (None: a batch without ``--max-batch-usd``)."""

    def __init__(
        self,
        upstream: str,
        *,
        credential_vars: Sequence[str],
        credentials: Mapping[str, str],
        apis: Sequence[str] = API_NAMES,
        prices: Mapping[str, Price] = PRICES,
        budget: Budget | None = None,
        unattributed_path: Path | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(upstream, **kwargs)  # host, port, timeouts: CaptureProxy's
        self.keep_requests = False
        self.keep_responses = True
        self.kept_response_limit = RECORD_BODY_LIMIT + 1
        self.credential_vars = tuple(credential_vars)
        self.apis = apis_named(apis)
        self.prices = prices
        self.budget = budget if budget is not None else Budget(None, name="the batch")
        self._credentials = dict(credentials)
        self._secrets = sorted({v for v in credentials.values() if v}, key=len, reverse=True)
        self._cells: dict[str, GatewayCell] = {}
        self._cells_lock = threading.Lock()
        self._local = threading.local()
        self.unattributed_path = unattributed_path
        self.refused = 0
        self.unlogged = 0
        """Refusals not attributed to a cell that were counted, not logged (the log was full)."""
        self._unattributed_bytes = 0

    def _scrub(self, text: str) -> str:
        return scrub_text(text, self._secrets)

    def open_cell(self, name: str, record_path: Path, *, cap_usd: float | None = None) -> GatewayCell:
        """Register a cell; its ``env`` holds the dummy credentials to give its container. The variables are
        those of ``credential_vars`` set on the host, or the first one when none is (so the harness starts;
        the upstream then gets the dummy). ``cap_usd``: the cell's budget under the batch's."""
        chosen = [v for v in self.credential_vars if v in self._credentials] or list(self.credential_vars[:1])
        budget = Budget(cap_usd, parent=self.budget, name="the cell's budget")
        cell = GatewayCell(name, record_path, chosen, budget, self._scrub)
        with self._cells_lock:
            for dummy in cell.env.values():
                self._cells[dummy] = cell
        return cell

    def close_cell(self, cell: GatewayCell, *, settle: float = 5.0) -> CellUsage:
        """Stop serving the cell (its keys are refused from now on, its waiting requests too), wait up to
        ``settle`` seconds for its requests still in flight, then cut their upstream connections and charge
        what is still unsettled at its reservation; close its record and return its account."""
        with self._cells_lock:
            for dummy in cell.env.values():
                self._cells.pop(dummy, None)
        cell.ending = True
        cell.budget.close()
        with self._settled:
            self._settled.wait_for(lambda: not cell.in_flight, timeout=settle)
            running = list(cell.in_flight)
        for ticket in running:
            sock = ticket.conn.sock if ticket.conn is not None else None
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        with self._settled:
            self._settled.wait_for(lambda: not cell.in_flight, timeout=CUT_SETTLE_S if running else 0)
            for ticket in cell.in_flight:
                if ticket.hold is not None and ticket.hold.settle(ticket.hold.worst_usd):
                    cell.usage.cost_usd += ticket.hold.worst_usd
                    cell.usage.worst_case += 1
            cell.closed = True
            cell._close()
        return cell.usage

    # --- CaptureProxy hooks ---------------------------------------------------------------------------

    def _screen(self, method: str, path: str, headers: Sequence[tuple[str, str]]) -> _Screened:
        if not path.startswith("/"):
            raise Refusal(
                400, f"the request target {path[:200]!r} is not a path: the model gateway is no proxy"
            )
        keys = find_cell_key(self.apis, path, headers)
        if not keys:
            where = ", ".join(sorted({h for api in self.apis for h in api.credential_headers}))
            raise Refusal(
                401,
                f"the model gateway serves dokimi's cells only: this request carries no cell key ({where})",
            )
        with self._cells_lock:
            cells = {self._cells[k] for k in keys if k in self._cells}
        if len(cells) != 1 or not keys <= _known(cells):  # an ended cell, or the keys of two cells
            raise Refusal(401, "the model gateway does not know this cell key (the cell has ended)")
        (cell,) = cells
        problem = credential_problem(self.apis, path, headers, list(cell.env.values()))
        if problem is not None:
            raise Refusal(401, f"the model gateway refused the request: {problem}", cell)
        route = route_of(self.apis, method, urlsplit(path).path)
        if route is None:
            allowed = "; ".join(f"{api.name}: {api.describe()}" for api in self.apis)
            raise Refusal(
                403,
                f"{method} {urlsplit(path).path} is not forwarded: the model gateway forwards only the model "
                f"API this harness uses ({allowed})",
                cell,
            )
        return _Screened(cell, route)

    def _admit(
        self, method: str, path: str, headers: Sequence[tuple[str, str]], body: bytes, screened: Any
    ) -> Admission:
        assert isinstance(screened, _Screened)
        cell, route = screened.cell, screened.route
        try:
            payload = request_object(body)
        except ValueError as e:
            raise Refusal(400, f"the model gateway forwards a JSON object body only: {e}", cell) from None
        model = request_model(route, payload)
        row = price_for(model, self.prices)
        hold: Hold | None = None
        if route.action == GENERATE:
            if model is None:
                raise Refusal(400, "the request names no model, so the model gateway cannot price it", cell)
            if row is None:
                raise Refusal(
                    400,
                    f"model {model!r} has no price in the price table, so the model gateway cannot count its "
                    "cost and does not forward it (give its price with repo run --price MODEL=IN,OUT)",
                    cell,
                )
            worst = worst_case_usd(row[1], route.api, body, payload)
            del payload  # a request waiting for its turn holds its bytes, not their parsed objects
            try:
                hold = cell.budget.hold(worst, given_up=lambda: cell.ending)
            except BudgetSpent as spent:
                raise Refusal(
                    429, f"{spent}; the model gateway forwards no more of the cell's requests", cell
                ) from None
        ticket = _Ticket(
            cell, route, model, None if row is None else row[0], None if row is None else row[1], hold
        )
        with self._lock:
            cell.in_flight.add(ticket)
        self._local.ticket = ticket
        real = {dummy: self._credentials[var] for var, dummy in cell.env.items() if var in self._credentials}
        new_path, new_headers = swap_credentials(self.apis, path, headers, real)
        return Admission(new_path, new_headers, tag=ticket)

    def _opened(self, conn: http.client.HTTPConnection) -> None:
        ticket = getattr(self._local, "ticket", None)
        if isinstance(ticket, _Ticket):
            ticket.conn = conn
        self._local.ticket = None

    def _body_filter(self, req: ProxiedRequest, response: http.client.HTTPResponse) -> _AnswerFilter:
        ticket = req.tag
        assert isinstance(ticket, _Ticket)
        try:
            decoder = Decoder(response.getheader("Content-Encoding"))
        except UnreadableEncoding as e:
            ticket.unreadable = str(e)
            raise Refusal(502, f"model gateway: {e}, so it does not relay the answer", ticket.cell) from None
        if ticket.route.action == GENERATE and 200 <= response.status < 300:
            ticket.meter = UsageMeter(response.getheader("Content-Type"))
        return _AnswerFilter(decoder, ticket.meter, Scrubber(self._secrets))

    def _relayed_headers(
        self, req: ProxiedRequest, headers: list[tuple[str, str]], filtered: bool
    ) -> list[tuple[str, str]]:
        drop = {"content-encoding", "content-length"} if filtered else set()
        return [(k, self._scrub(v)) for k, v in headers if k.lower() not in drop]

    def _refused(self, method: str, path: str, refusal: Refusal) -> None:
        tag = refusal.tag
        cell = tag.cell if isinstance(tag, _Screened) else tag
        if isinstance(cell, GatewayCell):
            self._record_refusal(cell, method, path, refusal)
            return
        with self._lock:
            self.refused += 1
            shown = redacted_path(path[:LOGGED_PATH_CHARS])
            reason = refusal.message[:LOGGED_PATH_CHARS]
            self._log_unattributed(
                {"method": method, "path": shown, "status": refusal.status, "reason": reason}
            )

    def _log_unattributed(self, line: Mapping[str, Any], *, last: bool = False) -> None:
        """One line of the batch's refused log, while it holds less than :data:`REFUSAL_LOG_BYTES` (else the
        line is counted, for the ``last`` line to say)."""
        if self.unattributed_path is None:
            return
        text = self._scrub(json.dumps(line, sort_keys=True)) + "\n"
        if not last and self._unattributed_bytes >= REFUSAL_LOG_BYTES:
            self.unlogged += 1
            return
        self.unattributed_path.parent.mkdir(parents=True, exist_ok=True)
        with self.unattributed_path.open("a", encoding="utf-8") as f:
            f.write(text)
        self._unattributed_bytes += len(text)

    def _stopped(self) -> None:
        with self._lock:
            if self.unlogged:
                line = {"method": "-", "path": "-", "status": None, "reason": unlogged(self.unlogged)}
                self._log_unattributed(line, last=True)

    def _record_refusal(self, cell: GatewayCell, method: str, path: str, refusal: Refusal) -> None:
        with self._lock:
            cell.usage.requests += 1
            cell.usage.refused += 1
            cell.usage.statuses[refusal.status] += 1
            if cell.closed or cell.recorded_bytes >= CELL_RECORD_LIMIT:  # counted in usage.refused only
                return
            t = round(time.monotonic() - cell.opened, 3)
            record = GatewayRecord(
                index=0, t=t, duration_s=0.0, method=method, path=redacted_path(path[:LOGGED_PATH_CHARS]),
                headers={}, status=refusal.status, error=refusal.message[:LOGGED_PATH_CHARS],
            )  # fmt: skip
            cell._write(record.model_dump(mode="json"))

    def _completed(self, req: ProxiedRequest) -> None:
        ticket = req.tag
        if not isinstance(ticket, _Ticket):
            return
        cell = ticket.cell
        cell.in_flight.discard(ticket)
        status = req.status or 0
        answered = ticket.route.action == GENERATE and (200 <= status < 300 or ticket.unreadable is not None)
        usage = ticket.meter.finish() if ticket.meter is not None else None
        cost, basis = 0.0, None
        if ticket.hold is not None:
            if answered and (usage is None or req.error is not None) and ticket.price is not None:
                cost = ticket.hold.worst_usd
                unreadable = ticket.meter.unreadable if ticket.meter is not None else None
                basis = "worst case: " + (
                    ticket.unreadable
                    or req.error
                    or unreadable
                    or "the answer carries no usage the gateway can read"
                )
            elif answered and usage is not None and ticket.price is not None:
                cost, basis = price_of(ticket.price, usage), "usage"
            if not ticket.hold.settle(cost):
                return  # charged at its reservation when its cell closed
        account = cell.usage
        account.requests += 1
        account.statuses[status] += 1
        if req.error and status == 502 and len(account.upstream_errors) < 5:
            account.upstream_errors.append(req.error)
        account.cost_usd += cost
        if basis is not None and basis != "usage":
            account.worst_case += 1
        if ticket.model:
            account.models.add(ticket.model)
        if answered and ticket.unreadable is None:
            account.turns += 1
            if account.first_response_s is None:
                account.first_response_s = round(req.started - cell.opened + (req.duration_s or 0.0), 3)
        if usage is not None:
            account.usage = account.usage + usage
        if cell.closed:
            return
        self._record(req, ticket, usage, cost if basis is not None else None, basis)

    def _record(
        self, req: ProxiedRequest, ticket: _Ticket, usage: Usage | None, cost: float | None, basis: str | None
    ) -> None:
        cell = ticket.cell
        request_cut = _bounded(len(req.raw), req.raw, cell)
        response_cut = _bounded(req.response_bytes, bytes(req.response or b""), cell)
        record = {
            **req.to_json(read_json),
            **({"body": request_cut} if request_cut is not None else {}),
            "t": round(req.started - cell.opened, 3),
            "duration_s": round(req.duration_s or 0.0, 3),
            "response": _response_json(req) if response_cut is None else response_cut,
            "response_type": req.response_type,
            "model": ticket.model,
            "priced_as": ticket.priced_as,
            "usage": None
            if usage is None
            else {
                "input_tokens": usage.input,
                "output_tokens": usage.output,
                "cache_write_tokens": usage.cache_write,
                "cache_read_tokens": usage.cache_read,
            },
            "cost_usd": None if cost is None else round(cost, 8),
            "cost_basis": basis,
            "reserved_usd": None if ticket.hold is None else round(ticket.hold.worst_usd, 8),
        }
        cell._write(GatewayRecord.model_validate(record).model_dump(mode="json"))
