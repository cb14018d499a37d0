"""Per-call cost of a guarded tool beside the same tool unguarded, for each adapter and protocol era.

Each server has two tools with the same body (read a small file): ``guarded`` (``@guard.paths("path")``,
``guard.install(server)``) and ``plain``. A client on the framework's in-memory transport calls them by
turns (guarded, plain, plain, guarded, ...), each call timed alone in CPU time (client and server share the
process, so the figure is the work a call costs, whatever else the machine runs); the figure per tool is
its median call, and the ratio is guarded's median call over plain's: a slow spell of the VM (steal time,
a full collection) lands on a few calls of either tool, which the median leaves out. The same calls grouped
in rounds give the rounds' ratios (the estimator of earlier runs), printed beside it with the lowest and
highest round. On
2026-07-28 the guarded call also needs the roots, which come by one multi-round-trip (``roots/list`` input
request): the script counts the client's roots answers per call, and checks that a path outside the
operator's ceiling costs none. Two unguarded mcp 2.x rows show what that round trip costs without the
guard: answered by a middleware that does nothing else (the floor), and the SDK's own ``ListRoots``
resolver. On the legacy era an unguarded mcp 2.x row shows the least any guard adds when the roots are in
hand: one wrapper around the body and one kernel lookup of the path.

    .venv/bin/python benchmarks/bench_overhead.py [--calls 200] [--rounds 9]

Run from the main venv it measures ``mcp`` 2.x and ``fastmcp`` 4.x, then runs itself in ``.venv-mcp1`` (when
``make`` built it) for ``mcp`` 1.x, and prints every row in one table.
"""

from __future__ import annotations

import argparse
import functools
import importlib.metadata
import json
import logging
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

from mcp_roots import RootsGuard, path_to_uri
from mcp_roots._sys import linux

REPO = Path(__file__).resolve().parent.parent
MCP1_PYTHON = REPO / ".venv-mcp1" / "bin" / "python"

Call = Callable[[str, str], Awaitable[Any]]


class Counter:
    def __init__(self) -> None:
        self.calls = 0


def read_file(path: str) -> str:
    """The body of both tools (a 1 KiB file: a blocking read is cheaper than a thread hop here)."""
    with open(path) as file:
        return file.read()


def make_guard(project: Path, ceiling: Path) -> RootsGuard:
    return RootsGuard(environ={}, user_config_dir=project / "no-config", ceiling=str(ceiling))


async def measure(
    call: Call, target: str, calls: int, rounds: int, names: tuple[str, ...] = ("guarded", "plain")
) -> dict[str, float]:
    """The CPU time of every call of each tool of ``names`` (``guarded`` and ``plain``), the tools taking
    turns call by call (the order reversed every other turn), ``rounds`` x ``calls`` calls each: per tool,
    the median call (seconds); per tool but ``plain``, the ratio of the median calls and the rounds'
    figures (see :func:`round_ratios`)."""
    for name in names:  # warm up: connection state, first roots/list, caches
        for _ in range(5):
            await call(name, target)
    clock = time.process_time_ns
    times: dict[str, list[int]] = {name: [] for name in names}
    for turn in range(rounds * calls):
        for name in names if turn % 2 == 0 else names[::-1]:
            start = clock()
            await call(name, target)
            times[name].append(clock() - start)
    figures = {name: statistics.median(values) / 1e9 for name, values in times.items()}
    for name in names:
        if name != "plain":
            figures[name + ":ratio"] = figures[name] / figures["plain"]
            figures.update(round_ratios(name, times[name], times["plain"], calls))
    return figures


def round_ratios(name: str, ours: list[int], plain: list[int], calls: int) -> dict[str, float]:
    """The same calls in rounds of ``calls`` turns: each round's total CPU time over ``plain``'s in the
    same turns, their median and the lowest and highest round. (The estimator of earlier runs, which timed
    each tool's round as one block: one slow spell of the VM -- a burst of steal time, a full collection --
    moves a round's total, so the rounds' ratios spread wide, 0.6x-1.6x here, where the median call does
    not move.)"""
    ratios = sorted(sum(ours[i : i + calls]) / sum(plain[i : i + calls]) for i in range(0, len(ours), calls))
    return {
        name + ":rounds": statistics.median(ratios),
        name + ":low": ratios[0],
        name + ":high": ratios[-1],
    }


def ratio_fields(figures: dict[str, float], name: str) -> dict[str, float]:
    return {key: figures[f"{name}:{key}"] for key in ("ratio", "rounds", "low", "high")}


