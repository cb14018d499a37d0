"""Session isolation under load: many concurrent clients, each with its own root, on one HTTP server.

Starts examples/file_server.py on 127.0.0.1 (streamable HTTP), connects N concurrent legacy-era sessions of
the official Python SDK client, each granting a distinct directory, and has each make M guarded reads that
alternate its own file and another session's. Prints cross-session grants (must be 0), errors (must be 0),
calls/s, p50/p99 latency and the server's resident memory per session. Bounded by --time-limit.

    .venv/bin/python benchmarks/bench_sessions.py                       # 200 sessions x 100 calls
    .venv/bin/python benchmarks/bench_sessions.py --sessions 2000 --calls 10
    .venv/bin/python benchmarks/bench_sessions.py --control   # same load on an unguarded server: must leak
"""

from __future__ import annotations

import argparse
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.client.context import ClientRequestContext
from mcp_types import ListRootsResult, Root

from mcp_roots import path_to_uri

FILE_SERVER = Path(__file__).resolve().parent.parent / "examples" / "file_server.py"
PLAIN_SERVER = Path(__file__).resolve().parent / "plain_server.py"


@dataclass
class Tally:
    latencies: list[float] = field(default_factory=list)
    own_reads: int = 0
    other_refused: int = 0
    cross_grants: int = 0
    errors: int = 0
    roots_requests: int = 0
    # Wall-clock time after which sessions start no new call (set once all sessions are connected).
    stop_at: float = float("inf")
    stopped_early: int = 0
    error_samples: list[str] = field(default_factory=list)

    def error(self, what: str) -> None:
        self.errors += 1
        if len(self.error_samples) < 5:
            self.error_samples.append(what)


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc status")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_listening(proc: subprocess.Popen[bytes], port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited early with {proc.returncode}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise SystemExit(f"the server did not listen within {timeout} s")


def text_of(result: Any) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


class Session:
    """One client session: its own root directory and file, and the roots callback that grants it."""

    def __init__(self, index: int, base: Path, tally: Tally) -> None:
        self.index = index
        self.root = base / f"session-{index:05d}"
        self.file = self.root / "own.txt"
        self.content = f"private to session {index}"
        self.tally = tally

    def make(self) -> None:
        self.root.mkdir()
        self.file.write_text(self.content)

    async def list_roots(self, context: ClientRequestContext) -> ListRootsResult:
        self.tally.roots_requests += 1
        return ListRootsResult(roots=[Root(uri=path_to_uri(self.root), name=self.root.name)])


async def run_session(
    session: Session,
    others: list[Session],
    url: str,
    calls: int,
    connected: list[int],
    all_connected: anyio.Event,
    measured: anyio.Event,
) -> None:
    tally = session.tally
    try:
        async with Client(url, mode="legacy", list_roots_callback=session.list_roots) as client:
            # The first call waits for this session's roots; only then does the session count as connected.
            first = await client.call_tool("read_text", {"path": str(session.file)})
            if first.is_error or text_of(first) != session.content:
                tally.error(f"session {session.index}: first read failed: {text_of(first)[:200]}")
            connected[0] += 1
            if connected[0] == len(others):
                all_connected.set()
            await measured.wait()
            for k in range(calls):
                if time.monotonic() > tally.stop_at:
                    tally.stopped_early += 1
                    break
                other = others[(session.index + 1 + k) % len(others)]
                target = session if k % 2 == 0 or other is session else other
                started = time.perf_counter()
                result = await client.call_tool("read_text", {"path": str(target.file)})
                tally.latencies.append(time.perf_counter() - started)
                text = text_of(result)
                if target is session:
                    if result.is_error or text != session.content:
                        tally.error(f"session {session.index}: own read refused: {text[:200]}")
                    else:
                        tally.own_reads += 1
                elif not result.is_error:
                    # Any content of another session's file reaching this session is a breach.
                    tally.cross_grants += 1
                elif not text.startswith("Access denied"):
                    tally.error(f"session {session.index}: odd refusal: {text[:200]}")
                else:
                    tally.other_refused += 1
    except Exception as exc:
        tally.error(f"session {session.index}: {type(exc).__name__}: {exc}")
        connected[0] += 1
        if connected[0] == len(others):
            all_connected.set()


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Measures:
    phase: dict[str, float] = field(default_factory=dict)
    rss_before: int = 0
    rss_connected: int = 0
    rss_after_waves: list[int] = field(default_factory=list)
    server_cpu_calls: float = 0.0
    timed_out: bool = False
    late_connects: int = 0


