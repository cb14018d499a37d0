"""What ``mcp-roots wrap`` costs beside the same server run bare, in one run: per-call overhead (p50 and p90
of a tools/call round trip, wall clock, from a raw JSON-RPC host over pipes; and the CPU time per call of
the process the host talks to, wrap or the bare server, which the machine's load does not inflate),
start-up (from spawn to the answer to initialize), and the cost of a roots change (list_changed sent until
the first call answered by the new child confined to the new roots). The servers: the project's stdlib
server (tests/servers/hostile_stdio_server.py: its own start-up is small, so the figures are wrap's) and,
when ``make`` installed it, the official filesystem server on Node. With ``--launchers`` (needs the npm
registry): the line hosts write, ``npx -y @modelcontextprotocol/server-filesystem@VERSION``, started bare and
under wrap, first from an empty cache (the fetch) and then warm, beside ``node dist/index.js``.

    .venv/bin/python benchmarks/bench_wrap.py [--calls 300] [--starts 5] [--launchers]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import Process

REPO = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
HOSTILE = REPO / "tests" / "servers" / "hostile_stdio_server.py"
OFFICIAL = (
    REPO
    / "tests"
    / "interop"
    / "node_modules"
    / "@modelcontextprotocol"
    / "server-filesystem"
    / "dist"
    / "index.js"
)


FILESYSTEM = "@modelcontextprotocol/server-filesystem@2026.8.31"


class Host:
    """A minimal legacy-era host over a subprocess's pipes, answering roots/list with ``roots``."""

    def __init__(self, process: Process, roots: list[Path]) -> None:
        self.process = process
        self.roots = roots
        self.next = 0
        self.buffer = b""

    async def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send((json.dumps({"jsonrpc": "2.0", **message}) + "\n").encode())

    async def request(self, method: str, params: Any = None) -> dict[str, Any]:
        self.next += 1
        id_ = self.next
        await self.send({"id": id_, "method": method, "params": params or {}})
        while True:
            message = await self.receive()
            if message.get("method") == "roots/list" and "id" in message:
                roots = [{"uri": p.as_uri()} for p in self.roots]
                await self.send({"id": message["id"], "result": {"roots": roots}})
            elif message.get("id") == id_ and "method" not in message:
                return message

    async def receive(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        while b"\n" not in self.buffer:
            self.buffer += await self.process.stdout.receive()
        line, self.buffer = self.buffer.split(b"\n", 1)
        message: dict[str, Any] = json.loads(line)
        return message

    async def initialize(self) -> None:
        params = {
            "protocolVersion": "2025-11-25",
            "capabilities": {"roots": {"listChanged": True}},
            "clientInfo": {"name": "bench", "version": "0"},
        }
        await self.request("initialize", params)
        await self.send({"method": "notifications/initialized"})


def _cpu_seconds(pid: int) -> float:
    """User plus system CPU time of process ``pid`` (the wrap process, or the bare server), from /proc."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wrapped(argv: list[str], ceiling: Path, cache: Path, *options: str) -> list[str]:
    return [
        PYTHON,
        "-m",
        "mcp_roots",
        "wrap",
        "--ceiling",
        str(ceiling),
        "--cache-dir",
        str(cache),
        *options,
        "--",
        *argv,
    ]


async def measure(
    argv: list[str],
    roots: list[Path],
    call: tuple[str, dict[str, Any]],
    calls: int,
    starts: int,
    narrow: list[Path] | None,
) -> dict[str, float]:
    figures: dict[str, float] = {}
    start_times = []
    for _ in range(starts):
        began = time.perf_counter()
        async with await anyio.open_process(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        ) as process:
            host = Host(process, roots)
            await host.initialize()
            start_times.append(time.perf_counter() - began)
            await host.request(
                "tools/call", {"name": call[0], "arguments": call[1]}
            )  # warm (wrap: the child for the roots)
            if len(start_times) == starts:
                times = []
                cpu = _cpu_seconds(process.pid)
                for _ in range(calls):
                    t = time.perf_counter()
                    await host.request("tools/call", {"name": call[0], "arguments": call[1]})
                    times.append(time.perf_counter() - t)
                times.sort()
                figures["p50 call ms"] = statistics.median(times) * 1000
                figures["p90 call ms"] = times[int(len(times) * 0.9)] * 1000
                figures["CPU ms/call"] = (_cpu_seconds(process.pid) - cpu) / calls * 1000
                if narrow is not None:
                    changes = []
                    for i in range(5):
                        host.roots = narrow if i % 2 == 0 else roots
                        t = time.perf_counter()
                        await host.send({"method": "notifications/roots/list_changed"})
                        await host.request("tools/call", {"name": call[0], "arguments": call[1]})
                        changes.append(time.perf_counter() - t)
                    figures["roots change ms"] = statistics.median(changes) * 1000
            assert process.stdin is not None
            await process.stdin.aclose()
            await process.wait()
    figures["start-up ms"] = statistics.median(start_times) * 1000
    return figures


async def start_up(argv: list[str], roots: list[Path], env: dict[str, str], starts: int) -> float:
    """The median time from spawn to the answer to initialize, in ms."""
    times = []
    for _ in range(starts):
        began = time.perf_counter()
        async with await anyio.open_process(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
        ) as process:
            host = Host(process, roots)
            await host.initialize()
            times.append(time.perf_counter() - began)
            assert process.stdin is not None
            await process.stdin.aclose()
            with anyio.move_on_after(10):
                await process.wait()
            if process.returncode is None:
                process.kill()
    return statistics.median(times) * 1000


async def launchers(base: Path, served: Path, starts: int) -> list[tuple[str, dict[str, float]]]:
    """``npx -y PKG`` bare and under wrap: the first start (fetch, empty caches) and warm starts."""
    npx, node = shutil.which("npx"), shutil.which("node")
    if npx is None or node is None:
        return []
    home = base / "npx-home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "npm_config_cache": str(home / "npm")}
    line = [npx, "-y", FILESYSTEM, str(served)]
    rows: list[tuple[str, dict[str, float]]] = []
    for label, argv in (
        ("npx -y (fetch, then warm): bare", line),
        ("npx -y (fetch, then warm): wrap", wrapped(line, served, base / "launch-cache")),
    ):
        first = await start_up(argv, [served], env, 1)
        warm = await start_up(argv, [served], env, starts)
        rows.append((label, {"first start ms": first, "start-up ms": warm}))
    if OFFICIAL.exists():
        direct = await start_up([node, str(OFFICIAL), str(served)], [served], env, starts)
        rows.append(("node dist/index.js: bare", {"start-up ms": direct}))
    return rows


async def main(calls: int, starts: int, with_launchers: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        ceiling, a, b = base / "ceiling", base / "ceiling" / "a", base / "ceiling" / "b"
        for folder in (a, b):
            folder.mkdir(parents=True)
        (b / "fixed.txt").write_text("x" * 100)
        (a / "file.txt").write_text("y" * 100)
        rows: list[tuple[str, dict[str, float]]] = []
        hostile = [
            PYTHON,
            str(HOSTILE),
            "--secret",
            "/nonexistent",
            "--plant",
            "/nonexistent",
            "--inside",
            str(b / "fixed.txt"),
        ]
        servers: list[tuple[str, list[str], tuple[str, dict[str, Any]]]] = [
            ("stdlib server, peek", hostile, ("peek", {}))
        ]
        node = shutil.which("node")
        if node and OFFICIAL.exists():
            servers.append(
                (
                    "official filesystem, read_text_file",
                    [node, str(OFFICIAL), str(ceiling)],
                    ("read_text_file", {"path": str(a / "file.txt")}),
                )
            )
        for label, argv, call in servers:
            bare = await measure(argv, [a, b], call, calls, starts, None)
            wrap = await measure(wrapped(argv, ceiling, base / "cache"), [a, b], call, calls, starts, [a])
            rows.append((f"{label}: bare", bare))
            rows.append((f"{label}: wrap", wrap))
            rows.append((f"{label}: wrap - bare", {k: wrap[k] - bare[k] for k in bare if k != "CPU ms/call"}))
        if with_launchers:
            rows += await launchers(base, a, starts)
    keys = ["p50 call ms", "p90 call ms", "CPU ms/call", "start-up ms", "roots change ms", "first start ms"]
    print(f"{'':48}" + "".join(f"{k:>17}" for k in keys))
    for label, figures in rows:
        print(f"{label:48}" + "".join(f"{figures[k]:17.2f}" if k in figures else f"{'-':>17}" for k in keys))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--starts", type=int, default=5)
    parser.add_argument("--launchers", action="store_true", help="also npx -y from the registry (network)")
    args = parser.parse_args()
    anyio.run(main, args.calls, args.starts, args.launchers)
