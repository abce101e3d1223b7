"""Issue 20's gateway attacks (items 6 to 11), each through a sealed ``repo run`` on the real daemon.

The attacker is a harness profile whose agent is a shell script running Python in the agent's container
(conftest.py), with the gateway's endpoint and its dummy key in ``ANTHROPIC_BASE_URL`` and
``ANTHROPIC_API_KEY`` like any sealed harness. The upstream is :class:`tests.attacks.vendor.Vendor` on host
loopback: it quotes every header back in its errors, compresses its answers with gzip, and bills the most a
request could cost. Attacks:

6. the dummy key in a header that is not a credential header (``anthropic-beta``) and in the query string,
   an upstream quoting the real key in an error, in a response header, in an answer split across two chunks,
   gzip-compressed: the real key reaches neither the agent nor any file of the batch;
7. 12 concurrent requests on a $1 cap, and two cells of such requests on a batch cap: the cell never spends
   more than its cap plus one request, the batch than its cap plus one request, and ``repo run`` reports
   what the upstream billed;
8. an honest agent that accepts gzip, behind an upstream that compresses (even when asked not to): counted,
   graded, not an infra error;
9. a model the price table lacks: refused without ``--price``; with it, priced (recorded in batch.json), and
   the cell's cost is the gateway's, never the harness's printed figure; a second unpriced model is refused;
10. batches, files, admin, model listing and legacy paths: refused, logged, never forwarded;
11. a chunked body with chunk size -1 and no key, a huge chunk with a key, a gzip bomb, 32 key-less
    connections each sending 99 header lines of 64 KB, and 1,500 idle key-less connections: the gateway's
    memory and threads stay bounded, and idle connections are closed;
    JSON nested 100,000 (and 900) levels deep and integers of 5,000 (and 400) digits, in requests and in the
    upstream's answers, streamed or not: refused requests, answers charged their worst case, each line of
    gateway.jsonl saying why, and the gateway serving on.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dokimi.batch import cell_dir
from dokimi.gateway.prices import Price
from tests.attacks.conftest import Attacker, Example, attacker, dokimi
from tests.attacks.vendor import Vendor

pytestmark = [pytest.mark.docker, pytest.mark.slow]

TASK = "fix_power_assoc"
MODEL = "claude-haiku-4-5"
REAL_KEY = "sk-ant-real-" + "q" * 30
SEALED = """\
endpoint_env: ANTHROPIC_BASE_URL
credential_env: [ANTHROPIC_API_KEY]
api: [anthropic]
"""

LIB = r"""
import gzip, http.client, json, os, socket, threading, time, urllib.parse
BASE = urllib.parse.urlsplit(os.environ["ANTHROPIC_BASE_URL"])
KEY = os.environ["ANTHROPIC_API_KEY"]
def report(name, value):
    print("ATTACK " + json.dumps({name: value}), flush=True)
def call(method, path, body=None, headers=None):
    conn = http.client.HTTPConnection(BASE.hostname, BASE.port, timeout=300)
    h = {"x-api-key": KEY, "anthropic-version": "2023-06-01", "content-type": "application/json"}
    h.update(headers or {})
    try:
        conn.request(method, path, None if body is None else json.dumps(body).encode(), h)
        resp = conn.getresponse()
        data = resp.read()
    except OSError as e:
        return {"status": None, "error": repr(e)}
    finally:
        conn.close()
    if resp.getheader("Content-Encoding") == "gzip":
        data = gzip.decompress(data)
    return {"status": resp.status, "headers": dict(resp.getheaders()), "body": data.decode("latin-1")}
def closed(s):  # the server closed it (after its 503, for one turned away at once)
    s.settimeout(0.05)
    try:
        while s.recv(65536):
            pass
        return True
    except socket.timeout:
        return False
    except OSError:
        return True
def message(size=100, max_tokens=100, stream=False, model="claude-haiku-4-5", text="hi"):
    return {"model": model, "max_tokens": max_tokens, "stream": stream,
            "messages": [{"role": "user", "content": text + " " + "x" * size}]}