async def measure(sessions: list[Session], url: str, pid: int, args: argparse.Namespace) -> Measures:
    m = Measures()
    # Warm the server (imports, a first session) so that the baseline is a server at rest.
    async with Client(url, mode="legacy", list_roots_callback=sessions[0].list_roots) as client:
        await client.call_tool("list_roots", {})
    await anyio.sleep(0.5)
    m.rss_before = rss_kib(pid)
    sessions[0].tally.roots_requests = 0
    # The time limit stops new calls gracefully; the hard stop (connections that hang) comes later.
    with anyio.move_on_after((args.connect_limit + args.time_limit + 60) * args.waves) as scope:
        for wave in range(args.waves):
            connected = [0]
            all_connected = anyio.Event()
            measured = anyio.Event()
            async with anyio.create_task_group() as tg:
                t0 = time.perf_counter()
                for s in sessions:
                    tg.start_soon(
                        run_session, s, sessions, url, args.calls, connected, all_connected, measured
                    )
                with anyio.move_on_after(args.connect_limit):
                    await all_connected.wait()
                if connected[0] < len(sessions):
                    m.late_connects += len(sessions) - connected[0]
                m.phase["connect"] = m.phase.get("connect", 0.0) + time.perf_counter() - t0
                if wave == 0:
                    m.rss_connected = rss_kib(pid)
                cpu0 = cpu_seconds(pid)
                t1 = time.perf_counter()
                sessions[0].tally.stop_at = time.monotonic() + args.time_limit
                measured.set()
            m.phase["calls"] = m.phase.get("calls", 0.0) + time.perf_counter() - t1
            m.server_cpu_calls += cpu_seconds(pid) - cpu0
            await anyio.sleep(1.0)
            m.rss_after_waves.append(rss_kib(pid))
    m.timed_out = scope.cancelled_caught
    return m


