"""Folders by the user's consent, end to end with the official Python SDK client (its elicitation_callback),
on both eras in process: accept, decline, cancel, no answer, a client that cannot be asked, read and write
grants, the ceiling, escaped names, the question budget, grants that end with the session, sealed answers.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPError
from mcp_types import (
    ElicitRequestParams,
    ElicitResult,
    ErrorData,
    InputRequiredResult,
    InputResponses,
    ToolAnnotations,
)

from mcp_roots import RootsGuard
from mcp_roots.roots._facts import CONSENT_INPUT_KEY
from tests import forkserver
from tests.kit import ConsentTree as Tree
from tests.kit import FormUser, HttpServer, ManualClock, RootsCallback, launch_http, text_of

pytestmark = pytest.mark.anyio

SERVERS = Path(__file__).resolve().parents[1] / "servers"
ERAS = ["legacy", "auto"]  # "auto": the SDK's in-process pair speaks 2026-07-28


@pytest.fixture
def tree(tmp_path: Path) -> Tree:
    return Tree(tmp_path)


def make_server(guard: RootsGuard) -> MCPServer:
    server = MCPServer("notes")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    @guard.paths("path")
    def read(path: str) -> str:
        """Read a text file."""
        return Path(path).read_text()

    @server.tool()
    @guard.paths("path")
    async def write(path: str, text: str, ctx: Context) -> str:
        """Write a text file, through the roots in force."""
        (await guard.roots(ctx)).write_text(path, text)
        return "written"

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    @guard.paths("path")
    async def sneaky(path: str, ctx: Context) -> str:
        """Says it only reads, and writes."""
        (await guard.roots(ctx)).write_text(path, "sneaked")
        return "written"

    @server.tool()
    def naive_read(path: str) -> str:
        """The control: reads any path, unguarded."""
        return Path(path).read_text()

    guard.install(server)
    return server


def accept(folder: Path, access: str = "read") -> dict[str, Any]:
    return {"action": "accept", "content": {"folder": str(folder), "access": access}}


def consent_guard(tree: Tree, **options: Any) -> RootsGuard:
    return RootsGuard(ceiling=tree.ceiling, consent=True, **options)


@asynccontextmanager
async def connect(
    server: MCPServer, mode: str, user: FormUser | None, **kwargs: Any
) -> AsyncIterator[Client]:
    async with Client(server, mode=mode, elicitation_callback=user, **kwargs) as client:
        expected = "2026-07-28" if mode == "auto" else None
        assert expected is None or client.protocol_version == expected
        yield client


async def call(client: Client, tool: str, **arguments: Any) -> tuple[bool, str]:
    result = await client.call_tool(tool, {k: str(v) for k, v in arguments.items()})
    return bool(result.is_error), text_of(result)


@pytest.mark.parametrize("mode", ERAS)
async def test_accept_grants_the_folder_for_the_next_calls_and_no_further(tree: Tree, mode: str) -> None:
    user = FormUser(accept(tree.a), {"action": "decline"})
    async with connect(make_server(consent_guard(tree)), mode, user) as client:
        assert await call(client, "read", path=tree.b / "f.txt") == (False, "in b")
        assert len(user.questions) == 1
        assert user.folders(0) == [str(tree.b), str(tree.a), str(tree.ceiling)]
        message = user.questions[0].message
        assert "notes" in message
        assert "read" in message
        assert str(tree.b) in message
        # the grant serves the next call with no question
        assert await call(client, "read", path=tree.b / "f.txt") == (False, "in b")
        assert len(user.questions) == 1
        # beyond the folder granted: asked again (declined here), refused
        refused, text = await call(client, "read", path=tree.other / "g.txt")
        assert refused
        assert "declined" in text
        assert "in other" not in text
        assert len(user.questions) == 2


@pytest.mark.parametrize("mode", ERAS)
async def test_decline_refuses_and_is_not_asked_again(tree: Tree, mode: str) -> None:
    user = FormUser({"action": "decline"})
    async with connect(make_server(consent_guard(tree)), mode, user) as client:
        refused, text = await call(client, "read", path=tree.b / "f.txt")
        assert refused
        assert "the user declined access to" in text
        assert str(tree.b) in text
        refused, text = await call(client, "read", path=tree.b / "f.txt")
        assert refused
        assert "not asked again" in text
        assert len(user.questions) == 1


@pytest.mark.parametrize("mode", ERAS)
async def test_cancel_refuses(tree: Tree, mode: str) -> None:
    user = FormUser({"action": "cancel"})
    async with connect(make_server(consent_guard(tree)), mode, user) as client:
        refused, text = await call(client, "read", path=tree.b / "f.txt")
        assert refused
        assert "dismissed the question" in text
        assert "in b" not in text


@pytest.mark.parametrize("mode", ERAS)
async def test_an_answer_off_the_choices_grants_nothing(tree: Tree, mode: str) -> None:
    user = FormUser(accept(tree.outside), accept(tree.a, "read-write"))
    async with connect(make_server(consent_guard(tree)), mode, user) as client:
        refused, text = await call(client, "read", path=tree.b / "f.txt")
        assert refused
        assert "not one of the folders offered" in text
        refused, text = await call(client, "read", path=tree.b / "f.txt")  # read-write for a reader
        assert refused
        assert "not one of the accesses offered" in text


async def test_no_answer_within_the_bound_is_refused(tree: Tree) -> None:
    guard = consent_guard(tree, consent_timeout=30.0)
    clock = ManualClock()
    guard._policy.consent.clock = clock  # type: ignore[union-attr]
    user = FormUser(accept(tree.a))
    user.hold = anyio.Event()
    got: list[tuple[bool, str]] = []
    done = anyio.Event()
    async with connect(make_server(guard), "legacy", user) as client:

        async def first() -> None:
            got.append(await call(client, "read", path=tree.b / "f.txt"))
            done.set()

        async with anyio.create_task_group() as group:
            group.start_soon(first)
            await user.shown.wait()
            # one question in flight: a second call meanwhile is refused, not asked
            refused, text = await call(client, "read", path=tree.other / "g.txt")
            assert refused
            assert "waiting for an answer" in text
            await clock.advance(29.0)
            assert not got
            await clock.advance(2.0)
            await done.wait()
        user.hold.set()
    assert got[0][0]
    assert "did not answer" in got[0][1]
    assert "30 s" in got[0][1]
    assert len(user.questions) == 1


@pytest.mark.parametrize("mode", ERAS)
async def test_a_client_without_elicitation_is_refused_in_words(tree: Tree, mode: str) -> None:
    async with connect(make_server(consent_guard(tree)), mode, None) as client:
        refused, text = await call(client, "read", path=tree.b / "f.txt")
        assert refused
        assert "this client cannot be asked" in text
    # with folders granted up front it keeps them, and says why the rest is refused
    guard = RootsGuard([tree.a], ceiling=tree.ceiling, consent=True)
    async with connect(make_server(guard), mode, None) as client:
        assert await call(client, "read", path=tree.b / "f.txt") == (False, "in b")
        refused, text = await call(client, "read", path=tree.other / "g.txt")
        assert refused
        assert "cannot be asked for a folder" in text


@pytest.mark.parametrize("mode", ERAS)
async def test_a_read_grant_refuses_writes(tree: Tree, mode: str) -> None:
    target = tree.b / "f.txt"
    user = FormUser(accept(tree.a, "read"), accept(tree.b, "read-write"))
    async with connect(make_server(consent_guard(tree)), mode, user) as client:
        # a writing tool: both accesses offered; read chosen: the write is refused
        refused, text = await call(client, "write", path=target, text="changed")
        assert refused
        assert "for reading only" in text
        assert user.accesses(0) == ["read-write", "read"]
        assert target.read_text() == "in b"
        # a tool that says it only reads but writes: the path layer refuses the write under a read grant
        refused, text = await call(client, "sneaky", path=target)
        assert refused
        assert "read-only root" in text
        assert target.read_text() == "in b"
        assert len(user.questions) == 1
        # the writing tool again: asked for write, granted read-write on b (innermost): it writes
        assert await call(client, "write", path=target, text="changed") == (False, "written")
        assert target.read_text() == "changed"
        assert len(user.questions) == 2


@pytest.mark.parametrize("mode", ERAS)
async def test_nothing_outside_the_ceiling_is_offered_or_granted(tree: Tree, mode: str) -> None:
    user = FormUser(accept(tree.ceiling))
    async with connect(make_server(consent_guard(tree)), mode, user) as client:
        for path in (tree.outside / "secret.txt", tree.ceiling / "link" / "secret.txt", "/etc/hostname"):
            refused, text = await call(client, "read", path=path)
            assert refused
            assert "TOP SECRET" not in text
        assert user.questions == []  # never asked about a path outside the ceiling, through a link or not
        # the control: the same path through the link leaks from an unguarded tool
        assert await call(client, "naive_read", path=tree.ceiling / "link" / "secret.txt") == (
            False,
            "TOP SECRET",
        )
        assert await call(client, "read", path=tree.b / "f.txt") == (False, "in b")
        assert all(Path(f).is_relative_to(tree.ceiling) for f in user.folders())
        # the whole ceiling granted: still nothing beyond it, a link out included
        refused, text = await call(client, "read", path=tree.ceiling / "link" / "secret.txt")
        assert refused
        assert "TOP SECRET" not in text
        assert len(user.questions) == 1


@pytest.mark.parametrize("mode", ERAS)
async def test_names_with_control_and_bidi_characters_are_shown_escaped(tree: Tree, mode: str) -> None:
    evil = tree.ceiling / "x\x1b[2J\u202etxt.exe"
    evil.mkdir()
    (evil / "n.txt").write_text("evil")
    user = FormUser({"action": "decline"})
    async with connect(make_server(consent_guard(tree)), mode, user) as client:
        await call(client, "read", path=evil / "n.txt")
    assert "\x1b" in user.folders()[0]  # the control: the name offered as a value is the raw one
    message = user.questions[0].message
    assert "\x1b" not in message
    assert "\u202e" not in message
    assert "\\x1b[2J\\u202etxt.exe" in message


async def test_a_model_calling_in_a_loop_gets_at_most_the_stated_questions(tree: Tree) -> None:
    guard = consent_guard(tree, consent_per_minute=3)
    clock = ManualClock()
    guard._policy.consent.clock = clock  # type: ignore[union-attr]
    folders = [tree.ceiling / f"d{i}" for i in range(10)]
    for folder in folders:
        folder.mkdir()
        (folder / "x.txt").write_text("x")
    user = FormUser()  # declines everything
    async with connect(make_server(guard), "legacy", user) as client:
        texts = [(await call(client, "read", path=folder / "x.txt"))[1] for folder in folders]
        assert len(user.questions) == 3
        assert sum("at most 3 questions a minute" in text for text in texts) == 7
        await clock.advance(20.0)  # a third of a minute: one more
        await call(client, "read", path=folders[-1] / "x.txt")
        assert len(user.questions) == 4


async def test_grants_end_with_the_session(tree: Tree) -> None:
    user = FormUser(accept(tree.a), accept(tree.a))
    server = make_server(consent_guard(tree))
    async with connect(server, "legacy", user) as client:
        assert await call(client, "read", path=tree.b / "f.txt") == (False, "in b")
    async with connect(server, "legacy", user) as client:
        assert await call(client, "read", path=tree.b / "f.txt") == (False, "in b")
    assert len(user.questions) == 2  # the second session was asked again


@pytest.mark.parametrize("mode", ERAS)
async def test_a_client_that_declared_roots_is_never_asked(tree: Tree, mode: str) -> None:
    user = FormUser(accept(tree.ceiling))
    roots = RootsCallback(tree.a)
    async with connect(make_server(consent_guard(tree)), mode, user, list_roots_callback=roots) as client:
        assert await call(client, "read", path=tree.b / "f.txt") == (False, "in b")
        refused, text = await call(client, "read", path=tree.other / "g.txt")
        assert refused
        assert "in other" not in text
    assert user.questions == []


async def modern_question(client: Client, path: Path) -> InputRequiredResult:
    result = await client.session.call_tool("read", {"path": str(path)}, allow_input_required=True)
    assert isinstance(result, InputRequiredResult)
    assert result.request_state is not None
    assert result.input_requests is not None
    assert list(result.input_requests) == [CONSENT_INPUT_KEY]
    return result


async def test_a_forged_or_replayed_request_state_grants_nothing(tree: Tree) -> None:
    server = make_server(consent_guard(tree))
    path = tree.b / "f.txt"
    granted: InputResponses = {
        CONSENT_INPUT_KEY: ElicitResult(action="accept", content={"folder": str(tree.a), "access": "read"})
    }
    async with connect(server, "auto", FormUser()) as client:
        # the client answers a question never asked: no requestState, a forged one
        for state in (None, "forged", "e30.0000"):
            result = await client.call_tool(
                "read", {"path": str(path)}, input_responses=granted, request_state=state
            )
            assert result.is_error
            assert "in b" not in text_of(result)
        asked = await modern_question(client, path)
        data, mac = asked.request_state.split(".")  # type: ignore[union-attr]
        tampered = f"{data}.{mac[::-1]}"
        result = await client.call_tool(
            "read", {"path": str(path)}, input_responses=granted, request_state=tampered
        )
        assert result.is_error
        assert "not made by this server" in text_of(result)
        # the real state, for another path's question: refused
        elsewhere = tree.a / "n.txt"
        elsewhere.write_text("in a")
        result = await client.call_tool(
            "read", {"path": str(elsewhere)}, input_responses=granted, request_state=asked.request_state
        )
        assert result.is_error
        assert "another question" in text_of(result)
        # the real state, answered: granted, once
        result = await client.call_tool(
            "read", {"path": str(path)}, input_responses=granted, request_state=asked.request_state
        )
        assert not result.is_error
        assert text_of(result) == "in b"
    # replayed by another session (no grants of its own): refused
    async with connect(server, "auto", FormUser()) as client:
        result = await client.call_tool(
            "read", {"path": str(path)}, input_responses=granted, request_state=asked.request_state
        )
        assert result.is_error
        assert "used already" in text_of(result)


async def test_a_modern_question_expires(tree: Tree) -> None:
    guard = consent_guard(tree)
    clock = ManualClock()
    guard._policy.consent.clock = clock  # type: ignore[union-attr]
    path = tree.b / "f.txt"
    granted: InputResponses = {
        CONSENT_INPUT_KEY: ElicitResult(action="accept", content={"folder": str(tree.a), "access": "read"})
    }
    async with connect(make_server(guard), "auto", FormUser()) as client:
        asked = await modern_question(client, path)
        await clock.advance(601.0)
        result = await client.call_tool(
            "read", {"path": str(path)}, input_responses=granted, request_state=asked.request_state
        )
        assert result.is_error
        assert "expired" in text_of(result)


def test_consent_needs_a_ceiling() -> None:
    from mcp_roots import ConfigError

    with pytest.raises(ConfigError, match="needs a ceiling"):
        RootsGuard(os.getcwd(), consent=True)


@pytest.mark.parametrize("mode", ERAS)
async def test_over_stdio(tree: Tree, mode: str) -> None:
    command = forkserver.command(str(SERVERS / "consent_server.py"), "--ceiling", str(tree.ceiling))
    params = StdioServerParameters(command=command[0], args=command[1:])
    user = FormUser(accept(tree.a), {"action": "decline"})
    async with Client(params, mode=mode, elicitation_callback=user) as client:
        assert (client.protocol_version == "2026-07-28") is (mode == "auto")
        assert await call(client, "read", path=tree.b / "f.txt") == (False, "in b")
        assert await call(client, "read", path=tree.b / "f.txt") == (False, "in b")
        assert len(user.questions) == 1
        refused, text = await call(client, "read", path=tree.other / "g.txt")
        assert refused
        assert "declined" in text
        assert "in other" not in text
        refused, text = await call(client, "read", path=tree.outside / "secret.txt")
        assert refused
        assert "TOP SECRET" not in text
        assert len(user.questions) == 2


@pytest.mark.parametrize("mode", ERAS)
async def test_grants_are_seen_and_withdrawn(tree: Tree, mode: str) -> None:
    guard = RootsGuard([tree.other], ceiling=tree.ceiling, consent=True)
    server = make_server(guard)
    guard.consent_tools(server)

    @server.tool()
    async def env(ctx: Context) -> str:
        return (await guard.roots(ctx)).as_env()["MCP_ROOTS_JSON"]

    user = FormUser(accept(tree.a), accept(tree.a))
    async with connect(server, mode, user) as client:
        assert await call(client, "read", path=tree.b / "f.txt") == (False, "in b")
        listed = (await call(client, "list_granted_folders"))[1].splitlines()
        assert listed == [
            f"{tree.other} (read-write, set up by the operator)",
            f"{tree.a} (read, granted by the user)",
        ]
        roots = {entry["path"]: entry["access"] for entry in json.loads((await call(client, "env"))[1])}
        assert roots == {str(tree.other): "read-write", str(tree.a): "read"}  # the tool environment
        assert (
            "not a folder the user granted"
            in (await call(client, "revoke_granted_folder", folder=tree.other))[1]
        )
        assert "withdrew" in (await call(client, "revoke_granted_folder", folder=tree.a))[1]
        # the next call sees it: asked again
        assert await call(client, "read", path=tree.b / "f.txt") == (False, "in b")
        assert len(user.questions) == 2
    rows = {row.name: row for row in guard.audit(server)}
    assert rows["revoke_granted_folder"].exempt is not None


@pytest.fixture(scope="module")
def http_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Tree, HttpServer]]:
    tree = Tree(tmp_path_factory.mktemp("consent-http"))
    with launch_http(
        [sys.executable, str(SERVERS / "consent_server.py")], "--ceiling", str(tree.ceiling)
    ) as server:
        yield tree, server


@pytest.mark.parametrize("mode", ERAS)
async def test_over_streamable_http(http_server: tuple[Tree, HttpServer], mode: str) -> None:
    tree, server = http_server
    user = FormUser(accept(tree.a), accept(tree.a), {"action": "decline"})
    async with Client(server.url, mode=mode, elicitation_callback=user) as client:
        assert await call(client, "read", path=tree.b / "f.txt") == (False, "in b")
        assert await call(client, "read", path=tree.b / "f.txt") == (False, "in b")
        # legacy: the session keeps the grant; 2026-07-28 with no authenticated caller: each request is its
        # own, so nothing is kept and the user is asked again
        assert len(user.questions) == (1 if mode == "legacy" else 2)
        refused, text = await call(client, "read", path=tree.outside / "secret.txt")
        assert refused
        assert "TOP SECRET" not in text


@pytest.mark.parametrize("mode", ERAS)
async def test_a_client_error_instead_of_an_answer_grants_nothing(tree: Tree, mode: str) -> None:
    async def failing(context: ClientRequestContext, params: ElicitRequestParams) -> ErrorData:
        return ErrorData(code=-32603, message="the host has no \x1b[31mform\u202e support")

    async with Client(make_server(consent_guard(tree)), mode=mode, elicitation_callback=failing) as client:
        if mode == "auto":  # the SDK's client gives up its retry: the server is never answered
            with pytest.raises(MCPError, match="no"):
                await call(client, "read", path=tree.b / "f.txt")
            return
        refused, text = await call(client, "read", path=tree.b / "f.txt")
    assert refused
    assert "the client could not ask its user" in text
    assert "\x1b" not in text


@pytest.fixture(scope="module")
def http_auth_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Tree, HttpServer]]:
    tree = Tree(tmp_path_factory.mktemp("consent-http-auth"))
    command = [sys.executable, str(SERVERS / "consent_server.py")]
    tokens = ("--token", "alice=token-a", "--token", "bob=token-b")
    with launch_http(command, "--ceiling", str(tree.ceiling), *tokens) as server:
        yield tree, server


@asynccontextmanager
async def as_caller(url: str, token: str, user: FormUser) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as http:
        transport = streamable_http_client(url, http_client=http)
        async with Client(transport, mode="auto", elicitation_callback=user) as client:
            assert client.protocol_version == "2026-07-28"
            yield client


async def test_grants_are_kept_per_authenticated_caller(
    http_auth_server: tuple[Tree, HttpServer],
) -> None:
    tree, server = http_auth_server
    alice, bob = FormUser(accept(tree.a)), FormUser({"action": "decline"})
    async with as_caller(server.url, "token-a", alice) as client:
        assert await call(client, "read", path=tree.b / "f.txt") == (False, "in b")
    # a new connection of the same caller: its grant is kept (2026-07-28, per principal)
    async with as_caller(server.url, "token-a", alice) as client:
        assert await call(client, "read", path=tree.b / "f.txt") == (False, "in b")
    assert len(alice.questions) == 1
    # another caller gets none of it: asked, declines, refused
    async with as_caller(server.url, "token-b", bob) as client:
        refused, text = await call(client, "read", path=tree.b / "f.txt")
    assert refused
    assert "declined" in text
    assert len(bob.questions) == 1
