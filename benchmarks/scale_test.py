"""Several replicas behind HAProxy, both protocol eras, one replica killed in the middle: isolation proven.

Starts N replicas of an mcp-roots HTTP server on 127.0.0.1 and HAProxy with deploy/haproxy.cfg in front of
them, then runs legacy-era sessions (stateful, sticky on Mcp-Session-Id) and 2026-07-28 clients (stateless,
multi-round-trip roots/list) at once, each with its own root, reading its own file and its neighbours' (which
must be refused). Midway it kills one replica: its legacy sessions end, re-initialize elsewhere and have their
roots fetched again. It also runs the same load against one process directly, for comparison. It prints
calls/s and p50/p99 per call, errors by kind, memory per session per replica, cross-session grants (must be
0) and the sessions that recovered; it exits 1 if isolation or recovery failed. Everything stops by itself
(--deadline), and every child process is killed on exit.

    make scale-test                                  # 4 replicas, 400 legacy + 400 modern sessions
    .venv/bin/python benchmarks/scale_test.py --legacy 40 --modern 40 --window 10 --recovery 20
    .venv/bin/python benchmarks/scale_test.py --server-cmd '{python} my_server.py --http {port} ...'
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import importlib.util
import json
import logging
import math
import os
import platform
import re
import resource
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
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
HAPROXY_CFG = REPO / "deploy" / "haproxy.cfg"
FILE_SERVER = REPO / "examples" / "file_server.py"
# deploy/haproxy.cfg names four replicas; their ports come from these variables.
CFG_REPLICAS = 4
MODERN = "2026-07-28"
SESSION_NAME = re.compile(r"(?:legacy|modern)-\d{5}")


def control_server_cmd() -> str:
    """The same tool without mcp-roots (roots ignored): the run must count cross-session grants."""
    return "{python} " + str(REPO / "benchmarks" / "plain_server.py") + " --http {port} --roots {fallback}"


def default_server_cmd() -> str:
    """`mcp-roots serve` once it exists (issue 16), else the reference server; both get the same flags."""
    flags = "--http {port} --roots {fallback} --state-key-file {key}"
    if importlib.util.find_spec("mcp_roots.filesystem") is not None:
        return "{bindir}/mcp-roots serve " + flags
    # --timeout: the roots/list timeout, generous because 800 sessions share two cores with other jobs.
    return "{python} " + str(FILE_SERVER) + " " + flags + " --timeout 60"


# --- the sessions -------------------------------------------------------------------------------------------


@dataclass
class Sample:
    at: float  # monotonic time the call finished
    seconds: float
    era: str


@dataclass
class Phase:
    """What one phase (one process, or the balancer with a kill) measured."""

    name: str
    url: str
    sessions: int
    samples: list[Sample] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    error_samples: dict[str, str] = field(default_factory=dict)
    cross_grants: int = 0
    foreign_roots_seen: int = 0
    own_granted: int = 0
    other_refused: int = 0
    connected: int = 0
    window: tuple[float, float] = (0.0, 0.0)
    kill_at: float | None = None
    killed_replica: str | None = None
    summary: dict[str, Any] = field(default_factory=dict)
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

    def reset(self) -> None:
        self.roots_requests = self.connections = self.connections_at_kill = self.roots_requests_at_kill = 0
        self.replica = self.replica_at_kill = None
        self.counted = self.first_ok = self.failed_after_kill = self.own_ok_after_kill = False
        self.recovered = False

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


def http_client(session: Session) -> httpx2.AsyncClient:
    async def note_replica(response: httpx2.Response) -> None:
        replica = response.headers.get("x-mcp-replica")
        if replica:
            session.replica = replica

    # The SDK's own defaults: 30 s to connect/write, 300 s to read (a response stream may stay open).
    return httpx2.AsyncClient(
        timeout=httpx2.Timeout(30.0, read=300.0), event_hooks={"response": [note_replica]}
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
            with anyio.CancelScope(deadline=anyio.current_time() + call_timeout * 2) as connecting:
                await connect_gate.acquire()
                gated = True
                async with http_client(session) as hc:
                    transport = streamable_http_client(phase.url, http_client=hc)
                    mode = "legacy" if session.era == "legacy" else "auto"
                    async with Client(transport, mode=mode, list_roots_callback=session.list_roots) as client:
                        session.connections += 1
                        started = time.perf_counter()
                        first = await client.call_tool("read_text", {"path": str(session.file)})
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
                            target = session if k % 2 == 0 else others[(k // 2) % len(others)]
                            k += 1
                            started = time.perf_counter()
                            with anyio.fail_after(call_timeout):
                                result = await client.call_tool("read_text", {"path": str(target.file)})
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


def haproxy_status(stats_port: int) -> dict[str, str]:
    """Backend server name -> status (UP, DOWN...) from HAProxy's CSV stats."""
    with urllib.request.urlopen(f"http://127.0.0.1:{stats_port}/stats;csv", timeout=10) as reply:
        rows = reply.read().decode().lstrip("# ").splitlines()
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


