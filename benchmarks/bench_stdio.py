"""Single small calls over stdio: `mcp-roots serve` on its own stdio transport, the same server on the SDK's
`stdio_server()`, a bare `MCPServer` tool on the SDK's transport, and the official TypeScript server.

Usage: python benchmarks/bench_stdio.py [--calls 1000] [--rounds 5] [--files 1000]
Each server answers --calls sequential `read_text_file` calls of small files per round, driven by the same
official Python client; the servers are interleaved round by round. Printed per call: wall time seen by the
client (best and median round) and the server process's CPU (user + system, from /proc; best and median).
On a loaded machine read the CPU: wall time moves with the load.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

REPO = Path(__file__).resolve().parent.parent
OFFICIAL = REPO / "tests" / "interop" / "node_modules" / "@modelcontextprotocol" / "server-filesystem"

SERVE_ON_SDK_TRANSPORT = """
import sys
from mcp_roots import RootsGuard
from mcp_roots.filesystem import Settings, build_server
root = sys.argv[1]
build_server(RootsGuard([root], ceiling=[root]), Settings()).run("stdio")
"""

BARE_SERVER = """
from mcp.server import MCPServer
server = MCPServer("bare")
@server.tool()
async def read_text_file(path: str) -> str:
    return "x"
server.run("stdio")
"""


def children() -> set[int]:
    pids: set[int] = set()
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        with contextlib.suppress(OSError):
            pids.update(int(pid) for pid in (task / "children").read_text().split())
    return pids


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def servers(root: Path) -> dict[str, StdioServerParameters]:
    node = shutil.which("node")
    index = OFFICIAL / "dist" / "index.js"
    if node is None or not index.exists():
        raise SystemExit(f"needs node and {index}: run `npm ci --prefix tests/interop` (make test does)")
    env = dict(os.environ)
    serve = ["-c", "from mcp_roots.cli import main; raise SystemExit(main())", "serve", str(root)]
    return {
        "official (TypeScript)": StdioServerParameters(command=node, args=[str(index), str(root)]),
        "mcp-roots serve": StdioServerParameters(command=sys.executable, args=serve, env=env),
        "mcp-roots serve, SDK transport": StdioServerParameters(
            command=sys.executable, args=["-c", SERVE_ON_SDK_TRANSPORT, str(root)], env=env
        ),
        "bare MCPServer, SDK transport": StdioServerParameters(
            command=sys.executable, args=["-c", BARE_SERVER], env=env
        ),
    }


async def run(args: argparse.Namespace, root: Path) -> None:
    paths = [str(root / f"f{i % args.files:05d}.txt") for i in range(args.calls)]
    wall: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}
    async with contextlib.AsyncExitStack() as stack:
        clients: dict[str, Client] = {}
        pids: dict[str, int] = {}
        for name, server in servers(root).items():
            before = children()
            clients[name] = await stack.enter_async_context(Client(server, mode="legacy"))
            pids[name] = max(children() - before)
            await clients[name].call_tool("read_text_file", {"path": paths[0]})  # warm up
        for _ in range(args.rounds):
            for name, client in clients.items():
                cpu_before = cpu_seconds(pids[name])
                start = time.perf_counter()
                for path in paths:
                    result = await client.call_tool("read_text_file", {"path": path})
                    if result.is_error:
                        raise SystemExit(f"{name}: {result.content}")
                wall.setdefault(name, []).append((time.perf_counter() - start) / args.calls * 1e3)
                cpu.setdefault(name, []).append((cpu_seconds(pids[name]) - cpu_before) / args.calls * 1e3)
    print(f"{args.calls:,} sequential small read_text_file calls per round, {args.rounds} rounds interleaved")
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    print()
    print("| server | server CPU per call (best / median) | wall per call (best / median) |")
    print("|---|---:|---:|")
    for name in clients:
        w, c = wall[name], cpu[name]
        print(
            f"| {name} | {min(c):.2f} / {statistics.median(c):.2f} ms "
            f"| {min(w):.2f} / {statistics.median(w):.2f} ms |"
        )
    official = "official (TypeScript)"
    for name in ("mcp-roots serve", "mcp-roots serve, SDK transport"):
        wall_ratio = statistics.median(wall[name]) / statistics.median(wall[official])
        cpu_ratio = statistics.median(cpu[name]) / statistics.median(cpu[official])
        print(f"{name}: {wall_ratio:.2f}x the official wall time (median rounds), {cpu_ratio:.2f}x its CPU")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=1_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--files", type=int, default=1_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench_stdio_") as tmp:
        root = Path(tmp).resolve()
        for i in range(args.files):
            (root / f"f{i:05d}.txt").write_bytes(b"line %d\n" % i)
        anyio.run(run, args, root)


if __name__ == "__main__":
    main()
