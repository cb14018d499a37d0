"""The stdio transport of ``mcp-roots serve``.
The pipes are read and written from the event loop; the SDK still frames.
"""

# The stdio transport of ``mcp-roots serve``: the pipes (or Unix stream sockets, which Node gives a child)
# read and written from the event loop, not a worker-thread hop per line as the SDK's ``stdio_server()`` does;
# the SDK's own ``stdio_server(stdin=..., stdout=...)`` still does the framing, so parsing and errors are the
# SDK's.

from __future__ import annotations

import contextlib
import logging
import os
import re
import select
import socket
import stat
import sys
from collections import deque
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, cast

import anyio
import anyio.to_thread

if TYPE_CHECKING:
    from mcp.server import MCPServer

__all__ = [
    "DEFAULT_MAX_LINE_BYTES",
    "StdinLines",
    "StdoutWriter",
    "pipes_are_the_wire",
    "pipes_claimed",
    "serve_stdio",
    "write_all",
]

logger = logging.getLogger("mcp_roots")

DEFAULT_MAX_LINE_BYTES = 32 * 1024 * 1024
"""The longest message (one line of JSON, in bytes) the transport takes from a client; longer ones are
dropped (the SDK's transport has no bound: a client could make it hold any amount of memory)."""

_READ_CHUNK = 64 * 1024
_ENCODE_CHUNK = 1024 * 1024
# Line ends as the SDK's text wrapper sees them (universal newlines): \r\n, \r or \n.
_LINE_END = re.compile(rb"\r\n|\r|\n")