"""


def sealed_attacker(directory: Path, code: str, *, stream_json: bool = False) -> Attacker:
    """An attacker harness with a model route (so the run is sealed) whose agent runs ``code`` in Python;
    ``stream_json``: its trace is read as Claude Code's (so it can print a cost of its own)."""
    who = attacker(directory, "python3 - <<'PY'\n" + LIB + code + "\nPY")
    who.profile.write_text(who.profile.read_text() + SEALED)
    if stream_json:
        who.profile.write_text(who.profile.read_text().replace("trace: text", "trace: claude-stream-json"))
        who.binary.write_text(who.binary.read_text().replace("\necho done\n", "\n"))
    return who


@dataclass
class Ran:
    """One sealed ``repo run`` of an attack: the command's result, the batch, and what the upstream saw."""

    proc: subprocess.CompletedProcess[str]
    batch: Path
    vendor: Vendor
    sampled: Sampled | None = None

    def cell(self, rep: int = 0, model: str = MODEL) -> Path:
        return cell_dir(self.batch, TASK, "guidance:raw", model, None, rep)

    def result(self, rep: int = 0, model: str = MODEL) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.cell(rep, model) / "result.json").read_text())
        return data

    def reports(self, model: str = MODEL) -> dict[str, list[Any]]:
        """What the attack script printed (ATTACK lines of agent.stdout), by name."""
        found: dict[str, list[Any]] = {}
        for line in (self.cell(model=model) / "agent.stdout").read_text(errors="replace").splitlines():
            if line.startswith("ATTACK "):
                for name, value in json.loads(line[7:]).items():
                    found.setdefault(name, []).append(value)
        return found

    def gateway_lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in (self.cell() / "gateway.jsonl").read_text().splitlines()]


@dataclass
class SealedAttack:
    """Runs an attack script as the agent of a sealed ``repo run`` of the bundled example, against a
    :class:`Vendor` upstream (the real key in the host's environment, as a user's would be)."""

    example: Example
    out: Path
    batch: str
    monkeypatch: pytest.MonkeyPatch

    def run(
        self,
        code: str,
        *extra: str,
        vendor: Vendor,
        model: str = MODEL,
        reps: int = 1,
        stream_json: bool = False,
        sample: bool = False,
    ) -> Ran:
        """``vendor`` must be started (``with Vendor(...) as vendor``); ``sample``: the run's memory and
        threads are sampled (:func:`run_sampled`; the script must end with a request for :data:`DONE`)."""
        who = sealed_attacker(self.out.parent / "agent", code, stream_json=stream_json)
        self.monkeypatch.setenv("ANTHROPIC_BASE_URL", vendor.url)
        args = [
            "repo", "run", self.example.source(), "--manifest", ".agent-eval/repo-eval.yaml", "--task", TASK,
            "--arm", "guidance:raw", "--model", model, "--reps", str(reps), "--batch", self.batch,
            "--out", str(self.out), "--harness", str(who.profile), "--bin", str(who.binary), "--json",
            "--allow-unchecked", *extra,
        ]  # fmt: skip
        batch = self.out / self.batch
        if not sample:
            return Ran(dokimi(args), batch, vendor)
        sampled = run_sampled(args, cell_dir(batch, TASK, "guidance:raw", model, None, 0))
        return Ran(sampled.proc, batch, vendor, sampled)


@pytest.fixture
def sealed(
    docker_available: bool, example: Example, tmp_path: Path, batch_name: str, monkeypatch: pytest.MonkeyPatch
) -> SealedAttack:
    for name in ("ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "HTTPS_PROXY", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", REAL_KEY)
    return SealedAttack(example, tmp_path / "out", batch_name, monkeypatch)


def _no_real_key_under(root: Path) -> None:
    for directory, _dirs, files in os.walk(root):
        for name in files:
            path = Path(directory) / name
            if path.is_file() and not path.is_symlink():
                assert REAL_KEY.encode() not in path.read_bytes(), f"the real key leaked into {path}"


# --- 6: the real key -------------------------------------------------------------------------------------

