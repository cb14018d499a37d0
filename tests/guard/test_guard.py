"""RootsGuard beyond the reference server: the low-level Server, the SDK seams it relies on, per-connection
state that does not outlive its connection, and no deprecation noise from the server side.

Everything runs against the real mcp SDK over its in-memory transport.
"""

from __future__ import annotations

import gc
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.server import MCPServer
from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import Context
from mcp_types import (
    RootsListChangedNotification,
)
from pydantic import BaseModel

from mcp_roots import RootsCache, RootsGuard
from mcp_roots.adapters.mcp2_sdk import connection_of as _connection_of
from mcp_roots.adapters.mcp2_sdk import request_channel as _request_channel
from tests.kit import RootsCallback, Tree, lowlevel_server, text_of

pytestmark = pytest.mark.anyio


@pytest.fixture
def tree(tmp_path: Path) -> Tree:
    return Tree(tmp_path)


async def test_lowlevel_server_is_guarded_and_follows_roots_changes(tree: Tree) -> None:
    guard = RootsGuard([tree.fallback])
    callback = RootsCallback(tree.project)
    async with Client(lowlevel_server(guard), mode="legacy", list_roots_callback=callback) as client:

        async def read(path: Path) -> tuple[bool, str]:
            result = await client.call_tool("read_text", {"path": str(path)})
            return bool(result.is_error), text_of(result)

        assert await read(tree.project / "hello.txt") == (False, "hello from project")
        refused = await read(tree.project / "escape" / "secret.txt")
        assert refused[0]
        assert "Access denied" in refused[1]
        assert "TOP SECRET" not in refused[1]
        callback.paths = [tree.other]
        await client.session.send_notification(RootsListChangedNotification())
        assert await read(tree.other / "other.txt") == (False, "hello from other")
        assert (await read(tree.project / "hello.txt"))[0] is True


async def test_lowlevel_server_without_client_roots_uses_the_fallback(tree: Tree) -> None:
    guard = RootsGuard([tree.fallback])
    async with Client(lowlevel_server(guard), mode="legacy") as client:
        ok = await client.call_tool("read_text", {"path": str(tree.fallback / "fb.txt")})
        assert not ok.is_error
        assert text_of(ok) == "hello from fallback"


def test_install_refuses_what_is_not_an_mcp_server(tree: Tree) -> None:
    with pytest.raises(TypeError, match=r"supports: mcp 2\.x MCPServer, mcp 2\.x low-level Server"):
        RootsGuard([tree.fallback]).install(object())  # type: ignore[arg-type]


def test_a_ceiling_given_as_one_string_is_one_path(tree: Tree) -> None:
    guard = RootsGuard([tree.project / "sub"], ceiling=str(tree.project))
    assert guard.ceiling is not None
    assert list(guard.ceiling.paths) == [tree.project]


def test_install_twice_installs_once(tree: Tree) -> None:
    guard = RootsGuard([tree.fallback])
    server = MCPServer("t")
    guard.install(server)
    guard.install(server)
    assert sum(1 for m in server.middleware if type(m).__module__ == "mcp_roots.adapters.mcp2") == 1


async def test_guard_files_says_clearly_when_the_client_offers_no_brokering(tree: Tree) -> None:
    guard = RootsGuard([tree.fallback])
    server = MCPServer("brokered")
    guard.install(server)

    @server.tool()
    @guard.paths()  # turns the library's errors into readable tool errors
    async def peek(path: str, ctx: Context) -> str:
        fs = await guard.files(ctx)
        return await fs.read_text(path)

    async with Client(server, mode="legacy", list_roots_callback=RootsCallback(tree.project)) as client:
        result = await client.call_tool("peek", {"path": "hello.txt"})
    assert result.is_error
    assert "filesystemBrokering" in text_of(result)


def test_paths_names_a_missing_parameter(tree: Tree) -> None:
    guard = RootsGuard([tree.fallback])

    def tool(path: str) -> str:
        return path

    with pytest.raises(TypeError, match="no parameter named 'dest'"):
        guard.paths("dest")(tool)


# --- the SDK's private corners: if mcp moves them, these fail loudly -----------------------------------


