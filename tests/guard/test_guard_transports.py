"""The guard's safety guarantees over real transports: tests/servers/order_server.py as a stdio
subprocess and as a streamable HTTP server (stateful, JSON response, stateless), the official Client on
the other end.

Decorator in either order, install() forgotten, and a low-level Server handler; each refusal next to a
naive control that leaks.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

from tests import forkserver
from tests.kit import RootsCallback, Tree, launch_http, text_of

pytestmark = pytest.mark.anyio

SCRIPT = Path(__file__).resolve().parents[1] / "servers" / "order_server.py"
HTTP = ["http", "http-json", "http-stateless"]


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Tree:
    return Tree(tmp_path_factory.mktemp("transports"))


class _Servers:
    """One HTTP server per command line, shared by this module's tests (each start costs a second)."""

    def __init__(self) -> None:
        self.stack = contextlib.ExitStack()
        self.urls: dict[tuple[str, ...], str] = {}

    def url(self, *args: str) -> str:
        if args not in self.urls:
            server = self.stack.enter_context(launch_http([sys.executable, str(SCRIPT)], *args))
            self.urls[args] = server.url
        return self.urls[args]


@pytest.fixture(scope="module")
def servers() -> Iterator[_Servers]:
    servers = _Servers()
    with servers.stack:
        yield servers


@contextlib.asynccontextmanager
async def connect(
    transport: str, kind: str, tree: Tree, servers: _Servers, *extra: str, mode: str = "legacy"
) -> AsyncIterator[Client]:
    args = (kind, "--roots", str(tree.fallback), *extra)
    callback = RootsCallback(tree.project)
    if transport == "stdio":
        command = forkserver.command(str(SCRIPT), *args)  # a real process, forked warm
        params = StdioServerParameters(command=command[0], args=command[1:])
        target: Any = params
    else:
        flags = {"http": (), "http-json": ("--json-response",), "http-stateless": ("--stateless",)}[transport]
        target = servers.url(*args, *flags)
    async with Client(target, mode=mode, list_roots_callback=callback) as client:
        yield client


async def read(client: Client, path: Path) -> tuple[bool, str]:
    result = await client.call_tool("read_text", {"path": str(path)})
    return bool(result.is_error), text_of(result)


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_naive_server_leaks_over_real_transports(transport: str, tree: Tree, servers: _Servers) -> None:
    async with connect(transport, "naive", tree, servers) as client:
        assert await read(client, tree.outside / "secret.txt") == (False, "TOP SECRET")


@pytest.mark.parametrize("kind", ["below", "above", "lowlevel"])
@pytest.mark.parametrize("transport", ["stdio", *HTTP])
async def test_outside_reads_are_refused_over_real_transports(
    transport: str, kind: str, tree: Tree, servers: _Servers
) -> None:
    # Stateless HTTP has no back-channel: the fallback roots apply there, the client's elsewhere.
    inside = tree.fallback / "fb.txt" if transport == "http-stateless" else tree.project / "hello.txt"
    async with connect(transport, kind, tree, servers) as client:
        for outside in (tree.outside / "secret.txt", tree.project / "escape" / "secret.txt"):
            refused, text = await read(client, outside)
            assert refused
            assert "TOP SECRET" not in text
        ok, text = await read(client, inside)
        assert not ok, text
        assert text.startswith("hello from")


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_install_forgotten_refuses_over_real_transports(
    transport: str, tree: Tree, servers: _Servers
) -> None:
    async with connect(transport, "below", tree, servers, "--no-install") as client:
        for path in (tree.outside / "secret.txt", tree.project / "hello.txt"):
            refused, text = await read(client, path)
            assert refused
            assert "guard.install(server) was not called" in text


@pytest.mark.parametrize("kind", ["below", "above", "lowlevel"])
@pytest.mark.parametrize("transport", ["stdio", *HTTP])
async def test_modern_era_gets_the_client_roots_over_real_transports(
    transport: str, kind: str, tree: Tree, servers: _Servers
) -> None:
    """2026-07-28 (the default of the official client): every transport, stateless included, gets the
    client's roots by multi-round-trip, for decorated tools and low-level handlers alike."""
    async with connect(transport, kind, tree, servers, mode="auto") as client:
        assert client.session.protocol_version == "2026-07-28"
        refused, text = await read(client, tree.outside / "secret.txt")
        assert refused
        assert "TOP SECRET" not in text
        assert await read(client, tree.project / "hello.txt") == (False, "hello from project")
        assert (await read(client, tree.fallback / "fb.txt"))[0]  # the client's roots, not the fallback
