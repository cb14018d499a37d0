"""The reference server (examples/file_server.py) with the SDK's own Client: its own tools in memory (legacy
and 2026-07-28), and the transports the conformance table does not run: streamable HTTP answering each POST
with one JSON body, and stateless HTTP, against the script run as a real process on 127.0.0.1.

The guarded call itself (inside and outside the roots, symlinks, writes, the fallback, a client whose roots
fail, the ceiling, a roots change, connections kept apart) is a row of the conformance table
(tests/conformance.py), which runs it in memory, over stdio and over streamable HTTP on every framework.
Nothing of the SDK is mocked.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp_types import (
    INVALID_REQUEST,
    ErrorData,
    ListRootsResult,
    Root,
    RootsListChangedNotification,
)
from pydantic import FileUrl

from mcp_roots import RootsGuard, path_to_uri
from tests.kit import RootsCallback, Tree, launch_file_server, load_file_server, text_of

file_server = load_file_server()

MEMORY = ["memory-legacy", "memory-modern"]
pytestmark = [
    pytest.mark.anyio,
]


@pytest.fixture
def tree(tmp_path: Path) -> Tree:
    return Tree(tmp_path)


class _HttpServers:
    """One reference server per distinct command line, shared by the tests of this module."""

    def __init__(self) -> None:
        self._stack = contextlib.ExitStack()
        self._ports: dict[tuple[str, ...], int] = {}

    def url(self, args: tuple[str, ...]) -> str:
        if args not in self._ports:
            self._ports[args] = self._stack.enter_context(launch_file_server(*args)).port
        return f"http://127.0.0.1:{self._ports[args]}/mcp"

    def close(self) -> None:
        self._stack.close()


@pytest.fixture(scope="module")
def http_servers() -> Iterator[_HttpServers]:
    servers = _HttpServers()
    yield servers
    servers.close()


@contextlib.asynccontextmanager
async def connect(
    transport: str,
    tree: Tree,
    http_servers: _HttpServers,
    callback: RootsCallback | None,
    *,
    roots_timeout: float = 5.0,
    stateless: bool = False,
) -> AsyncIterator[Client]:
    """A connected SDK Client to the reference server over ``transport``, fallback roots = tree.fallback."""
    kwargs: dict[str, Any] = {"list_roots_callback": callback} if callback is not None else {}
    args: tuple[str, ...] = ("--roots", str(tree.fallback), "--timeout", str(roots_timeout))
    if transport.startswith("memory"):
        guard = RootsGuard([tree.fallback], timeout=roots_timeout)
        server = file_server.build_server(guard)
        mode = "legacy" if transport == "memory-legacy" else "auto"
        async with Client(server, mode=mode, **kwargs) as client:
            yield client
    else:
        if transport == "http-json":
            args = (*args, "--json-response")
        url = http_servers.url((*args, "--stateless") if stateless else args)
        async with Client(url, mode="legacy", **kwargs) as client:
            yield client


async def read(client: Client, path: Path | str) -> tuple[bool, str]:
    result = await client.call_tool("read_text", {"path": str(path)})
    return bool(result.is_error), text_of(result)


# --- the reference server's own tools -------------------------------------------------------------------


@pytest.mark.parametrize("transport", MEMORY)
async def test_the_reference_servers_tools(transport: str, tree: Tree, http_servers: _HttpServers) -> None:
    async with connect(transport, tree, http_servers, RootsCallback(tree.project, tree.other)) as client:
        assert await read(client, tree.project / "hello.txt") == (False, "hello from project")
        assert (await read(client, tree.project / "escape" / "secret.txt"))[0]
        listing = await client.call_tool("list_dir", {"path": str(tree.project / "escape")})
        assert listing.is_error
        assert "secret.txt" not in text_of(listing)
        ok = await client.call_tool("write_text", {"path": str(tree.project / "new.txt"), "content": "fresh"})
        assert not ok.is_error, text_of(ok)
        assert (tree.project / "new.txt").read_text() == "fresh"
        bad = await client.call_tool("write_text", {"path": str(tree.outside / "pwned.txt"), "content": "x"})
        assert bad.is_error
        assert not (tree.outside / "pwned.txt").exists()
        result = await client.call_tool("list_roots", {})
        assert not result.is_error
        assert result.structured_content is not None
        paths = [r["path"] for r in result.structured_content["result"]]
        assert paths == [str(tree.project), str(tree.other)]


# --- the roots lifecycle beyond the table ---------------------------------------------------------------


async def test_client_answering_roots_unsupported_is_refused_never_given_the_fallback(
    tree: Tree, http_servers: _HttpServers
) -> None:
    # The client declared roots: it is the only authority, so "switched off" never means the fallback.
    # (The table's failing client answers -32601; this one -32600, as a client without a callback does.)
    error = ErrorData(code=INVALID_REQUEST, message="List roots not supported")
    async with connect("memory-legacy", tree, http_servers, RootsCallback(answer=lambda: error)) as client:
        refused, text = await read(client, tree.fallback / "fb.txt")
        assert refused is True
        assert text.startswith("the client has not sent its roots yet")
        assert (await read(client, tree.project / "hello.txt"))[0] is True


async def test_client_that_never_answers_is_refused_within_the_timeout(
    tree: Tree, http_servers: _HttpServers
) -> None:
    callback = RootsCallback(answer=lambda: 3600.0)
    async with connect("memory-legacy", tree, http_servers, callback, roots_timeout=0.5) as client:
        with anyio.fail_after(10):
            refused, text = await read(client, tree.fallback / "fb.txt")
        assert refused is True
        assert text.startswith("the client has not sent its roots yet")
        assert (await read(client, tree.project / "hello.txt"))[0] is True


@pytest.mark.parametrize("transport", MEMORY)
async def test_valid_empty_roots_list_fails_closed(
    transport: str, tree: Tree, http_servers: _HttpServers
) -> None:
    callback = RootsCallback(answer=lambda: ListRootsResult(roots=[]))
    async with connect(transport, tree, http_servers, callback) as client:
        assert (await read(client, tree.fallback / "fb.txt"))[0] is True
        assert (await read(client, tree.project / "hello.txt"))[0] is True


# --- the HTTP variants the table does not run -----------------------------------------------------------


async def test_json_response_http_reads_and_sees_a_roots_change(
    tree: Tree, http_servers: _HttpServers
) -> None:
    """Each POST answered with one JSON body: the server's roots/list can only use the standalone GET
    stream."""
    callback = RootsCallback(tree.project)
    async with connect("http-json", tree, http_servers, callback) as client:
        assert await read(client, tree.project / "hello.txt") == (False, "hello from project")
        assert await read(client, "sub/deep.txt") == (False, "deep")
        refused, text = await read(client, tree.project / "escape" / "secret.txt")
        assert refused
        assert "outside the allowed roots" in text
        assert "TOP SECRET" not in text
        callback.paths = [tree.other]
        await client.session.send_notification(RootsListChangedNotification())
        # No sleep: the call right after the notification must already see the new roots.
        assert await read(client, tree.other / "other.txt") == (False, "hello from other")
        assert (await read(client, tree.project / "hello.txt"))[0] is True


async def test_stateless_http_uses_the_fallback(tree: Tree, http_servers: _HttpServers) -> None:
    async with connect("http", tree, http_servers, RootsCallback(tree.project), stateless=True) as client:
        assert await read(client, tree.fallback / "fb.txt") == (False, "hello from fallback")
        assert (await read(client, tree.project / "hello.txt"))[0] is True


# --- the decorator ----------------------------------------------------------------------------------------


async def test_decorator_keeps_the_tool_input_schema(tree: Tree) -> None:
    guard = RootsGuard([tree.fallback])
    server = file_server.build_server(guard)
    async with Client(server, mode="legacy") as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert tools["read_text"].input_schema["properties"].keys() == {"path"}
    assert tools["read_text"].input_schema["required"] == ["path"]
    assert tools["write_text"].input_schema["properties"].keys() == {"path", "content"}
    assert tools["list_roots"].input_schema.get("properties", {}) == {}
    assert "Read a UTF-8 text file" in (tools["read_text"].description or "")


async def test_path_annotation_and_list_of_paths_are_checked(tree: Tree) -> None:
    from mcp.server import MCPServer
    from mcp.server.mcpserver import Context

    guard = RootsGuard([tree.fallback])
    server = MCPServer("t")
    guard.install(server)
    received: list[Any] = []

    @server.tool()
    @guard.paths("paths", "dest")
    def copy_many(paths: list[Path], dest: Path, ctx: Context) -> str:  # a sync tool
        received.append((paths, dest))
        return "ok"

    async with Client(server, mode="legacy", list_roots_callback=RootsCallback(tree.project)) as client:
        good = [str(tree.project / "hello.txt"), "sub/deep.txt"]
        ok = await client.call_tool("copy_many", {"paths": good, "dest": str(tree.project / "out")})
        assert not ok.is_error, text_of(ok)
        bad = await client.call_tool(
            "copy_many", {"paths": [*good, str(tree.outside / "secret.txt")], "dest": str(tree.project)}
        )
        assert bad.is_error
        assert "secret.txt" in text_of(bad)
    assert received == [
        ([tree.project / "hello.txt", tree.project / "sub" / "deep.txt"], tree.project / "out")
    ]


@pytest.mark.filterwarnings("ignore::UserWarning:pydantic.main")  # model_construct'ed hostile roots
@pytest.mark.parametrize("transport", MEMORY)
async def test_roots_with_invalid_entries_keep_the_valid_ones(
    transport: str, tree: Tree, http_servers: _HttpServers
) -> None:
    def answer() -> ListRootsResult:
        return ListRootsResult(
            roots=[
                Root.model_construct(uri="http://evil.example/", name="web"),
                Root.model_construct(uri="file://evil.example/etc", name="remote"),
                Root(uri=FileUrl(path_to_uri(tree.project)), name="project"),
            ]
        )

    async with connect(transport, tree, http_servers, RootsCallback(answer=answer)) as client:
        assert (await read(client, tree.project / "hello.txt"))[0] is False
        assert (await read(client, "/etc/hostname"))[0] is True
        assert (await read(client, tree.fallback / "fb.txt"))[0] is True
