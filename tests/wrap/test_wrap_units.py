"""wrap's parts on their own: the schema walk (where the paths are in a tool's input schema), the plan (what a
wrapped server may read beside its roots), and the proxy run in this process on asyncio and on trio, with
pipes for the host's channel and the hostile server as its child.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcp_roots import RootSet
from mcp_roots.errors import ConfigError
from mcp_roots.guard import path_slots, walk_schema
from mcp_roots.sandbox import support
from mcp_roots.wrap import Options, Proxy, make_plan
from mcp_roots.wrap._plan import refuse_container
from mcp_roots.wrap._schema import named_values
from mcp_roots.wrap._wire import Lines, Writer
from tests.kit import LEGACY, hostile_argv

# --- the schema walk -----------------------------------------------------------------------------------


FILESYSTEM_LIKE = {
    "type": "object",
    "properties": {
        "path": {"type": "string"},
        "paths": {"type": "array", "items": {"type": "string"}},
        "edits": {"type": "array", "items": {"$ref": "#/$defs/Edit"}},
        "options": {
            "type": "object",
            "properties": {
                "workdir": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                "depth": {"type": "integer"},
            },
        },
        "where": {"type": "string", "format": "uri"},
        "env": {"type": "object", "additionalProperties": {"type": "string"}},
        "mounts": {"type": "object", "additionalProperties": {"$ref": "#/$defs/Mount"}},
        "content": {"type": "string"},
    },
    "$defs": {
        "Edit": {"type": "object", "properties": {"file": {"type": "string"}, "text": {"type": "string"}}},
        "Mount": {
            "type": "object",
            "properties": {"source": {"type": "string"}, "self": {"$ref": "#/$defs/Mount"}},
        },
    },
}


def test_the_check_finds_every_path_and_nothing_else() -> None:
    # The first net is the guard's schema walk (the probe's): the places wrap checks in a call.
    assert {slot.locator for slot in path_slots(FILESYSTEM_LIKE)} == {
        "path",
        "paths[]",
        "edits[].file",
        "options.workdir",
        "where",
        "mounts{}.source",
    }
    arguments = {
        "path": "/a",
        "paths": ["/b", 3, "/c"],
        "edits": [{"file": "/d", "text": "x"}, {"text": "y"}],
        "mounts": {"m1": {"source": "/e"}},
        "content": "/not/a/path",
    }
    got = [v for slot in path_slots(FILESYSTEM_LIKE) for v in slot.values(arguments) if isinstance(v, str)]
    assert sorted(got) == ["/a", "/b", "/c", "/d", "/e"]
    # The second net: path names anywhere in the arguments, whatever the schema said (or could not follow).
    assert sorted(named_values({"x": {"target_dir": "/f"}, "files": ["/g"]})) == ["/f", "/g"]
    assert named_values({"mounts": {"m": {"self": {"source": "/h"}}}}) == ["/h"]
    assert walk_schema(FILESYSTEM_LIKE).opaque  # the recursive Mount: not followed, and said so


def test_the_second_net_is_bounded() -> None:
    deep: dict[str, Any] = {"path": "/x"}
    for _ in range(200):
        deep = {"path_holder_dir": deep}
    assert len(named_values(deep)) <= 13


# --- the plan ------------------------------------------------------------------------------------------


def test_the_plan_grants_code_by_its_package_and_never_data(tmp_path: Path) -> None:
    package = tmp_path / "proj" / "node_modules" / "@scope" / "server" / "dist"
    package.mkdir(parents=True)
    script = package / "index.js"
    script.write_text("#!/usr/bin/env node\n")
    data = tmp_path / "data.txt"
    data.write_text("x")
    folder = tmp_path / "served"
    folder.mkdir()
    plan = make_plan(["node", str(script), str(folder), str(data)], cache_base=str(tmp_path / "cache"))
    assert str(tmp_path / "proj" / "node_modules") in plan.read
    assert not {str(folder), str(data), str(tmp_path)} & set(plan.read)
    assert plan.argv[1] == str(script)
    assert Path(plan.cache).parent == tmp_path / "cache"
    assert plan.env["HOME"].startswith(plan.cache)
    again = make_plan(["node", str(script), str(folder), str(data)], cache_base=str(tmp_path / "cache"))
    assert again.cache == plan.cache  # one private cache per wrapped command, kept across runs


def test_a_shebang_interpreter_and_a_venv_are_granted(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    tool = venv / "bin" / "server"
    tool.write_text(f"#!{venv / 'bin' / 'python'}\n")
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    plan = make_plan([str(tool)], cache_base=str(tmp_path / "cache"))
    assert str(venv) in plan.read


def test_container_daemons_are_refused() -> None:
    for argv in (["docker", "run", "-i", "x"], ["/usr/bin/podman", "run", "x"], ["docker", "compose", "up"]):
        with pytest.raises(ConfigError, match="container daemon"):
            refuse_container(argv)
    refuse_container(["docker-credential-helper", "run"])
    with pytest.raises(ConfigError, match="not found on PATH"):
        make_plan(["no-such-command-anywhere"])


# --- the proxy in this process, on both backends -------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.skipif(not support().complete, reason="needs Landlock and the seccomp filter")
async def test_the_proxy_on_this_backend(tmp_path: Path) -> None:
    outside, a, b = tmp_path / "outside", tmp_path / "ceiling" / "a", tmp_path / "ceiling" / "b"
    for folder in (outside, a, b):
        folder.mkdir(parents=True)
    (outside / "secret.txt").write_text("SECRET")
    (b / "fixed.txt").write_text("INSIDE")
    plan = make_plan(
        hostile_argv(outside / "secret.txt", outside / "plant.txt", b / "fixed.txt"),
        cache_base=str(tmp_path / "c"),
    )
    for sub in ("home", "tmp"):
        os.makedirs(os.path.join(plan.cache, sub), exist_ok=True)
    options = Options(plan=plan, ceiling=RootSet.from_paths([tmp_path / "ceiling"]))
    to_wrap_r, to_wrap_w = os.pipe()
    from_wrap_r, from_wrap_w = os.pipe()
    proxy = Proxy(options, to_wrap_r, from_wrap_w)
    host_in, host_out = Lines(from_wrap_r, "wrap"), Writer(to_wrap_w)
    roots = [a, b]

    async def answer(id_: object) -> dict[str, Any]:
        while True:
            message = await host_in.receive()
            assert isinstance(message, dict)
            if message.get("method") == "roots/list":
                entries = [{"uri": p.as_uri()} for p in roots]
                await host_out.send({"jsonrpc": "2.0", "id": message["id"], "result": {"roots": entries}})
            elif message.get("id") == id_ and "method" not in message:
                return message

    async def call(id_: int, name: str) -> str:
        params = {"name": name, "arguments": {}}
        await host_out.send({"jsonrpc": "2.0", "id": id_, "method": "tools/call", "params": params})
        return str((await answer(id_))["result"]["content"][0]["text"])

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(proxy.run)
            init = {
                "protocolVersion": LEGACY,
                "capabilities": {"roots": {"listChanged": True}},
                "clientInfo": {"name": "t", "version": "0"},
            }
            await host_out.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})
            assert (await answer(1))["result"]["serverInfo"]["name"] == "hostile"
            await host_out.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            assert "SECRET" not in await call(2, "summarize")
            assert await call(3, "peek") == "INSIDE"
            roots = [a]
            await host_out.send({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"})
            assert "INSIDE" not in await call(4, "peek")
            os.close(to_wrap_w)  # the host goes away: wrap stops and kills its child
            host_out.closed = True
    finally:
        for fd in (to_wrap_r, from_wrap_r, from_wrap_w):
            os.close(fd)
    assert proxy.children == []


class FakeChild:
    """Only what the pool reads of a child: its roots and whether it is alive."""

    def __init__(self, roots: RootSet) -> None:
        self.roots = roots
        self.alive = True


def test_the_pool_keeps_a_bounded_number_of_children_least_recently_used_first(tmp_path: Path) -> None:
    from mcp_roots.wrap._modern import Pool

    folders = []
    for name in "abcde":
        (tmp_path / name).mkdir()
        folders.append(RootSet.from_paths([tmp_path / name]))
    pool = Pool(size=3)
    children: list[Any] = [FakeChild(roots) for roots in folders]
    assert pool.put(children[0]) == []
    assert pool.put(children[1]) == []
    assert pool.put(children[2]) == []
    assert pool.get(folders[0]) is children[0]  # used: now the newest
    assert pool.put(children[3]) == [children[1]]
    assert pool.get(folders[1]) is None
    children[2].alive = False
    assert pool.get(folders[2]) is None  # a dead child is not handed out
    assert pool.put(children[4]) == []


# --- the wire ------------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_the_wire_drops_what_is_too_long_or_not_an_object_and_keeps_the_rest() -> None:
    read_end, write_end = os.pipe()
    lines = Lines(read_end, "a test peer", max_bytes=100)
    try:
        os.write(write_end, b'{"id": 1}\n' + b"x" * 150)  # a long line arrives in pieces...
        os.write(write_end, b"y" * 150 + b'\n[1, 2]\nnot json\n{"id": 2}\r\n{"id": 3}')  # ...and ends
        os.close(write_end)
        got = [await lines.receive() for _ in range(4)]
    finally:
        os.close(read_end)
    assert got == [{"id": 1}, {"id": 2}, {"id": 3}, None]


@pytest.mark.anyio
async def test_the_wire_drops_a_message_nested_deeper_than_the_parser_goes() -> None:
    read_end, write_end = os.pipe()
    lines = Lines(read_end, "a test peer")
    try:
        os.write(write_end, b'{"a": ' * 5_000 + b"1" + b"}" * 5_000 + b'\n{"id": 2}\n')
        os.close(write_end)
        got = [await lines.receive() for _ in range(2)]
    finally:
        os.close(read_end)
    assert got == [{"id": 2}, None]


def test_a_code_grant_never_opens_the_ceiling(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    script = project / "src" / "server.py"
    script.write_text("print()\n")
    for ceiling in (project, project / "src" / "data", project / "src"):
        plan = make_plan(["python3", str(script)], cache_base=str(tmp_path / "c"), ceiling=[str(ceiling)])
        assert str(script) in plan.read  # the program's file alone
        assert str(project / "src") not in plan.read
        assert "this file alone" in plan.reasons[str(script)]
    elsewhere = make_plan(
        ["python3", str(script)], cache_base=str(tmp_path / "c"), ceiling=[str(tmp_path / "x")]
    )
    assert str(project / "src") in elsewhere.read  # no overlap: its folder, as before
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    tool = venv / "bin" / "server"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    with pytest.raises(ConfigError, match=f"{venv} .* holds the ceiling {venv / 'data'}"):
        make_plan([str(tool)], cache_base=str(tmp_path / "c"), ceiling=[str(venv / "data")])
