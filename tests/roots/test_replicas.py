"""Replicas behind a load balancer: a 2026-07-28 call whose rounds land on different replicas.

A guarded tool on 2026-07-28 answers its first round with a roots/list input request (and, if the round
carries state, a `requestState` the SDK seals); the client's retry may reach another replica. These tests
run real servers (the reference example and `mcp-roots serve --http`) and send every HTTP request of one
call to the next replica in turn, as a round-robin balancer does: with a key shared through
--state-key-file the call completes (and isolation holds); with each process's own key (the SDK default)
nothing is ever granted beyond the caller's roots.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.kit import (
    FILE_SERVER,
    HttpServer,
    RootsCallback,
    Tree,
    launch_http,
    serve_command,
    text_of,
    write_token,
)

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


@dataclass(frozen=True)
class Kind:
    """One server under test: how to start it with extra flags, and the name of its text-reading tool."""

    name: str
    command: list[str] | None  # None: examples/file_server.py
    read_tool: str


KINDS = [
    Kind("example", None, "read_text"),
    Kind("serve", [*serve_command()], "read_text_file"),
]


@dataclass
class Replicas:
    kind: Kind
    tree: Tree
    first: HttpServer  # first and second share a request-state key
    second: HttpServer
    own_key: HttpServer  # the SDK default: a key of this process only
    headers: dict[str, str]  # mcp-roots serve's bearer token (the example takes none)


@pytest.fixture(scope="module", params=KINDS, ids=lambda kind: kind.name)
def replicas(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Replicas]:
    """Two replicas sharing a request-state key, and a third with its own key (the SDK default)."""
    kind: Kind = request.param
    base = tmp_path_factory.mktemp(f"replicas-{kind.name}")
    key = base / "state.key"
    key.write_text("0123456789abcdef" * 4 + "\n")
    tree = Tree(base / "tree")
    # mcp-roots serve needs directories or a ceiling; the example serves whatever roots the client sends.
    flags: list[str] = []
    headers: dict[str, str] = {}
    if kind.command is not None:  # every replica reads the same token file, as behind HAProxy
        token_file, token = write_token(base)
        flags = ["--ceiling", str(tree.base), "--token-file", str(token_file)]
        headers = {"Authorization": f"Bearer {token}"}

    def start(*extra: str) -> HttpServer:
        return stack.enter_context(
            launch_http(kind.command or [sys.executable, str(FILE_SERVER)], *flags, *extra)
        )

    with contextlib.ExitStack() as stack:
        shared = [start("--state-key-file", str(key)) for _ in range(2)]
        yield Replicas(kind, tree, shared[0], shared[1], start(), headers)


def balanced_client(
    ports: list[int], callback: RootsCallback, headers: dict[str, str]
) -> tuple[Client, RoundRobin, httpx2.AsyncClient]:
    balancer = RoundRobin(ports)
    http = httpx2.AsyncClient(transport=balancer, timeout=httpx2.Timeout(30.0, read=120.0), headers=headers)
    transport = streamable_http_client(f"http://127.0.0.1:{ports[0]}/mcp", http_client=http)
    return Client(transport, mode="2026-07-28", list_roots_callback=callback), balancer, http


async def test_a_shared_key_lets_another_replica_finish_the_call(replicas: Replicas) -> None:
    first, second, tree, read = replicas.first, replicas.second, replicas.tree, replicas.kind.read_tool
    callback = RootsCallback(tree.project)
    client, balancer, http = balanced_client([first.port, second.port], callback, replicas.headers)
    async with http, client:
        own = await client.call_tool(read, {"path": str(tree.project / "hello.txt")})
        # The call's first round went to one replica and its retry, with the roots, to the other.
        assert balancer.served[:2] == [first.port, second.port]
        assert balancer.retries == [second.port]
        assert not own.is_error, text_of(own)
        assert text_of(own) == "hello from project"
        other = await client.call_tool(read, {"path": str(tree.other / "other.txt")})
        assert other.is_error
        assert text_of(other).startswith("Access denied")
        assert "hello from other" not in text_of(other)
    assert callback.calls >= 2  # roots asked for on every call, whichever replica asked


async def test_without_a_shared_key_the_other_replica_judges_the_retry_by_its_own_roots(
    replicas: Replicas,
) -> None:
    # The guard's roots round seals no server state (no requestState): the retry carries the client's roots
    # and is judged by them alone, so any replica can finish it, whatever its key. A client gains nothing by
    # skipping the first round: on 2026-07-28 the roots are the caller's own claim, per request, either way.
    first, own_key, tree, read = replicas.first, replicas.own_key, replicas.tree, replicas.kind.read_tool
    client, balancer, http = balanced_client(
        [first.port, own_key.port], RootsCallback(tree.project), replicas.headers
    )
    async with http, client:
        for _ in range(2):  # whichever replica starts the call, the other one gets its retry
            own = await client.call_tool(read, {"path": str(tree.project / "hello.txt")})
            assert not own.is_error, text_of(own)
            assert text_of(own) == "hello from project"
            other = await client.call_tool(read, {"path": str(tree.other / "other.txt")})
            assert other.is_error
            assert text_of(other).startswith("Access denied")
            assert "hello from other" not in text_of(other)
    assert set(balancer.retries) == {first.port, own_key.port}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "state key file {path}: cannot read it"),
        ("too short\n", "state key file {path}: the key must be at least 32 bytes"),
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