# --- one phase ---------------------------------------------------------------------------------------------


@dataclass
class Replica:
    name: str
    port: int
    pid: int
    rss_rest: int = 0
    rss_loaded: int = 0
    cpu_window: float = 0.0
    legacy_sessions: int = 0


async def run_phase(
    phase: Phase,
    legacy: list[Session],
    modern: list[Session],
    replicas: list[Replica],
    args: argparse.Namespace,
    kill: Callable[[str], None] | None,
) -> None:
    sessions = legacy + modern
    for s in sessions:
        s.reset()
    for r in replicas:
        r.rss_rest = rss_kib(r.pid)
    gate = anyio.Semaphore(args.connect_concurrency)
    t_start = time.monotonic()
    async with anyio.create_task_group() as tg:
        for s in sessions:
            others = neighbours(s, legacy, modern)
            tg.start_soon(run_session, phase, s, others, gate, args.call_timeout)
        with anyio.move_on_after(args.connect_limit):
            await phase.all_connected.wait()
        connect_s = time.monotonic() - t_start
        print(f"  [{phase.name}] {phase.connected}/{len(sessions)} sessions connected in {connect_s:.1f} s")
        await anyio.sleep(1.0)
        for r in replicas:
            r.rss_loaded = rss_kib(r.pid)
            # Through the balancer the X-Mcp-Replica header says where each session lives.
            r.legacy_sessions = (
                len(legacy) if len(replicas) == 1 else sum(1 for s in legacy if s.replica == r.name)
            )
        cpu0 = {r.name: cpu_seconds(r.pid) for r in replicas}
        phase.go.set()
        w0 = time.monotonic()
        await anyio.sleep(args.window)
        w1 = time.monotonic()
        phase.window = (w0, w1)
        for r in replicas:
            r.cpu_window = cpu_seconds(r.pid) - cpu0[r.name]
        print(f"  [{phase.name}] measured window: {sum(1 for x in phase.samples if w0 <= x.at <= w1)} calls")
        if kill is not None:
            held = Counter(s.replica for s in legacy if s.replica)
            victim = held.most_common(1)[0][0] if held else replicas[1].name
            for s in sessions:
                s.replica_at_kill = s.replica
                s.roots_requests_at_kill = s.roots_requests
                s.connections_at_kill = s.connections
            phase.killed_replica = victim
            phase.kill_at = time.monotonic()
            await anyio.to_thread.run_sync(kill, victim)
            print(f"  [{phase.name}] killed replica {victim} (it held {held.get(victim, 0)} legacy sessions)")
            await anyio.sleep(args.recovery)
        phase.stop.set()
        # Sessions finish the call in flight and close; the ones that hang are cancelled.
        tg.cancel_scope.deadline = time.monotonic() + args.call_timeout + 15
    phase.summary = summarise(phase, legacy, modern)


