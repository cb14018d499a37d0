"""2026-07-28: the roots come with every guarded call; a client stream that sends the same answer again gets
the RootSet built from its previous answer (no worker thread, no new build), and nothing else does: not a
changed answer, not an earlier answer sent again after another, not another client sending the same one.

Real SDKs (mcp 2.x MCPServer, fastmcp 4), in memory, both ways an in-process client reaches a server (the
SDK's direct dispatcher pair, and a memory stream pair served like stdio), asyncio and trio. The roots are
told apart by a symlink retargeted between calls: a RootSet built anew follows it, a reused one does not.
"""

from __future__ import annotations

import gc
import os
from pathlib import Path
from typing import Any

import mcp_types
import pytest
from fastmcp import Client as FastMCPClient
from fastmcp import Context as FastMCPContext
from fastmcp import FastMCP
from mcp import Client
from mcp.client._memory import InMemoryTransport
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from pydantic import FileUrl

from mcp_roots import RootSet, RootsGuard
from mcp_roots.roots._answers import LastAnswers, answer_key, check_roots_answer
from tests.kit import RootsCallback, text_of

pytestmark = pytest.mark.anyio

WAYS = ["direct", "stream"]  # Client(server): a DirectDispatcher pair; Client(InMemoryTransport): a stream


class Tree:
    """``a/x.txt``, ``b/y.txt``, ``c/z.txt`` and ``link`` -> ``a`` (retargeted by :meth:`point`)."""

    def __init__(self, base: Path) -> None:
        self.base = base.resolve()
        for name, file in (("a", "x.txt"), ("b", "y.txt"), ("c", "z.txt")):
            (self.base / name).mkdir()
            (self.base / name / file).write_text(f"in {name}")
        self.fallback = self.base / "fallback"
        self.fallback.mkdir()
        self.link = self.base / "link"
        self.link.symlink_to(self.base / "a")

    def point(self, name: str) -> None:
        """Retarget ``link`` to ``name`` atomically."""
        tmp = self.base / "link.new"
        tmp.symlink_to(self.base / name)
        os.replace(tmp, self.link)

    def __truediv__(self, name: str) -> Path:
        return self.base / name


@pytest.fixture
def tree(tmp_path: Path) -> Tree:
    return Tree(tmp_path)


def mcp_server(guard: RootsGuard, seen: list[RootSet]) -> MCPServer:
    """``read_text(path)`` guarded; it keeps each call's RootSet in ``seen`` (alive, so that a new set can
    never take a collected one's place)."""
    server = MCPServer("reuse")
    guard.install(server)

    @server.tool()
    @guard.paths("path")
    async def read_text(path: str, ctx: Context) -> str:
        seen.append(await guard.roots(ctx))
        return Path(path).read_text()  # noqa: ASYNC240

    return server


def mcp_client(server: MCPServer, way: str, callback: RootsCallback) -> Client:
    target: Any = server if way == "direct" else InMemoryTransport(server)
    return Client(target, mode="auto", list_roots_callback=callback)


async def read(client: Client, path: Path) -> tuple[bool, str]:
    result = await client.call_tool("read_text", {"path": str(path)})
    return bool(result.is_error), text_of(result)


@pytest.mark.parametrize("way", WAYS)
async def test_an_unchanged_answer_on_one_stream_reuses_its_roots(tree: Tree, way: str) -> None:
    seen: list[RootSet] = []
    callback = RootsCallback(tree.link)
    async with mcp_client(mcp_server(RootsGuard([tree.fallback]), seen), way, callback) as client:
        assert client.session.protocol_version == "2026-07-28"
        assert await read(client, tree / "a" / "x.txt") == (False, "in a")
        assert await read(client, tree / "a" / "x.txt") == (False, "in a")
    assert callback.calls == 2  # the client answered each call: the protocol's round trip stays
    assert seen[0].paths == (tree / "a",)
    assert seen[1] is seen[0]  # the same answer on the same stream: not built again


@pytest.mark.parametrize("way", WAYS)
async def test_a_changed_answer_gives_its_roots_and_an_earlier_one_is_built_anew(
    tree: Tree, way: str
) -> None:
    seen: list[RootSet] = []
    callback = RootsCallback(tree.link)
    async with mcp_client(mcp_server(RootsGuard([tree.fallback]), seen), way, callback) as client:
        assert await read(client, tree / "a" / "x.txt") == (False, "in a")
        callback.paths = [tree / "c"]
        refused, _ = await read(client, tree / "a" / "x.txt")
        assert refused  # the new answer's roots, at once (no stale read)
        assert await read(client, tree / "c" / "z.txt") == (False, "in c")
        tree.point("b")
        callback.paths = [tree.link]  # the first answer again, after another one
        assert await read(client, tree / "b" / "y.txt") == (False, "in b")
        refused, _ = await read(client, tree / "a" / "x.txt")
        assert refused
    assert [s.paths for s in seen] == [(tree / "a",), (tree / "c",), (tree / "b",)]  # (refused: no body)
    assert seen[2] is not seen[0]  # an answer's RootSet never outlives the answer that replaced it


