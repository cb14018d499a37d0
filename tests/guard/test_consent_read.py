"""Folders by the user's consent for a ``resources/read`` of a ``file:`` URI, with the official Python SDK
client on both eras, in process, over stdio and HTTP: accept, decline, a client that cannot be asked, the
ceiling, a client with roots, and a tool call's sealed answer replayed on a read.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from mcp.server import MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import ElicitResult, InputRequiredResult, InputResponses, TextResourceContents, ToolAnnotations

from mcp_roots import RootsGuard, path_to_uri
from mcp_roots.roots._facts import CONSENT_INPUT_KEY
from tests import forkserver
from tests.kit import (
    ConsentTree as Tree,
)
from tests.kit import (
    FormUser,
    HttpServer,
    RootsCallback,
    file_reader,
    launch_http,
    text_of,
)
from tests.kit import (
    read_file_uri as read,
)

pytestmark = pytest.mark.anyio

SERVERS = Path(__file__).resolve().parents[1] / "servers"
ERAS = ["legacy", "auto"]  # "auto": the SDK's in-process pair speaks 2026-07-28


@pytest.fixture
def tree(tmp_path: Path) -> Tree:
    return Tree(tmp_path)


def make_server(guard: RootsGuard | None, tree: Tree) -> MCPServer:
    """The tree's files as ``file:`` resources, and a read tool; ``guard`` None: the naive control."""
    server = MCPServer("notes")
    for path in tree.files:
        server.resource(path_to_uri(path), name=path.name)(file_reader(path))
    if guard is not None:

        @server.tool(annotations=ToolAnnotations(read_only_hint=True))
        @guard.paths("path")
        def read(path: str) -> str:
            """Read a text file."""
            return Path(path).read_text()

        guard.install(server)
    return server


def consent_guard(tree: Tree, *roots: Path) -> RootsGuard:
    return RootsGuard(list(roots), ceiling=tree.ceiling, consent=True)


@asynccontextmanager
async def connect(
    server: MCPServer, mode: str, user: FormUser | None, **kwargs: Any
) -> AsyncIterator[Client]:
    async with Client(server, mode=mode, elicitation_callback=user, **kwargs) as client:
        assert (client.protocol_version == "2026-07-28") is (mode == "auto")
        yield client


async def call(client: Client, path: Path) -> tuple[bool, str]:
    result = await client.call_tool("read", {"path": str(path)})
    return bool(result.is_error), text_of(result)


@pytest.mark.parametrize("mode", ERAS)
async def test_accept_grants_the_folder_for_the_next_reads_and_tool_calls(tree: Tree, mode: str) -> None:
    user = FormUser((str(tree.b), "read"), "decline")
    async with connect(make_server(consent_guard(tree), tree), mode, user) as client:
        assert await read(client, tree.b / "f.txt") == (False, "in b")
        assert len(user.questions) == 1
        assert user.offered(0) == ([str(tree.b), str(tree.a), str(tree.ceiling)], ["read"])
        message = user.questions[0].message
        assert "notes" in message
        assert "resource" in message
        assert path_to_uri(tree.b / "f.txt") in message
        # the grant serves the next read in the folder and a tool call there, with no question
        assert await read(client, tree.b / "h.txt") == (False, "also in b")
        assert await call(client, tree.b / "f.txt") == (False, "in b")
        assert len(user.questions) == 1
        # beyond the folder granted: asked again (declined here), refused
        refused, text = await read(client, tree.other / "g.txt")
        assert refused
        assert "declined" in text
        assert "in other" not in text
        assert len(user.questions) == 2


@pytest.mark.parametrize("mode", ERAS)
async def test_decline_refuses_the_read_and_is_not_asked_again(tree: Tree, mode: str) -> None:
    user = FormUser("decline")
    async with connect(make_server(consent_guard(tree), tree), mode, user) as client:
        refused, text = await read(client, tree.b / "f.txt")
        assert refused
        assert "the user declined access to" in text
        assert str(tree.b) in text
        refused, text = await read(client, tree.b / "h.txt")
        assert refused
        assert "not asked again" in text
        assert "also in b" not in text
        assert len(user.questions) == 1


@pytest.mark.parametrize("mode", ERAS)
async def test_a_client_without_elicitation_is_refused_in_words(tree: Tree, mode: str) -> None:
    async with connect(make_server(consent_guard(tree), tree), mode, None) as client:
        refused, text = await read(client, tree.b / "f.txt")
        assert refused
        assert "this client cannot be asked for a folder" in text
        assert "in b" not in text
    # a folder granted up front is still served to it
    async with connect(make_server(consent_guard(tree, tree.b), tree), mode, None) as client:
        assert await read(client, tree.b / "f.txt") == (False, "in b")


@pytest.mark.parametrize("mode", ERAS)
async def test_nothing_outside_the_ceiling_is_asked_or_read(tree: Tree, mode: str) -> None:
    user = FormUser((str(tree.ceiling), "read"))
    async with connect(make_server(consent_guard(tree), tree), mode, user) as client:
        for path in (tree.outside / "secret.txt", tree.ceiling / "link" / "secret.txt"):
            refused, text = await read(client, path)
            assert refused
            assert "TOP SECRET" not in text
        assert user.questions == []  # never asked about a path outside the ceiling, through a link or not
        assert await read(client, tree.b / "f.txt") == (False, "in b")  # inside: asked, granted
        # the whole ceiling granted: still nothing beyond it, through the link
        refused, text = await read(client, tree.ceiling / "link" / "secret.txt")
        assert refused
        assert "TOP SECRET" not in text
        assert len(user.questions) == 1
    # the control: the same server without the guard reads it through the link
    async with connect(make_server(None, tree), mode, None) as client:
        assert await read(client, tree.ceiling / "link" / "secret.txt") == (False, "TOP SECRET")


