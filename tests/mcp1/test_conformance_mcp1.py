"""The adapter conformance table (tests/conformance.py) on mcp 1.x ``FastMCP`` (legacy era: the only one
mcp 1.x speaks), in memory and (for the rows that name them) over stdio and streamable HTTP. Runs in
.venv-mcp1 (`make pytest-mcp1`), in memory on asyncio and trio; over stdio and HTTP on asyncio
(tests/test_conformance.py says why)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.server.fastmcp import Context, FastMCP
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import McpError
from mcp.shared.memory import create_connected_server_and_client_session
from mcp.shared.message import SessionMessage
from pydantic import AnyUrl, ValidationError

from mcp_roots import RootsGuard, path_to_uri

from ..conformance import HTTP, MEMORY, ROWS, STDIO, TRANSPORTS, Harness, Session, http_url, over_pipes
from ..kit import Tree


def _text(blocks: Any) -> str:
    return "".join(getattr(b, "text", "") for b in blocks)


def _serve_stdio(server: FastMCP) -> Callable[[anyio.AsyncFile[str], anyio.AsyncFile[str]], Any]:
    """What ``FastMCP.run_stdio_async`` does, over the given pipes instead of fds 0 and 1."""

    async def serve(stdin: anyio.AsyncFile[str], stdout: anyio.AsyncFile[str]) -> None:
        lowlevel = server._mcp_server
        with anyio.CancelScope() as done:
            async with stdio_server(stdin=stdin, stdout=stdout) as (read, write):
                await lowlevel.run(read, write, lowlevel.create_initialization_options())
                done.cancel()  # the client's EOF ended the connection

    return serve


@asynccontextmanager
async def _client_end(stdin: anyio.AsyncFile[str], stdout: anyio.AsyncFile[str]) -> AsyncIterator[Any]:
    """The client's end of the pipes: one JSON-RPC message a line each way, as mcp.client.stdio frames a
    subprocess's. On exit its stdout closes: the server's EOF."""
    to_session, read = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write, from_session = anyio.create_memory_object_stream[SessionMessage](0)

    async def reader() -> None:
        async with to_session:
            async for line in stdin:
                try:
                    message = types.JSONRPCMessage.model_validate_json(line)
                except ValidationError as exc:
                    await to_session.send(exc)
                    continue
                await to_session.send(SessionMessage(message))

    async def writer() -> None:
        async with from_session:
            async for message in from_session:
                await stdout.write(message.message.model_dump_json(by_alias=True, exclude_none=True) + "\n")
                await stdout.flush()

    async with anyio.create_task_group() as tg:
        tg.start_soon(reader)
        tg.start_soon(writer)
        try:
            yield read, write
        finally:
            with anyio.CancelScope(shield=True):
                await stdout.aclose()
            tg.cancel_scope.cancel()  # the reader's blocking read returns at the server's EOF


def _http_app(server: FastMCP) -> Callable[[], Any]:
    def app() -> Any:
        server._session_manager = None  # FastMCP 1.x keeps its first manager, and a manager runs once
        return server.streamable_http_app()

    return app


class _Mcp1Session(Session):
    def __init__(self, session: ClientSession | None, paths: list[Path]) -> None:
        self.session = session  # type: ignore[assignment]
        self.paths = paths

    async def prompt(self, name: str, **arguments: str) -> tuple[bool, str]:
        try:
            result = await self.session.get_prompt(name, arguments)
        except McpError as exc:
            return True, exc.error.message
        return False, _text([m.content for m in result.messages][:1])

    async def roots_changed(self) -> None:
        await self.session.send_roots_list_changed()

    async def input_schema(self, tool: str) -> dict[str, Any]:
        tools = (await self.session.list_tools()).tools
        return next(t.inputSchema for t in tools if t.name == tool)

    async def call(self, tool: str, **arguments: Any) -> tuple[bool, str]:
        result = await self.session.call_tool(tool, arguments)
        return bool(result.isError), _text(result.content)

    async def read(self, uri: str) -> tuple[bool, str]:
        try:
            result = await self.session.read_resource(AnyUrl(uri))
        except McpError as exc:
            return True, exc.error.message
        return False, _text(result.contents)


class Mcp1FastMCPHarness(Harness):
    name = "mcp1-FastMCP"
    context_type = Context
    eras = ("legacy",)

    def server(self, guard: RootsGuard | None, *, install: bool = True) -> Any:
        server = FastMCP("conformance", log_level="WARNING")
        if guard is not None and install:
            guard.install(server)
        return server

    def register(self, server: Any, fn: Callable[..., Any]) -> Any:
        return server.tool()(fn)

    def register_template(self, server: Any, uri_template: str, fn: Callable[..., Any]) -> Any:
        return server.resource(uri_template)(fn)

    def register_prompt(self, server: Any, fn: Callable[..., Any]) -> Any:
        return server.prompt()(fn)

    def register_file_resources(self, server: Any, paths: list[Path]) -> None:
        for path in paths:
            server.resource(path_to_uri(path), name=str(path))(_reader(path))

    @asynccontextmanager
    async def session(
        self,
        server: Any,
        era: str,
        roots: list[Path] | None,
        *,
        failing: bool = False,
        transport: str | None = None,
    ) -> AsyncIterator[Session]:
        assert era == "legacy"
        session: _Mcp1Session

        async def list_roots(context: Any) -> types.ListRootsResult | types.ErrorData:
            session.roots_requests += 1
            if failing:
                return types.ErrorData(code=types.METHOD_NOT_FOUND, message="roots are switched off")
            return types.ListRootsResult(
                roots=[types.Root(uri=path_to_uri(p), name=p.name) for p in session.paths]  # type: ignore[arg-type]
            )

        session = _Mcp1Session(None, list(roots or []))
        callback = list_roots if roots is not None else None
        transport = transport or self.transport
        if transport == MEMORY:
            async with create_connected_server_and_client_session(
                server, list_roots_callback=callback
            ) as client:
                session.session = client
                yield session
            return
        async with AsyncExitStack() as stack:
            if transport == STDIO:
                pipes = await stack.enter_async_context(over_pipes(_serve_stdio(server)))
                read, write = await stack.enter_async_context(_client_end(*pipes))
            else:
                assert transport == HTTP, transport
                url = await stack.enter_async_context(http_url(server, _http_app(server)))
                read, write, _ = await stack.enter_async_context(streamable_http_client(url))
            client = await stack.enter_async_context(ClientSession(read, write, list_roots_callback=callback))
            await client.initialize()
            session.session = client
            yield session


def _reader(path: Path) -> Callable[[], str]:
    return lambda: path.read_text()


@pytest.fixture
def adapter() -> Harness:
    return Mcp1FastMCPHarness()


#: (row, transport, backend): every row in memory on both backends; over stdio and HTTP on asyncio.
CELLS = [
    (name, transport, backend)
    for name, transports in TRANSPORTS.items()
    for transport in transports
    for backend in ("asyncio", "trio")
    if transport == MEMORY or backend == "asyncio"
]


@pytest.fixture
def tree(tmp_path: Path) -> Tree:
    return Tree(tmp_path)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("row", "transport", "anyio_backend"), CELLS, ids=[f"{name}-{t}-{backend}" for name, t, backend in CELLS]
)
async def test_conformance(
    adapter: Harness, row: str, transport: str, tree: Tree, caplog: pytest.LogCaptureFixture
) -> None:
    await ROWS[row](adapter.over(transport), tree, caplog)
