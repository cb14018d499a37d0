"""The adapter conformance table (tests/conformance.py) on mcp 2.x ``MCPServer``, mcp 2.x low-level
``Server`` and fastmcp 4.x, in memory, both protocol eras. (mcp 1.x: tests/mcp1/test_conformance_mcp1.py.)

The ``adapter`` fixture is the framework entry, as ``anyio_backend`` is the event loop: every row runs on
every entry. fastmcp 4 runs on asyncio only; the mcp 2.x entries run on asyncio and trio.

``make compat`` runs this file again at the other ends of the extras' ranges (fastmcp 4.2.3; the oldest mcp
2.x, which fastmcp 4 does not install beside: there MCP_ROOTS_COMPAT_NO_FASTMCP=1 leaves its entry out, and
only there).
"""

from __future__ import annotations

import inspect
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import mcp_types
import pytest
from mcp import Client
from mcp.client.context import ClientRequestContext
from mcp.server import MCPServer, Server
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPError

from mcp_roots import RootsGuard, path_to_uri

from .conformance import ROWS, Harness, Row, Session
from .tree import Tree

WITHOUT_FASTMCP = os.environ.get("MCP_ROOTS_COMPAT_NO_FASTMCP") == "1"
if not WITHOUT_FASTMCP:
    from fastmcp import Client as FastMCPClient
    from fastmcp import Context as FastMCPContext
    from fastmcp import FastMCP

MODES = {"legacy": "legacy", "modern": "auto"}  # "auto" negotiates 2026-07-28 in memory


def _text(blocks: Any) -> str:
    return "".join(getattr(b, "text", "") for b in blocks)


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
    async def session(
        self, server: Any, era: str, roots: list[Path] | None, *, failing: bool = False
    ) -> AsyncIterator[Session]:
        session: _Mcp2Session

        async def list_roots(
            context: ClientRequestContext,
        ) -> mcp_types.ListRootsResult | mcp_types.ErrorData:
            session.roots_requests += 1
            if failing:
                return mcp_types.ErrorData(code=mcp_types.METHOD_NOT_FOUND, message="roots are switched off")
            return mcp_types.ListRootsResult(
                roots=[mcp_types.Root(uri=path_to_uri(p), name=p.name) for p in session.paths]
            )

        options: dict[str, Any] = {"list_roots_callback": list_roots} if roots is not None else {}
        session = _Mcp2Session(None, list(roots or []))  # type: ignore[arg-type]
        async with Client(server, mode=MODES[era], **options) as client:
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


class Mcp2LowLevelHarness(_Mcp2Base):
    """A low-level Server whose handler dispatches to plain functions: ``@guard.paths`` on them works as
    on a framework's tools (the guard asks for the roots when the function is called)."""

    name = "mcp2-lowlevel-Server"
    context_type = ServerRequestContext
    registry = False

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

    def register(self, server: Any, fn: Callable[..., Any]) -> Any:
        server.handlers.tools[fn.__name__] = fn
        return fn

    def register_template(self, server: Any, uri_template: str, fn: Callable[..., Any]) -> Any:
        server.handlers.templates[uri_template] = fn
        return fn

    def register_prompt(self, server: Any, fn: Callable[..., Any]) -> Any:
        server.handlers.prompts[fn.__name__] = fn
        return fn

    def tool(
        self, server: Any, guard: RootsGuard | None, fn: Callable[..., Any], *names: str, order: str = "below"
    ) -> None:
        # No framework decorator to stand above or below: both orders register the guarded function.
        self.register(server, fn if guard is None else guard.paths(*names)(fn))

    def template(
        self, server: Any, guard: RootsGuard, fn: Callable[..., Any], *names: str, order: str = "below"
    ) -> None:
        self.register_template(server, "text://{name}", guard.paths(*names)(fn))

    def register_file_resources(self, server: Any, paths: list[Path]) -> None:
        for path in paths:
            server.handlers.files[path_to_uri(path)] = path


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


class FastMCP4Harness(Harness):
    name = "fastmcp4"
    context_type = None if WITHOUT_FASTMCP else FastMCPContext
    reads_modern = False
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
    async def session(
        self, server: Any, era: str, roots: list[Path] | None, *, failing: bool = False
    ) -> AsyncIterator[Session]:
        session: _FastMCPSession

        async def list_roots(context: Any) -> list[mcp_types.Root]:
            session.roots_requests += 1
            if failing:
                raise RuntimeError("roots are switched off")  # fastmcp answers an error
            return [mcp_types.Root(uri=path_to_uri(p), name=p.name) for p in session.paths]

        client = FastMCPClient(server, roots=list_roots if roots is not None else None, mode=MODES[era])  # type: ignore[call-arg]
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


@pytest.fixture(params=HARNESSES, ids=[f"{h.name}-{backend}" for h, backend in HARNESSES])
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


@pytest.mark.anyio
# The legacy era's list_changed is what the rows test; the SDKs warn that roots are deprecated (SEP-2577).
@pytest.mark.filterwarnings("ignore:The roots capability is deprecated")
@pytest.mark.parametrize("row", list(ROWS.values()), ids=list(ROWS))
async def test_conformance(
    adapter: tuple[Harness, str], row: Row, tree: Tree, caplog: pytest.LogCaptureFixture
) -> None:
    await row(adapter[0], tree, caplog)
