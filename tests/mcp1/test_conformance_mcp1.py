"""The adapter conformance table (tests/conformance.py) on mcp 1.x ``FastMCP`` and the mcp 1.x low-level
``Server`` (legacy era: the only one mcp 1.x speaks), in memory and (for the rows that name them) over stdio
and streamable HTTP. Runs in
.venv-mcp1 (`make pytest-mcp1`), in memory on asyncio and trio; over stdio and HTTP on asyncio
(tests/adapters/test_conformance.py says why)."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.server.fastmcp import Context, FastMCP
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.context import RequestContext
from mcp.shared.exceptions import McpError
from mcp.shared.memory import create_connected_server_and_client_session
from mcp.shared.message import SessionMessage
from pydantic import AnyUrl
from starlette.applications import Starlette
from starlette.routing import Route

from mcp_roots import RootsGuard, path_to_uri

from ..conformance import (
    HTTP,
    MEMORY,
    ROWS,
    STDIO,
    TRANSPORTS,
    Harness,
    LowLevelHarness,
    Session,
    client_end,
    http_url,
    over_pipes,
)
from ..kit import Tree, file_reader


def _text(blocks: Any) -> str:
    return "".join(getattr(b, "text", "") for b in blocks)


def _serve_stdio(
    server: FastMCP | Server[Any, Any],
) -> Callable[[anyio.AsyncFile[str], anyio.AsyncFile[str]], Any]:
    """What ``FastMCP.run_stdio_async`` does, over the given pipes instead of fds 0 and 1."""

    async def serve(stdin: anyio.AsyncFile[str], stdout: anyio.AsyncFile[str]) -> None:
        lowlevel = server._mcp_server if isinstance(server, FastMCP) else server
        with anyio.CancelScope() as done:
            async with stdio_server(stdin=stdin, stdout=stdout) as (read, write):
                await lowlevel.run(read, write, lowlevel.create_initialization_options())
                done.cancel()  # the client's EOF ended the connection

    return serve


def _client_end(
    stdin: anyio.AsyncFile[str], stdout: anyio.AsyncFile[str]
) -> AbstractAsyncContextManager[Any]:
    """The client's end of the pipes with mcp 1.x's message types (``conformance.client_end``)."""
    return client_end(
        stdin,
        stdout,
        lambda line: SessionMessage(types.JSONRPCMessage.model_validate_json(line)),
        lambda message: message.message.model_dump_json(by_alias=True, exclude_none=True),
    )


def _http_app(server: FastMCP | Server[Any, Any]) -> Callable[[], Any]:
    def app() -> Any:
        if not isinstance(server, FastMCP):
            return _lowlevel_http_app(server)
        server._session_manager = None  # FastMCP 1.x keeps its first manager, and a manager runs once
        return server.streamable_http_app()

    return app


class _Endpoint:
    """The session manager as an ASGI endpoint (what FastMCP 1.x mounts at /mcp)."""

    def __init__(self, manager: StreamableHTTPSessionManager) -> None:
        self.manager = manager

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.manager.handle_request(scope, receive, send)


def _lowlevel_http_app(server: Server[Any, Any]) -> Starlette:
    """A low-level server's streamable HTTP app at /mcp, as its users write one."""
    manager = StreamableHTTPSessionManager(app=server)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with manager.run():
            yield

    return Starlette(routes=[Route("/mcp", endpoint=_Endpoint(manager))], lifespan=lifespan)


class _Mcp1Session(Session):
    def __init__(self, paths: list[Path]) -> None:
        self.client: ClientSession | None = None  # set once the connection is up
        self.paths = paths

    @property
    def session(self) -> ClientSession:
        assert self.client is not None, "the client session is not connected yet"
        return self.client

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
    context_type: Any = Context
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
            server.resource(path_to_uri(path), name=str(path))(file_reader(path))

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

        session = _Mcp1Session(list(roots or []))
        callback = list_roots if roots is not None else None
        transport = transport or self.transport
        if transport == MEMORY:
            async with create_connected_server_and_client_session(
                server, list_roots_callback=callback
            ) as client:
                session.client = client
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
            session.client = client
            yield session


class _Handlers:
    """A hand-written low-level server's own dispatch: tools, templates and prompts by name, as a user writes
    it (the request's context, ``server.request_context``, passed to a function that asks for ``ctx``)."""

    def __init__(self, server: Server[Any, Any]) -> None:
        self.server = server
        self.tools: dict[str, Callable[..., Any]] = {}
        self.templates: dict[str, Callable[..., Any]] = {}
        self.prompts: dict[str, Callable[..., Any]] = {}
        self.files: dict[str, Path] = {}

    async def run(self, fn: Callable[..., Any], arguments: dict[str, Any]) -> Any:
        if "ctx" in inspect.signature(fn).parameters:
            arguments["ctx"] = self.server.request_context
        result = fn(**arguments)
        return await result if inspect.isawaitable(result) else result

    async def list_tools(self) -> list[types.Tool]:
        return [types.Tool(name=name, inputSchema={"type": "object"}) for name in self.tools]

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> list[types.TextContent]:
        # An exception here is the SDK's isError result with its text, as a careful handler's would be.
        return [types.TextContent(type="text", text=str(await self.run(self.tools[name], dict(arguments))))]

    async def read_resource(self, uri: AnyUrl) -> list[ReadResourceContents]:
        text = str(uri)
        if text in self.files:
            return [ReadResourceContents(self.files[text].read_text(), "text/plain")]
        scheme, _, name = text.partition("://")
        return [
            ReadResourceContents(await self.run(self.templates[scheme + "://{name}"], {"name": name}), None)
        ]

    async def get_prompt(self, name: str, arguments: dict[str, str] | None) -> types.GetPromptResult:
        text = await self.run(self.prompts[name], dict(arguments or {}))
        message = types.PromptMessage(role="user", content=types.TextContent(type="text", text=text))
        return types.GetPromptResult(messages=[message])


class Mcp1LowLevelHarness(LowLevelHarness, Mcp1FastMCPHarness):
    """An mcp 1.x low-level Server whose handlers dispatch to plain functions: ``@guard.paths`` on them works
    as on FastMCP's tools (the port hands the server's tools/call and resources/read to the algorithm)."""

    name = "mcp1-lowlevel-Server"
    context_type = RequestContext

    def server(self, guard: RootsGuard | None, *, install: bool = True) -> Any:
        server: Server[Any, Any] = Server("conformance")
        handlers = _Handlers(server)
        server.list_tools()(handlers.list_tools)
        server.call_tool(validate_input=False)(handlers.call_tool)
        server.read_resource()(handlers.read_resource)
        server.get_prompt()(handlers.get_prompt)
        server.handlers = handlers  # type: ignore[attr-defined]
        if guard is not None and install:
            guard.install(server)
        return server


@pytest.fixture(params=[Mcp1FastMCPHarness, Mcp1LowLevelHarness], ids=["FastMCP", "lowlevel"])
def adapter(request: pytest.FixtureRequest) -> Harness:
    harness: Harness = request.param()
    return harness


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
