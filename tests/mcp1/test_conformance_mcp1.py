"""The adapter conformance table (tests/conformance.py) on mcp 1.x ``FastMCP``, in memory (legacy era: the
only one mcp 1.x speaks). Runs in .venv-mcp1 (`make pytest-mcp1`), on asyncio and trio."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import mcp.types as types
import pytest
from mcp.client.session import ClientSession
from mcp.server.fastmcp import Context, FastMCP
from mcp.shared.exceptions import McpError
from mcp.shared.memory import create_connected_server_and_client_session
from pydantic import AnyUrl

from mcp_roots import RootsGuard, path_to_uri

from ..conformance import ROWS, Harness, Row, Session
from ..tree import Tree


def _text(blocks: Any) -> str:
    return "".join(getattr(b, "text", "") for b in blocks)


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
        self, server: Any, era: str, roots: list[Path] | None, *, failing: bool = False
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
        async with create_connected_server_and_client_session(
            server, list_roots_callback=list_roots if roots is not None else None
        ) as client:
            session.session = client
            yield session


def _reader(path: Path) -> Callable[[], str]:
    return lambda: path.read_text()


@pytest.fixture
def adapter() -> Harness:
    return Mcp1FastMCPHarness()


@pytest.fixture
def tree(tmp_path: Path) -> Tree:
    return Tree(tmp_path)


@pytest.mark.anyio
@pytest.mark.parametrize("row", list(ROWS.values()), ids=list(ROWS))
async def test_conformance(adapter: Harness, row: Row, tree: Tree, caplog: pytest.LogCaptureFixture) -> None:
    await row(adapter, tree, caplog)