def summarise(phase: Phase, legacy: list[Session], modern: list[Session]) -> dict[str, Any]:
    """The per-session outcome of a phase (sessions are reused by the next phase)."""
    summary: dict[str, Any] = {"first_reads_ok": sum(1 for s in legacy + modern if s.first_ok)}
    if phase.kill_at is not None:
        on_victim = [s for s in legacy if s.replica_at_kill == phase.killed_replica]
        recovered = [s for s in on_victim if s.recovered]
        summary["kill"] = {
            "replica": phase.killed_replica,
            "legacy_on_victim": len(on_victim),
            "ended": sum(1 for s in on_victim if s.failed_after_kill),
            "recovered": len(recovered),
            "roots_refetched": sum(1 for s in recovered if s.roots_requests > s.roots_requests_at_kill),
            "other_legacy_failed": sum(
                1 for s in legacy if s.replica_at_kill != phase.killed_replica and s.failed_after_kill
            ),
            "modern_failed_once": sum(1 for s in modern if s.failed_after_kill),
            "modern_own_read_after": sum(1 for s in modern if s.own_ok_after_kill),
        }
    return summary


# --- the report --------------------------------------------------------------------------------------------


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(p * len(values)))] * 1000 if values else float("nan")


def window_figures(phase: Phase, era: str | None) -> tuple[int, float, float, float]:
    w0, w1 = phase.window
    lat = [x.seconds for x in phase.samples if w0 <= x.at <= w1 and (era is None or x.era == era)]
    rate = len(lat) / (w1 - w0) if w1 > w0 else float("nan")
    return len(lat), rate, pct(lat, 0.50), pct(lat, 0.99)


