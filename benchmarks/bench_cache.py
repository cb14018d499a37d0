"""RootsCache under a notification storm: requests sent, settle time, and current() read throughput.

A fake client answers roots/list after a fixed latency (1 ms by default) with the roots it has when the
request arrives; its roots change with every notification. The storm sends N notifications as fast as it
can, yielding to the event loop every few notifications so the worker and a reader task run during it.

    .venv/bin/python benchmarks/bench_cache.py [--notifications 10000] [--latency 0.001] [--yield-every 10]
        [--reads-per-turn 100] [--debounce 0.02] [--max-wait 0.1]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import anyio
import anyio.lowlevel

from mcp_roots import RootsCache, RootSet, path_to_uri


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

    def watch(old: RootSet, new: RootSet) -> None:
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notifications", type=int, default=10_000)
    parser.add_argument("--latency", type=float, default=0.001, help="fetch latency in seconds")
    parser.add_argument("--yield-every", type=int, default=10, help="notifications between event-loop yields")
    parser.add_argument("--reads-per-turn", type=int, default=100, help="current() calls per reader turn")
    parser.add_argument("--debounce", type=float, default=0.02)
    parser.add_argument("--max-wait", type=float, default=0.1)
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


if __name__ == "__main__":
    main()
