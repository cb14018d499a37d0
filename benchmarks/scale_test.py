"""Replicas behind HAProxy, both protocol eras, HAProxy reloaded and a replica killed: isolation proven.

Starts N replicas of an mcp-roots HTTP server on 127.0.0.1 and HAProxy with deploy/haproxy.cfg in front of
them, then runs legacy-era sessions (stateful, routed by Mcp-Session-Id) and 2026-07-28 clients (stateless,
multi-round-trip roots/list) at once from several client processes, each session with its own root, reading
its own file and its neighbours' (which must be refused). Every request carries the servers' bearer token
(--token-file, as deployed). Halfway through the measured window it reloads HAProxy (`haproxy -sf OLD`, as
`systemctl reload` does): a session's route is in its id, so no legacy session may fail. Then it kills one
replica: its legacy sessions end, re-initialize elsewhere and have their roots fetched again. `--phases
one,balancer` also runs the same load against one process, for comparison. It prints calls/s and p50/p99 per
call, errors by kind, memory per session per replica, cross-session grants (must be 0) and the sessions that
recovered, and exits 1 if isolation or recovery failed. Everything stops by itself (--deadline); every child
process is killed on exit.

    make scale-test                                  # 4 replicas, 400 legacy + 400 modern sessions, a kill
    .venv/bin/python benchmarks/scale_test.py --phases one,balancer      # and the same load on one process
    .venv/bin/python benchmarks/scale_test.py --legacy 40 --modern 40 --window 10 --recovery 20
    .venv/bin/python benchmarks/scale_test.py --control     # no guard (plain_server.py): must count grants
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import http.client
import json
import logging
import math
import os
import platform
import re
import resource
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp import Client
from mcp.client.context import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client
from mcp_types import ListRootsResult, Root

from mcp_roots import path_to_uri

REPO = Path(__file__).resolve().parent.parent
SCRIPT = Path(__file__).resolve()
HAPROXY_CFG = REPO / "deploy" / "haproxy.cfg"
# deploy/haproxy.cfg names four replicas; their ports come from these variables.
CFG_REPLICAS = 4
MODERN = "2026-07-28"
SESSION_NAME = re.compile(r"(?:legacy|modern)-\d{5}")


def control_server_cmd() -> str:
    """The same tool without mcp-roots (roots ignored): the run must count cross-session grants."""
    return "{python} " + str(REPO / "benchmarks" / "plain_server.py") + " --http {port} --roots {fallback}"


def default_server_cmd() -> str:
    """`mcp-roots serve --http`, as README "Running several replicas" deploys it (issue 17).

    --roots: the fallback for clients that send none; --ceiling: the directory holding every session's root
    (serve's default ceiling is its fallback, which would refuse each session's own root); --state-key-file:
    one request-state key for all replicas; --token-file: the bearer token every client sends (HAProxy passes
    it on); --timeout: the roots/list timeout, generous because 800 sessions share two cores here (the
    default, 5 s, is for one client waiting on its own answer).
    """
    return (
        "{bindir}/mcp-roots serve --http {port} --roots {fallback} --ceiling {data} "
        "--state-key-file {key} --token-file {token} --timeout 60"
    )


# --- the sessions -------------------------------------------------------------------------------------------


@dataclass
class Sample:
    at: float  # monotonic time the call finished
    seconds: float
    era: str


@dataclass
class Phase:
    """What one worker process measured in one phase (one server process, or the balancer with a kill)."""

    url: str
    sessions: int
    tool: str  # the server's tool that reads a text file: {"path": ...}
    samples: list[Sample] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    error_samples: dict[str, str] = field(default_factory=dict)
    cross_grants: int = 0
    foreign_roots_seen: int = 0
    own_granted: int = 0
    other_refused: int = 0
    connected: int = 0
    kill_at: float | None = None
    all_connected: anyio.Event = field(default_factory=anyio.Event)
    stop: anyio.Event = field(default_factory=anyio.Event)
    go: anyio.Event = field(default_factory=anyio.Event)

    def count_connected(self) -> None:
        self.connected += 1
        if self.connected == self.sessions:
            self.all_connected.set()

    def error(self, kind: str, detail: str) -> None:
        self.errors[kind] += 1
        self.error_samples.setdefault(kind, detail[:300])


@dataclass
class Session:
    era: str  # "legacy" or "modern"
    index: int
    base: Path
    roots_requests: int = 0
    connections: int = 0
    replica: str | None = None  # replica of the current legacy session (X-Mcp-Replica)
    counted: bool = False  # counted in Phase.connected
    first_ok: bool = False
    # At the kill: where the session was, how many connections and roots/list answers it had made.
    replica_at_kill: str | None = None
    connections_at_kill: int = 0
    roots_requests_at_kill: int = 0
    failed_after_kill: bool = False
    own_ok_after_kill: bool = False
    # An own read granted on a connection opened after the kill (a re-initialized legacy session).
    recovered: bool = False

    replica_at_go: str | None = None

    def record(self) -> dict[str, Any]:
        """What the driver needs to know about this session once the phase is over."""
        return {
            "era": self.era,
            "first_ok": self.first_ok,
            "replica_at_go": self.replica_at_go,
            "replica_at_kill": self.replica_at_kill,
            "failed_after_kill": self.failed_after_kill,
            "own_ok_after_kill": self.own_ok_after_kill,
            "recovered": self.recovered,
            "roots_refetched": self.roots_requests > self.roots_requests_at_kill,
        }

    @property
    def name(self) -> str:
        return f"{self.era}-{self.index:05d}"

    @property
    def root(self) -> Path:
        return self.base / self.name

    @property
    def file(self) -> Path:
        return self.root / "own.txt"

    @property
    def content(self) -> str:
        return f"private to {self.name}"

    async def list_roots(self, context: ClientRequestContext) -> ListRootsResult:
        self.roots_requests += 1
        return ListRootsResult(roots=[Root(uri=path_to_uri(self.root), name=self.name)])


def text_of(result: Any) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


def error_kind(exc: BaseException) -> str:
    """A short, stable name for an exception (the innermost of an exception group)."""
    while getattr(exc, "exceptions", None):  # an exception group (Python 3.10 has no builtin name for it)
        exc = exc.exceptions[0]  # type: ignore[attr-defined]
    if isinstance(exc, TimeoutError):
        return "call timed out"
    message = str(exc)
    code = getattr(getattr(exc, "error", None), "code", None)
    status = re.search(r"\b(404|502|503|504)\b", message)
    if code is not None:
        return f"MCPError {code}" + (f" (HTTP {status.group(1)})" if status else "")
    return type(exc).__name__ + (f" (HTTP {status.group(1)})" if status else "")


def judge(phase: Phase, session: Session, target: Session, result: Any, seconds: float) -> bool:
    """Record one read; True when it came out as it must (own read granted, neighbour's refused)."""
    phase.samples.append(Sample(time.monotonic(), seconds, session.era))
    text = text_of(result)
    allowed = text.split("allowed roots", 1)[1] if "allowed roots" in text else ""
    if any(name != session.name for name in SESSION_NAME.findall(allowed)):
        # A refusal that lists another session's root: that session's roots were in force for this one.
        phase.foreign_roots_seen += 1
        phase.error("another session's roots in force", f"{session.name}: {text}")
        return False
    if target is session:
        if not result.is_error and text == session.content:
            phase.own_granted += 1
            if phase.kill_at is not None:
                session.own_ok_after_kill = True
                if session.connections > session.connections_at_kill:
                    session.recovered = True
            return True
        if "allowed roots" in text and "fallback" in allowed:
            phase.error(
                "own read refused: fallback roots in force (issue 11 forbids)", f"{session.name}: {text}"
            )
        elif "allowed roots" in text:
            phase.error("own read refused: roots not in force", f"{session.name}: {text}")
        else:
            phase.error("own read refused: " + text.split(":", 1)[0][:60], f"{session.name}: {text}")
        return False
    if not result.is_error:
        phase.cross_grants += 1
        phase.error("CROSS-SESSION GRANT", f"{session.name} read {target.name}'s file: {text}")
        return False
    if text.startswith("Access denied"):
        phase.other_refused += 1
        return True
    phase.error("neighbour read: odd refusal", f"{session.name}: {text}")
    return False


def neighbours(session: Session, legacy: list[Session], modern: list[Session]) -> list[Session]:
    same, other = (legacy, modern) if session.era == "legacy" else (modern, legacy)
    n = len(same)
    found = [same[(session.index + 1) % n], same[(session.index - 1) % n]]
    if other:
        found.append(other[session.index % len(other)])
    return [s for s in found if s is not session] or [session]


#: What every request carries: the servers' bearer token (set from --token-file in the driver and workers).
HEADERS: dict[str, str] = {}


def bearer(token_file: Path) -> dict[str, str]:
    return {"Authorization": f"Bearer {token_file.read_text().split()[0]}"}


def http_client(session: Session) -> httpx2.AsyncClient:
    async def note_replica(response: httpx2.Response) -> None:
        replica = response.headers.get("x-mcp-replica")
        if replica:
            session.replica = replica

    # The SDK's own timeouts: 30 s to connect/write, 300 s to read (a response stream may stay open). Idle
    # connections are dropped after 2 s: uvicorn closes them after 5 s, httpx's default is also 5 s, and a
    # request sent on a connection the server is closing at that moment fails (seen as ReadError on the
    # direct one-process runs; HAProxy keeps client connections 60 s, so through it the client closes first).
    return httpx2.AsyncClient(
        headers=HEADERS,
        timeout=httpx2.Timeout(30.0, read=300.0),
        limits=httpx2.Limits(keepalive_expiry=2.0),
        event_hooks={"response": [note_replica]},
    )


async def run_session(
    phase: Phase,
    session: Session,
    others: list[Session],
    connect_gate: anyio.Semaphore,
    call_timeout: float,
) -> None:
    """One client for the whole phase: connect, read own file, then alternate own / neighbour reads until
    the phase stops. A legacy client whose session ends (its replica died) initializes a new one."""
    k = 0
    while not phase.stop.is_set():
        try:
            # The connection's own scope: initialize and the first read are bounded; once connected, each call
            # is (a cancel scope must enclose the client's task group, so it cannot be a `fail_after` inside).
            gated = False
            await connect_gate.acquire()  # waiting for a turn to connect is not part of the connect timeout
            gated = True
            with anyio.CancelScope(deadline=anyio.current_time() + call_timeout * 2) as connecting:
                async with http_client(session) as hc:
                    transport = streamable_http_client(phase.url, http_client=hc)
                    mode = "legacy" if session.era == "legacy" else "auto"
                    async with Client(transport, mode=mode, list_roots_callback=session.list_roots) as client:
                        session.connections += 1
                        started = time.perf_counter()
                        first = await client.call_tool(phase.tool, {"path": str(session.file)})
                        connecting.deadline = math.inf
                        connect_gate.release()
                        gated = False
                        ok = judge(phase, session, session, first, time.perf_counter() - started)
                        if not session.counted:
                            session.counted = True
                            session.first_ok = ok
                            phase.count_connected()
                        await phase.go.wait()
                        while not phase.stop.is_set():
                            # After the kill the next calls read the session's own file until one succeeds.
                            recheck = phase.kill_at is not None and not session.own_ok_after_kill
                            target = session if k % 2 == 0 or recheck else others[(k // 2) % len(others)]
                            k += 1
                            started = time.perf_counter()
                            with anyio.fail_after(call_timeout):
                                result = await client.call_tool(phase.tool, {"path": str(target.file)})
                            judge(phase, session, target, result, time.perf_counter() - started)
            if connecting.cancelled_caught:
                raise TimeoutError("initialize and the first read took longer than twice --call-timeout")
        except Exception as exc:  # every failure is counted by kind, then the client retries
            if gated:
                connect_gate.release()
            after_kill = phase.kill_at is not None
            if after_kill:
                session.failed_after_kill = True
            where = "after the kill" if after_kill else "before any kill"
            phase.error(f"{session.era}: {error_kind(exc)}, {where}", f"{session.name}: {exc!r}")
            if not session.counted:
                session.counted = True  # so that the phase does not wait for it; first_ok stays False
                phase.count_connected()
            await anyio.sleep(0.5)


# --- processes ---------------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _die_with_parent() -> None:
    # Linux: the child gets SIGKILL if this driver dies, even by SIGKILL, so nothing outlives the run.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class Children:
    """Every process the run starts; all of them are killed on exit, whatever happens."""

    def __init__(self, logdir: Path) -> None:
        self.logdir = logdir
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        with (self.logdir / f"{name}.log").open("wb") as log:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                preexec_fn=_die_with_parent if sys.platform == "linux" else None,
            )
        self.procs[name] = proc
        return proc

    def reload(self, haproxy: str, env: dict[str, str]) -> None:
        """``haproxy -sf OLD`` as a reload does: the new process takes the listeners; the old one finishes its
        connections (at most hard-stop-after) and exits.
        Started while threads run: no preexec_fn here, so close() stops it."""
        old = self.procs["haproxy"]
        with (self.logdir / "haproxy-reloaded.log").open("wb") as log:
            new = subprocess.Popen(
                [haproxy, "-db", "-f", env["MCP_SCALE_HAPROXY_CFG"], "-sf", str(old.pid)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
            )
        self.procs["haproxy-old"] = old
        self.procs["haproxy"] = new
        deadline = time.monotonic() + 30
        while set(haproxy_status(env["MCP_LB_STATS_SOCKET"]).values()) != {"UP"}:
            if new.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("scale_test: the reloaded haproxy did not come up with every replica UP")
            time.sleep(0.2)

    def kill(self, name: str) -> None:
        proc = self.procs[name]
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)

    def close(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


def wait_listening(proc: subprocess.Popen[bytes], port: int, what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"scale_test: {what} exited early with {proc.returncode} (log in --keep dir)")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise SystemExit(f"scale_test: {what} did not listen on 127.0.0.1:{port} within {timeout:g} s")


class _UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: str) -> None:
        super().__init__("localhost", timeout=10)
        self.path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.settimeout(10)
        self.sock.connect(self.path)


def haproxy_status(stats_socket: str) -> dict[str, str]:
    """Backend server name -> status (UP, DOWN...) from HAProxy's CSV stats, on its Unix socket."""
    connection = _UnixHTTPConnection(stats_socket)
    try:
        connection.request("GET", "/stats;csv")
        rows = connection.getresponse().read().decode().lstrip("# ").splitlines()
    finally:
        connection.close()
    header = rows[0].split(",")
    status: dict[str, str] = {}
    for row in rows[1:]:
        cols = dict(zip(header, row.split(","), strict=False))
        if cols.get("pxname") == "mcp_replicas" and cols.get("svname") not in ("BACKEND", "FRONTEND"):
            status[cols["svname"]] = cols.get("status", "")
    return status


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc status")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def find_haproxy(explicit: str | None) -> str:
    found = (
        explicit
        or shutil.which("haproxy")
        or ("/usr/sbin/haproxy" if Path("/usr/sbin/haproxy").exists() else None)
    )
    if not found:
        raise SystemExit(
            "scale_test: haproxy not found. Install HAProxy 2.6 from the system's packages "
            "(Debian/Ubuntu, as root: apt-get update && apt-get install haproxy; `make scale-test` does it "
            "when run as root), or pass --haproxy PATH."
        )
    version = subprocess.run([found, "-v"], capture_output=True, text=True, check=False).stdout
    if not re.search(r"version (2\.[6-9]|2\.\d\d|3\.)", version):
        print(
            f"scale_test: warning: tested with HAProxy 2.6; found {version.splitlines()[0:1]}",
            file=sys.stderr,
        )
    return found


# --- a worker: a slice of the sessions in its own process ---------------------------------------------------
# The SDK client costs more CPU per call than the server: one process driving 800 sessions measures itself.
# So the sessions are spread over --workers processes. The driver talks to each worker with lines of text:
# it sends "go", "kill" and "stop" on the worker's stdin; the worker answers "connected" once every one of
# its sessions has made its first read, and a final JSON report on stdout. Call times use CLOCK_MONOTONIC,
# which all processes share, so the driver can cut the measured window out of every worker's samples.


def emit(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


async def worker(args: argparse.Namespace) -> None:
    base = Path(args.base)
    legacy = [Session("legacy", i, base) for i in range(args.legacy)]
    modern = [Session("modern", i, base) for i in range(args.modern)]
    mine = [s for s in legacy + modern if s.index % args.workers == args.worker]
    phase = Phase(args.url, len(mine), args.tool)
    gate = anyio.Semaphore(args.connect_concurrency)

    async def commands() -> None:
        while True:
            line = (await anyio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)).strip()
            if line == "go":
                for s in mine:
                    s.replica_at_go = s.replica
                phase.go.set()
            elif line == "kill":
                for s in mine:
                    s.replica_at_kill = s.replica
                    s.roots_requests_at_kill = s.roots_requests
                    s.connections_at_kill = s.connections
                phase.kill_at = time.monotonic()
            elif line in ("stop", ""):  # "" is the driver gone: stop too
                phase.go.set()
                phase.stop.set()
                phase.all_connected.set()  # too late to matter; ends announce()
                return

    async def announce() -> None:
        await phase.all_connected.wait()
        emit({"event": "connected"})

    async with anyio.create_task_group() as tg:
        tg.start_soon(commands)
        tg.start_soon(announce)
        for s in mine:
            tg.start_soon(run_session, phase, s, neighbours(s, legacy, modern), gate, args.call_timeout)
        await phase.stop.wait()
        # Sessions finish the call in flight and close; the ones that hang are cancelled.
        tg.cancel_scope.deadline = anyio.current_time() + args.call_timeout + 15
    emit(
        {
            "event": "report",
            "samples": [[x.at, x.seconds, x.era] for x in phase.samples],
            "errors": dict(phase.errors),
            "error_samples": phase.error_samples,
            "cross_grants": phase.cross_grants,
            "foreign_roots_seen": phase.foreign_roots_seen,
            "own_granted": phase.own_granted,
            "other_refused": phase.other_refused,
            "sessions": [s.record() for s in mine],
        }
    )


# --- the driver: one phase ---------------------------------------------------------------------------------


@dataclass
class Replica:
    name: str
    port: int
    pid: int
    rss_rest: int = 0
    rss_loaded: int = 0
    cpu_window: float = 0.0


@dataclass
class Outcome:
    """One phase as the driver saw it, all workers merged."""

    name: str
    url: str
    replicas: list[Replica]
    connect_seconds: float = 0.0
    window: tuple[float, float] = (0.0, 0.0)
    client_cpu_window: float = 0.0
    killed_replica: str | None = None
    reloaded: bool = False
    samples: list[tuple[float, float, str]] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    error_samples: dict[str, str] = field(default_factory=dict)
    cross_grants: int = 0
    foreign_roots_seen: int = 0
    own_granted: int = 0
    other_refused: int = 0
    sessions: list[dict[str, Any]] = field(default_factory=list)
    lost_workers: int = 0

    def merge(self, part: dict[str, Any]) -> None:
        self.samples.extend((at, seconds, era) for at, seconds, era in part["samples"])
        self.errors.update(part["errors"])
        for kind, sample in part["error_samples"].items():
            self.error_samples.setdefault(kind, sample)
        for key in ("cross_grants", "foreign_roots_seen", "own_granted", "other_refused"):
            setattr(self, key, getattr(self, key) + part[key])
        self.sessions.extend(part["sessions"])


async def run_phase(
    outcome: Outcome,
    args: argparse.Namespace,
    base: Path,
    kill: Callable[[str], None] | None,
    reload: Callable[[], None] | None = None,
) -> None:
    # One legacy session and one 2026-07-28 call on each replica first, so that "at rest" means after the
    # server's lazy imports and first-use allocations, not before.
    warm = [Session("legacy", 0, base), Session("modern", 0, base)]
    for r in outcome.replicas:
        for session in warm:
            mode = "legacy" if session.era == "legacy" else "auto"
            with anyio.fail_after(args.call_timeout):
                url = f"http://127.0.0.1:{r.port}/mcp"
                async with (
                    httpx2.AsyncClient(headers=HEADERS, timeout=args.call_timeout) as hc,
                    Client(
                        streamable_http_client(url, http_client=hc),
                        mode=mode,
                        list_roots_callback=session.list_roots,
                    ) as client,
                ):
                    await client.call_tool(args.tool, {"path": str(session.file)})
    await anyio.sleep(0.5)
    for r in outcome.replicas:
        r.rss_rest = rss_kib(r.pid)
    argv = [sys.executable, str(SCRIPT), "--worker-of", str(args.workers)]
    argv += ["--url", outcome.url, "--base", str(base), "--legacy", str(args.legacy)]
    argv += ["--modern", str(args.modern), "--call-timeout", str(args.call_timeout), "--tool", args.tool]
    argv += ["--connect-concurrency", str(max(1, args.connect_concurrency // args.workers))]
    argv += ["--token-file", str(args.token_file)]
    connected = [anyio.Event() for _ in range(args.workers)]
    reports: list[dict[str, Any] | None] = [None] * args.workers
    t0 = time.monotonic()
    async with contextlib.AsyncExitStack() as stack:
        procs = []
        for i in range(args.workers):
            proc = await anyio.open_process([*argv, "--worker", str(i)], stderr=None)
            stack.push_async_callback(reap, proc)
            procs.append(proc)

        async def read(i: int) -> None:
            assert procs[i].stdout is not None
            async for line in TextLines(procs[i].stdout):
                message = json.loads(line)
                if message["event"] == "connected":
                    connected[i].set()
                elif message["event"] == "report":
                    reports[i] = message

        async def tell(word: str) -> None:
            for proc in procs:
                assert proc.stdin is not None
                with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                    await proc.stdin.send(f"{word}\n".encode())

        async with anyio.create_task_group() as tg:
            for i in range(args.workers):
                tg.start_soon(read, i)
            with anyio.move_on_after(args.connect_limit):
                for event in connected:
                    await event.wait()
            outcome.connect_seconds = time.monotonic() - t0
            done = sum(e.is_set() for e in connected)
            print(
                f"  [{outcome.name}] {done}/{args.workers} workers connected all their sessions "
                f"in {outcome.connect_seconds:.1f} s"
            )
            await anyio.sleep(1.0)
            for r in outcome.replicas:
                r.rss_loaded = rss_kib(r.pid)
            cpu0 = {r.name: cpu_seconds(r.pid) for r in outcome.replicas}
            client0 = sum(cpu_seconds(p.pid) for p in procs)
            await tell("go")
            w0 = time.monotonic()
            if reload is None:
                await anyio.sleep(args.window)
            else:  # halfway through the window: every legacy session must survive it
                await anyio.sleep(args.window / 2)
                await anyio.to_thread.run_sync(reload)
                outcome.reloaded = True
                print(f"  [{outcome.name}] reloaded haproxy (haproxy -sf OLD)")
                await anyio.sleep(args.window / 2)
            outcome.window = (w0, time.monotonic())
            for r in outcome.replicas:
                r.cpu_window = cpu_seconds(r.pid) - cpu0[r.name]
            outcome.client_cpu_window = sum(cpu_seconds(p.pid) for p in procs) - client0
            if kill is not None:
                outcome.killed_replica = args.kill
                await tell("kill")
                await anyio.to_thread.run_sync(kill, args.kill)
                print(f"  [{outcome.name}] killed replica {args.kill}")
                await anyio.sleep(args.recovery)
            await tell("stop")
            with anyio.move_on_after(args.call_timeout + 60):
                for proc in procs:
                    await proc.wait()
            tg.cancel_scope.cancel()
    for report in reports:
        if report is None:
            outcome.lost_workers += 1
        else:
            outcome.merge(report)


class TextLines:
    """Lines of a byte stream (anyio's TextReceiveStream gives chunks, not lines)."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.buffer = b""

    def __aiter__(self) -> TextLines:
        return self

    async def __anext__(self) -> str:
        while b"\n" not in self.buffer:
            try:
                self.buffer += await self.stream.receive()
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                raise StopAsyncIteration from None
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line.decode()


async def reap(proc: Any) -> None:
    """A worker that did not stop by itself is killed."""
    if proc.returncode is None:
        proc.kill()
        with anyio.move_on_after(10):
            await proc.wait()


def summarise(outcome: Outcome) -> dict[str, Any]:
    """Per-session outcomes of a phase, counted."""
    sessions = outcome.sessions
    summary: dict[str, Any] = {"first_reads_ok": sum(1 for s in sessions if s["first_ok"])}
    if outcome.killed_replica is not None:
        legacy = [s for s in sessions if s["era"] == "legacy"]
        modern = [s for s in sessions if s["era"] == "modern"]
        on_victim = [s for s in legacy if s["replica_at_kill"] == outcome.killed_replica]
        recovered = [s for s in on_victim if s["recovered"]]
        summary["kill"] = {
            "replica": outcome.killed_replica,
            "legacy_on_victim": len(on_victim),
            "ended": sum(1 for s in on_victim if s["failed_after_kill"]),
            "recovered": len(recovered),
            "roots_refetched": sum(1 for s in recovered if s["roots_refetched"]),
            "other_legacy_failed": sum(
                1 for s in legacy if s["replica_at_kill"] != outcome.killed_replica and s["failed_after_kill"]
            ),
            "modern_failed_once": sum(1 for s in modern if s["failed_after_kill"]),
            "modern_own_read_after": sum(1 for s in modern if s["own_ok_after_kill"]),
        }
    return summary


# --- the report --------------------------------------------------------------------------------------------


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(p * len(values)))] * 1000 if values else float("nan")


def window_figures(outcome: Outcome, era: str | None) -> tuple[int, float, float, float]:
    w0, w1 = outcome.window
    lat = [sec for at, sec, e in outcome.samples if w0 <= at <= w1 and (era is None or e == era)]
    rate = len(lat) / (w1 - w0) if w1 > w0 else float("nan")
    return len(lat), rate, pct(lat, 0.50), pct(lat, 0.99)


def report(outcomes: list[Outcome], args: argparse.Namespace) -> tuple[bool, dict[str, Any]]:
    ok = True
    figures: dict[str, Any] = {}
    total = args.legacy + args.modern
    print()
    print(
        f"scale_test  {time.strftime('%Y-%m-%d %H:%M:%S %Z')}  {platform.node()}  "
        f"load {os.getloadavg()[0]:.1f}"
    )
    print(f"  python {platform.python_version()}, {os.cpu_count()} CPUs; server: {args.server_cmd}")
    print(
        f"  {args.legacy} legacy sessions + {args.modern} 2026-07-28 clients in {args.workers} client "
        "processes, each session its own root,"
    )
    print(
        f"  reads alternating own / neighbours' files; window {args.window:g} s, "
        f"after the kill {args.recovery:g} s"
    )
    print()
    print(
        "  | phase | era | calls in window | calls/s | p50 | p99 | server CPU per call "
        "| client CPU per call |"
    )
    print("  |---|---|---:|---:|---:|---:|---:|---:|")
    for outcome in outcomes:
        cpu = sum(r.cpu_window for r in outcome.replicas)
        for era in ("legacy", "modern", None):
            n, rate, p50, p99 = window_figures(outcome, era)
            label = {"legacy": "legacy", "modern": MODERN, None: "both"}[era]
            server = f"{cpu / n * 1000:.2f} ms" if era is None and n else ""
            client = f"{outcome.client_cpu_window / n * 1000:.2f} ms" if era is None and n else ""
            print(
                f"  | {outcome.name} | {label} | {n} | {rate:.1f} | {p50:.0f} ms | {p99:.0f} ms "
                f"| {server} | {client} |"
            )
            figures[f"{outcome.name}/{label}"] = {"calls": n, "calls_s": rate, "p50_ms": p50, "p99_ms": p99}
    for outcome in outcomes:
        summary = summarise(outcome)
        print()
        print(f"  [{outcome.name}] {outcome.url}")
        print(
            f"    connect + first read: {outcome.connect_seconds:.1f} s; sessions whose first own read "
            f"succeeded: {summary['first_reads_ok']}/{total}"
        )
        print(
            f"    own reads granted: {outcome.own_granted}; "
            f"neighbours' reads refused: {outcome.other_refused}"
        )
        print(f"    cross-session grants: {outcome.cross_grants} (must be 0)")
        print(f"    refusals naming another session's roots: {outcome.foreign_roots_seen} (must be 0)")
        print(
            "    server memory per legacy session (VmRSS with the sessions connected - at rest), per replica:"
        )
        memory = {}
        for r in outcome.replicas:
            held = sum(
                1 for s in outcome.sessions if s["era"] == "legacy" and s["replica_at_go"] in (r.name, None)
            )
            per = (r.rss_loaded - r.rss_rest) / held if held else float("nan")
            memory[r.name] = {"legacy_sessions": held, "kib_per_session": per}
            print(
                f"      {r.name}: {held} legacy sessions, "
                f"{r.rss_rest / 1024:.1f} -> {r.rss_loaded / 1024:.1f} MiB"
                f" = {per:.0f} KiB per session; CPU in window {r.cpu_window:.2f} s"
            )
        print("    errors by kind:" + ("" if outcome.errors else " none"))
        for kind, count in outcome.errors.most_common():
            print(f"      {count:6d}  {kind}")
            print(f"              e.g. {outcome.error_samples[kind]}")
        if outcome.lost_workers:
            print(f"    {outcome.lost_workers} client processes sent no report")
        unexpected = sum(
            c for kind, c in outcome.errors.items() if "after the kill" not in kind and "GRANT" not in kind
        )
        if args.control:
            # The control must leak, or this test could not see a leak; its own reads all succeed.
            print(f"    CONTROL (no guard): cross-session grants must be > 0: {outcome.cross_grants}")
            ok = ok and outcome.cross_grants > 0
        elif outcome.cross_grants or outcome.foreign_roots_seen:
            ok = False
        if unexpected or summary["first_reads_ok"] < total or outcome.lost_workers:
            ok = False
        figures[outcome.name] = {
            **summary,
            "connect_seconds": outcome.connect_seconds,
            "cross_grants": outcome.cross_grants,
            "foreign_roots_seen": outcome.foreign_roots_seen,
            "errors": dict(outcome.errors),
            "memory": memory,
        }
        kill = summary.get("kill")
        if kill is not None:
            print(f"    replica {kill['replica']} killed; legacy sessions on it: {kill['legacy_on_victim']}")
            print(
                f"      sessions that ended: {kill['ended']}; re-initialized and read their own file again: "
                f"{kill['recovered']}; of those, roots fetched again: {kill['roots_refetched']}"
            )
            print(
                "      legacy sessions on other replicas that failed: "
                f"{kill['other_legacy_failed']} (must be 0)"
            )
            print(
                f"      2026-07-28 clients: {kill['modern_failed_once']} saw a failed call, "
                f"{kill['modern_own_read_after']}/{args.modern} read their own file after the kill"
            )
            if (
                kill["legacy_on_victim"] == 0
                or kill["recovered"] < kill["legacy_on_victim"]
                # (the control's server never asks for roots)
                or (kill["roots_refetched"] < kill["recovered"] and not args.control)
                or kill["other_legacy_failed"]
                or kill["modern_own_read_after"] < args.modern
            ):
                ok = False
    print()
    print("  result:", "OK" if ok else "FAIL")
    return ok, figures


# --- main --------------------------------------------------------------------------------------------------


@contextlib.contextmanager
def workdir(keep: str | None) -> Iterator[Path]:
    if keep:
        path = Path(keep).resolve()
        path.mkdir(parents=True, exist_ok=True)
        yield path
    else:
        with tempfile.TemporaryDirectory(prefix="mcp-roots-scale-") as tmp:
            yield Path(tmp).resolve()


def server_argv(template: str, port: int, data: Path, key: Path, token: Path) -> list[str]:
    return shlex.split(
        template.format(
            python=shlex.quote(sys.executable),
            bindir=shlex.quote(str(Path(sys.executable).parent)),
            port=port,
            data=shlex.quote(str(data)),
            fallback=shlex.quote(str(data / "fallback")),
            key=shlex.quote(str(key)),
            token=shlex.quote(str(token)),
            repo=shlex.quote(str(REPO)),
        )
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--legacy", type=int, default=400, help="legacy-era sessions (default 400)")
    parser.add_argument("--modern", type=int, default=400, help="2026-07-28 clients (default 400)")
    parser.add_argument(
        "--replicas", type=int, default=CFG_REPLICAS, help="replicas (deploy/haproxy.cfg has 4)"
    )
    parser.add_argument("--window", type=float, default=30.0, help="seconds of measured calls per phase (30)")
    parser.add_argument("--recovery", type=float, default=60.0, help="seconds of calls after the kill (60)")
    parser.add_argument("--call-timeout", type=float, default=90.0, help="most seconds for one call (90)")
    parser.add_argument("--connect-limit", type=float, default=240.0, help="most seconds to connect (240)")
    parser.add_argument(
        "--connect-concurrency", type=int, default=64, help="sessions connecting at once (64)"
    )
    parser.add_argument("--deadline", type=float, default=900.0, help="hard stop of the whole run, s (900)")
    parser.add_argument(
        "--phases",
        default="balancer",
        help="comma-separated: balancer (the replicas, a kill; default), one (the same load on one process)",
    )
    parser.add_argument(
        "--server-cmd",
        help="server command; {python} {bindir} {port} {data} (every session's root is in it) {fallback} "
        "{key} {repo} are replaced (default: mcp-roots serve --http, see default_server_cmd())",
    )
    parser.add_argument(
        "--tool",
        help="the server's tool that reads a text file given {path} (default: read_text_file, mcp-roots "
        "serve's; read_text with --control or for examples/file_server.py)",
    )
    parser.add_argument(
        "--control",
        action="store_true",
        help="run benchmarks/plain_server.py (no guard): cross-session grants must then be counted",
    )
    parser.add_argument("--haproxy", help="the haproxy binary (default: from PATH or /usr/sbin)")
    parser.add_argument(
        "--haproxy-cfg",
        type=Path,
        default=HAPROXY_CFG,
        help="the HAProxy config (default deploy/haproxy.cfg)",
    )
    parser.add_argument(
        "--keep", metavar="DIR", help="keep files and child logs in DIR (default: a temp dir)"
    )
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    parser.add_argument("--workers", type=int, default=4, help="client processes (default 4)")
    parser.add_argument("--kill", default="r2", help="the replica to kill midway (default r2)")
    parser.add_argument("--no-reload", action="store_true", help="do not reload HAProxy mid-window")
    # Internal: this script run as one of the client processes.
    parser.add_argument("--worker-of", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--base", help=argparse.SUPPRESS)
    parser.add_argument("--token-file", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    # The SDK warns that roots are deprecated; this test uses them on purpose.
    warnings.filterwarnings("ignore", message=".*deprecated.*")
    # The SDK logs each failed DELETE of a session that died with its replica; the run counts those itself.
    logging.getLogger("mcp").setLevel(logging.ERROR)
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if args.worker_of is not None:
        HEADERS.update(bearer(args.token_file))
        args.workers = args.worker_of
        anyio.run(worker, args)
        return 0
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]  # progress lines as they happen
    if args.server_cmd is None:
        args.server_cmd = control_server_cmd() if args.control else default_server_cmd()
    if args.tool is None:
        args.tool = "read_text" if args.control else "read_text_file"
    phases_wanted = [p.strip() for p in args.phases.split(",") if p.strip()]
    if args.replicas != CFG_REPLICAS and "balancer" in phases_wanted:
        parser.error(f"deploy/haproxy.cfg names {CFG_REPLICAS} replicas; edit it to run another number")
    if args.legacy < 2 or args.modern < 2 or set(phases_wanted) - {"one", "balancer"} or not phases_wanted:
        parser.error("need at least 2 sessions of each era and --phases from one,balancer")
    if args.workers < 1 or args.kill not in {f"r{i}" for i in range(1, CFG_REPLICAS + 1)}:
        parser.error(f"need --workers >= 1 and --kill one of r1..r{CFG_REPLICAS}")
    haproxy = find_haproxy(args.haproxy) if "balancer" in phases_wanted else ""
    with workdir(args.keep) as base:
        logdir = base / "logs"
        logdir.mkdir(exist_ok=True)
        # The servers' ceiling: the sessions' roots and the fallback, not the key or the logs beside it.
        data = base / "data"
        (data / "fallback").mkdir(parents=True, exist_ok=True)
        key = base / "state.key"
        key.write_text(os.urandom(32).hex())
        key.chmod(0o600)
        args.token_file = base / "http-token"
        args.token_file.write_text(secrets.token_urlsafe(32) + "\n")
        args.token_file.chmod(0o600)
        HEADERS.update(bearer(args.token_file))
        legacy = [Session("legacy", i, data) for i in range(args.legacy)]
        modern = [Session("modern", i, data) for i in range(args.modern)]
        for s in legacy + modern:  # the workers build the same sessions from the same names
            s.root.mkdir(exist_ok=True)
            s.file.write_text(s.content)
        children = Children(logdir)

        def on_signal(signum: int, frame: object) -> None:
            children.close()
            raise SystemExit(128 + signum)

        signal.signal(signal.SIGTERM, on_signal)
        try:
            # Every child is started here, before any thread exists (preexec_fn is then safe).
            ports = {"one": free_port()}
            replicas: dict[str, list[Replica]] = {"one": [], "balancer": []}
            if "one" in phases_wanted:
                proc = children.start(
                    "one", server_argv(args.server_cmd, ports["one"], data, key, args.token_file)
                )
                replicas["one"].append(Replica("one", ports["one"], proc.pid))
            if "balancer" in phases_wanted:
                env = dict(
                    os.environ, MCP_LB_PORT=str(free_port()), MCP_LB_STATS_SOCKET=str(base / "stats.sock")
                )
                for i in range(1, args.replicas + 1):
                    port = free_port()
                    env[f"MCP_REPLICA{i}_PORT"] = str(port)
                    proc = children.start(
                        f"r{i}", server_argv(args.server_cmd, port, data, key, args.token_file)
                    )
                    replicas["balancer"].append(Replica(f"r{i}", port, proc.pid))
                cfg = env["MCP_SCALE_HAPROXY_CFG"] = str(args.haproxy_cfg)
                check = subprocess.run([haproxy, "-c", "-q", "-f", cfg], env=env, check=False)
                if check.returncode != 0:
                    raise SystemExit(f"scale_test: haproxy -c rejected {cfg}")
                lb = children.start("haproxy", [haproxy, "-db", "-f", cfg], env=env)
                ports["balancer"] = int(env["MCP_LB_PORT"])
            for rs in replicas.values():
                for r in rs:
                    wait_listening(children.procs[r.name], r.port, f"replica {r.name}", 60)
            if "balancer" in phases_wanted:
                wait_listening(lb, ports["balancer"], "haproxy", 30)
                deadline = time.monotonic() + 30
                while set(haproxy_status(env["MCP_LB_STATS_SOCKET"]).values()) != {"UP"}:
                    if time.monotonic() > deadline:
                        raise SystemExit("scale_test: haproxy did not see every replica UP within 30 s")
                    time.sleep(0.5)
            done: list[Outcome] = []

            async def run_all() -> bool:
                with anyio.move_on_after(args.deadline) as scope:
                    for name in phases_wanted:
                        label = "one process" if name == "one" else f"{args.replicas} replicas + haproxy"
                        print(f"phase: {label}")
                        outcome = Outcome(label, f"http://127.0.0.1:{ports[name]}/mcp", replicas[name])
                        kill = children.kill if name == "balancer" else None
                        reload = (
                            (lambda: children.reload(haproxy, env))
                            if name == "balancer" and not args.no_reload
                            else None
                        )
                        await run_phase(outcome, args, data, kill, reload)
                        done.append(outcome)
                        if name == "one":
                            children.kill("one")  # frees its memory and CPU for the next phase
                return scope.cancelled_caught

            timed_out = anyio.run(run_all)
        finally:
            children.close()
        ok, figures = report(done, args)
        if timed_out:
            print(f"  KILLED by --deadline {args.deadline:g} s: FAIL")
            ok = False
        if args.json:
            Path(args.json).write_text(json.dumps(figures, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
