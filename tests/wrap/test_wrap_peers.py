"""What a peer can do to wrap itself: any line with any id from either peer is answered or dropped, and wrap
goes on; one message costs a stated multiple of its size at most; a child that stops reading its input never
holds back a roots change; a tool list built to cost the schema walk holds back nothing.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcp_roots import RootSet
from mcp_roots.sandbox import support
from mcp_roots.wrap._child import Child, tool_slots_of
from mcp_roots.wrap._wire import PARSE_FACTOR, Lines, Unparsed
from tests.kit import Host, ManualClock, connected, hostile_argv, kernel_refused, wrap_argv

confined = pytest.mark.skipif(not support().complete, reason="needs Landlock and the seccomp filter")
#: wrap runs in a process of its own there: one backend is enough (the units below take both).
on_asyncio = pytest.mark.parametrize("anyio_backend", ["asyncio"])
INSIDE = "INSIDE B 5e1d"
#: Lines from the host that are not MCP's JSON-RPC, each with what wrap answers (None: nothing, logged).
HOST_LINES: list[tuple[str, dict[str, Any] | None]] = [
    ('{"jsonrpc": "2.0", "id": [1], "method": "ping"}', {"id": None, "code": -32600}),
    (
        '{"jsonrpc": "2.0", "id": {"a": 1}, "method": "tools/call", "params": {}}',
        {"id": None, "code": -32600},
    ),
    ('{"jsonrpc": "2.0", "id": true, "method": "ping"}', {"id": None, "code": -32600}),
    ('{"jsonrpc": "2.0", "id": 1e400, "method": "ping"}', {"id": None, "code": -32600}),
    ('{"jsonrpc": "2.0", "id": "s1", "method": ["tools/call"]}', {"id": "s1", "code": -32600}),
    ('{"jsonrpc": "2.0", "id": "s2", "method": "tools/call", "params": [1]}', {"id": "s2", "code": -32600}),
    ('{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": [1]}}', None),
    ('{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": {"a": 1}}}', None),
    ('{"jsonrpc": "2.0", "id": [2], "result": {}}', None),
    ('{"jsonrpc": "2.0", "id": "mcp-roots-wrap-1", "result": {}, "error": {}}', None),
    ("[1, 2]", None),
    ("not json", None),
    ('"a string"', None),
]


@pytest.fixture
def world(tmp_path: Path) -> dict[str, Path]:
    for folder in ("outside", "ceiling/a", "ceiling/b", "cache"):
        (tmp_path / folder).mkdir(parents=True)
    (tmp_path / "ceiling" / "b" / "fixed.txt").write_text(INSIDE)
    (tmp_path / "outside" / "secret.txt").write_text("SECRET")
    return {name: tmp_path / name for name in ("outside", "cache")} | {
        "ceiling": tmp_path / "ceiling",
        "a": tmp_path / "ceiling" / "a",
        "b": tmp_path / "ceiling" / "b",
    }


def wrapped(world: dict[str, Path], *options: str, server: tuple[str, ...] = ()) -> list[str]:
    server_argv = hostile_argv(
        world["outside"] / "secret.txt", world["outside"] / "plant.txt", world["b"] / "fixed.txt"
    )
    return wrap_argv(
        [world["ceiling"]], [*server_argv, *server], "--cache-dir", str(world["cache"]), *options
    )


async def raw(host: Host, line: str) -> None:
    assert host.process.stdin is not None
    await host.process.stdin.send(line.encode() + b"\n")


# --- any line, any id --------------------------------------------------------------------------------


@pytest.mark.anyio
@on_asyncio
@confined
async def test_any_line_from_the_host_is_answered_or_dropped_and_wrap_goes_on(world: dict[str, Path]) -> None:
    async with connected(wrapped(world), [str(world["b"])]) as host:
        await host.initialize()
        for line, expected in HOST_LINES:
            before = len(host.seen)
            await raw(host, line)
            assert (await host.request("ping"))["result"] == {}, line  # wrap is still there
            got = [m for m in host.seen[before:] if "method" not in m and m.get("id") != host._next]
            if expected is None:
                assert got == [], line
            else:
                assert [(m["id"], m["error"]["code"]) for m in got] == [(expected["id"], expected["code"])]
        assert await host.text("peek") == INSIDE
        assert host.process.returncode is None


@pytest.mark.anyio
@on_asyncio
@confined
async def test_any_line_from_the_child_is_dropped_and_its_call_still_answered(world: dict[str, Path]) -> None:
    async with connected(wrapped(world), [str(world["b"])]) as host:
        await host.initialize()
        assert await host.text("garbage") == "after the garbage"
        assert await host.text("peek") == INSIDE
        # Nothing of the garbage reached the host: answers to its own ids, and wrap's roots/list.
        assert all(isinstance(m.get("method", ""), str) for m in host.seen)
        assert all(isinstance(m["id"], int) for m in host.seen if "method" not in m)
        assert [m["method"] for m in host.requests] == ["roots/list"] * len(host.requests)


# --- one message, a bounded multiple of its size -------------------------------------------------------


def peak_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


@pytest.mark.anyio
@on_asyncio
@confined
async def test_a_line_of_empty_objects_costs_wrap_a_small_multiple_of_its_size(
    world: dict[str, Path],
) -> None:
    size = 30 * 1024 * 1024
    pad = ",".join(["{}"] * (size // 3))
    line = '{"jsonrpc": "2.0", "id": 77, "method": "tools/call", "params": {"name": "peek", "arguments": '
    line += '{"pad": [' + pad + "]}}}"
    async with connected(wrapped(world), [str(world["b"])]) as host:
        await host.initialize()
        assert await host.text("peek") == INSIDE
        before = peak_kib(host.process.pid)
        await raw(host, line)
        with anyio.fail_after(120):
            while 77 not in host.answers:  # noqa: ASYNC110 - the kit's Host has no event per answer
                await anyio.sleep(0.05)
        rise = (peak_kib(host.process.pid) - before) * 1024
        assert host.answers[77]["error"]["code"] == -32600
        assert rise < 3 * len(line), f"peak memory rose {rise >> 20} MiB for a {len(line) >> 20} MiB line"
        assert await host.text("peek") == INSIDE


@pytest.mark.anyio
async def test_a_line_too_costly_to_parse_comes_unparsed_with_its_id() -> None:
    read_end, write_end = os.pipe()
    lines = Lines(read_end, "a test peer", max_bytes=8 * 1024 * 1024)
    pad = b",".join([b"{}"] * 2_000_000)
    head = b'{"jsonrpc":"2.0","id":41,"result":{"pad":[' + pad + b"]}}"
    tail = b'{"result":{"pad":[' + pad + b']},"jsonrpc":"2.0","id":"x-2"}'
    small = b'{"jsonrpc":"2.0","id":3,"result":{"pad":"' + b"y" * 1000 + b'"}}'

    async def write() -> None:
        for data in (head, tail, small):
            await anyio.to_thread.run_sync(os.write, write_end, data + b"\n")
        os.close(write_end)

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(write)
            got = [await lines.receive() for _ in range(4)]
    finally:
        os.close(read_end)
    first, second, third, end = got
    assert isinstance(first, Unparsed)
    assert isinstance(second, Unparsed)
    assert (first.id, second.id) == (41, "x-2")
    assert first.cost > PARSE_FACTOR * 8 * 1024 * 1024
    assert first.with_id("host-9").startswith(b'{"jsonrpc":"2.0","id":"host-9","result"')
    assert second.with_id(5).endswith(b'"jsonrpc":"2.0","id":5}\n')
    assert third == {"jsonrpc": "2.0", "id": 3, "result": {"pad": "y" * 1000}}
    assert end is None


# --- a child that stops reading ------------------------------------------------------------------------


@pytest.mark.anyio
@on_asyncio
@confined
async def test_a_child_that_stops_reading_never_holds_back_a_roots_change(world: dict[str, Path]) -> None:
    async with connected(wrapped(world, "--drain", "1"), [str(world["a"]), str(world["b"])]) as host:
        await host.initialize()
        assert await host.text("peek") == INSIDE
        async with anyio.create_task_group() as group:
            group.start_soon(host.call, "stall")
            await anyio.sleep(0.5)
            for _ in range(64):  # far more than a pipe holds: the stalled child's input is full
                await host.notify("notifications/whatever", {"pad": "z" * 65536})
            await host.set_roots([str(world["a"])])
            # Read and applied: the next call is served by a child confined to a alone (on main the host's
            # channel is never read again, and this waits forever).
            answer = await host.text("peek")
            group.cancel_scope.cancel()
        assert INSIDE not in answer
        assert kernel_refused(answer)
        # The stalled child (which held b) is ended within the drain: the one left is confined to a alone.
        with anyio.fail_after(60):
            while len(children_of(world)) > 1:  # noqa: ASYNC110 - processes, not tasks
                await anyio.sleep(0.1)


def children_of(world: dict[str, Path]) -> list[int]:
    """The wrapped servers of this test still running (each has this test's --inside path in its argv)."""
    mark = str(world["b"] / "fixed.txt").encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if mark in argv and b"mcp_roots" not in argv and state != "Z":  # not wrap itself
                found.append(int(entry.name))
    return found


@pytest.mark.anyio
async def test_a_child_whose_input_stays_full_is_ended_after_the_stated_bound() -> None:
    process = subprocess.Popen(  # noqa: ASYNC220 - started once, before anything waits
        [sys.executable, "-c", "import time; time.sleep(3600)"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    clock = ManualClock()
    child = Child(process, RootSet.empty(), 1, 1024, stall=5.0, clock=clock)
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(child.pump)
            assert child.post(b"x" * (1024 * 1024))  # more than the pipe holds
            await clock.advance(4.9)
            assert child.alive
            assert process.poll() is None
            await clock.advance(0.2)
            with anyio.fail_after(30):
                await child.gone.wait()
        assert process.returncode is not None  # its tree was ended
        assert "stopped reading its input for 5s" in child.exit_note
        assert not child.post({"id": 1})
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        assert process.stdout is not None
        process.stdout.close()


# --- the schema walk, bounded in total -----------------------------------------------------------------


def test_the_schema_walk_of_one_tool_list_stops_at_its_budget(caplog: pytest.LogCaptureFixture) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "servers"))
    try:
        from hostile_stdio_server import crafted_schema  # type: ignore[import-not-found]
    finally:
        sys.path.pop(0)
    schemas = {f"t{i}": crafted_schema() for i in range(300)} | {"plain": {"properties": {"path": {}}}}
    slots = tool_slots_of(schemas, 0.05)
    assert 0 < len(slots) < 300  # the rest: checked by path names only
    assert "plain" not in slots
    assert "checked by path names only" in caplog.text
    assert tool_slots_of({"plain": {"properties": {"path": {"type": "string"}}}}, 0.05)["plain"]


@pytest.mark.anyio
@on_asyncio
@confined
async def test_a_costly_tool_list_holds_back_no_roots_change(
    world: dict[str, Path], capfd: pytest.CaptureFixture[str]
) -> None:
    argv = wrapped(world, server=("--crafted-tools", "300"))
    async with connected(argv, [str(world["a"]), str(world["b"])]) as host:
        await host.initialize()
        async with anyio.create_task_group() as group:
            group.start_soon(host.text, "peek")  # the first call: the walk of 300 costly schemas starts
            await host.set_roots([str(world["a"])])
            assert (await host.request("ping"))["result"] == {}
            answer = await host.text("read_path", {"path": str(world["b"] / "fixed.txt")})
        assert INSIDE not in answer
        assert "outside the allowed roots" in answer
    # The walk stopped at its budget (about 11 s of CPU unbounded) and said so on wrap's stderr.
    assert "checked by path names only" in capfd.readouterr().err


@pytest.mark.anyio
@on_asyncio
@confined
async def test_no_child_outlives_wrap_even_one_starting_as_the_host_leaves(world: dict[str, Path]) -> None:
    for _ in range(3):
        async with connected(wrapped(world), [str(world["a"]), str(world["b"])]) as host:
            await host.initialize()
            with anyio.fail_after(30):
                while not host.requests:  # noqa: ASYNC110 - the kit's Host has no event for it
                    await anyio.sleep(0.01)
            await anyio.sleep(0.1)  # roots/list answered: the host leaves as the child for them starts
    with anyio.fail_after(30):
        while children_of(world):  # noqa: ASYNC110 - processes, not tasks
            await anyio.sleep(0.1)