LEAK = r"""
BOGUS, GZ = {"anthropic-beta": "bogus"}, {"accept-encoding": "gzip"}
for name, path, body, headers in [
    ("dummy-in-beta", "/v1/messages", message(), {"anthropic-beta": KEY}),
    ("dummy-in-query", "/v1/messages?key=" + KEY, message(), {"anthropic-beta": "bogus"}),
    ("error-quotes-headers", "/v1/messages", message(), {"anthropic-beta": "bogus"}),
    ("error-quotes-headers-gzip", "/v1/messages", message(), {**BOGUS, **GZ}),
    ("echo", "/v1/messages", message(text="ECHO-KEY"), {}),
    ("echo-stream-split", "/v1/messages", message(text="ECHO-KEY", stream=True), {}),
    ("echo-stream-gzip", "/v1/messages", message(text="ECHO-KEY", stream=True), GZ),
    ("bearer", "/v1/messages", message(), {"x-api-key": "", "authorization": "Bearer " + KEY, **BOGUS}),
    ("key-twice", "/v1/messages", message(), {"x-api-key": KEY + " " + KEY, **BOGUS}),
]:
    report(name, call("POST", path, body, headers))
"""


@pytest.mark.parametrize("always_gzip", [False, True], ids=["gzip-when-asked", "always-gzip"])
def test_attack_6_the_real_key_reaches_neither_the_agent_nor_a_file(
    sealed: SealedAttack, always_gzip: bool
) -> None:
    with Vendor(REAL_KEY, always_gzip=always_gzip) as vendor:
        ran = sealed.run(LEAK, vendor=vendor)
    assert ran.proc.returncode in (0, 1), ran.proc.stderr
    reports = ran.reports()
    assert len(reports) == 9, reports
    assert REAL_KEY not in (ran.cell() / "agent.stdout").read_text(errors="replace")
    assert REAL_KEY not in ran.proc.stdout + ran.proc.stderr
    _no_real_key_under(sealed.out)
    for seen in vendor.requests:  # the real key went in the credential header and nowhere else
        assert REAL_KEY not in seen["path"]
        for name, value in seen["headers"].items():
            if name.lower() not in ("x-api-key", "authorization"):
                assert REAL_KEY not in value, (name, seen)
    assert reports["echo"][0]["status"] == 200 and "x-request-echo" in reports["echo"][0]["headers"]
    assert "the key is" in reports["echo-stream-split"][0]["body"]


# --- 7: the cap ------------------------------------------------------------------------------------------

FLOOD = r"""
import concurrent.futures
def one(i):
    return call("POST", "/v1/messages", message(size=400_000, max_tokens=4000))["status"]
with concurrent.futures.ThreadPoolExecutor(12) as pool:
    report("statuses", list(pool.map(one, range(12))))
"""
ONE_REQUEST_USD = (400_000 * 1.0 + 4000 * 5.0) / 1_000_000  # at least; a little more with the JSON around it


def test_attack_7_twelve_concurrent_requests_spend_at_most_the_cap_and_one_request(
    sealed: SealedAttack,
) -> None:
    with Vendor(REAL_KEY, delay_s=1.0) as vendor:
        ran = sealed.run(FLOOD, "--budget", "1", vendor=vendor)
    assert ran.proc.returncode == 0, ran.proc.stderr
    billed, one = vendor.billed_usd, max(vendor.billed)
    print(f"12 concurrent requests on a $1 cap: the upstream billed ${billed:.4f} (one request ${one:.4f})")
    assert one >= ONE_REQUEST_USD
    assert billed <= 1.0 + one + 1e-9  # the cap is a hard bound: at most one request past it
    (statuses,) = ran.reports()["statuses"]
    paid = statuses.count(200)
    assert paid == len(vendor.billed) and set(statuses) <= {200, 429}
    assert (paid - 1) * one < 1.0  # every request was admitted while money remained
    result = ran.result()
    assert result["cost_source"] == "gateway"
    assert result["cost_usd"] == pytest.approx(billed, abs=1e-5)
    assert json.loads(ran.proc.stdout)["spent_usd"] == pytest.approx(billed, abs=1e-5)