async def rows_mcp2(project: Path, outside: Path, calls: int, rounds: int) -> list[dict[str, Any]]:
    from mcp import Client
    from mcp.server import MCPServer
    from mcp_types import ListRootsResult, Root

    rows = []
    for era, mode in (("legacy", "legacy"), ("2026-07-28", "auto")):
        guard = make_guard(project, project.parent)
        server = MCPServer("bench")
        guard.install(server)

        @server.tool()
        @guard.paths("path")
        async def guarded(path: str) -> str:
            return read_file(path)

        @server.tool()
        async def plain(path: str) -> str:
            return read_file(path)

        @server.tool()
        @least_guard
        async def floor(path: str) -> str:
            return read_file(path)

        counter = Counter()
        uri = path_to_uri(project)  # a client keeps its roots as URIs: the answer is its only cost

        async def roots(context: Any, counter: Counter = counter, uri: str = uri) -> ListRootsResult:
            counter.calls += 1
            return ListRootsResult(roots=[Root(uri=uri)])

        async with Client(server, mode=mode, list_roots_callback=roots) as client:  # type: ignore[call-arg]

            async def call(name: str, path: str, client: Any = client) -> Any:
                result = await client.call_tool(name, {"path": path})
                assert not result.is_error, result
                return result

            names = ("guarded", "plain", "floor") if era == "legacy" else ("guarded", "plain")
            found = await row("mcp 2.x MCPServer", era, call, project, outside, counter, calls, rounds, names)
            found["outside"] = await outside_ceiling(client, outside, counter)
            rows.append(found)
            if "floor" in names:  # the least-guard reference, against the same unguarded rounds
                rows.append(
                    {
                        "adapter": "mcp 2.x MCPServer (one wrapper and one lookup, no guard)",
                        "era": era,
                        "guarded_us": found["floor_us"],
                        "plain_us": found["plain_us"],
                        **{key: found["floor_" + key] for key in ("ratio", "rounds", "low", "high")},
                        "roots_per_call": 0,
                    }
                )
    return rows


def least_guard(fn: Callable[[str], Awaitable[str]]) -> Callable[[str], Awaitable[str]]:
    """The least any guard of a tool adds to a legacy call whose roots are in hand: one wrapper around the
    body and one kernel lookup of the path (``openat2(RESOLVE_NO_SYMLINKS)``, what ``RootSet.resolve``'s
    common case makes); no roots looked up, nothing compared, nothing refused."""
    lookup = linux.OPENAT2.no_symlinks if linux.OPENAT2 is not None else os.path.exists

    @functools.wraps(fn)
    async def wrapper(path: str) -> str:
        lookup(path)
        return await fn(path)

    return wrapper


async def rows_mcp2_consent(project: Path, outside: Path, calls: int, rounds: int) -> list[dict[str, Any]]:
    """A guard that asks the user for folders (``consent=True``), the project granted at the first call: what
    a granted folder costs a call (its ``roots_per_call`` column counts questions)."""
    from mcp import Client
    from mcp.server import MCPServer
    from mcp_types import ElicitResult

    rows = []
    for era, mode in (("legacy", "legacy"), ("2026-07-28", "auto")):
        guard = RootsGuard(
            environ={}, user_config_dir=project / "no-config", ceiling=project.parent, consent=True
        )
        server = MCPServer("bench")
        guard.install(server)

        @server.tool()
        @guard.paths("path")
        async def guarded(path: str) -> str:
            return read_file(path)

        @server.tool()
        async def plain(path: str) -> str:
            return read_file(path)

        counter = Counter()

        async def grant(context: Any, params: Any, counter: Counter = counter) -> ElicitResult:
            counter.calls += 1
            return ElicitResult(action="accept", content={"folder": str(project), "access": "read-write"})

        async with Client(server, mode=mode, elicitation_callback=grant) as client:

            async def call(name: str, path: str, client: Any = client) -> Any:
                result = await client.call_tool(name, {"path": path})
                assert not result.is_error, result
                return result

            await call("guarded", str(project / "data.txt"))  # the question, answered once
            found = await row(
                "mcp 2.x MCPServer (consent, folder granted)",
                era,
                call,
                project,
                outside,
                counter,
                calls,
                rounds,
            )
            found["outside"] = await outside_ceiling(client, outside, counter)
            rows.append(found)
    return rows


