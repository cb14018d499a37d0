"""Replicas behind a load balancer: a 2026-07-28 call whose rounds land on different replicas.

A guarded tool on 2026-07-28 answers its first round with a roots/list input request and a sealed
`requestState`; the client's retry may reach another replica. These tests run real reference servers and
send every HTTP request of one call to the next replica in turn, as a round-robin balancer does: with a key
shared through --state-key-file the call completes (and isolation holds); with each process's own key (the
SDK default, the control) the retry is refused, never granted.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from .interopkit import FILE_SERVER, HttpServer, http_server
from .serverkit import RootsCallback, Tree, text_of

pytestmark = pytest.mark.anyio


class RoundRobin(httpx2.AsyncBaseTransport):
    """Sends each request to the next server in turn (what HAProxy's `balance roundrobin` does to
    requests that carry no Mcp-Session-Id), and remembers which port served which request."""

    def __init__(self, ports: list[int]) -> None:
        self.ports = ports
        self.served: list[int] = []
        self.retries: list[int] = []  # ports that got a tools/call carrying inputResponses (a second round)
        self.inner = httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        port = self.ports[len(self.served) % len(self.ports)]
        self.served.append(port)
        if b'"inputResponses"' in request.content:
            self.retries.append(port)
        request.url = request.url.copy_with(port=port)
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


@pytest.fixture(scope="module")
def replicas(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[HttpServer, HttpServer, HttpServer]]:
    """Two replicas sharing a request-state key, and a third with its own key (the SDK default)."""
    key = tmp_path_factory.mktemp("key") / "state.key"
    key.write_text("0123456789abcdef" * 4 + "\n")
    with contextlib.ExitStack() as stack:
        shared = [stack.enter_context(http_server("--state-key-file", str(key))) for _ in range(2)]
        own_key = stack.enter_context(http_server())
        yield shared[0], shared[1], own_key


@pytest.fixture
def tree(tmp_path: Path) -> Tree:
    return Tree(tmp_path)


def balanced_client(
    ports: list[int], callback: RootsCallback
) -> tuple[Client, RoundRobin, httpx2.AsyncClient]:
    balancer = RoundRobin(ports)
    http = httpx2.AsyncClient(transport=balancer, timeout=httpx2.Timeout(30.0, read=120.0))
    transport = streamable_http_client(f"http://127.0.0.1:{ports[0]}/mcp", http_client=http)
    return Client(transport, mode="2026-07-28", list_roots_callback=callback), balancer, http


async def test_a_shared_key_lets_another_replica_finish_the_call(
    replicas: tuple[HttpServer, HttpServer, HttpServer], tree: Tree
) -> None:
    first, second, _ = replicas
    callback = RootsCallback(tree.project)
    client, balancer, http = balanced_client([first.port, second.port], callback)
    async with http, client:
        own = await client.call_tool("read_text", {"path": str(tree.project / "hello.txt")})
        # The call's first round went to one replica and its retry, with the roots, to the other.
        assert balancer.served[:2] == [first.port, second.port]
        assert balancer.retries == [second.port]
        assert not own.is_error, text_of(own)
        assert text_of(own) == "hello from project"
        other = await client.call_tool("read_text", {"path": str(tree.other / "other.txt")})
        assert other.is_error
        assert text_of(other).startswith("Access denied")
        assert "hello from other" not in text_of(other)
    assert callback.calls >= 2  # roots asked for on every call, whichever replica asked


async def test_without_a_shared_key_the_other_replica_refuses_the_retry(
    replicas: tuple[HttpServer, HttpServer, HttpServer], tree: Tree
) -> None:
    first, _, own_key = replicas
    client, balancer, http = balanced_client([first.port, own_key.port], RootsCallback(tree.project))
    async with http, client:
        for _ in range(2):  # whichever replica starts the call, the other one cannot open its state
            with pytest.raises(MCPError, match="Invalid or expired requestState"):
                await client.call_tool("read_text", {"path": str(tree.project / "hello.txt")})
    assert set(balancer.served) == {first.port, own_key.port}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "--state-key-file {path}: cannot read it"),
        ("too short\n", "--state-key-file {path}: the key must be at least 32 bytes"),
    ],
)
def test_a_bad_state_key_file_stops_the_server_with_one_line(
    tmp_path: Path, content: str | None, message: str
) -> None:
    path = tmp_path / "state.key"
    if content is not None:
        path.write_text(content)
    done = subprocess.run(
        [sys.executable, str(FILE_SERVER), "--http", "1", "--state-key-file", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert message.format(path=path) in done.stderr
    assert "Traceback" not in done.stderr
