"""RootsCache under a notification storm: requests sent, settle time, and current() read throughput.

In process: a fake client answers roots/list after a fixed latency (1 ms by default) with the roots it has
when the request arrives; its roots change with every notification. The storm sends N notifications as fast
as it can, yielding to the event loop every few notifications so the worker and a reader task run during it.

Over stdio (issue 21's figure): a raw JSON-RPC client drives examples/file_server.py, answers each roots/list
at once with its roots of the moment, and writes 2,000 list_changed as fast as the pipe takes them, its
roots changed mid-storm and once before the last; it counts the roots/list requests (goal: <= 3, the first
answer, the change mid-storm, the final state) and checks that the first call after the storm sees the
final roots.

    .venv/bin/python benchmarks/bench_cache.py [--notifications 10000] [--latency 0.001] [--yield-every 10]
        [--reads-per-turn 100] [--debounce 0.02] [--max-wait 0.1] [--stdio-notifications 2000]
        [--stdio-rounds 3]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
from anyio.abc import Process

from mcp_roots import RootsCache, RootSet, path_to_uri

FILE_SERVER = Path(__file__).resolve().parent.parent / "examples" / "file_server.py"


class FakeClient:
    """Answers roots/list after ``latency`` seconds with the roots it had when the request arrived."""

    def __init__(self, roots: list[Path], latency: float) -> None:
        self.roots = roots
        self.latency = latency
        self.calls = 0

    async def fetch(self) -> object:
        self.calls += 1
        snapshot = {"roots": [{"uri": path_to_uri(str(p))} for p in self.roots]}
        await anyio.sleep(self.latency)
        return snapshot


async def storm(
    dirs: list[Path],
    notifications: int,
    latency: float,
    yield_every: int,
    reads_per_turn: int,
    debounce: float,
    max_wait: float,
) -> dict[str, float]:
    client = FakeClient([dirs[0]], latency)
    cache = RootsCache(
        client.fetch,
        fallback=RootSet.empty(source="fallback"),
        debounce=debounce,
        max_wait=max_wait,
        timeout=5.0,
    )
    cache.set_capabilities(roots=True, list_changed=True)
    # The last notification moves the client to a directory it never had before, so "current() equals the
    # final answer" cannot come true by an earlier refresh that happened to see the same roots.
    final = RootSet.from_paths([dirs[-1]])
    settled = anyio.Event()
    settled_at = 0.0

    def watch(old: RootSet | None, new: RootSet | None) -> None:
        nonlocal settled_at
        if new == final and not storming:
            settled_at = anyio.current_time()
            settled.set()

    cache.on_change(watch)
    reads = 0
    storming = True

    async def reader() -> None:
        nonlocal reads
        while storming:
            for _ in range(reads_per_turn):
                cache.current()
            reads += reads_per_turn
            await anyio.lowlevel.checkpoint()

    async with cache, anyio.create_task_group() as tg:
        cache.start()
        await cache.fresh()
        calls_before = client.calls
        tg.start_soon(reader)
        await anyio.lowlevel.checkpoint()
        t0 = anyio.current_time()
        for i in range(1, notifications + 1):
            client.roots = [dirs[-1]] if i == notifications else [dirs[i % (len(dirs) - 1)]]
            cache.notify_changed()
            if i % yield_every == 0:
                await anyio.lowlevel.checkpoint()
        t_last = anyio.current_time()
        storming = False
        if cache.current() == final:  # already applied by a refresh sent during the storm's last yield
            settled_at = t_last
        else:
            with anyio.fail_after(10):
                await settled.wait()
        await anyio.sleep(max_wait * 2)  # nothing more should go out
    assert cache.current() == final
    return {
        "fetches": client.calls - calls_before,
        "storm_s": t_last - t0,
        "settle_ms": (settled_at - t_last) * 1000,
        "reads_per_s": reads / (t_last - t0) if t_last > t0 else float("nan"),
    }


class RawStdioClient:
    """JSON-RPC lines on the server's stdin/stdout; answers roots/list at once with ``self.roots``."""

    def __init__(self, proc: Process, roots: list[Path]) -> None:
        self.proc = proc
        self.roots = roots
        self.roots_requests: list[float] = []
        self._waiting: dict[int, anyio.Event] = {}
        self._answers: dict[int, dict[str, Any]] = {}
        self._next_id = 0

    async def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        await self.proc.stdin.send((json.dumps(message) + "\n").encode())

    async def read(self) -> None:
        assert self.proc.stdout is not None
        pending = b""
        async for chunk in self.proc.stdout:
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                message = json.loads(line)
                if message.get("method") == "roots/list":
                    self.roots_requests.append(time.perf_counter())
                    roots = [{"uri": path_to_uri(str(p))} for p in self.roots]
                    await self.send({"jsonrpc": "2.0", "id": message["id"], "result": {"roots": roots}})
                elif message.get("id") in self._waiting:
                    self._answers[message["id"]] = message
                    self._waiting.pop(message["id"]).set()

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self._next_id += 1
        done = self._waiting[self._next_id] = anyio.Event()
        await self.send({"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params})
        with anyio.fail_after(60):
            await done.wait()
        return self._answers.pop(self._next_id)

    async def list_roots(self) -> list[str]:
        answer = await self.request("tools/call", {"name": "list_roots", "arguments": {}})
        return [root["path"] for root in answer["result"]["structuredContent"]["result"]]


async def stdio_storm(base: Path, notifications: int) -> dict[str, float]:
    dirs = {name: base / name for name in ("fallback", "a", "b", "c")}
    for path in dirs.values():
        path.mkdir(exist_ok=True)
    with (base / "server.log").open("w") as log:
        command = [sys.executable, str(FILE_SERVER), "--roots", str(dirs["fallback"])]
        async with await anyio.open_process(command, stderr=log) as proc, anyio.create_task_group() as tg:
            client = RawStdioClient(proc, [dirs["a"]])
            tg.start_soon(client.read)
            capabilities = {"roots": {"listChanged": True}}
            info = {"name": "bench-cache-storm", "version": "0"}
            await client.request(
                "initialize",
                {"protocolVersion": "2025-11-25", "capabilities": capabilities, "clientInfo": info},
            )
            await client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            assert await client.list_roots() == [str(dirs["a"])]
            changed = {"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}
            line = (json.dumps(changed) + "\n").encode()
            assert proc.stdin is not None
            t0 = time.perf_counter()
            for i in range(1, notifications + 1):
                if i == notifications // 2:
                    client.roots = [dirs["b"]]  # mid-storm
                elif i == notifications - 1:
                    client.roots = [dirs["c"]]  # once before the last
                await proc.stdin.send(line)
            t_written = time.perf_counter()
            final_ok = await client.list_roots() == [str(dirs["c"])]
            t_seen = time.perf_counter()
            await anyio.sleep(1.0)  # nothing more should go out
            tg.cancel_scope.cancel()
            await proc.stdin.aclose()
    return {
        "requests": len(client.roots_requests),
        "written_ms": (t_written - t0) * 1000,
        "seen_ms": (t_seen - t_written) * 1000,
        "final_ok": final_ok,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notifications", type=int, default=10_000)
    parser.add_argument("--latency", type=float, default=0.001, help="fetch latency in seconds")
    parser.add_argument("--yield-every", type=int, default=10, help="notifications between event-loop yields")
    parser.add_argument("--reads-per-turn", type=int, default=100, help="current() calls per reader turn")
    parser.add_argument("--debounce", type=float, default=0.02)
    parser.add_argument("--max-wait", type=float, default=0.1)
    parser.add_argument("--stdio-notifications", type=int, default=2000, help="0: skip the stdio storm")
    parser.add_argument("--stdio-rounds", type=int, default=3)
    args = parser.parse_args()
    goal_ms = (args.max_wait + 2 * args.latency) * 1000
    print(
        f"{args.notifications} notifications, fetch latency {args.latency * 1000:g} ms, yield every "
        f"{args.yield_every}, debounce {args.debounce * 1000:g} ms, max_wait {args.max_wait * 1000:g} ms"
    )
    print(f"goal: <= 5 fetches, settle <= {goal_ms:g} ms (max_wait + 2 fetch latencies)")
    print(f"{'backend':8} {'fetches':>7} {'storm ms':>9} {'settle ms':>9} {'current() reads/s':>18}  goal")
    with tempfile.TemporaryDirectory() as tmp:
        dirs = []
        for i in range(5):
            (Path(tmp) / f"r{i}").mkdir()
            dirs.append((Path(tmp) / f"r{i}").resolve())
        for backend in ("asyncio", "trio"):
            r = anyio.run(
                storm,
                dirs,
                args.notifications,
                args.latency,
                args.yield_every,
                args.reads_per_turn,
                args.debounce,
                args.max_wait,
                backend=backend,
            )
            print(
                f"{backend:8} {r['fetches']:7.0f} {r['storm_s'] * 1000:9.1f} {r['settle_ms']:9.1f} "
                f"{r['reads_per_s']:18,.0f}  "
                f"{'met' if r['fetches'] <= 5 and r['settle_ms'] <= goal_ms else 'MISSED'}"
            )
    if args.stdio_notifications <= 0:
        return
    print()
    print(
        f"{args.stdio_notifications} list_changed over stdio to examples/file_server.py from a raw client "
        "that answers at once, roots changed mid-storm and before the last; goal: <= 3 roots/list requests"
    )
    print(f"{'round':5} {'roots/list':>10} {'written ms':>10} {'final seen ms':>13}  final roots  goal")
    for round_ in range(1, args.stdio_rounds + 1):
        with tempfile.TemporaryDirectory() as tmp:
            r = anyio.run(stdio_storm, Path(tmp).resolve(), args.stdio_notifications)
        print(
            f"{round_:5} {r['requests']:10.0f} {r['written_ms']:10.1f} {r['seen_ms']:13.1f}  "
            f"{'in force' if r['final_ok'] else 'WRONG':11}  "
            f"{'met' if r['requests'] <= 3 and r['final_ok'] else 'MISSED'}"
        )


if __name__ == "__main__":
    main()