async def rows_mcp2_floor(project: Path, calls: int, rounds: int) -> list[dict[str, Any]]:
    """2026-07-28 references, no guard: ``floor`` is answered once with a ``roots/list`` input request by a
    middleware that does nothing else (no answer read, no path checked: the protocol's round trip alone);
    ``sdk_roots`` gets the client's roots the SDK's own way (the ``ListRoots`` resolver)."""
    from typing import Annotated

    from mcp import Client
    from mcp.server import MCPServer
    from mcp.server.mcpserver import ListRoots, Resolve
    from mcp_types import InputRequiredResult, ListRootsRequest, ListRootsResult, Root

    server = MCPServer("bench-floor")

    async def round_trip_only(ctx: Any, call_next: Any) -> Any:
        params = ctx.params or {}
        if ctx.method == "tools/call" and params.get("name") == "floor" and not params.get("inputResponses"):
            return InputRequiredResult(input_requests={"roots": ListRootsRequest()})
        return await call_next(ctx)

    server.middleware.insert(0, round_trip_only)

    @server.tool()
    async def floor(path: str) -> str:
        return read_file(path)

    async def sdk_roots(path: str, roots: Any) -> str:
        return read_file(path)

    # (Annotations are strings in this module; the SDK evaluates them in its globals, not these locals.)
    roots_type = Annotated[ListRootsResult, Resolve(lambda: ListRoots())]
    sdk_roots.__annotations__ = {"path": str, "roots": roots_type, "return": str}
    server.tool()(sdk_roots)

    @server.tool()
    async def plain(path: str) -> str:
        return read_file(path)

    counter = Counter()
    uri = path_to_uri(project)

    async def answer(context: Any) -> ListRootsResult:
        counter.calls += 1
        return ListRootsResult(roots=[Root(uri=uri)])  # type: ignore[arg-type]

    async with Client(server, mode="auto", list_roots_callback=answer) as client:

        async def call(name: str, path: str) -> Any:
            result = await client.call_tool(name, {"path": path})
            assert not result.is_error, result
            return result

        target = str(project / "data.txt")
        figures = await measure(call, target, calls, rounds, names=("floor", "sdk_roots", "plain"))
        rows = []
        references = (("floor", "round trip alone, no guard"), ("sdk_roots", "SDK's ListRoots, no guard"))
        for name, what in references:
            before = counter.calls
            await call(name, target)
            rows.append(
                {
                    "adapter": f"mcp 2.x MCPServer ({what})",
                    "era": "2026-07-28",
                    "guarded_us": figures[name] * 1e6,
                    **ratio_fields(figures, name),
                    "plain_us": figures["plain"] * 1e6,
                    "roots_per_call": counter.calls - before,
                }
            )
    return rows


async def rows_fastmcp4(project: Path, outside: Path, calls: int, rounds: int) -> list[dict[str, Any]]:
    from fastmcp import Client, FastMCP
    from mcp_types import Root

    rows = []
    for era, mode in (("legacy", "legacy"), ("2026-07-28", "auto")):
        guard = make_guard(project, project.parent)
        server: FastMCP = FastMCP("bench")
        guard.install(server)

        @server.tool
        @guard.paths("path")
        async def guarded(path: str) -> str:
            return read_file(path)

        @server.tool
        async def plain(path: str) -> str:
            return read_file(path)

        counter = Counter()
        uri = path_to_uri(project)

        async def roots(context: Any, counter: Counter = counter, uri: str = uri) -> list[Root]:
            counter.calls += 1
            return [Root(uri=uri)]  # type: ignore[arg-type]

        async with Client(server, roots=roots, mode=mode) as client:  # type: ignore[arg-type]

            async def call(name: str, path: str, client: Any = client) -> Any:
                result = await client.call_tool(name, {"path": path}, raise_on_error=False)
                assert not result.is_error, result
                return result

            rows.append(await row("fastmcp 4.x FastMCP", era, call, project, outside, counter, calls, rounds))
            rows[-1]["outside"] = await outside_ceiling(client, outside, counter, fastmcp=True)
    return rows


async def rows_mcp1(project: Path, outside: Path, calls: int, rounds: int) -> list[dict[str, Any]]:
    from mcp.server.fastmcp import FastMCP
    from mcp.shared.memory import create_connected_server_and_client_session
    from mcp.types import ListRootsResult, Root

    guard = make_guard(project, project.parent)
    server = FastMCP("bench")
    guard.install(server)

    @server.tool()
    @guard.paths("path")
    async def guarded(path: str) -> str:
        return read_file(path)

    @server.tool()
    async def plain(path: str) -> str:
        return read_file(path)

    counter = Counter()
    uri = path_to_uri(project)

    async def roots(context: Any) -> ListRootsResult:
        counter.calls += 1
        return ListRootsResult(roots=[Root(uri=uri)])  # type: ignore[arg-type]

    async with create_connected_server_and_client_session(
        server._mcp_server, list_roots_callback=roots
    ) as client:

        async def call(name: str, path: str) -> Any:
            result = await client.call_tool(name, {"path": path})
            assert not result.isError, result
            return result

        rows = [await row("mcp 1.x FastMCP", "legacy", call, project, outside, counter, calls, rounds)]
        before = counter.calls
        refused = await client.call_tool("guarded", {"path": str(outside / "secret.txt")})
        assert refused.isError, refused
        rows[-1]["outside"] = counter.calls - before
        return rows