async def test_sdk_seams_are_where_the_guard_expects_them(tree: Tree) -> None:
    """_connection_of() must give one stable object per connection (not the per-request ServerSession),
    and _request_channel() the request-scoped channel; both read private SDK attributes."""
    seen: list[tuple[Connection, Any, Any]] = []
    server = MCPServer("seams")

    @server.tool()
    async def probe(ctx: Context) -> str:
        request_ctx = ctx.request_context
        seen.append((_connection_of(request_ctx), request_ctx.session, _request_channel(request_ctx)))
        return "ok"

    async with Client(server, mode="legacy") as first:
        await first.call_tool("probe", {})
        await first.call_tool("probe", {})
    async with Client(server, mode="legacy") as second:
        await second.call_tool("probe", {})
    (c1, s1, ch1), (c2, s2, _), (c3, _, _) = seen
    assert c1 is c2
    assert c1 is not c3
    assert s1 is not s2  # while the ServerSession is new on every request
    assert callable(ch1.send_raw_request)


def test_sdk_seams_fail_loudly_when_the_sdk_changes() -> None:
    class Session:  # what a future ServerSession without the private attributes would look like
        pass

    ctx: ServerRequestContext[Any, Any] = ServerRequestContext(
        session=Session(),  # type: ignore[arg-type]
        lifespan_context={},
        protocol_version="2025-11-25",
        method="tools/call",
    )
    with pytest.raises(RuntimeError, match="SDK changed"):
        _connection_of(ctx)
    with pytest.raises(RuntimeError, match="SDK changed"):
        _request_channel(ctx)


# --- per-connection state ---------------------------------------------------------------------------


async def test_connection_state_is_released_when_connections_end(tree: Tree) -> None:
    guard = RootsGuard([tree.fallback])
    server = MCPServer("many")
    guard.install(server)

    @server.tool()
    @guard.paths("path")
    async def touch(path: str) -> str:
        return path

    def live_caches() -> int:
        gc.collect()
        return sum(1 for o in gc.get_objects() if isinstance(o, RootsCache))

    before = live_caches()
    for i in range(150):
        callback = RootsCallback(tree.project if i % 2 else tree.other)
        async with Client(server, mode="legacy", list_roots_callback=callback) as client:
            result = await client.call_tool("touch", {"path": "x"})
            assert not result.is_error
    assert live_caches() == before  # every connection's cache went with its connection
    policy = guard._policy
    assert policy.__dict__.keys() >= {"fallback"}
    assert not any(isinstance(v, (dict, list, set)) and len(v) > 10 for v in policy.__dict__.values())
    assert len(policy.connections.states) == 0


# --- noise ------------------------------------------------------------------------------------------


@pytest.mark.filterwarnings("error::mcp.shared.exceptions.MCPDeprecationWarning")
async def test_server_side_raises_no_deprecation_warnings(
    tree: Tree, caplog: pytest.LogCaptureFixture
) -> None:
    guard = RootsGuard([tree.fallback])
    server = MCPServer("quiet")
    guard.install(server)

    @server.tool()
    @guard.paths("path")
    async def read_text(path: str, ctx: Context) -> str:
        return (await guard.roots(ctx)).read_text(path)

    caplog.set_level(logging.INFO, logger="mcp_roots")
    callback = RootsCallback(tree.project)
    for _ in range(2):
        async with Client(server, mode="legacy", list_roots_callback=callback) as client:
            result = await client.call_tool("read_text", {"path": str(tree.project / "hello.txt")})
            assert not result.is_error, text_of(result)
            callback.paths = [tree.other]
            await client.session.send_notification(RootsListChangedNotification())
            with anyio.fail_after(5):
                result = await client.call_tool("read_text", {"path": str(tree.other / "other.txt")})
            assert not result.is_error, text_of(result)
            callback.paths = [tree.project]
    # The deprecation of roots is said once per process at most, not once per connection or call.
    assert sum("deprecated" in r.getMessage() for r in caplog.records) <= 1


# --- @guard.paths with locators: parts of a parameter -------------------------------------------------------


class Item(BaseModel):
    src: str
    dest: Path | None = None


@dataclass
class Options:
    workdir: str
    depth: int = 1


class Batch(BaseModel):
    items: list[Item] = []
    named: dict[str, Item] = {}
    label: str = ""