@pytest.mark.parametrize("way", WAYS)
async def test_another_stream_never_gets_a_streams_roots(tree: Tree, way: str) -> None:
    """Two clients of one server send the same answer; between them the symlink it names is retargeted.
    The second gets roots built from its own answer. (The direct pairs' transport contexts compare equal:
    keyed by value instead of identity, the second client would get the first one's roots.)"""
    seen: list[RootSet] = []
    server = mcp_server(RootsGuard([tree.fallback]), seen)
    one, two = RootsCallback(tree.link), RootsCallback(tree.link)
    async with mcp_client(server, way, one) as first, mcp_client(server, way, two) as second:
        assert await read(first, tree / "a" / "x.txt") == (False, "in a")
        tree.point("b")
        assert await read(second, tree / "b" / "y.txt") == (False, "in b")
        refused, _ = await read(second, tree / "a" / "x.txt")
        assert refused
        assert await read(first, tree / "a" / "x.txt") == (False, "in a")
    assert [s.paths for s in seen] == [(tree / "a",), (tree / "b",), (tree / "a",)]  # (refused: no body)
    assert seen[1] is not seen[0]
    assert seen[2] is seen[0]  # each stream keeps its own


async def test_a_malformed_answer_forgets_the_last_one(tree: Tree) -> None:
    seen: list[RootSet] = []
    callback = RootsCallback(tree.link)
    async with mcp_client(mcp_server(RootsGuard([tree.fallback]), seen), "direct", callback) as client:
        assert await read(client, tree / "a" / "x.txt") == (False, "in a")
        # The SDK client validates what it sends; its dispatcher sends what a hostile client would.
        dispatcher: Any = client.session._dispatcher
        envelope = {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"roots": {}},
        }
        params = {
            "name": "read_text",
            "arguments": {"path": str(tree / "a" / "x.txt")},
            "inputResponses": {"mcp_roots.roots": {"roots": "not a list"}},
            "_meta": envelope,
        }
        result = await dispatcher.send_raw_request("tools/call", params)
        assert result["isError"] is True
        tree.point("b")
        assert await read(client, tree / "b" / "y.txt") == (False, "in b")
    assert [s.paths for s in seen] == [(tree / "a",), (tree / "b",)]


# --- fastmcp 4 ---------------------------------------------------------------------------------------


def fastmcp_server(guard: RootsGuard, seen: list[RootSet]) -> FastMCP:
    server: FastMCP = FastMCP("reuse")
    guard.install(server)

    @server.tool
    @guard.paths("path")
    async def read_text(path: str, ctx: FastMCPContext) -> str:
        seen.append(await guard.roots(ctx))
        return Path(path).read_text()  # noqa: ASYNC240

    return server


class FastMCPRoots:
    def __init__(self, path: Path) -> None:
        self.path = path

    async def __call__(self, context: Any) -> list[mcp_types.Root]:
        return [mcp_types.Root(uri=FileUrl(self.path.as_uri()))]


async def fastmcp_read(client: FastMCPClient[Any], path: Path) -> tuple[bool, str]:
    result = await client.call_tool("read_text", {"path": str(path)}, raise_on_error=False)
    return result.is_error, "".join(getattr(block, "text", "") for block in result.content)


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # fastmcp 4's client runs on asyncio only
async def test_fastmcp_streams_reuse_their_own_roots_only(tree: Tree) -> None:
    seen: list[RootSet] = []
    server = fastmcp_server(RootsGuard([tree.fallback]), seen)
    one, two = FastMCPRoots(tree.link), FastMCPRoots(tree.link)
    async with (
        FastMCPClient(server, roots=one, mode="auto") as first,
        FastMCPClient(server, roots=two, mode="auto") as second,
    ):
        assert await fastmcp_read(first, tree / "a" / "x.txt") == (False, "in a")
        assert await fastmcp_read(first, tree / "a" / "x.txt") == (False, "in a")
        tree.point("b")
        assert await fastmcp_read(second, tree / "b" / "y.txt") == (False, "in b")
        one.path = tree / "c"
        assert await fastmcp_read(first, tree / "c" / "z.txt") == (False, "in c")
    assert [s.paths for s in seen] == [(tree / "a",), (tree / "a",), (tree / "b",), (tree / "c",)]
    assert seen[1] is seen[0]
    assert seen[2] is not seen[0]


# --- LastAnswers itself ------------------------------------------------------------------------------


class Stream:
    """A stream object that compares equal to every other (as the SDK's transport contexts do)."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Stream)

    def __hash__(self) -> int:
        return 0


def key_of(*uris: str) -> Any:
    key = answer_key(check_roots_answer({"roots": [{"uri": u} for u in uris]}))
    assert key is not None
    return key


def test_last_answers_are_kept_by_identity_one_per_stream_and_bounded(tree: Tree) -> None:
    answers = LastAnswers(limit=2)
    roots_a = RootSet.from_paths([tree / "a"])
    one, two = Stream(), Stream()
    answers.put(one, key_of((tree / "a").as_uri()), roots_a)
    assert answers.get(one, key_of((tree / "a").as_uri())) is roots_a
    assert answers.get(two, key_of((tree / "a").as_uri())) is None  # equal, not the same stream
    assert answers.get(one, key_of((tree / "b").as_uri())) is None  # another answer
    answers.put(one, key_of((tree / "b").as_uri()), RootSet.from_paths([tree / "b"]))
    assert answers.get(one, key_of((tree / "a").as_uri())) is None  # one answer per stream
    answers.put(two, key_of((tree / "a").as_uri()), roots_a)
    three = Stream()
    answers.put(three, key_of((tree / "a").as_uri()), roots_a)
    assert len(answers) == 2  # the oldest stream was forgotten
    assert answers.get(one, key_of((tree / "b").as_uri())) is None
    del three
    gc.collect()
    assert len(answers) == 1  # the entry goes with its stream
    answers.forget(two)
    assert len(answers) == 0


def test_an_answer_the_build_refuses_is_not_remembered() -> None:
    assert answer_key(check_roots_answer({"roots": [{"uri": "file:///x", "name": 3}]})) is None
    assert answer_key(check_roots_answer({"roots": [{"uri": "file:///x", "name": "x"}]})) == (
        ("file:///x", "x"),
    )