async def row(
    adapter: str,
    era: str,
    call: Call,
    project: Path,
    outside: Path,
    counter: Counter,
    calls: int,
    rounds: int,
    names: tuple[str, ...] = ("guarded", "plain"),
) -> dict[str, Any]:
    """The guarded tool's row; with ``floor`` in ``names``, that tool's figures too (``floor_*``)."""
    target = str(project / "data.txt")
    figures = await measure(call, target, calls, rounds, names)
    before = counter.calls
    await call("guarded", target)
    found = {
        "adapter": adapter,
        "era": era,
        "guarded_us": figures["guarded"] * 1e6,
        **ratio_fields(figures, "guarded"),
        "plain_us": figures["plain"] * 1e6,
        "roots_per_call": counter.calls - before,
    }
    if "floor" in names:
        found["floor_us"] = figures["floor"] * 1e6
        found.update({"floor_" + key: value for key, value in ratio_fields(figures, "floor").items()})
    return found


async def outside_ceiling(client: Any, outside: Path, counter: Counter, fastmcp: bool = False) -> int:
    """Roots requests a call with a path outside the ceiling cost (it must be refused without asking)."""
    before = counter.calls
    kwargs = {"raise_on_error": False} if fastmcp else {}
    result = await client.call_tool("guarded", {"path": str(outside / "secret.txt")}, **kwargs)
    assert result.is_error, result
    return counter.calls - before


def main() -> None:
    # fastmcp's logging handler would print every refusal the script provokes on purpose.
    logging.getLogger("mcp_roots").setLevel(logging.ERROR)
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=200, help="calls per tool per round")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--json", action="store_true", help="print the rows as JSON (used for .venv-mcp1)")
    args = parser.parse_args()
    mcp_major = int(importlib.metadata.version("mcp").split(".")[0])
    with tempfile.TemporaryDirectory(prefix="bench-overhead-") as tmp:
        base = Path(tmp).resolve()
        project, outside = base / "inside" / "project", base / "outside"
        project.mkdir(parents=True)
        outside.mkdir()
        (project / "data.txt").write_text("x" * 1024)
        (outside / "secret.txt").write_text("secret")
        rows: list[dict[str, Any]] = []
        if mcp_major == 1:
            rows += anyio.run(rows_mcp1, project, outside, args.calls, args.rounds)
        else:
            # The ceiling is the project's parent, so that "outside the ceiling" exists beside it.
            rows += anyio.run(rows_mcp2, project, outside, args.calls, args.rounds)
            rows += anyio.run(rows_mcp2_floor, project, args.calls, args.rounds)
            rows += anyio.run(rows_mcp2_consent, project, outside, args.calls, args.rounds)
            rows += anyio.run(rows_fastmcp4, project, outside, args.calls, args.rounds)
    if args.json:
        print(json.dumps(rows))
        return
    if MCP1_PYTHON.exists():
        command = [
            str(MCP1_PYTHON),
            __file__,
            "--json",
            "--calls",
            str(args.calls),
            "--rounds",
            str(args.rounds),
        ]
        output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
        rows += json.loads(output.strip().splitlines()[-1])
    else:
        print("(.venv-mcp1 not built: `make .venv-mcp1/.installed` adds the mcp 1.x row)")
    print(
        f"{args.rounds} rounds of {args.calls} calls per tool, median CPU time per call "
        "(client and server), in-memory transport, the tools taking turns call by call; ratio: guarded / "
        "unguarded median call; rounds: the median of the rounds' guarded / unguarded totals (lowest and "
        "highest round)"
    )
    print()
    print(
        "| adapter | era | unguarded | guarded | ratio | rounds (lowest-highest) "
        "| roots/list per guarded call | outside the ceiling |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        outside_calls = r.get("outside")
        print(
            f"| {r['adapter']} | {r['era']} | {r['plain_us']:.0f} us | {r['guarded_us']:.0f} us | "
            f"{r['ratio']:.3f}x | {r['rounds']:.2f}x ({r['low']:.2f}-{r['high']:.2f}) | "
            f"{r['roots_per_call']} | "
            f"{'-' if outside_calls is None else f'{outside_calls} round trips'} |"
        )


if __name__ == "__main__":
    main()
