"""A ``resources/read`` of a ``file:`` URI on a fastmcp 4 server, on 2026-07-28, with the official Python SDK
client in process and over stdio: the client's roots asked and checked, and folders by the user's consent.
On asyncio only, as fastmcp 4 itself is. (fastmcp's own client: the conformance table and
test_consent_fastmcp4.py.)
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from fastmcp import FastMCP
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import ElicitResult, InputRequiredResult, InputResponses, TextResourceContents, ToolAnnotations

from mcp_roots import RootsGuard, path_to_uri
from mcp_roots.roots._facts import CONSENT_INPUT_KEY
from tests.adapters.test_conformance import _client_end, _serve_fastmcp_stdio
from tests.conformance import over_pipes
from tests.kit import ConsentTree as Tree
from tests.kit import FormUser, RootsCallback, file_reader
from tests.kit import read_file_uri as read

pytestmark = pytest.mark.anyio

TRANSPORTS = ["memory", "stdio"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # fastmcp 4 runs on asyncio only


@pytest.fixture
def tree(tmp_path: Path) -> Tree:
    return Tree(tmp_path)


def make_server(guard: RootsGuard | None, tree: Tree) -> FastMCP:
    """The tree's files as ``file:`` resources on a fastmcp 4 server; ``guard`` None: the naive control."""
    server: FastMCP = FastMCP("notes")
    if guard is not None:
        guard.install(server)

        @server.tool(annotations=ToolAnnotations(read_only_hint=True))
        @guard.paths("path")
        def read(path: str) -> str:
            """Read a text file."""
            return Path(path).read_text()

    for path in tree.files:
        server.resource(path_to_uri(path), name=path.name)(file_reader(path))
    return server


def make_guard(tree: Tree, **options: Any) -> RootsGuard:
    return RootsGuard(ceiling=tree.ceiling, environ={}, user_config_dir=tree.ceiling / "none", **options)


@asynccontextmanager
async def connect(server: FastMCP, transport: str, **callbacks: Any) -> AsyncIterator[Client]:
    """The SDK's client on 2026-07-28, to ``server`` in process or over a pair of OS pipes (stdio)."""
    if transport == "memory":
        async with server._lifespan_manager(), Client(server._mcp_server, mode="auto", **callbacks) as client:
            assert client.protocol_version == "2026-07-28"
            yield client
        return
    async with (
        over_pipes(functools.partial(_serve_fastmcp_stdio, server)) as (stdin, stdout),
        Client(_client_end(stdin, stdout), mode="auto", **callbacks) as client,
    ):
        assert client.protocol_version == "2026-07-28"
        yield client


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_the_clients_roots_are_asked_and_checked(tree: Tree, transport: str) -> None:
    roots = RootsCallback(tree.a)
    async with connect(make_server(make_guard(tree), tree), transport, list_roots_callback=roots) as client:
        assert await read(client, tree.b / "f.txt") == (False, "in b")
        assert roots.calls == 1  # asked with the read (an input request), answered on the retry
        for path in (tree.other / "g.txt", tree.outside / "secret.txt", tree.ceiling / "link" / "secret.txt"):
            refused, text = await read(client, path)
            assert refused, path
            assert "outside the allowed roots" in text
            assert "in other" not in text
            assert "TOP SECRET" not in text
    # the control: the same server without the guard serves them
    async with connect(make_server(None, tree), transport, list_roots_callback=roots) as client:
        assert await read(client, tree.other / "g.txt") == (False, "in other")
        assert await read(client, tree.ceiling / "link" / "secret.txt") == (False, "TOP SECRET")


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_accept_serves_the_read_and_the_next(tree: Tree, transport: str) -> None:
    user = FormUser((str(tree.b), "read"), "decline")
    guard = make_guard(tree, consent=True)
    async with connect(make_server(guard, tree), transport, elicitation_callback=user) as client:
        assert await read(client, tree.b / "f.txt") == (False, "in b")
        assert len(user.questions) == 1
        message = user.questions[0].message
        assert "notes" in message
        assert "resource" in message
        assert path_to_uri(tree.b / "f.txt") in message
        assert await read(client, tree.b / "h.txt") == (
            False,
            "also in b",
        )  # the grant serves it, unasked
        assert len(user.questions) == 1
        refused, text = await read(client, tree.other / "g.txt")  # beyond the grant: asked, declined
        assert refused
        assert "declined" in text
        assert "in other" not in text
        assert len(user.questions) == 2


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_decline_refuses_the_read(tree: Tree, transport: str) -> None:
    user = FormUser("decline")
    guard = make_guard(tree, consent=True)
    async with connect(make_server(guard, tree), transport, elicitation_callback=user) as client:
        refused, text = await read(client, tree.b / "f.txt")
        assert refused
        assert "the user declined access to" in text
        assert "in b" not in text
        refused, text = await read(client, tree.b / "h.txt")
        assert refused
        assert "not asked again" in text
        assert len(user.questions) == 1


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_nothing_outside_the_ceiling_is_asked_or_read(tree: Tree, transport: str) -> None:
    user = FormUser((str(tree.ceiling), "read"))
    guard = make_guard(tree, consent=True)
    async with connect(make_server(guard, tree), transport, elicitation_callback=user) as client:
        for path in (tree.outside / "secret.txt", tree.ceiling / "link" / "secret.txt"):
            refused, text = await read(client, path)
            assert refused
            assert "TOP SECRET" not in text
        assert user.questions == []  # never asked about a path outside the ceiling, through a link or not
        assert await read(client, tree.b / "f.txt") == (False, "in b")  # inside: asked, granted
        refused, text = await read(client, tree.ceiling / "link" / "secret.txt")  # the whole ceiling granted
        assert refused
        assert "TOP SECRET" not in text
        assert len(user.questions) == 1
    # the control: the same server without the guard reads it through the link
    async with connect(make_server(None, tree), transport) as client:
        assert await read(client, tree.ceiling / "link" / "secret.txt") == (False, "TOP SECRET")


def granted(folder: Path) -> InputResponses:
    return {
        CONSENT_INPUT_KEY: ElicitResult(action="accept", content={"folder": str(folder), "access": "read"})
    }


async def test_a_tool_calls_answer_replayed_on_a_read_grants_nothing(tree: Tree) -> None:
    path = tree.b / "f.txt"
    uri = path_to_uri(path)
    guard = make_guard(tree, consent=True)
    async with connect(make_server(guard, tree), "memory", elicitation_callback=FormUser()) as client:
        # a question minted for the tool call on the same path, the same folders and access
        asked = await client.session.call_tool("read", {"path": str(path)}, allow_input_required=True)
        assert isinstance(asked, InputRequiredResult)
        assert asked.request_state is not None
        with pytest.raises(MCPError) as refused:
            await client.read_resource(
                uri, input_responses=granted(tree.b), request_state=asked.request_state
            )
        # fastmcp seals requestState with the SDK's boundary, bound to the method and URI: it refuses first
        assert "requestState" in refused.value.error.message
        # the read's own question, answered: served (so the refusal above was the binding's)
        own = await client.session.read_resource(uri, allow_input_required=True)
        assert isinstance(own, InputRequiredResult)
        assert own.input_requests is not None
        assert list(own.input_requests) == [CONSENT_INPUT_KEY]
        answered = await client.read_resource(
            uri, input_responses=granted(tree.b), request_state=own.request_state
        )
        (content,) = answered.contents
        assert isinstance(content, TextResourceContents)
        assert content.text == "in b"
