"""The stdio transport of `mcp-roots serve` (filesystem/_stdio.py) against the SDK's own: the same bytes in
give the same answers out (framing, bad lines, \\r\\n, non-UTF-8, EOF), plus the bound on a line's length.

The filesystem test suite (tests/filesystem/) runs `mcp-roots serve` on this transport too, through
the official Python and TypeScript clients.
"""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from mcp.server import MCPServer
from mcp.server.lowlevel import Server

from mcp_roots import SDKChanged
from mcp_roots.adapters.mcp2_sdk import check_stdio_server, lowlevel_of
from mcp_roots.filesystem import _stdio
from mcp_roots.filesystem._stdio import StdinLines
from tests import forkserver

SERVER = Path(__file__).parents[1] / "servers" / "fs_stdio_server.py"
GIVE_UP = 120.0  # seconds without a byte from the server: fail instead of hanging (not a timing check)


def message(**fields: Any) -> bytes:
    return json.dumps({"jsonrpc": "2.0", **fields}).encode()


def initialize() -> bytes:
    params = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    }
    return message(id=1, method="initialize", params=params)


def read_call(id: int, path: bytes) -> bytes:
    params = {"name": "read_text_file", "arguments": {"path": "PATH"}}
    return message(id=id, method="tools/call", params=params).replace(b"PATH", path)


class Peer:
    """A server process on pipes, driven a step at a time: send bytes, read the answers they cause."""

    def __init__(self, transport: str, root: Path, *extra: str) -> None:
        self.process = subprocess.Popen(
            forkserver.command(str(SERVER), transport, str(root), *extra),  # a real process, forked warm
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.pending = b""

    def send(self, data: bytes, answers: int) -> list[Any]:
        assert self.process.stdin is not None
        self.process.stdin.write(data)
        self.process.stdin.flush()
        # Answers to requests sent together may come in any order (each request is its own task).
        return sorted((json.loads(self.line()) for _ in range(answers)), key=lambda answer: answer["id"])

    def line(self) -> bytes:
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        while b"\n" not in self.pending:
            ready, _, _ = select.select([fd], [], [], GIVE_UP)
            chunk = os.read(fd, 65536) if ready else b""
            if not chunk:
                pytest.fail(f"the server stopped answering; stderr: {self.stderr()}")
            self.pending += chunk
        line, self.pending = self.pending.split(b"\n", 1)
        return line

    def close(self) -> tuple[list[Any], int]:
        """Close stdin (EOF); the rest of the answers and the exit code."""
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.process.stdin.close()
        rest = self.pending + self.process.stdout.read()
        code = self.process.wait(GIVE_UP)
        return [json.loads(line) for line in rest.splitlines()], code

    def stderr(self) -> str:
        assert self.process.stderr is not None
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        return self.process.stderr.read().decode(errors="replace")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "a.txt").write_text("alpha\n")
    (tmp_path / "é.txt").write_text("accent\n")
    return tmp_path


def transcript(transport: str, root: Path) -> list[Any]:
    peer = Peer(transport, root)
    base = str(root).encode()
    answers = peer.send(initialize() + b"\n", 1)
    answers += peer.send(message(method="notifications/initialized") + b"\n", 0)
    answers += peer.send(b"\n" + b"not json\n" + b'{"jsonrpc": "2.0", "id": 2}\n', 0)
    answers += peer.send(message(id=3, method="no/such/method") + b"\n", 1)
    answers += peer.send(read_call(4, base + b"/a.txt") + b"\r\n", 1)
    # A lone \r ends a line too (universal newlines); undecodable bytes become U+FFFD, as in the SDK's reader.
    answers += peer.send(
        read_call(5, base + b"/\xff\xfe.txt") + b"\r" + read_call(6, base + b"/\xc3\xa9.txt"), 0
    )
    answers += peer.send(b"\n", 2)
    answers += peer.send(message(id=7, method="tools/list") + b"\n", 1)  # longer than PIPE_BUF
    answers += peer.send(b"\n".join(message(id=n, method="ping") for n in range(8, 40)) + b"\n", 32)
    rest, code = peer.close()
    assert code == 0, peer.stderr()
    return [*answers, "EOF", *rest]


def test_same_bytes_same_answers_as_the_sdk_transport(root: Path) -> None:
    fast = transcript("fast", root)
    sdk = transcript("sdk", root)
    assert fast == sdk
    by_id = {a["id"]: a for a in fast if isinstance(a, dict)}
    assert by_id[3]["error"]["code"] == -32601
    assert by_id[4]["result"]["content"][0]["text"] == "alpha\n"
    assert "\ufffd\ufffd.txt" in by_id[5]["result"]["content"][0]["text"]
    assert by_id[6]["result"]["content"][0]["text"] == "accent\n"
    assert len(json.dumps(by_id[7])) > select.PIPE_BUF
    assert sorted(by_id) == [1, 3, 4, 5, 6, 7, *range(8, 40)]


