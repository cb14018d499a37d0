"""The mcp 1.x adapter against the real mcp 1.30 SDK: the low-level Server (and, for a client that answers
too late, FastMCP) run as a real subprocess (tests/mcp1/server.py) over stdio and over streamable HTTP on
127.0.0.1, driven by the SDK's own ClientSession, on asyncio and trio (a stdio server runs on the test's
backend too; an HTTP server runs on uvicorn's asyncio loop, so its rows are collected on asyncio only:
tests/conftest.py). Legacy era only (mcp 1.x has no other). FastMCP's guarded call is the conformance
table's (tests/mcp1/test_conformance_mcp1.py), in memory, over stdio and over streamable HTTP, for FastMCP
and the low-level Server; these tests add real processes and a client that answers too late.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import mcp.types as types
import pytest
import sniffio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from mcp_roots import path_to_uri

from .. import forkserver
from ..kit import Tree, subprocess_http_url

pytestmark = pytest.mark.anyio

SERVER = Path(__file__).resolve().parent / "server.py"

FILE_OF = {"project": "hello.txt", "other": "other.txt"}

FLAVORS = [("lowlevel", "stdio"), ("lowlevel", "http")]
EVERY_FLAVOR = [("fastmcp", "stdio"), ("fastmcp", "http"), *FLAVORS]


@pytest.fixture
def tree(tmp_path: Path) -> Tree:
    return Tree(tmp_path)


@pytest.fixture(params=FLAVORS, ids=["-".join(f) for f in FLAVORS])
def flavor(request: pytest.FixtureRequest) -> tuple[str, str]:
    return request.param  # type: ignore[no-any-return]


class Roots:
    """A list_roots_callback whose answer the test can change, and that counts the requests."""

    def __init__(self, *paths: Path, answer: Callable[[], Awaitable[Any]] | None = None) -> None:
        self.paths = list(paths)
        self.calls = 0
        self._answer = answer

    async def __call__(self, context: Any) -> types.ListRootsResult:
        self.calls += 1
        if self._answer is not None:
            await self._answer()
        return types.ListRootsResult(
            roots=[types.Root(uri=path_to_uri(p), name=p.name) for p in self.paths]  # type: ignore[arg-type]
        )


@contextlib.asynccontextmanager
async def connect(
    flavor: tuple[str, str], tree: Tree, roots: Roots | None, *server_args: str
) -> AsyncIterator[ClientSession]:
    """A ClientSession to a fresh server of ``flavor`` (kind, transport), initialized. A stdio server runs
    on the test's own backend (asyncio or trio); an HTTP one on asyncio (uvicorn's only loop)."""
    kind, transport = flavor
    command = [sys.executable, str(SERVER), kind, *server_args]
    if transport == "stdio":  # a real process, forked warm
        command = forkserver.command(*command[1:], "--backend", sniffio.current_async_library())
    log = tree.base / f"server-{kind}-{transport}.log"
    async with contextlib.AsyncExitStack() as stack:
        if transport == "stdio":
            errlog = stack.enter_context(log.open("w"))
            params = StdioServerParameters(command=command[0], args=command[1:])
            read, write = await stack.enter_async_context(stdio_client(params, errlog=errlog))
        else:
            url = await stack.enter_async_context(subprocess_http_url(command, log))
            read, write, _ = await stack.enter_async_context(streamable_http_client(url))
        session = await stack.enter_async_context(ClientSession(read, write, list_roots_callback=roots))
        await session.initialize()
        yield session


async def read(session: ClientSession, path: Path | str, tool: str = "read_text") -> tuple[bool, str]:
    result = await session.call_tool(tool, {"path": str(path)})
    text = "".join(getattr(block, "text", "") for block in result.content)
    return bool(result.isError), text


def fallback_args(tree: Tree) -> list[str]:
    return ["--roots", str(tree.fallback)]


# One connection per flavor runs the whole table: (path, relative to the tree, and what the client sees).
READ_CASES: list[tuple[str, str, str | None]] = [
    ("allowed", "project/hello.txt", "hello from project"),
    ("allowed, relative to the first root", "sub/deep.txt", "deep"),
    ("refused: outside", "outside/secret.txt", None),
    ("refused: climbs out", "project/../outside/secret.txt", None),
    ("refused: symlink escape", "project/escape/secret.txt", None),
    ("refused: sibling prefix", "project_evil/x.txt", None),
]


async def test_reads_inside_are_allowed_and_outside_refused(tree: Tree, flavor: tuple[str, str]) -> None:
    async with connect(flavor, tree, Roots(tree.project)) as session:
        # The control: the unguarded twin reads through the symlink, so the link does lead outside.
        leak = await read(session, tree.project / "escape" / "secret.txt", "plain_read")
        assert leak == (False, "TOP SECRET")
        for case, relative, expected in READ_CASES:
            path = relative if relative.startswith("sub/") else str(tree.base / relative)
            is_error, text = await read(session, path)
            if expected is None:
                assert is_error, case
                assert text.startswith("Access denied:"), (case, text)
                assert "TOP SECRET" not in text, case
            else:
                assert (is_error, text) == (False, expected), case


async def test_roots_change_is_visible_on_the_next_call(tree: Tree, flavor: tuple[str, str]) -> None:
    roots = Roots(tree.project)
    async with connect(flavor, tree, roots) as session:
        assert await read(session, tree.project / "hello.txt") == (False, "hello from project")
        roots.paths = [tree.other]
        await session.send_roots_list_changed()
        is_error, _ = await read(session, tree.project / "hello.txt")
        assert is_error
        assert await read(session, tree.other / "other.txt") == (False, "hello from other")


async def test_client_without_roots_gets_the_configured_fallback(tree: Tree, flavor: tuple[str, str]) -> None:
    async with connect(flavor, tree, None, *fallback_args(tree)) as session:
        assert await read(session, tree.fallback / "fb.txt") == (False, "hello from fallback")
        is_error, _ = await read(session, tree.project / "hello.txt")
        assert is_error


async def test_client_without_roots_and_no_fallback_is_refused(tree: Tree, flavor: tuple[str, str]) -> None:
    async with connect(flavor, tree, None) as session:
        is_error, text = await read(session, tree.project / "hello.txt")
        assert is_error
        assert "hello from project" not in text


# A client that answers too late is not a row of the table (its failing client answers an error at once).
@pytest.mark.parametrize("flavor", EVERY_FLAVOR, ids=["-".join(f) for f in EVERY_FLAVOR])
async def test_silent_client_is_refused_not_given_the_fallback(tree: Tree, flavor: tuple[str, str]) -> None:
    # DESIGN.md "fail closed": a client that declared roots never gets fallback roots; before its
    # first answer, calls wait first_answer_timeout and are refused with RootsUnavailable.
    # mcp 1.x's ClientSession runs the roots callback inside its receive loop, so a callback that never
    # returns would stall the client itself: this one answers, but long after the server stopped waiting.
    silent = Roots(tree.project, answer=lambda: anyio.sleep(1.5))
    options = [*fallback_args(tree), "--first-answer-timeout", "0.3"]
    async with connect(flavor, tree, silent, *options) as session:
        is_error, text = await read(session, tree.fallback / "fb.txt")
        assert is_error
        assert "hello from fallback" not in text
        assert "has not sent its roots yet" in text


async def test_ceiling_narrows_client_roots(tree: Tree, flavor: tuple[str, str]) -> None:
    async with connect(flavor, tree, Roots(tree.base), "--ceiling", str(tree.project / "sub")) as session:
        assert await read(session, tree.project / "sub" / "deep.txt") == (False, "deep")
        is_error, text = await read(session, tree.project / "hello.txt")
        assert is_error
        assert "hello from project" not in text


async def test_two_concurrent_connections_are_isolated(tree: Tree, flavor: tuple[str, str]) -> None:
    kind, transport = flavor
    outcomes: dict[str, list[tuple[bool, str]]] = {}

    async def client(session: ClientSession, name: str, mine: Path, theirs: Path) -> None:
        results = []
        for _ in range(3):
            results.append(await read(session, mine / FILE_OF[mine.name]))
            results.append(await read(session, theirs / FILE_OF[theirs.name]))
            await anyio.lowlevel.checkpoint()
        outcomes[name] = results

    if transport == "http":
        # One server, two sessions: the case where one connection's roots could leak to another.
        command = [sys.executable, str(SERVER), kind]
        async with (
            subprocess_http_url(command, tree.base / "server.log") as url,
            streamable_http_client(url) as (r1, w1, _),
            streamable_http_client(url) as (r2, w2, _),
            ClientSession(r1, w1, list_roots_callback=Roots(tree.project)) as s1,
            ClientSession(r2, w2, list_roots_callback=Roots(tree.other)) as s2,
        ):
            await s1.initialize()
            await s2.initialize()
            async with anyio.create_task_group() as tg:
                tg.start_soon(client, s1, "project", tree.project, tree.other)
                tg.start_soon(client, s2, "other", tree.other, tree.project)
    else:
        async with (
            connect(flavor, tree, Roots(tree.project)) as s1,
            connect(flavor, tree, Roots(tree.other)) as s2,
            anyio.create_task_group() as tg,
        ):
            tg.start_soon(client, s1, "project", tree.project, tree.other)
            tg.start_soon(client, s2, "other", tree.other, tree.project)
    assert set(outcomes) == {"project", "other"}
    for name, results in outcomes.items():
        own, foreign = results[0::2], results[1::2]
        assert all(not is_error for is_error, _ in own), (name, own)
        assert all(is_error for is_error, _ in foreign), (name, foreign)


async def test_install_forgotten_refuses_every_call(tree: Tree, flavor: tuple[str, str]) -> None:
    async with connect(flavor, tree, Roots(tree.project), "--no-install") as session:
        for path in (tree.project / "hello.txt", tree.outside / "secret.txt"):
            is_error, text = await read(session, path)
            assert is_error
            assert "guard.install(server) was not called" in text


async def test_os_error_is_one_readable_line(tree: Tree, flavor: tuple[str, str]) -> None:
    async with connect(flavor, tree, Roots(tree.project)) as session:
        is_error, text = await read(session, tree.project / "missing.txt")
        assert is_error
        assert "No such file" in text
        assert "missing.txt" in text
        assert "\n" not in text
        assert "Traceback" not in text
        assert "Error executing tool" not in text


def _guard(tree: Tree) -> Any:
    from mcp_roots import RootsGuard

    return RootsGuard(environ={}, user_config_dir=tree.base / "no-config")


def test_install_checks_the_private_corners_it_relies_on(tree: Tree) -> None:
    from mcp.server.fastmcp import FastMCP
    from mcp.server.lowlevel import Server

    from mcp_roots import SDKChanged

    class MovedDispatch(Server):  # as if mcp changed the dispatch's signature
        async def _handle_message(self, message: Any, session: Any) -> None:  # type: ignore[override]
            return None

    with pytest.raises(SDKChanged, match=r"Server\._handle_message"):
        _guard(tree).install(MovedDispatch("moved"))

    server = FastMCP("moved")
    del server._tool_manager  # as if FastMCP renamed its tool registry
    with pytest.raises(SDKChanged, match=r"FastMCP\._tool_manager"):
        _guard(tree).install(server)


def test_install_names_the_supported_frameworks(tree: Tree) -> None:
    with pytest.raises(TypeError, match=r"mcp 1\.x FastMCP"):
        _guard(tree).install(object())


@pytest.mark.parametrize("kind", ["fastmcp", "lowlevel"])
def test_a_guarded_stdio_server_ends_when_its_client_closes_stdin(kind: str) -> None:
    """The guard keeps a connection's roots fresh in a task that lives as long as the connection; mcp 1.x
    1.26 (unlike 1.30) waits, at EOF, for every message's task, so that task must not be the ``initialized``
    notification's own, or the server never ends (make compat runs this at mcp 1.26, where it hung)."""
    messages = [
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {"roots": {"listChanged": True}},
                "clientInfo": {"name": "host", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
    ]
    server = subprocess.Popen(
        [sys.executable, str(SERVER), kind],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert server.stdin is not None
        assert server.stdout is not None
        server.stdin.write(json.dumps(messages[0]).encode() + b"\n")
        server.stdin.flush()
        assert json.loads(server.stdout.readline())["id"] == 0
        server.stdin.write(json.dumps(messages[1]).encode() + b"\n")
        server.stdin.close()
        # A bound only to catch the hang: a stdio server ends on EOF at once.
        assert server.wait(timeout=30) == 0
    finally:
        server.kill()
        server.wait()


def test_the_mcp1_adapter_implements_the_sdk_port_whole() -> None:
    from mcp_roots.adapters.mcp1 import Mcp1Adapter
    from mcp_roots.guard._port import SdkPort
    from mcp_roots.roots._port import RootsPort, missing_operations

    assert issubclass(Mcp1Adapter, SdkPort)
    assert issubclass(Mcp1Adapter, RootsPort)
    assert missing_operations(Mcp1Adapter) == []
    assert "roots" not in vars(Mcp1Adapter)  # one spelling: the core port's
