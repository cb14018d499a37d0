"""Folders by consent with fastmcp 4's client (its elicitation handler), accept and decline, for a tool call
and a ``resources/read``: against a fastmcp 4 server and an ``mcp`` 2.x server, on both eras. On asyncio only,
as fastmcp 4 itself is.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mcp_types
import pytest
from fastmcp import Client, FastMCP
from fastmcp.client.elicitation import ElicitResult
from mcp.server import MCPServer
from mcp.shared.exceptions import MCPError

from mcp_roots import RootsGuard, path_to_uri
from tests.kit import file_reader

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # fastmcp 4 runs on asyncio only


class User:
    """A fastmcp elicitation handler: accepts the folder it is told (None: declines), recording each
    question."""

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder
        self.messages: list[str] = []

    async def __call__(self, message: str, response_type: Any, params: Any, context: Any) -> Any:
        self.messages.append(message)
        if self.folder is None:
            return ElicitResult(action="decline")
        return {"folder": str(self.folder), "access": "read"}


def tree(base: Path) -> tuple[Path, Path, Path]:
    ceiling = base.resolve() / "ceiling"
    (ceiling / "a").mkdir(parents=True)
    (ceiling / "a" / "f.txt").write_text("in a")
    (ceiling / "other").mkdir()
    (ceiling / "other" / "g.txt").write_text("in other")
    return ceiling, ceiling / "a", ceiling / "other"


def fastmcp_server(guard: RootsGuard) -> FastMCP:
    server: FastMCP = FastMCP("notes")
    guard.install(server)

    @server.tool(annotations=mcp_types.ToolAnnotations(read_only_hint=True))
    @guard.paths("path")
    def read(path: str) -> str:
        return Path(path).read_text()

    return server


def mcp2_server(guard: RootsGuard) -> MCPServer:
    server = MCPServer("notes")

    @server.tool(annotations=mcp_types.ToolAnnotations(read_only_hint=True))
    @guard.paths("path")
    def read(path: str) -> str:
        return Path(path).read_text()

    guard.install(server)
    return server


async def read(client: Client[Any], path: Path) -> tuple[bool, str]:
    result = await client.call_tool("read", {"path": str(path)}, raise_on_error=False)
    text = result.content[0].text if result.content else ""  # type: ignore[union-attr]
    return bool(result.is_error), str(text)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
@pytest.mark.parametrize("kind", ["fastmcp4", "mcp2"])
async def test_fastmcp_client_accept_then_decline(tmp_path: Path, kind: str, mode: str) -> None:
    ceiling, a, other = tree(tmp_path)
    guard = RootsGuard(ceiling=ceiling, consent=True, environ={}, user_config_dir=tmp_path / "none")
    server = fastmcp_server(guard) if kind == "fastmcp4" else mcp2_server(guard)
    user = User(a)
    async with Client(server, mode=mode, elicitation_handler=user) as client:
        assert (client.protocol_version == "2026-07-28") is (mode == "auto")
        assert await read(client, a / "f.txt") == (False, "in a")
        assert await read(client, a / "f.txt") == (False, "in a")
        assert len(user.messages) == 1
        assert str(a) in user.messages[0]
        assert "The MCP server notes asks" in user.messages[0]
        user.folder = None  # the user declines the next question
        refused, text = await read(client, other / "g.txt")
        assert refused
        assert "declined" in text
        assert "in other" not in text
        assert len(user.messages) == 2


def with_resources(server: Any, *paths: Path) -> Any:
    """``server`` (fastmcp 4 or mcp 2.x) serving each of ``paths`` as a ``file:`` resource."""
    for path in paths:
        server.resource(path_to_uri(path), name=path.name)(file_reader(path))
    return server


async def read_resource(client: Client[Any], path: Path) -> tuple[bool, str]:
    try:
        contents = await client.read_resource(path_to_uri(path))
    except MCPError as exc:
        return True, exc.error.message
    return False, str(getattr(contents[0], "text", ""))


@pytest.mark.parametrize("mode", ["legacy", "auto"])
@pytest.mark.parametrize("kind", ["fastmcp4", "mcp2"])
async def test_a_resources_read_asks_too(tmp_path: Path, kind: str, mode: str) -> None:
    ceiling, a, other = tree(tmp_path)
    guard = RootsGuard(ceiling=ceiling, consent=True, environ={}, user_config_dir=tmp_path / "none")
    server = fastmcp_server(guard) if kind == "fastmcp4" else mcp2_server(guard)
    with_resources(server, a / "f.txt", other / "g.txt")
    user = User(a)
    async with Client(server, mode=mode, elicitation_handler=user) as client:
        assert await read_resource(client, a / "f.txt") == (False, "in a")
        assert len(user.messages) == 1
        assert "resource" in user.messages[0]
        assert await read(client, a / "f.txt") == (False, "in a")  # the grant serves a tool call
        assert len(user.messages) == 1
        user.folder = None
        refused, text = await read_resource(client, other / "g.txt")
        assert refused
        assert "declined" in text
        assert "in other" not in text
        assert len(user.messages) == 2