def report(
    phases: list[tuple[Phase, list[Replica]]],
    legacy: list[Session],
    modern: list[Session],
    args: argparse.Namespace,
) -> tuple[bool, dict[str, Any]]:
    ok = True
    figures: dict[str, Any] = {}
    print()
    print(
        f"scale_test  {time.strftime('%Y-%m-%d %H:%M:%S %Z')}  {platform.node()}  "
        f"load {os.getloadavg()[0]:.1f}"
    )
    print(f"  python {platform.python_version()}, {os.cpu_count()} CPUs; server command: {args.server_cmd}")
    print(
        f"  {len(legacy)} legacy sessions + {len(modern)} 2026-07-28 clients, each its own root; "
        "reads alternate"
    )
    print(
        f"  own / neighbours' files; measured window {args.window:g} s, "
        f"recovery after the kill {args.recovery:g} s"
    )
    print()
    print("  | phase | era | calls in window | calls/s | p50 | p99 | replica CPU per call |")
    print("  |---|---|---:|---:|---:|---:|---:|")
    for phase, replicas in phases:
        cpu = sum(r.cpu_window for r in replicas)
        for era in ("legacy", "modern", None):
            n, rate, p50, p99 = window_figures(phase, era)
            label = {"legacy": "legacy", "modern": MODERN, None: "both"}[era]
            per_call = f"{cpu / n * 1000:.2f} ms" if era is None and n else ""
            print(
                f"  | {phase.name} | {label} | {n} | {rate:.0f} | {p50:.0f} ms | {p99:.0f} ms | {per_call} |"
            )
            figures[f"{phase.name}/{label}"] = {"calls": n, "calls_s": rate, "p50_ms": p50, "p99_ms": p99}
    for phase, replicas in phases:
        summary = phase.summary
        print()
        print(f"  [{phase.name}] {phase.url}")
        total = len(legacy) + len(modern)
        print(f"    sessions whose first own read succeeded: {summary['first_reads_ok']}/{total}")
        print(f"    own reads granted: {phase.own_granted}; neighbours' reads refused: {phase.other_refused}")
        print(f"    cross-session grants: {phase.cross_grants} (must be 0)")
        print(f"    refusals naming another session's roots: {phase.foreign_roots_seen} (must be 0)")
        print("    memory per legacy session, per replica (VmRSS with the sessions connected - at rest):")
        memory = {}
        for r in replicas:
            per = (r.rss_loaded - r.rss_rest) / r.legacy_sessions if r.legacy_sessions else float("nan")
            memory[r.name] = {"legacy_sessions": r.legacy_sessions, "kib_per_session": round(per)}
            print(
                f"      {r.name}: {r.legacy_sessions} legacy sessions, {r.rss_rest / 1024:.1f} -> "
                f"{r.rss_loaded / 1024:.1f} MiB = {per:.0f} KiB per session; "
                f"CPU in window {r.cpu_window:.2f} s"
            )
        print("    errors by kind:" + ("" if phase.errors else " none"))
        for kind, count in phase.errors.most_common():
            print(f"      {count:6d}  {kind}")
            print(f"              e.g. {phase.error_samples[kind]}")
        unexpected = sum(
            c for kind, c in phase.errors.items() if "after the kill" not in kind and "GRANT" not in kind
        )
        if args.control:
            # The control must leak, or this test could not see a leak; its own reads all succeed.
            print(f"    CONTROL (no guard): cross-session grants must be > 0: {phase.cross_grants}")
            ok = ok and phase.cross_grants > 0 and not unexpected and summary["first_reads_ok"] == total
        elif (
            phase.cross_grants or phase.foreign_roots_seen or summary["first_reads_ok"] < total or unexpected
        ):
            ok = False
        figures[phase.name] = {
            **summary,
            "cross_grants": phase.cross_grants,
            "foreign_roots_seen": phase.foreign_roots_seen,
            "errors": dict(phase.errors),
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
                f"{kill['modern_own_read_after']}/{len(modern)} read their own file after the kill"
            )
            if (
                kill["recovered"] < kill["legacy_on_victim"]
                # (the control's server never asks for roots)
                or (kill["roots_refetched"] < kill["recovered"] and not args.control)
                or kill["other_legacy_failed"]
                or kill["modern_own_read_after"] < len(modern)
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


def server_argv(template: str, port: int, fallback: Path, key: Path) -> list[str]:
    return shlex.split(
        template.format(
            python=shlex.quote(sys.executable),
            bindir=shlex.quote(str(Path(sys.executable).parent)),
            port=port,
            fallback=shlex.quote(str(fallback)),
            key=shlex.quote(str(key)),
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
    parser.add_argument("--recovery", type=float, default=45.0, help="seconds of calls after the kill (45)")
    parser.add_argument("--call-timeout", type=float, default=90.0, help="most seconds for one call (90)")
    parser.add_argument("--connect-limit", type=float, default=150.0, help="most seconds to connect (150)")
    parser.add_argument(
        "--connect-concurrency", type=int, default=64, help="sessions connecting at once (64)"
    )
    parser.add_argument("--deadline", type=float, default=600.0, help="hard stop of the whole run, s (600)")
    parser.add_argument(
        "--phases", default="one,balancer", help="comma-separated: one (one process), balancer (with a kill)"
    )
    parser.add_argument(
        "--server-cmd",
        help="server command; {python} {bindir} {port} {fallback} {key} {repo} are replaced "
        "(default: mcp-roots serve if installed, else examples/file_server.py)",
    )
    parser.add_argument(
        "--control",
        action="store_true",
        help="run benchmarks/plain_server.py (no guard): cross-session grants must then be counted",
    )
    parser.add_argument("--haproxy", help="the haproxy binary (default: from PATH or /usr/sbin)")
    parser.add_argument(
        "--keep", metavar="DIR", help="keep files and child logs in DIR (default: a temp dir)"
    )
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = parser.parse_args()
    if args.server_cmd is None:
        args.server_cmd = control_server_cmd() if args.control else default_server_cmd()
    phases_wanted = [p.strip() for p in args.phases.split(",") if p.strip()]
    if args.replicas != CFG_REPLICAS and "balancer" in phases_wanted:
        parser.error(f"deploy/haproxy.cfg names {CFG_REPLICAS} replicas; edit it to run another number")
    if args.legacy < 2 or args.modern < 2 or set(phases_wanted) - {"one", "balancer"} or not phases_wanted:
        parser.error("need at least 2 sessions of each era and --phases from one,balancer")
    haproxy = find_haproxy(args.haproxy) if "balancer" in phases_wanted else ""
    # The SDK warns that roots are deprecated; this test uses them on purpose.
    warnings.filterwarnings("ignore", message=".*deprecated.*")
    # The SDK logs each failed DELETE of a session that died with its replica; the run counts those itself.
    logging.getLogger("mcp").setLevel(logging.ERROR)
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    with workdir(args.keep) as base:
        logdir = base / "logs"
        logdir.mkdir(exist_ok=True)
        fallback = base / "fallback"
        fallback.mkdir(exist_ok=True)
        key = base / "state.key"
        key.write_text(os.urandom(32).hex())
        key.chmod(0o600)
        legacy = [Session("legacy", i, base) for i in range(args.legacy)]
        modern = [Session("modern", i, base) for i in range(args.modern)]
        for s in legacy + modern:
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
                proc = children.start("one", server_argv(args.server_cmd, ports["one"], fallback, key))
                replicas["one"].append(Replica("one", ports["one"], proc.pid))
            if "balancer" in phases_wanted:
                env = dict(os.environ, MCP_LB_PORT=str(free_port()), MCP_LB_STATS_PORT=str(free_port()))
                for i in range(1, args.replicas + 1):
                    port = free_port()
                    env[f"MCP_REPLICA{i}_PORT"] = str(port)
                    proc = children.start(f"r{i}", server_argv(args.server_cmd, port, fallback, key))
                    replicas["balancer"].append(Replica(f"r{i}", port, proc.pid))
                check = subprocess.run([haproxy, "-c", "-q", "-f", str(HAPROXY_CFG)], env=env, check=False)
                if check.returncode != 0:
                    raise SystemExit(f"scale_test: haproxy -c rejected {HAPROXY_CFG}")
                lb = children.start("haproxy", [haproxy, "-db", "-f", str(HAPROXY_CFG)], env=env)
                ports["balancer"] = int(env["MCP_LB_PORT"])
            for rs in replicas.values():
                for r in rs:
                    wait_listening(children.procs[r.name], r.port, f"replica {r.name}", 60)
            if "balancer" in phases_wanted:
                wait_listening(lb, ports["balancer"], "haproxy", 30)
                deadline = time.monotonic() + 30
                while set(haproxy_status(int(env["MCP_LB_STATS_PORT"])).values()) != {"UP"}:
                    if time.monotonic() > deadline:
                        raise SystemExit("scale_test: haproxy did not see every replica UP within 30 s")
                    time.sleep(0.5)
            done: list[tuple[Phase, list[Replica]]] = []

            async def run_all() -> bool:
                with anyio.move_on_after(args.deadline) as scope:
                    for name in phases_wanted:
                        label = "one process" if name == "one" else f"{args.replicas} replicas + haproxy"
                        phase = Phase(label, f"http://127.0.0.1:{ports[name]}/mcp", len(legacy) + len(modern))
                        print(f"phase: {label}")
                        kill = children.kill if name == "balancer" else None
                        await run_phase(phase, legacy, modern, replicas[name], args, kill)
                        done.append((phase, replicas[name]))
                        if name == "one":
                            children.kill("one")  # frees its memory and CPU for the next phase
                return scope.cancelled_caught

            timed_out = anyio.run(run_all)
        finally:
            children.close()
        ok, figures = report(done, legacy, modern, args)
        if timed_out:
            print(f"  KILLED by --deadline {args.deadline:g} s: FAIL")
            ok = False
        if args.json:
            Path(args.json).write_text(json.dumps(figures, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
