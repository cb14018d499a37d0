"""The adapter conformance table (tests/conformance.py) on mcp 2.x ``MCPServer``, mcp 2.x low-level
``Server`` and fastmcp 4.x, both protocol eras, in memory and (for the rows that name them) over stdio and
streamable HTTP. (mcp 1.x: tests/mcp1/test_conformance_mcp1.py.)

The ``adapter`` fixture is the framework entry, as ``anyio_backend`` is the event loop: every row runs on
every entry. fastmcp 4 runs on asyncio only; the mcp 2.x entries run on asyncio and trio in memory. Over
stdio and HTTP a row runs on asyncio only: uvicorn serves on asyncio alone, and the guard's code on trio is
the in-memory trio row's; over stdio trio would add only the SDK's transport on trio, not ours.

``make compat`` runs this file again at the other ends of the extras' ranges (fastmcp 4.2.3; the oldest mcp
2.x, which fastmcp 4 does not install beside: there MCP_ROOTS_COMPAT_NO_FASTMCP=1 leaves its entry out, and
only there).
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types
import pytest
from mcp import Client, ClientSession
from mcp.client.context import ClientRequestContext
from mcp.server import MCPServer, Server
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import Context
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from pydantic import FileUrl

from mcp_roots import RootsGuard, path_to_uri
from tests.conformance import (
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
from tests.kit import Tree

WITHOUT_FASTMCP = os.environ.get("MCP_ROOTS_COMPAT_NO_FASTMCP") == "1"
if not WITHOUT_FASTMCP:
    from fastmcp import Client as FastMCPClient
    from fastmcp import Context as FastMCPContext
    from fastmcp import FastMCP
    from fastmcp.client.transports import ClientTransport
else:  # the oldest mcp 2.x end of make compat: no fastmcp there, and no fastmcp entry
    ClientTransport = object  # type: ignore[assignment,misc]

MODES = {"legacy": "legacy", "modern": "auto"}  # "auto" negotiates 2026-07-28 in memory


def _text(blocks: Any) -> str:
    return "".join(getattr(b, "text", "") for b in blocks)


async def _serve_stdio(
    lowlevel: Server[Any], stdin: anyio.AsyncFile[str], stdout: anyio.AsyncFile[str]
) -> None:
    """What ``MCPServer.run_stdio_async`` does, over the given pipes instead of fds 0 and 1."""
    with anyio.CancelScope() as done:
        async with stdio_server(stdin=stdin, stdout=stdout) as (read, write):
            await lowlevel.run(read, write, lowlevel.create_initialization_options())
            done.cancel()  # the client's EOF ended the connection; the transport's writer waits for no more


def _client_end(
    stdin: anyio.AsyncFile[str], stdout: anyio.AsyncFile[str]
) -> AbstractAsyncContextManager[tuple[Any, Any]]:
    """The client's end of the pipes with mcp 2.x's message types (``conformance.client_end``)."""
    return client_end(
        stdin,
        stdout,
        lambda line: SessionMessage(mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)),
        lambda message: message.message.model_dump_json(by_alias=True, exclude_unset=True),
    )


def _lowlevel(server: Any) -> Server[Any]:
    return server._lowlevel_server if isinstance(server, MCPServer) else server


class _Mcp2Session(Session):
    def __init__(self, client: Client, paths: list[Path]) -> None:
        self.client = client
        self.paths = paths

    async def roots_changed(self) -> None:
        await self.client.send_roots_list_changed()

    async def prompt(self, name: str, **arguments: str) -> tuple[bool, str]:
        try:
            result = await self.client.get_prompt(name, arguments)
        except MCPError as exc:
            return True, exc.error.message
        return False, _text([m.content for m in result.messages][:1])

    async def input_schema(self, tool: str) -> dict[str, Any]:
        tools = (await self.client.list_tools()).tools
        return next(t.input_schema for t in tools if t.name == tool)

    async def call(self, tool: str, **arguments: Any) -> tuple[bool, str]:
        result = await self.client.call_tool(tool, arguments)
        return bool(result.is_error), _text(result.content)

    async def read(self, uri: str) -> tuple[bool, str]:
        try:
            result = await self.client.read_resource(uri)
        except MCPError as exc:
            return True, exc.error.message
        return False, _text(result.contents)


class _Mcp2Base(Harness):
    @asynccontextmanager
    async def target(self, server: Any, transport: str) -> AsyncIterator[Any]:
        """What ``mcp.Client`` connects to over ``transport``: the server itself (in memory), the client's
        end of the pipes the server is served on (stdio), the URL it is served at (HTTP)."""
        if transport == MEMORY:
            yield server
        elif transport == STDIO:
            async with over_pipes(functools.partial(_serve_stdio, _lowlevel(server))) as (stdin, stdout):
                yield _client_end(stdin, stdout)
        else:
            assert transport == HTTP, transport
            async with http_url(server, server.streamable_http_app) as url:
                yield url

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
        session: _Mcp2Session

        async def list_roots(
            context: ClientRequestContext,
        ) -> mcp_types.ListRootsResult | mcp_types.ErrorData:
            session.roots_requests += 1
            if failing:
                return mcp_types.ErrorData(code=mcp_types.METHOD_NOT_FOUND, message="roots are switched off")
            return mcp_types.ListRootsResult(
                roots=[mcp_types.Root(uri=FileUrl(path_to_uri(p)), name=p.name) for p in session.paths]
            )

        options: dict[str, Any] = {"list_roots_callback": list_roots} if roots is not None else {}
        session = _Mcp2Session(None, list(roots or []))  # type: ignore[arg-type]
        async with (
            self.target(server, transport or self.transport) as target,
            Client(target, mode=MODES[era], **options) as client,
        ):
            assert (client.session.protocol_version == "2026-07-28") == (era == "modern"), era
            session.client = client
            yield session


class Mcp2ServerHarness(_Mcp2Base):
    name = "mcp2-MCPServer"
    context_type = Context

    def server(self, guard: RootsGuard | None, *, install: bool = True) -> Any:
        server = MCPServer("conformance")
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


def _reader(path: Path) -> Callable[[], str]:
    return lambda: path.read_text()


class _Handlers:
    """A hand-written low-level server's own dispatch: tools and templates by name, as a user writes it."""

    def __init__(self) -> None:
        self.tools: dict[str, Callable[..., Any]] = {}
        self.templates: dict[str, Callable[..., Any]] = {}
        self.prompts: dict[str, Callable[..., Any]] = {}
        self.files: dict[str, Path] = {}

    async def get_prompt(
        self, ctx: ServerRequestContext[Any, Any], params: mcp_types.GetPromptRequestParams
    ) -> mcp_types.GetPromptResult:
        text = await self.prompts[params.name](**(params.arguments or {}))
        content = mcp_types.TextContent(type="text", text=text)
        return mcp_types.GetPromptResult(messages=[mcp_types.PromptMessage(role="user", content=content)])

    async def list_tools(self, ctx: ServerRequestContext[Any, Any], params: Any) -> mcp_types.ListToolsResult:
        schema = {"type": "object"}
        return mcp_types.ListToolsResult(
            tools=[mcp_types.Tool(name=n, input_schema=schema) for n in self.tools]
        )

    async def call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: mcp_types.CallToolRequestParams
    ) -> mcp_types.CallToolResult:
        try:
            fn = self.tools[params.name]
            arguments = dict(params.arguments or {})
            if "ctx" in inspect.signature(fn).parameters:
                arguments["ctx"] = ctx
            result = fn(**arguments)
            if inspect.isawaitable(result):
                result = await result
        except MCPError:
            raise  # the guard's request for the roots (2026-07-28)
        except Exception as exc:  # a careful handler answers every failure as a tool error
            return mcp_types.CallToolResult(
                content=[mcp_types.TextContent(type="text", text=str(exc))], is_error=True
            )
        if isinstance(result, mcp_types.CallToolResult):
            return result
        return mcp_types.CallToolResult(content=[mcp_types.TextContent(type="text", text=str(result))])

    async def read_resource(
        self, ctx: ServerRequestContext[Any, Any], params: mcp_types.ReadResourceRequestParams
    ) -> mcp_types.ReadResourceResult:
        uri = str(params.uri)
        if uri in self.files:
            text = self.files[uri].read_text()
        else:
            scheme, _, name = uri.partition("://")
            text = await self.templates[scheme + "://{name}"](name=name)
        return mcp_types.ReadResourceResult(contents=[mcp_types.TextResourceContents(uri=uri, text=text)])