def test_a_bad_locator_is_a_type_error_naming_the_function_and_the_rule(tree: Tree) -> None:
    guard = RootsGuard([tree.fallback])

    def tool(batch: Batch, opts: Options) -> str:
        return ""

    for locator, words in [
        ("batch.itms[].src", "the type of 'batch' has no part at 'itms[].src'"),
        ("batch..items", "bad locator 'batch..items'"),
        ("nope.src", "no parameter named 'nope'"),
        ("batch.items[].src{key}x", "bad locator"),
    ]:
        with pytest.raises(TypeError, match=r"@guard\.paths\(.*\) on tool\(\)") as caught:
            guard.paths(locator)(tool)
        assert words in str(caught.value), (locator, caught.value)
    guard.paths("batch.items[].src", "opts.workdir")(tool)  # these fit


async def test_locators_check_every_nested_path_as_the_body_receives_it(tree: Tree) -> None:
    server = MCPServer("nested")
    guard = RootsGuard([tree.project])
    guard.install(server)
    seen: list[Any] = []

    @server.tool()
    @guard.paths("batch", "opts.workdir")
    def run(batch: Batch, opts: Options) -> str:
        seen.append((batch, opts))
        return "ran"

    hello, secret = str(tree.project / "hello.txt"), str(tree.outside / "secret.txt")
    ok = {"items": [{"src": "hello.txt", "dest": "sub/x"}], "named": {"a": {"src": "sub/deep.txt"}}}
    async with Client(server, mode="legacy") as client:
        result = await client.call_tool("run", {"batch": ok, "opts": {"workdir": "sub"}})
        assert not result.is_error, text_of(result)
        ((batch, opts),) = seen
        assert batch.items[0].src == hello
        assert batch.items[0].dest == tree.project / "sub" / "x"  # a Path where the field is a Path
        assert batch.named["a"].src == str(tree.project / "sub" / "deep.txt")
        assert opts.workdir == str(tree.project / "sub")
        for batch_arg, workdir in [
            ({"items": [{"src": "hello.txt"}, {"src": secret}]}, "sub"),
            ({"items": [{"src": "hello.txt", "dest": secret}]}, "sub"),
            ({"named": {"x": {"src": secret}}}, "sub"),
            (ok, str(tree.outside)),
        ]:
            result = await client.call_tool("run", {"batch": batch_arg, "opts": {"workdir": workdir}})
            assert result.is_error, (batch_arg, workdir)
            assert "outside the allowed roots" in text_of(result)
    assert len(seen) == 1
    rows = {row.name: row for row in guard.audit(server)}
    assert rows["run"].path_parameters == (
        "batch.items[].src",
        "batch.items[].dest",
        "batch.named{}.src",
        "batch.named{}.dest",
        "opts.workdir",
    )
    assert rows["run"].status == "guarded"


async def test_a_tool_asking_for_roots_without_the_decorator_is_refused_in_one_line(
    tree: Tree, caplog: pytest.LogCaptureFixture
) -> None:
    """``await guard.roots(ctx)`` in a tool without ``@guard.paths``, for a client that sends no roots and a
    server with none configured: the client gets the one-line refusal, the server logs no traceback."""
    guard = RootsGuard(None, environ={}, user_config_dir=tree.base / "no-config")
    server = MCPServer("unguarded")

    @server.tool()
    async def read_text(path: str, ctx: Context) -> str:
        return (await guard.roots(ctx)).read_text(path)

    @server.tool()
    async def naive(path: str, ctx: Context) -> str:  # the control: the same RootsError, raised as it is
        from mcp_roots import RootsUnavailable

        raise RootsUnavailable("This server has no folders for this client")

    guard.install(server)
    with caplog.at_level(logging.DEBUG):
        async with Client(server, mode="legacy") as client:
            control = await client.call_tool("naive", {"path": str(tree.fallback / "fb.txt")})
            # what a plain exception gets: a generic line for the client, a traceback in the server's log
            assert control.is_error
            assert "no folders" not in text_of(control), text_of(control)
            assert any(r.exc_info for r in caplog.records if "naive" in r.getMessage())
            caplog.clear()
            result = await client.call_tool("read_text", {"path": str(tree.fallback / "fb.txt")})
    assert result.is_error
    # the framework's own prefix for a deliberate tool error, then the one line; no traceback logged
    assert text_of(result).endswith(
        "This server has no folders for this client: it sends no roots, and none are set up for it."
    ), text_of(result)
    assert not [r for r in caplog.records if r.exc_info], [r.getMessage() for r in caplog.records]
