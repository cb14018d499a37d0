"""Folders by the user's consent on mcp 1.x: a FastMCP server with ``RootsGuard(consent=True)`` and the mcp
1.x client's own ``elicitation_callback``, in memory on asyncio and trio (legacy era only): accept, decline,
a read grant and a tool that writes, no elicitation, a client with roots; a ``resources/read`` asks too.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
from mcp import ClientSession
from mcp.server.fastmcp import Context, FastMCP
from mcp.server.lowlevel import Server
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.shared.exceptions import McpError
from mcp.shared.memory import create_connected_server_and_client_session

from mcp_roots import RootsGuard, path_to_uri, uri_to_path
from tests.kit import file_reader

pytestmark = pytest.mark.anyio


@pytest.fixture
def ceiling(tmp_path: Path) -> Path:
    top = tmp_path.resolve() / "ceiling"
    for name in ("a", "b"):
        (top / name).mkdir(parents=True)
        (top / name / "f.txt").write_text(f"in {name}")
    (tmp_path / "outside.txt").write_text("SECRET")
    return top


def server(ceiling: Path) -> FastMCP:
    guard = RootsGuard(ceiling=ceiling, consent=True)
    app = FastMCP("consent-mcp1")

    @app.tool(annotations=types.ToolAnnotations(readOnlyHint=True))
    @guard.paths("path")
    async def read(path: str, ctx: Context[Any, Any, Any]) -> str:
        return (await guard.roots(ctx)).read_text(path)

    @app.tool()
    @guard.paths("path")
    async def write(path: str, text: str, ctx: Context[Any, Any, Any]) -> str:
        (await guard.roots(ctx)).write_text(path, text)
        return "written"

    guard.install(app)
    return app


class User:
    """The user behind the mcp 1.x client's form: the next of ``answers`` (an action, or an accept's
    ``(folder, access)``), each question kept."""

    def __init__(self, *answers: str | tuple[Path, str]) -> None:
        self.answers = list(answers)
        self.questions: list[Any] = []

    async def __call__(self, context: Any, params: Any) -> types.ElicitResult:
        self.questions.append(params)
        answer = self.answers.pop(0) if self.answers else "decline"
        if isinstance(answer, tuple):
            content: dict[str, Any] = {"folder": str(answer[0]), "access": answer[1]}
            return types.ElicitResult(action="accept", content=content)
        return types.ElicitResult(action=answer)  # type: ignore[arg-type]

    def folders(self, index: int = -1) -> list[str]:
        return list(self.questions[index].requestedSchema["properties"]["folder"]["enum"])


@asynccontextmanager
async def connected(ceiling: Path, **callbacks: Any) -> AsyncIterator[ClientSession]:
    async with create_connected_server_and_client_session(server(ceiling), **callbacks) as client:
        yield client


async def call(client: ClientSession, tool: str, **arguments: str) -> tuple[bool, str]:
    result = await client.call_tool(tool, arguments)
    first = result.content[0] if result.content else None
    text = first.text if isinstance(first, types.TextContent) else ""
    return bool(result.isError), text


async def test_accept_grants_the_folder_and_no_further(ceiling: Path) -> None:
    user = User((ceiling / "a", "read"), "decline")
    async with connected(ceiling, elicitation_callback=user) as client:
        assert await call(client, "read", path=str(ceiling / "a" / "f.txt")) == (False, "in a")
        assert user.folders(0) == [str(ceiling / "a"), str(ceiling)]
        assert "consent-mcp1" in user.questions[0].message
        assert await call(client, "read", path=str(ceiling / "a" / "f.txt")) == (False, "in a")
        assert len(user.questions) == 1  # the grant serves the next call: not asked again
        error, text = await call(client, "read", path=str(ceiling / "b" / "f.txt"))
        assert error
        assert "in b" not in text
        assert len(user.questions) == 2  # beyond the folder granted: asked, and declined
        error, text = await call(client, "read", path=str(ceiling.parent / "outside.txt"))
        assert error
        assert "SECRET" not in text
        assert len(user.questions) == 2  # outside the ceiling: never offered


async def test_decline_refuses_and_is_not_asked_again(ceiling: Path) -> None:
    user = User("decline")
    async with connected(ceiling, elicitation_callback=user) as client:
        for _ in range(2):
            error, text = await call(client, "read", path=str(ceiling / "a" / "f.txt"))
            assert error
            assert "declined" in text
    assert len(user.questions) == 1


async def test_a_read_grant_refuses_a_tool_that_writes(ceiling: Path) -> None:
    user = User((ceiling / "a", "read"))
    async with connected(ceiling, elicitation_callback=user) as client:
        error, text = await call(client, "write", path=str(ceiling / "a" / "new.txt"), text="x")
        assert error
        assert "reading only" in text
    assert not (ceiling / "a" / "new.txt").exists()


async def test_a_client_without_elicitation_is_refused_in_words(ceiling: Path) -> None:
    async with connected(ceiling) as client:
        error, text = await call(client, "read", path=str(ceiling / "a" / "f.txt"))
    assert error
    assert "cannot be asked" in text


async def test_a_client_with_roots_is_never_asked(ceiling: Path) -> None:
    user = User((ceiling / "a", "read"))

    async def roots(context: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri=path_to_uri(ceiling / "b"))])  # type: ignore[arg-type]

    async with connected(ceiling, elicitation_callback=user, list_roots_callback=roots) as client:
        assert await call(client, "read", path=str(ceiling / "b" / "f.txt")) == (False, "in b")
        error, _ = await call(client, "read", path=str(ceiling / "a" / "f.txt"))
        assert error
    assert user.questions == []


def read_server(ceiling: Path) -> FastMCP:
    """:func:`server` with each ``f.txt`` of the ceiling and one outside it as ``file:`` resources."""
    app = server(ceiling)
    for path in (ceiling / "a" / "f.txt", ceiling / "b" / "f.txt", ceiling.parent / "outside.txt"):
        app.resource(path_to_uri(path), name=path.name)(file_reader(path))
    return app


async def read(client: ClientSession, path: Path) -> tuple[bool, str]:
    try:
        result = await client.read_resource(path_to_uri(path))  # type: ignore[arg-type]
    except McpError as exc:
        return True, exc.error.message
    first = result.contents[0]
    return False, first.text if isinstance(first, types.TextResourceContents) else ""


async def test_a_resources_read_asks_too(ceiling: Path) -> None:
    user = User((ceiling / "a", "read"), "decline")
    async with create_connected_server_and_client_session(
        read_server(ceiling), elicitation_callback=user
    ) as client:
        assert await read(client, ceiling / "a" / "f.txt") == (False, "in a")
        assert user.folders(0) == [str(ceiling / "a"), str(ceiling)]
        assert "resource" in user.questions[0].message
        assert await call(client, "read", path=str(ceiling / "a" / "f.txt")) == (False, "in a")
        assert len(user.questions) == 1  # the grant serves a tool call in the folder
        error, text = await read(client, ceiling / "b" / "f.txt")
        assert error
        assert "declined" in text
        error, text = await read(client, ceiling.parent / "outside.txt")
        assert error
        assert "SECRET" not in text
        assert len(user.questions) == 2  # outside the ceiling: never asked
    async with create_connected_server_and_client_session(read_server(ceiling)) as client:
        error, text = await read(client, ceiling / "a" / "f.txt")
    assert error
    assert "cannot be asked" in text


def lowlevel_read_server(ceiling: Path) -> Server[Any, Any]:
    """A low-level server whose handler reads any ``file:`` URI it is given (the guard checks it first)."""
    guard = RootsGuard(ceiling=ceiling, consent=True)
    app: Server[Any, Any] = Server("consent-lowlevel")
    guard.install(app)

    @app.read_resource()
    async def read_resource(uri: Any) -> list[ReadResourceContents]:
        text = await anyio.Path(uri_to_path(str(uri))).read_text()
        return [ReadResourceContents(content=text, mime_type="text/plain")]

    return app


async def test_a_low_level_servers_resources_read_asks_too(ceiling: Path) -> None:
    user = User((ceiling / "a", "read"))
    app = lowlevel_read_server(ceiling)
    async with create_connected_server_and_client_session(app, elicitation_callback=user) as client:
        assert await read(client, ceiling / "a" / "f.txt") == (False, "in a")
        assert len(user.questions) == 1
        error, text = await read(client, ceiling / "b" / "f.txt")  # declined (no answers left)
        assert error
        assert "declined" in text
        error, text = await read(client, ceiling.parent / "outside.txt")
        assert error
        assert "SECRET" not in text
        assert len(user.questions) == 2