class Mcp2LowLevelHarness(LowLevelHarness, _Mcp2Base):
    """A low-level Server whose handler dispatches to plain functions: ``@guard.paths`` on them works as
    on a framework's tools (the guard asks for the roots when the function is called)."""

    name = "mcp2-lowlevel-Server"
    context_type = ServerRequestContext

    def server(self, guard: RootsGuard | None, *, install: bool = True) -> Any:
        handlers = _Handlers()
        server: Server[Any] = Server(
            "conformance",
            on_list_tools=handlers.list_tools,
            on_call_tool=handlers.call_tool,
            on_read_resource=handlers.read_resource,
            on_get_prompt=handlers.get_prompt,
        )
        server.handlers = handlers  # type: ignore[attr-defined]
        if guard is not None and install:
            guard.install(server)
        return server


class _FastMCPSession(Session):
    def __init__(self, client: Any, paths: list[Path]) -> None:
        self.client = client
        self.paths = paths

    async def roots_changed(self) -> None:
        await self.client.send_roots_list_changed()

    async def prompt(self, name: str, **arguments: str) -> tuple[bool, str]:
        try:
            result = await self.client.get_prompt(name, arguments)
        except Exception as exc:  # fastmcp's client raises its own error type with the server's message
            return True, str(exc)
        return False, _text([m.content for m in result.messages][:1])

    async def input_schema(self, tool: str) -> dict[str, Any]:
        tools = await self.client.list_tools()
        return dict(next(t.input_schema for t in tools if t.name == tool))

    async def call(self, tool: str, **arguments: Any) -> tuple[bool, str]:
        result = await self.client.call_tool(tool, arguments, raise_on_error=False)
        return bool(result.is_error), _text(result.content)

    async def read(self, uri: str) -> tuple[bool, str]:
        try:
            contents = await self.client.read_resource(uri)
        except Exception as exc:  # fastmcp's client raises its own error type with the server's message
            return True, str(exc)
        return False, _text(contents)