def test_partial_last_line_is_read_at_eof(root: Path) -> None:
    # initialize is the one request the SDK's dispatcher answers before reading on (the others in flight at
    # EOF it cancels), so its answer shows deterministically that a last line without its end is served.
    for transport in ("fast", "sdk"):
        peer = Peer(transport, root)
        peer.send(initialize(), 0)
        rest, code = peer.close()
        assert code == 0, transport
        assert [answer["id"] for answer in rest] == [1], transport


def test_a_line_over_the_cap_is_dropped_and_the_next_is_served(root: Path) -> None:
    cap = 4096
    peer = Peer("fast", root, str(cap))
    peer.send(initialize() + b"\n" + message(method="notifications/initialized") + b"\n", 1)

    def ping(id: int, size: int) -> bytes:
        line = message(id=id, method="ping", params={"_meta": {"pad": ""}})
        return line.replace(b'"pad": ""', b'"pad": "' + b"x" * (size - len(line)) + b'"')

    assert len(ping(2, cap)) == cap
    assert peer.send(ping(2, cap) + b"\n", 1) == [{"jsonrpc": "2.0", "id": 2, "result": {}}]
    # One byte over, and a line of 10 MiB sent in pieces: both dropped, the line after them is served.
    peer.send(ping(3, cap + 1) + b"\n", 0)
    huge = ping(4, 10 * 1024 * 1024)
    for start in range(0, len(huge), 1024 * 1024):
        peer.send(huge[start : start + 1024 * 1024], 0)
    assert peer.send(b"\n" + message(id=5, method="ping") + b"\n", 1) == [
        {"jsonrpc": "2.0", "id": 5, "result": {}}
    ]
    rest, code = peer.close()
    assert (rest, code) == ([], 0)
    log = peer.stderr()
    assert log.count("dropped a message from the client: longer than 4096 bytes") == 2, log


def test_line_buffer_stays_bounded() -> None:
    lines = StdinLines(fd=-1, max_line_bytes=1024 * 1024)
    chunk = b"x" * 65536
    for _ in range(200):  # 12.5 MiB of one line
        lines.feed(chunk)
        assert lines.held <= 1024 * 1024 + len(chunk)
    lines.feed(b"tail\nnext\r")
    assert lines.held == len(b"next\r")  # that \r may be the start of \r\n: not a line end yet
    lines.feed(b"\nlast")
    lines.feed(b"")
    assert lines.ready() == ["next\n", "last\n"]


def test_the_sdk_seams_the_transport_uses_are_there() -> None:
    # Contract with mcp 2.x: MCPServer keeps its low-level Server in _lowlevel_server (private), and
    # stdio_server() takes explicit stdin/stdout streams (public). A move of either must say so.
    assert isinstance(lowlevel_of(MCPServer("contract")), Server)
    check_stdio_server()

    class Moved(MCPServer):
        def __init__(self) -> None:
            super().__init__("moved")
            self._lowlevel_server = None  # type: ignore[assignment]

    with pytest.raises(SDKChanged, match="_lowlevel_server"):
        lowlevel_of(Moved())


def test_cap_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_line_bytes must be at least 1"):
        StdinLines(fd=-1, max_line_bytes=0)


@pytest.mark.anyio
async def test_reads_a_real_pipe_on_the_event_loop() -> None:
    read_end, write_end = os.pipe()
    try:
        lines = StdinLines(read_end)
        got: list[str] = []

        async def reader() -> None:
            async for line in lines:
                got.append(line)

        async with anyio.create_task_group() as tg:
            tg.start_soon(reader)
            for piece in (b'{"a":', b" 1}\n{", b'"b": 2}\r', b"\n\xff\n", b"end"):
                os.write(write_end, piece)
                await anyio.lowlevel.checkpoint()
            os.close(write_end)
            write_end = -1
        assert got == ['{"a": 1}\n', '{"b": 2}\n', "\ufffd\n", "end\n"]
    finally:
        os.close(read_end)
        if write_end >= 0:
            os.close(write_end)


def test_pipes_and_unix_stream_sockets_are_the_wire_other_descriptors_are_not(tmp_path: Path) -> None:
    """Node (so the desktop hosts and the TypeScript SDK's client) starts a child on socket pairs, Python's
    subprocess on pipes: both take this transport; a datagram socket, a file or a TCP socket does not."""
    read_end, write_end = os.pipe()
    streams = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    datagrams = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    file = tmp_path / "f"
    file.write_text("")
    regular = os.open(file, os.O_RDONLY)
    try:
        assert _stdio._is_stream(read_end)
        assert _stdio._is_stream(write_end)
        assert _stdio._is_stream(streams[0].fileno())
        assert not _stdio._is_stream(datagrams[0].fileno())
        assert not _stdio._is_stream(tcp.fileno())
        assert not _stdio._is_stream(regular)
        assert not _stdio._is_stream(-1)
    finally:
        for fd in (read_end, write_end, regular):
            os.close(fd)
        for sock in (*streams, *datagrams, tcp):
            sock.close()
