"""What is particular to the fastmcp 4.x adapter, against the real fastmcp 4.1 server and client: real
transports (stdio, streamable HTTP), a client that never answers, guard.roots(ctx) outside a guarded call and
the private corner it relies on. Every guarded-call behaviour is a row of the conformance table
(tests/conformance.py, run by tests/adapters/test_conformance.py). On asyncio only: fastmcp 4 itself is.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import mcp_types
import pytest
from fastmcp import Client, Context, FastMCP
from fastmcp.client.transports import StdioTransport
from pydantic import FileUrl

from mcp_roots import RootsGuard, path_to_uri
from tests.kit import Tree, subprocess_http_url

pytestmark = pytest.mark.anyio

FILE_OF = {"project": "hello.txt", "other": "other.txt"}
ERAS = {"legacy": "legacy", "modern": "auto"}
HERE = Path(__file__).resolve().parents[1]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # fastmcp 4 runs on asyncio only (see the module docstring)


@pytest.fixture
def tree(tmp_path: Path) -> Tree:
    return Tree(tmp_path)


@pytest.fixture(params=sorted(ERAS))
def era(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def make_guard(tree: Tree, **options: Any) -> RootsGuard:
    # environ={} and an empty user config directory: only what the test configures is a fallback source.
    options.setdefault("environ", {})
    options.setdefault("user_config_dir", tree.base / "no-config")
    # Long enough never to expire under load where the client answers: only a silent client waits it out.
    options.setdefault("first_answer_timeout", 30)
    return RootsGuard(**options)


def make_server(guard: RootsGuard, *, order: str = "below", install: bool = True) -> FastMCP:
    """A fastmcp server with one guarded tool (``read_text``) and its unguarded twin (``plain_read``)."""
    server: FastMCP = FastMCP("guarded")
    if install:
        guard.install(server)
    if order == "below":

        @server.tool
        @guard.paths("path")
        async def read_text(path: str, ctx: Context) -> str:
            roots = await guard.roots(ctx)
            return roots.read_text(path)

    else:

        @guard.paths("path")
        @server.tool
        async def read_text(path: str, ctx: Context) -> str:
            roots = await guard.roots(ctx)
            return roots.read_text(path)

    @server.tool
    async def plain_read(path: str, ctx: Context) -> str:
        return await anyio.Path(path).read_text()

    return server


class Roots:
    """A client roots handler whose answer the test can change, and that counts the requests."""

    def __init__(self, *paths: Path, answer: Callable[[], Any] | None = None) -> None:
        self.paths = list(paths)
        self.calls = 0
        self._answer = answer

    async def __call__(self, context: Any) -> list[mcp_types.Root]:
        self.calls += 1
        if self._answer is not None:
            await self._answer()
        return [mcp_types.Root(uri=FileUrl(path_to_uri(p)), name=p.name) for p in self.paths]


def client(server: Any, era: str, roots: Roots | None) -> Client[Any]:
    return Client(server, roots=roots, mode=ERAS[era])


async def read(c: Client[Any], path: Path | str) -> tuple[bool, str]:
    result = await c.call_tool("read_text", {"path": str(path)}, raise_on_error=False)
    text = "".join(getattr(block, "text", "") for block in result.content)
    return result.is_error, text


async def test_silent_client_is_refused_not_given_the_fallback(tree: Tree) -> None:
    # DESIGN.md "fail closed": a client that declared roots never gets fallback roots; before its
    # first answer, calls wait first_answer_timeout and are refused with RootsUnavailable.
    server = make_server(make_guard(tree, roots=[str(tree.fallback)], first_answer_timeout=0.3))
    silent = Roots(tree.project, answer=anyio.sleep_forever)
    async with client(server, "legacy", silent) as c:
        is_error, text = await read(c, tree.fallback / "fb.txt")
        assert is_error
        assert "hello from fallback" not in text
        assert "has not sent its roots yet" in text


async def test_over_stdio(tree: Tree) -> None:
    """The same server as a subprocess over stdio (legacy era, the client's roots, a refusal)."""
    transport = StdioTransport(sys.executable, [str(HERE / "fastmcp4_server.py")])
    async with Client(transport, roots=Roots(tree.project), mode="legacy") as c:
        assert await read(c, tree.project / "hello.txt") == (False, "hello from project")
        is_error, text = await read(c, tree.project / "escape" / "secret.txt")
        assert is_error
        assert "TOP SECRET" not in text


async def test_over_streamable_http(tree: Tree, era: str) -> None:
    """The same server as a subprocess on streamable HTTP: the roots/list of a legacy connection rides the
    waiting call's response stream; on 2026-07-28 the roots come with the retried call."""
    command = [sys.executable, str(HERE / "fastmcp4_server.py")]
    async with (
        subprocess_http_url(command, tree.base / "server.log") as url,
        Client(url, roots=Roots(tree.project), mode=ERAS[era]) as c,
    ):
        assert await read(c, tree.project / "hello.txt") == (False, "hello from project")
        is_error, text = await read(c, tree.project / "escape" / "secret.txt")
        assert is_error
        assert "TOP SECRET" not in text


async def test_guard_roots_outside_a_guarded_call(tree: Tree, era: str) -> None:
    guard = make_guard(tree)
    server = make_server(guard)

    @server.tool
    async def where(ctx: Context) -> str:
        return ",".join(str(root.path) for root in await guard.roots(ctx))

    async with client(server, era, Roots(tree.project)) as c:
        result = await c.call_tool("where", {}, raise_on_error=False)
    text = "".join(getattr(block, "text", "") for block in result.content)
    if era == "legacy":
        assert (result.is_error, text) == (False, str(tree.project))
    else:
        # On 2026-07-28 only a guarded call can ask for the roots: the error says how to get them.
        assert result.is_error
        assert "@guard.paths" in text


def test_install_checks_the_private_corner_it_relies_on(tree: Tree) -> None:
    from mcp_roots import SDKChanged

    server: FastMCP = FastMCP("moved")
    server.middleware = tuple(server.middleware)  # type: ignore[assignment]  # as if fastmcp changed it
    with pytest.raises(SDKChanged, match=r"FastMCP\.middleware"):
        make_guard(tree).install(server)


def test_install_names_the_supported_frameworks(tree: Tree) -> None:
    with pytest.raises(TypeError, match=r"fastmcp 4\.x FastMCP.*mcp 1\.x FastMCP"):
        make_guard(tree).install(object())  # type: ignore[arg-type]