class _PipeTransport(ClientTransport):
    """fastmcp's client over the client's end of the pipes (fastmcp's own transports spawn a process)."""

    def __init__(self, streams: Any) -> None:
        self.streams = streams

    @asynccontextmanager
    async def connect_session(
        self, *, transport_options: Any = None, **session_kwargs: Any
    ) -> AsyncIterator[Any]:
        session_class = getattr(transport_options, "session_class", ClientSession)
        async with (
            self.streams as (read, write),
            session_class(read_stream=read, write_stream=write, **session_kwargs) as session,
        ):
            yield session


async def _serve_fastmcp_stdio(
    server: Any, stdin: anyio.AsyncFile[str], stdout: anyio.AsyncFile[str]
) -> None:
    """What ``FastMCP.run_stdio_async`` does, over the given pipes instead of fds 0 and 1."""
    async with server._lifespan_manager():
        await _serve_stdio(server._mcp_server, stdin, stdout)


class FastMCP4Harness(Harness):
    name = "fastmcp4"
    context_type = None if WITHOUT_FASTMCP else FastMCPContext
    template_above_runs = False

    def server(self, guard: RootsGuard | None, *, install: bool = True) -> Any:
        server: FastMCP = FastMCP("conformance")
        if guard is not None and install:
            guard.install(server)
        return server

    def register(self, server: Any, fn: Callable[..., Any]) -> Any:
        return server.tool(fn)

    def register_template(self, server: Any, uri_template: str, fn: Callable[..., Any]) -> Any:
        return server.resource(uri_template)(fn)

    def register_prompt(self, server: Any, fn: Callable[..., Any]) -> Any:
        return server.prompt(fn)

    def register_file_resources(self, server: Any, paths: list[Path]) -> None:
        for path in paths:
            server.resource(path_to_uri(path))(_reader(path))

    @asynccontextmanager
    async def target(self, server: Any, transport: str) -> AsyncIterator[Any]:
        """What fastmcp's Client connects to over ``transport`` (as :meth:`_Mcp2Base.target`)."""
        if transport == MEMORY:
            yield server
        elif transport == STDIO:
            serve = functools.partial(_serve_fastmcp_stdio, server)
            async with over_pipes(serve) as (stdin, stdout):
                yield _PipeTransport(_client_end(stdin, stdout))
        else:
            assert transport == HTTP, transport
            async with http_url(server, server.http_app) as url:
                yield url

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
        session: _FastMCPSession

        async def list_roots(context: Any) -> list[mcp_types.Root]:
            session.roots_requests += 1
            if failing:
                raise RuntimeError("roots are switched off")  # fastmcp answers an error
            return [mcp_types.Root(uri=FileUrl(path_to_uri(p)), name=p.name) for p in session.paths]

        async with self.target(server, transport or self.transport) as target:
            client: FastMCPClient[Any] = FastMCPClient(
                target, roots=list_roots if roots is not None else None, mode=MODES[era]
            )
            session = _FastMCPSession(client, list(roots or []))
            async with client:
                yield session