def test_attack_7_two_flooding_cells_spend_at_most_the_batch_cap_and_one_request(
    sealed: SealedAttack,
) -> None:
    with Vendor(REAL_KEY, delay_s=1.0) as vendor:
        ran = sealed.run(FLOOD, "--budget", "1", "--max-batch-usd", "2", "-j", "2", vendor=vendor, reps=2)
    assert ran.proc.returncode == 0, ran.proc.stderr
    billed, one = vendor.billed_usd, max(vendor.billed)
    print(f"two cells of 12 concurrent requests on a $2 batch cap: the upstream billed ${billed:.4f}")
    assert billed <= 2.0 + one + 1e-9
    costs = [ran.result(rep)["cost_usd"] for rep in (0, 1)]
    assert sum(costs) == pytest.approx(billed, abs=1e-5)
    assert all(cost <= 1.0 + one + 1e-9 for cost in costs)
    assert json.loads(ran.proc.stdout)["spent_usd"] == pytest.approx(billed, abs=1e-5)


# --- 8: compressed answers -------------------------------------------------------------------------------

HONEST = r"""
for i in range(3):
    r = call("POST", "/v1/messages", message(stream=i % 2 == 0), {"accept-encoding": "gzip, deflate, br"})
    report("status", r["status"])
"""


@pytest.mark.parametrize("always_gzip", [False, True], ids=["gzip-when-asked", "always-gzip"])
def test_attack_8_compressed_answers_are_counted_and_the_cell_graded(
    sealed: SealedAttack, always_gzip: bool
) -> None:
    with Vendor(REAL_KEY, always_gzip=always_gzip) as vendor:
        ran = sealed.run(HONEST, vendor=vendor)
    assert ran.proc.returncode == 0, ran.proc.stderr
    assert ran.reports()["status"] == [200, 200, 200]
    result = ran.result()
    assert result["infra_error"] is False and result["grader_failure"] is False
    assert result["turns"] == 3 and result["usage"]["turns"] == 3
    assert result["cost_source"] == "gateway"
    assert result["cost_usd"] == pytest.approx(vendor.billed_usd, abs=1e-6)
    assert all(line["usage"] is not None for line in ran.gateway_lines())


# --- 9: unpriced models ----------------------------------------------------------------------------------

UNPRICED = "mystery-model-1"
UNPRICED_LOOP = r"""
for i in range(10):
    answer = call("POST", "/v1/messages", message(size=300_000, max_tokens=1000, model="%s"))
    report("status", answer["status"])
report("other", call("POST", "/v1/messages", message(model="other-unpriced-2"))["status"])
print(json.dumps({"type": "result", "subtype": "success", "is_error": False, "result": "done",
                  "total_cost_usd": 0.000001, "num_turns": 1}), flush=True)
"""


def test_attack_9_a_model_the_price_table_lacks_is_refused_unless_priced_and_then_counted(
    sealed: SealedAttack,
) -> None:
    code = UNPRICED_LOOP % UNPRICED
    with Vendor(REAL_KEY) as vendor:
        vendor.prices[UNPRICED] = Price(2.0, 10.0, 2.5, 0.2)
        vendor.prices["other-unpriced-2"] = Price(2.0, 10.0, 2.5, 0.2)
        refused = sealed.run(code, "--budget", "1", vendor=vendor, model=UNPRICED, stream_json=True)
        assert vendor.requests == []
        price = ("--price", f"{UNPRICED}=2,10")
        ran = sealed.run(code, "--budget", "1", *price, vendor=vendor, model=UNPRICED, stream_json=True)
    assert refused.proc.returncode == 2, refused.proc.stderr
    stderr = refused.proc.stderr
    assert UNPRICED in stderr and "--price" in stderr and "Traceback" not in stderr
    assert ran.proc.returncode == 0, ran.proc.stderr
    billed, one = vendor.billed_usd, max(vendor.billed)
    pin = json.loads((ran.batch / "_eval" / "batch.json").read_text())
    assert pin["prices"][UNPRICED]["input"] == 2.0 and pin["prices"][UNPRICED]["output"] == 10.0
    result = ran.result(model=UNPRICED)
    assert result["cost_source"] == "gateway" and result["cost_usd"] == pytest.approx(billed, abs=1e-6)
    assert billed <= 1.0 + one + 1e-9
    assert ran.reports(model=UNPRICED)["other"] == [400]
    assert "other-unpriced-2" not in {seen["model"] for seen in vendor.requests}
    assert all(seen["path"].startswith("/v1/messages") for seen in vendor.requests)