class StdinLines:
    """The lines of a pipe, as ``async for line in`` over the SDK's UTF-8 text wrapper gives them.

    Universal newlines (each ending becomes ``"\\n"``), undecodable bytes replaced by U+FFFD, a last line
    without an ending still given at EOF; a line longer than ``max_line_bytes`` is dropped with a warning and
    never held whole (the buffer stays below ``max_line_bytes`` + one read).
    """

    def __init__(self, fd: int, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> None:
        if max_line_bytes < 1:
            raise ValueError(f"max_line_bytes must be at least 1, not {max_line_bytes}")
        self._fd = fd
        self._max = max_line_bytes
        self._buffer = bytearray()
        self._lines: deque[str] = deque()
        self._dropping = False  # inside a line already found too long: skip to its end
        self._eof = False

    def __aiter__(self) -> StdinLines:
        return self

    async def __anext__(self) -> str:
        while not self._lines:
            if self._eof:
                # The SDK's dispatcher cancels the requests still in flight when the stream ends; its reader
                # sees EOF one worker-thread round trip after the last line, so do the same once here:
                # requests sent just before EOF get the chance they get on the SDK's transport.
                await anyio.to_thread.run_sync(_nothing)
                raise StopAsyncIteration
            await anyio.wait_readable(self._fd)
            self.feed(os.read(self._fd, _READ_CHUNK))
        return self._lines.popleft()

    @property
    def held(self) -> int:
        """Bytes read and held that do not yet make a whole line."""
        return len(self._buffer)

    @property
    def at_eof(self) -> bool:
        """Whether the pipe has ended (lines may still be queued)."""
        return self._eof

    def put_back(self, lines: list[str]) -> None:
        """Queue ``lines`` before the ones queued now: they are given first."""
        self._lines.extendleft(reversed(lines))

    def ready(self) -> list[str]:
        """Take the complete lines queued so far (the ones ``async for`` would give next)."""
        lines = list(self._lines)
        self._lines.clear()
        return lines

    def feed(self, chunk: bytes) -> None:
        """Take the next bytes read (``b""`` is EOF) and queue the complete lines they end."""
        if not chunk:
            self._eof = True
        # The bytes held have no line end, except maybe a last \r: scan only from there (a long line is
        # scanned once, not once per read).
        scan_from = max(0, len(self._buffer) - 1)
        self._buffer += chunk
        start = 0
        for end in _LINE_END.finditer(self._buffer, scan_from):
            if end.group() == b"\r" and end.end() == len(self._buffer) and not self._eof:
                break  # may be the first half of \r\n: wait for the next byte
            self._take(self._buffer[start : end.start()])
            self._dropping = False
            start = end.end()
        del self._buffer[:start]
        if self._eof:
            if self._buffer:
                self._take(self._buffer)
            self._buffer.clear()
        elif len(self._buffer) > self._max:
            if not self._dropping:
                self._refuse(len(self._buffer))
            self._dropping = True
            self._buffer.clear()

    def _take(self, line: bytearray) -> None:
        if self._dropping:
            return
        if len(line) > self._max:
            self._refuse(len(line))
            return
        self._lines.append(line.decode("utf-8", "replace") + "\n")

    def _refuse(self, size: int) -> None:
        logger.warning(
            "dropped a message from the client: longer than %d bytes (at least %d), the most the "
            "stdio transport takes in one line (--max-message-bytes)",
            self._max,
            size,
        )


class StdoutWriter:
    """``write`` + ``flush`` of the SDK's stdout, for a pipe: an answer that fits the pipe's atomic size
    (``PIPE_BUF``) and finds the pipe writable is written from the event loop; a larger one, or one that
    would wait for the client to read, is written in a worker thread as the SDK does."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._pending: list[str] = []
        self._poll = select.poll()
        self._poll.register(fd, select.POLLOUT)

    async def write(self, text: str) -> int:
        self._pending.append(text)
        return len(text)

    async def flush(self) -> None:
        text = "".join(self._pending)
        self._pending.clear()
        if len(text) > _ENCODE_CHUNK and text.isascii():
            # A large answer (a whole directory_tree): encoded a piece at a time as it is written, so
            # the process never holds a second, encoded copy of it (ASCII: no piece can fail to encode).
            await anyio.to_thread.run_sync(_write_pieces, self._fd, text)
            return
        data = text.encode("utf-8")
        if len(data) <= select.PIPE_BUF and self._poll.poll(0):
            # A pipe that polls writable has a free page: a write of at most PIPE_BUF bytes neither blocks
            # nor splits (POSIX pipe atomicity), so it cannot stall the event loop. A Unix stream socket
            # polls writable while at most a quarter of its send buffer is in use (unix_writable), so such
            # a write fits whole there too.
            written = os.write(self._fd, data)
            if written == len(data):
                return
            data = data[written:]
        await anyio.to_thread.run_sync(write_all, self._fd, data)


def _nothing() -> None:
    pass


def _write_pieces(fd: int, text: str) -> None:
    for start in range(0, len(text), _ENCODE_CHUNK):
        write_all(fd, text[start : start + _ENCODE_CHUNK].encode("ascii"))


def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to ``fd``, however many writes it takes."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _is_stream(fd: int) -> bool:
    """Whether ``fd`` is a pipe or a Unix stream socket: how clients start a stdio server (Node, and so
    the desktop hosts built on it and the TypeScript SDK's client, gives a child socket pairs)."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    if stat.S_ISFIFO(mode):
        return True
    if not stat.S_ISSOCK(mode):
        return False
    try:
        with socket.socket(fileno=os.dup(fd)) as sock:
            return sock.family == socket.AF_UNIX and sock.type == socket.SOCK_STREAM
    except OSError:
        return False


@contextlib.contextmanager
def pipes_claimed() -> Iterator[tuple[int, int]]:
    """Take fds 0 and 1 for the wire, as the SDK's ``stdio_server()`` does: the wire moves to private
    descriptors, fd 0 reads the null device and fd 1 goes to stderr (so a tool's or a child's stray
    output cannot corrupt a frame), and both are put back on exit. Yields (wire in, wire out)."""
    wire_in = os.dup(0)
    wire_out = os.dup(1)
    try:
        # Best effort, as the SDK's: where the null device cannot be opened (a sandbox), fd 0 stays the wire.
        with contextlib.suppress(OSError):
            null = os.open(os.devnull, os.O_RDONLY)
            try:
                os.dup2(null, 0)
            finally:
                os.close(null)
        try:
            os.dup2(2, 1)
        except OSError:  # no stderr: stray output goes nowhere rather than onto the wire
            with contextlib.suppress(OSError):
                sink = os.open(os.devnull, os.O_WRONLY)
                try:
                    os.dup2(sink, 1)
                finally:
                    os.close(sink)
        yield wire_in, wire_out
    finally:
        with contextlib.suppress(OSError):
            os.dup2(wire_in, 0)
        with contextlib.suppress(OSError):
            os.dup2(wire_out, 1)
        os.close(wire_in)
        os.close(wire_out)


async def serve_stdio(
    server: MCPServer,
    *,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    wire: tuple[Any, Any] | None = None,
) -> None:
    """Serve ``server`` over this process's stdin and stdout until the client closes stdin.

    Pipes and Unix stream sockets (how MCP clients start a stdio server) take the fast path; anything else
    (a file, a terminal) is left to the SDK's own ``MCPServer.run_stdio_async()``. ``wire``: the (lines in,
    writer out) to use on pipes already claimed (``pipes_claimed``) instead of claiming them here.
    """
    if wire is None and not pipes_are_the_wire():
        await server.run_stdio_async()
        return
    from mcp.server.stdio import stdio_server

    from ..adapters import check_stdio_server, lowlevel_of

    lowlevel = lowlevel_of(server)
    check_stdio_server()
    run: Callable[..., Any] = lowlevel.run
    with contextlib.ExitStack() as stack:
        if wire is None:
            wire_in, wire_out = stack.enter_context(pipes_claimed())
            wire = (StdinLines(wire_in, max_line_bytes), StdoutWriter(wire_out))
        stdin = cast(anyio.AsyncFile[str], wire[0])
        stdout = cast(anyio.AsyncFile[str], wire[1])
        async with stdio_server(stdin=stdin, stdout=stdout) as (read_stream, write_stream):
            await run(read_stream, write_stream, lowlevel.create_initialization_options())


def pipes_are_the_wire() -> bool:
    """Whether stdin and stdout are pipes or Unix stream sockets (how MCP clients start a stdio server) on a
    POSIX system."""
    return sys.platform != "win32" and _is_stream(0) and _is_stream(1)