@pytest.mark.parametrize("mode", ERAS)
async def test_a_client_that_declared_roots_is_never_asked(tree: Tree, mode: str) -> None:
    server = make_server(consent_guard(tree), tree)
    user = FormUser((str(tree.ceiling), "read"))
    async with connect(server, mode, user, list_roots_callback=RootsCallback(tree.a)) as client:
        assert await read(client, tree.b / "f.txt") == (False, "in b")
        refused, text = await read(client, tree.other / "g.txt")
        assert refused
        assert "in other" not in text
    assert user.questions == []
    # the control: the same read from a client without roots is asked
    async with connect(server, mode, user) as client:
        assert await read(client, tree.other / "g.txt") == (False, "in other")
    assert len(user.questions) == 1


def granted(folder: Path) -> InputResponses:
    return {
        CONSENT_INPUT_KEY: ElicitResult(action="accept", content={"folder": str(folder), "access": "read"})
    }


async def test_a_tool_calls_answer_replayed_on_a_read_grants_nothing(tree: Tree) -> None:
    path = tree.b / "f.txt"
    uri = path_to_uri(path)
    async with connect(make_server(consent_guard(tree), tree), "auto", FormUser()) as client:
        # a question minted for the tool call on the same path, the same folders and access
        asked = await client.session.call_tool("read", {"path": str(path)}, allow_input_required=True)
        assert isinstance(asked, InputRequiredResult)
        assert asked.request_state is not None
        with pytest.raises(MCPError, match="another question, caller or method"):
            await client.read_resource(
                uri, input_responses=granted(tree.b), request_state=asked.request_state
            )
        # the read's own question, answered: granted (so the refusal above was the binding's)
        own = await client.session.read_resource(uri, allow_input_required=True)
        assert isinstance(own, InputRequiredResult)
        assert own.input_requests is not None
        assert list(own.input_requests) == [CONSENT_INPUT_KEY]
        # and the read's state replayed on the tool call: refused too
        result = await client.call_tool(
            "read", {"path": str(path)}, input_responses=granted(tree.b), request_state=own.request_state
        )
        assert result.is_error
        assert "another question, caller or method" in text_of(result)
        answered = await client.read_resource(
            uri, input_responses=granted(tree.b), request_state=own.request_state
        )
        (content,) = answered.contents
        assert isinstance(content, TextResourceContents)
        assert content.text == "in b"


@pytest.mark.parametrize("mode", ERAS)
async def test_over_stdio(tree: Tree, mode: str) -> None:
    resources = [arg for path in tree.files for arg in ("--resource", str(path))]
    command = forkserver.command(
        str(SERVERS / "consent_server.py"), "--ceiling", str(tree.ceiling), *resources
    )
    params = StdioServerParameters(command=command[0], args=command[1:])
    user = FormUser((str(tree.a), "read"), "decline")
    async with Client(params, mode=mode, elicitation_callback=user) as client:
        assert (client.protocol_version == "2026-07-28") is (mode == "auto")
        assert await read(client, tree.b / "f.txt") == (False, "in b")
        assert await read(client, tree.b / "h.txt") == (False, "also in b")
        assert await call(client, tree.b / "f.txt") == (False, "in b")
        assert len(user.questions) == 1
        refused, text = await read(client, tree.other / "g.txt")
        assert refused
        assert "declined" in text
        refused, text = await read(client, tree.ceiling / "link" / "secret.txt")
        assert refused
        assert "TOP SECRET" not in text
        assert len(user.questions) == 2


@pytest.fixture(scope="module")
def http_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Tree, HttpServer]]:
    tree = Tree(tmp_path_factory.mktemp("consent-read-http"))
    resources = [arg for path in tree.files for arg in ("--resource", str(path))]
    command = [sys.executable, str(SERVERS / "consent_server.py")]
    with launch_http(command, "--ceiling", str(tree.ceiling), *resources) as server:
        yield tree, server


@pytest.mark.parametrize("mode", ERAS)
async def test_over_streamable_http(http_server: tuple[Tree, HttpServer], mode: str) -> None:
    tree, server = http_server
    user = FormUser((str(tree.a), "read"), (str(tree.a), "read"))
    async with Client(server.url, mode=mode, elicitation_callback=user) as client:
        assert (client.protocol_version == "2026-07-28") is (mode == "auto")
        assert await read(client, tree.b / "f.txt") == (False, "in b")
        assert user.folders(0) == [str(tree.b), str(tree.a), str(tree.ceiling)]
        assert await read(client, tree.b / "h.txt") == (False, "also in b")
        # legacy: the session keeps the grant; 2026-07-28 with no authenticated caller: each request is its
        # own, so nothing is kept and the user is asked again
        assert len(user.questions) == (1 if mode == "legacy" else 2)
        refused, text = await read(client, tree.ceiling / "link" / "secret.txt")
        assert refused
        assert "TOP SECRET" not in text