# --- 10: paths -------------------------------------------------------------------------------------------

PATHS = r"""
for method, path, body in [
    ("POST", "/v1/messages/batches", {"requests": [{"custom_id": "a", "params": message()}]}),
    ("GET", "/v1/files", None),
    ("GET", "/v1/organizations/api_keys", None),
    ("GET", "/v1/models", None),
    ("POST", "/v1/complete", {"model": "claude-haiku-4-5", "prompt": "hi", "max_tokens_to_sample": 10}),
    ("POST", "/v1/messages/../messages/batches", {"requests": []}),
    ("DELETE", "/v1/messages", None),
]:
    report("paths", [method, path, call(method, path, body)["status"]])
"""


def test_attack_10_only_the_apis_paths_are_forwarded(sealed: SealedAttack) -> None:
    with Vendor(REAL_KEY) as vendor:
        ran = sealed.run(PATHS, vendor=vendor)
    assert ran.proc.returncode in (0, 1), ran.proc.stderr
    assert vendor.requests == []
    tried = ran.reports()["paths"]
    assert len(tried) == 7 and all(status in (403, 405) for _m, _p, status in tried), tried
    lines = ran.gateway_lines()
    assert len(lines) == 7
    for line in lines:
        assert line["status"] in (403, 405) and "not forwarded" in line["error"]


# --- 11: parsing, memory and connections -----------------------------------------------------------------


@dataclass
class Sampled:
    """The resident memory (MiB) and threads of ``repo run`` before the attack and at their peak during it."""

    proc: subprocess.CompletedProcess[str]
    baseline_rss_mib: float
    max_rss_mib: float
    baseline_threads: int
    max_threads: int


def _status(pid: int) -> tuple[float, int] | None:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    if "VmRSS" not in fields:  # a process that has exited
        return None
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["Threads"])


DONE = "/attack-done"
"""The path an attack script asks for last: the gateway refuses it, and its line in gateway.jsonl ends the
window in which memory and threads are sampled (grading later loads modules of its own)."""


