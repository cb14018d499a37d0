"""RootsGuard against real transports: in-memory (legacy and 2026-07-28), stdio subprocess, streamable HTTP.

Every test runs the reference server (examples/file_server.py) and the SDK's own Client; nothing of the
SDK is mocked. Each behaviour is one test parametrized over the transports it applies to.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp_types import (
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    ErrorData,
    ListRootsResult,
    Root,
    RootsListChangedNotification,
)

from mcp_roots import RootsGuard, path_to_uri

from . import forkserver
from .interopkit import http_server
from .serverkit import (
    FILE_SERVER,
    RootsCallback,
    Tree,
    load_file_server,
    text_of,
)

file_server = load_file_server()

LEGACY = ["memory-legacy", "stdio", "http"]
ALL = ["memory-legacy", "memory-modern", "stdio", "http"]
# Streamable HTTP answering each POST with one JSON body: server-to-client requests can only use the
# standalone GET stream there.
WITH_JSON = [*ALL, "http-json"]
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
            self._ports[args] = self._stack.enter_context(http_server(*args)).port
        return f"http://127.0.0.1:{self._ports[args]}/mcp"

    def close(self) -> None:
        self._stack.close()


@pytest.fixture(scope="module")
def http_servers() -> Iterator[_HttpServers]:
    servers = _HttpServers()
    yield servers
    servers.close()


def _server_args(fallback: Path, ceiling: Path | None, timeout: float) -> tuple[str, ...]:
    args = ["--roots", str(fallback), "--timeout", str(timeout)]
    if ceiling is not None:
        args += ["--ceiling", str(ceiling)]
    return tuple(args)


@contextlib.asynccontextmanager
async def connect(
    transport: str,
    tree: Tree,
    http_servers: _HttpServers,
    callback: RootsCallback | None,
    *,
    ceiling: Path | None = None,
    roots_timeout: float = 5.0,
    stateless: bool = False,
) -> AsyncIterator[Client]:
    """A connected SDK Client to the reference server over ``transport``, fallback roots = tree.fallback."""
    kwargs: dict[str, Any] = {"list_roots_callback": callback} if callback is not None else {}
    args = _server_args(tree.fallback, ceiling, roots_timeout)
    if transport.startswith("memory"):
        guard = RootsGuard([tree.fallback], ceiling=[ceiling] if ceiling else None, timeout=roots_timeout)
        server = file_server.build_server(guard)
        mode = "legacy" if transport == "memory-legacy" else "auto"
        async with Client(server, mode=mode, **kwargs) as client:
            yield client
    elif transport == "stdio":
        command = forkserver.command(str(FILE_SERVER), *args)  # a real process, forked warm
        params = StdioServerParameters(command=command[0], args=command[1:])
        async with Client(params, mode="legacy", **kwargs) as client:
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


# --- the boundary ------------------------------------------------------------------------------------


@pytest.mark.parametrize("transport", WITH_JSON)
async def test_read_inside_client_root_is_allowed(
    transport: str, tree: Tree, http_servers: _HttpServers
) -> None:
    async with connect(transport, tree, http_servers, RootsCallback(tree.project)) as client:
        assert await read(client, tree.project / "hello.txt") == (False, "hello from project")
        assert await read(client, tree.project / "sub" / "deep.txt") == (False, "deep")


@pytest.mark.parametrize("transport", WITH_JSON)
async def test_read_outside_client_root_is_refused(
    transport: str, tree: Tree, http_servers: _HttpServers
) -> None:
    async with connect(transport, tree, http_servers, RootsCallback(tree.project)) as client:
        for path in [
            tree.outside / "secret.txt",
            tree.project / ".." / "outside" / "secret.txt",
            str(tree.project) + "/../../../../../../etc/passwd",
            tree.fallback / "fb.txt",  # the fallback does not apply: the client sent roots
            tree.other / "other.txt",
        ]:
            is_error, text = await read(client, path)
            assert is_error, path
            assert "Access denied" in text
            assert "outside the allowed roots" in text
            assert str(tree.project) in text  # the message names the roots
            assert "TOP SECRET" not in text


@pytest.mark.parametrize("transport", ALL)
async def test_symlink_escape_is_refused(transport: str, tree: Tree, http_servers: _HttpServers) -> None:
    async with connect(transport, tree, http_servers, RootsCallback(tree.project)) as client:
        is_error, text = await read(client, tree.project / "escape" / "secret.txt")
        assert is_error
        assert "TOP SECRET" not in text
        listing = await client.call_tool("list_dir", {"path": str(tree.project / "escape")})
        assert listing.is_error
        assert "secret.txt" not in text_of(listing)


@pytest.mark.parametrize("transport", ALL)
async def test_write_inside_lands_and_outside_is_refused(
    transport: str, tree: Tree, http_servers: _HttpServers
) -> None:
    async with connect(transport, tree, http_servers, RootsCallback(tree.project)) as client:
        ok = await client.call_tool("write_text", {"path": str(tree.project / "new.txt"), "content": "fresh"})
        assert not ok.is_error, text_of(ok)
        assert (tree.project / "new.txt").read_text() == "fresh"
        bad = await client.call_tool("write_text", {"path": str(tree.outside / "pwned.txt"), "content": "x"})
        assert bad.is_error
        assert not (tree.outside / "pwned.txt").exists()


@pytest.mark.parametrize("transport", ALL)
async def test_list_roots_tool_reports_the_client_roots(
    transport: str, tree: Tree, http_servers: _HttpServers
) -> None:
    async with connect(transport, tree, http_servers, RootsCallback(tree.project, tree.other)) as client:
        result = await client.call_tool("list_roots", {})
        assert not result.is_error
        assert result.structured_content is not None
        paths = [r["path"] for r in result.structured_content["result"]]
        assert paths == [str(tree.project), str(tree.other)]


# --- the lifecycle -----------------------------------------------------------------------------------


@pytest.mark.parametrize("transport", [*LEGACY, "http-json"])
async def test_roots_change_is_visible_on_the_next_call(
    transport: str, tree: Tree, http_servers: _HttpServers
) -> None:
    callback = RootsCallback(tree.project)
    async with connect(transport, tree, http_servers, callback) as client:
        assert (await read(client, tree.project / "hello.txt"))[0] is False
        assert (await read(client, tree.other / "other.txt"))[0] is True
        callback.paths = [tree.other]
        await client.session.send_notification(RootsListChangedNotification())
        # No sleep: the call right after the notification must already see the new roots.
        assert await read(client, tree.other / "other.txt") == (False, "hello from other")
        assert (await read(client, tree.project / "hello.txt"))[0] is True


async def test_modern_era_asks_for_roots_on_every_call(tree: Tree, http_servers: _HttpServers) -> None:
    callback = RootsCallback(tree.project)
    async with connect("memory-modern", tree, http_servers, callback) as client:
        assert (await read(client, tree.project / "hello.txt"))[0] is False
        callback.paths = [tree.other]
        assert (await read(client, tree.other / "other.txt"))[0] is False
        assert (await read(client, tree.project / "hello.txt"))[0] is True
        assert callback.calls >= 2


@pytest.mark.parametrize("transport", ALL)
async def test_client_without_roots_gets_the_fallback(
    transport: str, tree: Tree, http_servers: _HttpServers
) -> None:
    async with connect(transport, tree, http_servers, None) as client:
        assert await read(client, tree.fallback / "fb.txt") == (False, "hello from fallback")
        assert (await read(client, tree.project / "hello.txt"))[0] is True


@pytest.mark.parametrize(
    "error",
    [
        ErrorData(code=METHOD_NOT_FOUND, message="Method not found"),
        ErrorData(code=INVALID_REQUEST, message="List roots not supported"),
    ],
    ids=["-32601", "-32600"],
)
@pytest.mark.parametrize("transport", LEGACY)
async def test_client_answering_roots_unsupported_is_refused_never_given_the_fallback(
    transport: str, error: ErrorData, tree: Tree, http_servers: _HttpServers
) -> None:
    # The client declared roots: it is the only authority, so "switched off" never means the fallback.
    callback = RootsCallback(answer=lambda: error)
    async with connect(transport, tree, http_servers, callback) as client:
        refused, text = await read(client, tree.fallback / "fb.txt")
        assert refused is True
        assert text.startswith("the client has not sent its roots yet")
        assert (await read(client, tree.project / "hello.txt"))[0] is True


@pytest.mark.parametrize("transport", LEGACY)
async def test_client_that_never_answers_is_refused_within_the_timeout(
    transport: str, tree: Tree, http_servers: _HttpServers
) -> None:
    callback = RootsCallback(answer=lambda: 3600.0)
    async with connect(transport, tree, http_servers, callback, roots_timeout=0.5) as client:
        with anyio.fail_after(10):
            refused, text = await read(client, tree.fallback / "fb.txt")
        assert refused is True
        assert text.startswith("the client has not sent its roots yet")
        assert (await read(client, tree.project / "hello.txt"))[0] is True


@pytest.mark.parametrize("transport", ["memory-legacy", "memory-modern", "stdio"])
async def test_valid_empty_roots_list_fails_closed(
    transport: str, tree: Tree, http_servers: _HttpServers
) -> None:
    callback = RootsCallback(answer=lambda: ListRootsResult(roots=[]))
    async with connect(transport, tree, http_servers, callback) as client:
        assert (await read(client, tree.fallback / "fb.txt"))[0] is True
        assert (await read(client, tree.project / "hello.txt"))[0] is True


async def test_stateless_http_uses_the_fallback(tree: Tree, http_servers: _HttpServers) -> None:
    async with connect("http", tree, http_servers, RootsCallback(tree.project), stateless=True) as client:
        assert await read(client, tree.fallback / "fb.txt") == (False, "hello from fallback")
        assert (await read(client, tree.project / "hello.txt"))[0] is True


# --- policy and isolation ----------------------------------------------------------------------------


@pytest.mark.parametrize("transport", ALL)
async def test_client_roots_are_clipped_to_the_ceiling(
    transport: str, tree: Tree, http_servers: _HttpServers
) -> None:
    # The client asks for the whole project; the operator's ceiling is project/sub.
    callback = RootsCallback(tree.project, tree.other)
    async with connect(transport, tree, http_servers, callback, ceiling=tree.project / "sub") as client:
        assert await read(client, tree.project / "sub" / "deep.txt") == (False, "deep")
        assert (await read(client, tree.project / "hello.txt"))[0] is True
        assert (await read(client, tree.other / "other.txt"))[0] is True


@pytest.mark.parametrize("transport", ALL)
async def test_concurrent_connections_never_see_each_others_roots(
    transport: str, tree: Tree, http_servers: _HttpServers
) -> None:
    seen: dict[str, list[tuple[bool, str]]] = {}

    async def session(name: str, own: Path, foreign: Path) -> None:
        async with connect(transport, tree, http_servers, RootsCallback(own.parent)) as client:
            results = []
            for _ in range(5):
                results.append(await read(client, own))
                results.append(await read(client, foreign))
            seen[name] = results

    async with anyio.create_task_group() as tg:
        tg.start_soon(session, "a", tree.project / "hello.txt", tree.other / "other.txt")
        tg.start_soon(session, "b", tree.other / "other.txt", tree.project / "hello.txt")
    for results in seen.values():
        assert [r[0] for r in results] == [False, True] * 5
    assert len(seen) == 2


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
@pytest.mark.parametrize("transport", ["memory-legacy", "memory-modern", "stdio"])
async def test_roots_with_invalid_entries_keep_the_valid_ones(
    transport: str, tree: Tree, http_servers: _HttpServers
) -> None:
    def answer() -> ListRootsResult:
        return ListRootsResult(
            roots=[
                Root.model_construct(uri="http://evil.example/", name="web"),
                Root.model_construct(uri="file://evil.example/etc", name="remote"),
                Root(uri=path_to_uri(tree.project), name="project"),
            ]
        )

    async with connect(transport, tree, http_servers, RootsCallback(answer=answer)) as client:
        assert (await read(client, tree.project / "hello.txt"))[0] is False
        assert (await read(client, "/etc/hostname"))[0] is True
        assert (await read(client, tree.fallback / "fb.txt"))[0] is True