def report(args: argparse.Namespace, tally: Tally, m: Measures) -> bool:
    lat = sorted(tally.latencies)
    n_calls = len(lat)

    def pct(p: float) -> float:
        return lat[min(len(lat) - 1, int(p * len(lat)))] * 1000 if lat else float("nan")

    calls_s = m.phase.get("calls", float("nan"))
    print(f"bench_sessions  {time.strftime('%Y-%m-%d %H:%M:%S %Z')}  {platform.node()}  {platform.machine()}")
    print(f"  python {platform.python_version()}, {os.cpu_count()} CPUs, server and clients on this machine")
    server = "CONTROL: benchmarks/plain_server.py, no guard" if args.control else "examples/file_server.py"
    print(f"  server: {server}, streamable HTTP on 127.0.0.1")
    print(
        f"  sessions: {args.sessions}, calls per session: {args.calls} (alternating own / another session's)"
    )
    waves = f" x {args.waves} waves" if args.waves > 1 else ""
    print(f"  connect + first call: {m.phase.get('connect', float('nan')):.2f} s for all sessions{waves}")
    rate = f" = {n_calls / calls_s:.0f} calls/s" if n_calls and calls_s == calls_s and calls_s > 0 else ""
    print(f"  guarded calls: {n_calls} in {calls_s:.2f} s{rate}")
    if n_calls:
        print(
            f"  server CPU: {m.server_cpu_calls:.2f} s"
            f" = {m.server_cpu_calls / n_calls * 1000:.2f} ms per call"
        )
    mean = statistics.fmean(lat) * 1000 if lat else float("nan")
    print(f"  latency: p50 {pct(0.50):.1f} ms, p99 {pct(0.99):.1f} ms, mean {mean:.1f} ms")
    print(f"  own reads granted: {tally.own_reads}, other sessions' reads refused: {tally.other_refused}")
    must = "must be > 0: the control shows the benchmark sees a leak" if args.control else "must be 0"
    print(f"  cross-session grants: {tally.cross_grants}  ({must})")
    print(f"  errors: {tally.errors}  (must be 0)")
    for sample in tally.error_samples:
        print(f"    e.g. {sample}")
    print(f"  roots/list requests answered: {tally.roots_requests} (one per session expected)")
    if "connect" in m.phase:
        per = (m.rss_connected - m.rss_before) / args.sessions
        print(
            f"  server RSS: {m.rss_before / 1024:.1f} MiB at rest, {m.rss_connected / 1024:.1f} MiB with "
            f"{args.sessions} sessions = {per:.0f} KiB per session"
        )
        after = ", ".join(f"{kib / 1024:.1f}" for kib in m.rss_after_waves)
        print(f"  server RSS after each wave of {args.sessions} sessions closed: {after} MiB")
    if m.late_connects:
        print(
            f"  {m.late_connects} sessions were not connected within --connect-limit {args.connect_limit:g} s"
        )
    if tally.stopped_early:
        print(
            f"  time limit: {tally.stopped_early} sessions stopped at --time-limit {args.time_limit:g} s "
            f"before their last call ({n_calls} of {args.sessions * args.calls} calls made)"
        )
    if m.timed_out:
        print(f"  KILLED: connections still hanging {args.time_limit + 60:g} s after the start")
    leaked_as_expected = tally.cross_grants > 0 if args.control else tally.cross_grants == 0
    ok = leaked_as_expected and tally.errors == 0 and not m.timed_out
    print("  result:", "OK" if ok else "FAIL")
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sessions", type=int, default=200, help="concurrent client sessions (default 200)")
    parser.add_argument("--calls", type=int, default=100, help="guarded calls per session (default 100)")
    parser.add_argument(
        "--time-limit",
        type=float,
        default=60.0,
        help="start no new call after this many seconds (default 60)",
    )
    parser.add_argument(
        "--server-arg",
        action="append",
        default=[],
        help="extra server argument, e.g. --server-arg=--timeout=30",
    )
    parser.add_argument("--server-log", help="keep the server's stderr in this file (default: discarded)")
    parser.add_argument(
        "--connect-limit", type=float, default=120.0, help="most seconds for all sessions to connect (120)"
    )
    parser.add_argument(
        "--waves", type=int, default=1, help="connect and run all sessions this many times, one after another"
    )
    parser.add_argument("--control", action="store_true", help="run against the unguarded plain_server.py")
    args = parser.parse_args()
    if args.sessions < 2 or args.calls < 1:
        parser.error("need at least 2 sessions and 1 call")
    # The SDK warns that roots are deprecated; this benchmark measures them on purpose.
    warnings.filterwarnings("ignore", message=".*deprecated.*")
    tally = Tally()
    with tempfile.TemporaryDirectory(prefix="mcp-roots-bench-") as tmp:
        base = Path(tmp).resolve()
        fallback = base / "fallback"
        fallback.mkdir()
        sessions = [Session(i, base, tally) for i in range(args.sessions)]
        for s in sessions:
            s.make()
        port = free_port()
        with Path(args.server_log or base / "server.log").open("wb") as log:
            server = subprocess.Popen(
                [
                    sys.executable,
                    str(PLAIN_SERVER if args.control else FILE_SERVER),
                    *("--http", str(port), "--roots", str(fallback)),
                    *args.server_arg,
                ],
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
        try:
            wait_listening(server, port)
            m = anyio.run(measure, sessions, f"http://127.0.0.1:{port}/mcp", server.pid, args)
        finally:
            server.terminate()
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait(timeout=10)
    return 0 if report(args, tally, m) else 1


if __name__ == "__main__":
    raise SystemExit(main())