def run_sampled(args: list[str], cell: Path) -> Sampled:
    """``dokimi ARGS`` with its resident memory and thread count sampled every 50 ms, from when the cell's
    workspace appears (before the agent's container starts: the baseline) until the cell's gateway.jsonl
    records the attack's last request (:data:`DONE`)."""
    child = subprocess.Popen(
        [sys.executable, "-m", "dokimi", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    samples: list[tuple[float, int]] = []
    record = cell / "gateway.jsonl"

    def done() -> bool:
        try:
            return DONE in record.read_text(errors="replace")
        except OSError:
            return False

    def sample() -> None:
        while child.poll() is None and not (samples and done()):
            now = _status(child.pid)
            if now is not None and (samples or (cell / "workspace").exists()):
                samples.append(now)
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    stdout, stderr = child.communicate(timeout=900)
    sampler.join(timeout=5)
    proc = subprocess.CompletedProcess(child.args, child.returncode, stdout, stderr)
    assert samples and done(), stderr
    rss, threads = [s[0] for s in samples], [s[1] for s in samples]
    return Sampled(proc, rss[0], max(rss), threads[0], max(threads))


CHUNKS = r"""
time.sleep(3)
def raw(head, body_chunks, total_mib):
    s = socket.create_connection((BASE.hostname, BASE.port), timeout=60)
    s.sendall(head)
    sent = 0
    try:
        for i in range(total_mib):
            s.sendall(body_chunks)
            sent += 1
        s.shutdown(socket.SHUT_WR)
    except OSError as e:
        pass
    try:
        answer = s.recv(4096).split(b"\r\n")[0].decode()
    except OSError as e:
        answer = repr(e)
    s.close()
    return [sent, answer]
mib = b"x" * 1048576
def head_flood(i):  # 99 header lines of 64 KB, without a key, the head never ended
    s = socket.create_connection((BASE.hostname, BASE.port), timeout=60)
    try:
        s.sendall(b"POST /v1/messages HTTP/1.1\r\n")
        for _ in range(99):
            s.sendall(b"X-A: " + b"a" * 65000 + b"\r\n")
        time.sleep(5)
        return s.recv(200).split(b"\r\n")[0].decode()
    except OSError as e:
        return repr(e)
    finally:
        s.close()
floods = [threading.Thread(target=head_flood, args=(i,)) for i in range(32)]
for t in floods:
    t.start()
for t in floods:
    t.join()
keyless = b"POST /v1/messages HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\n"
keyed = keyless.replace(b"Host: gw", b"Host: gw\r\nx-api-key: " + KEY.encode())
report("keyless-negative-chunk", raw(keyless, mib, 700))
report("keyed-negative-chunk", raw(keyed, mib, 700))
report("keyed-huge-chunk", raw(keyed.replace(b"-1\r\n", b"7fffffffffffffff\r\n"), mib, 700))
report("keyed-endless-chunks", raw(keyed.replace(b"-1\r\n", b""), b"100000\r\n" + mib + b"\r\n", 700))
huge_length = keyed.replace(b"Transfer-Encoding: chunked\r\n\r\n-1\r\n", b"Content-Length: 734003200\r\n\r\n")
report("keyed-huge-length", raw(huge_length, mib, 700))
bomb = gzip.compress(b"{" + b" " * (600 * 1048576) + b"}", 9)
report("bomb-bytes", len(bomb))
conn = http.client.HTTPConnection(BASE.hostname, BASE.port, timeout=120)
headers = {"x-api-key": KEY, "content-encoding": "gzip", "content-type": "application/json"}
conn.request("POST", "/v1/messages", bomb, headers)
report("gzip-bomb", conn.getresponse().status)
call("POST", "/attack-done", {})
"""


def test_attack_11_bad_request_bodies_keep_the_gateways_memory_bounded(sealed: SealedAttack) -> None:
    with Vendor(REAL_KEY) as vendor:
        ran = sealed.run(CHUNKS, vendor=vendor, sample=True)
    assert ran.proc.returncode in (0, 1), ran.proc.stderr
    assert ran.sampled is not None
    before, peak = ran.sampled.baseline_rss_mib, ran.sampled.max_rss_mib
    print(f"gateway under the chunk attacks: {before:.0f} MiB -> {peak:.0f} MiB")
    assert peak - before < 64, f"the gateway grew by {peak - before:.0f} MiB"
    reports = ran.reports()
    assert reports["keyless-negative-chunk"][0][1].split()[1] == "401"
    assert reports["keyed-negative-chunk"][0][1].split()[1] == "400"
    for name in ("keyed-huge-chunk", "keyed-endless-chunks", "keyed-huge-length"):
        assert reports[name][0][1].split()[1] == "413", reports[name]
    assert reports["gzip-bomb"] == [413]
    assert vendor.requests == []
    refused = (ran.batch / "_eval" / "gateway-refused.jsonl").read_text().splitlines()
    floods = [line for line in map(json.loads, refused) if line["status"] == 431]
    assert [line["reason"] for line in floods] == [
        "refused by the HTTP parser: request headers over 65536 bytes"
    ] * 32


FLOOD_IDLE = r"""
time.sleep(3)
socks, errors = [], []
for i in range(1500):
    try:
        socks.append(socket.create_connection((BASE.hostname, BASE.port), timeout=10))
    except OSError as e:
        errors.append(repr(e))
report("opened", [len(socks), errors[:3]])
time.sleep(5)
report("closed-at-once", sum(closed(s) for s in socks))
time.sleep(40)
report("closed-after-idle", sum(closed(s) for s in socks))
report("still-served", call("POST", "/v1/messages", message())["status"])
call("POST", "/attack-done", {})
"""


def test_attack_11_an_idle_flood_holds_few_threads_and_times_out(sealed: SealedAttack) -> None:
    with Vendor(REAL_KEY) as vendor:
        ran = sealed.run(FLOOD_IDLE, vendor=vendor, sample=True)
    assert ran.proc.returncode == 0, ran.proc.stderr
    assert ran.sampled is not None
    before, peak = ran.sampled.baseline_threads, ran.sampled.max_threads
    print(f"threads under 1,500 idle connections: {before} -> {peak}")
    assert peak - before <= 80
    reports = ran.reports()
    (opened,) = reports["opened"]
    (at_once,) = reports["closed-at-once"]
    assert at_once >= opened[0] - 32  # past 32 connections of one cell, each is turned away at once
    assert reports["closed-after-idle"] == [opened[0]]  # and the idle ones are closed after 30 s
    assert reports["still-served"] == [200]  # and the cell is served again once they are gone


HOSTILE_JSON = r"""
def post_raw(data):
    conn = http.client.HTTPConnection(BASE.hostname, BASE.port, timeout=300)
    h = {"x-api-key": KEY, "anthropic-version": "2023-06-01", "content-type": "application/json"}
    try:
        conn.request("POST", "/v1/messages", data, h)
        return conn.getresponse().status
    except OSError as e:
        return repr(e)
    finally:
        conn.close()
def nested(n):
    return (json.dumps(message())[:-1] + ', "metadata": {"x": ' + "[" * n + "]" * n + "}}").encode()
def huge(n):
    return json.dumps(message()).replace('"max_tokens": 100', '"max_tokens": ' + "9" * n).encode()
for n in (100000, 900):
    report("request-nested-%d" % n, post_raw(nested(n)))
for n in (5000, 400):
    report("request-digits-%d" % n, post_raw(huge(n)))
for stream in (False, True):
    for marker in ("DEEP-ANSWER-100000", "DEEP-ANSWER-900", "HUGE-USAGE-5000", "HUGE-USAGE-400"):
        answer = call("POST", "/v1/messages", message(text=marker, stream=stream))
        report("answer", [marker, stream, answer["status"]])
report("honest", call("POST", "/v1/messages", message())["status"])
"""
WHY = {"100000": "nested more than 64 levels deep", "900": "nested more than 64 levels deep",
       "5000": "an integer of 5000 digits", "400": "an integer of 400 digits"}  # fmt: skip


def test_attack_11_hostile_json_in_requests_and_answers_is_refused_or_charged_its_worst_case(
    sealed: SealedAttack,
) -> None:
    with Vendor(REAL_KEY) as vendor:
        ran = sealed.run(HOSTILE_JSON, "--budget", "5", vendor=vendor)
    assert ran.proc.returncode in (0, 1), ran.proc.stderr
    assert "Traceback" not in ran.proc.stderr, ran.proc.stderr
    reports = ran.reports()
    for name in ("request-nested-100000", "request-nested-900", "request-digits-5000", "request-digits-400"):
        assert reports[name] == [400], (name, reports[name])
    assert [status for _marker, _stream, status in reports["answer"]] == [200] * 8
    assert reports["honest"] == [200]  # the gateway serves on
    assert len(vendor.requests) == 9  # the refused requests never went upstream
    lines = ran.gateway_lines()
    refused = [line["error"] for line in lines if line["status"] == 400]
    assert len(refused) == 4
    for error, n in zip(refused, ("100000", "900", "5000", "400"), strict=True):
        assert error.startswith("the model gateway forwards a JSON object body only: the body is not JSON")
        assert WHY[n] in error, error
    answered = [line for line in lines if line["status"] == 200]
    assert len(answered) == 9
    hostile, honest = answered[:8], answered[8]
    for line, (marker, stream, _status) in zip(hostile, reports["answer"], strict=True):
        basis = line["cost_basis"]
        where = "an event of the answer" if stream else "the answer"
        assert basis.startswith(f"worst case: {where} is not JSON the gateway reads: "), basis
        assert WHY[marker.rsplit("-", 1)[1]] in basis, basis
        assert line["cost_usd"] == line["reserved_usd"] > 0
    assert honest["cost_basis"] == "usage"
    result = ran.result()
    assert result["usage"]["worst_case"] == 8 and result["usage"]["turns"] == 9
    assert result["cost_source"] == "gateway"
    assert result["cost_usd"] == pytest.approx(sum(line["cost_usd"] for line in answered), abs=1e-6)