HARNESSES: list[tuple[Harness, str]] = [
    (Mcp2ServerHarness(), "asyncio"),
    (Mcp2ServerHarness(), "trio"),
    (Mcp2LowLevelHarness(), "asyncio"),
    (Mcp2LowLevelHarness(), "trio"),
    *([] if WITHOUT_FASTMCP else [(FastMCP4Harness(), "asyncio")]),  # fastmcp 4 runs on asyncio only
]


@pytest.fixture
def adapter(request: pytest.FixtureRequest) -> tuple[Harness, str]:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def anyio_backend(adapter: tuple[Harness, str]) -> str:
    return adapter[1]


@pytest.fixture
def tree(tmp_path: Path) -> Tree:
    return Tree(tmp_path)


def test_every_entry_of_the_issue_is_in_the_table() -> None:
    expected = {"mcp2-MCPServer", "mcp2-lowlevel-Server"} | (set() if WITHOUT_FASTMCP else {"fastmcp4"})
    assert {h.name for h, _ in HARNESSES} == expected


#: (entry and backend, row, transport): every row in memory on each backend; the rows that name stdio and
#: HTTP over those too, on asyncio (the module's docstring says why).
CELLS = [
    ((harness, backend), name, transport)
    for harness, backend in HARNESSES
    for name, transports in TRANSPORTS.items()
    for transport in transports
    if transport == MEMORY or backend == "asyncio"
]


@pytest.mark.anyio
# The legacy era's list_changed is what the rows test; the SDKs warn that roots are deprecated (SEP-2577).
@pytest.mark.filterwarnings("ignore:The roots capability is deprecated")
@pytest.mark.parametrize(
    ("adapter", "row", "transport"),
    CELLS,
    ids=[f"{h.name}-{backend}-{name}-{t}" for (h, backend), name, t in CELLS],
    indirect=["adapter"],
)
async def test_conformance(
    adapter: tuple[Harness, str], row: str, transport: str, tree: Tree, caplog: pytest.LogCaptureFixture
) -> None:
    await ROWS[row](adapter[0].over(transport), tree, caplog)
