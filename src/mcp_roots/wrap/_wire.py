"""Raw JSON-RPC over stdio for wrap: one JSON object per line on a pipe, read and written from the event loop
(non-blocking descriptors, ``anyio.wait_readable``/``wait_writable``), bounded in line length. Messages stay
plain dicts: no model sits between the peers, so no field is ever dropped.
"""

from __future__ import annotations

import json
import logging
import os
from collections import deque
from typing import Any

import anyio

from ._options import DEFAULT_MAX_MESSAGE_BYTES

__all__ = ["Lines", "Writer", "encode", "error", "request", "result"]

logger = logging.getLogger("mcp_roots.wrap")

_READ_CHUNK = 256 * 1024

Message = dict[str, Any]


class Lines:
    """The JSON objects arriving on a pipe, one per line; ``None`` at end of input. A line that is not a JSON
    object, or longer than ``max_bytes``, is dropped with a warning naming ``peer``."""

    def __init__(self, fd: int, peer: str, max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> None:
        os.set_blocking(fd, False)
        self._fd = fd
        self._peer = peer
        self._max = max_bytes
        self._buffer = bytearray()
        self._ready: deque[bytes] = deque()
        self._dropping = False
        self._eof = False

    async def receive(self) -> Message | None:
        while True:
            while self._ready:
                message = self._parse(self._ready.popleft())
                if message is not None:
                    return message
            if self._eof:
                return None
            try:
                chunk = os.read(self._fd, _READ_CHUNK)
            except BlockingIOError:
                await anyio.wait_readable(self._fd)
                continue
            except OSError:
                chunk = b""
            self._feed(chunk)

    def _feed(self, chunk: bytes) -> None:
        if not chunk:
            self._eof = True
            if self._buffer and not self._dropping:
                self._ready.append(bytes(self._buffer))
            self._buffer.clear()
            return
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            if end < 0:
                break
            piece = chunk[start:end]
            if self._dropping:
                self._dropping = False
            elif len(self._buffer) + len(piece) > self._max:
                self._too_long()
            else:
                self._buffer += piece
                self._ready.append(bytes(self._buffer))
            self._buffer.clear()
            start = end + 1
        if not self._dropping:
            self._buffer += chunk[start:]
            if len(self._buffer) > self._max:
                self._too_long()
                self._dropping = True
                self._buffer.clear()

    def _too_long(self) -> None:
        logger.warning(
            "dropped a message from %s: longer than %d bytes (--max-message-bytes)", self._peer, self._max
        )

    def _parse(self, line: bytes) -> Message | None:
        line = line.strip()
        if not line:
            return None
        try:
            message = json.loads(line)
        except ValueError:
            logger.warning("dropped a line from %s that is not JSON (%d bytes)", self._peer, len(line))
            return None
        except RecursionError:  # the parser's own bound on nesting: a peer's line must not end wrap
            logger.warning("dropped a message from %s nested deeper than JSON is read here", self._peer)
            return None
        if not isinstance(message, dict):
            logger.warning(
                "dropped a message from %s that is not a JSON object (batches are not MCP)", self._peer
            )
            return None
        return message


class Writer:
    """Whole lines to a pipe, one message at a time (a lock keeps two senders' lines apart)."""

    def __init__(self, fd: int) -> None:
        os.set_blocking(fd, False)
        self._fd = fd
        self._lock = anyio.Lock()
        self.closed = False

    async def send(self, message: Message) -> None:
        data = memoryview(encode(message))
        async with self._lock:
            while data and not self.closed:
                try:
                    data = data[os.write(self._fd, data) :]
                except BlockingIOError:
                    await anyio.wait_writable(self._fd)
                except OSError:  # the peer went away: its reader sees the end
                    self.closed = True


def encode(message: Message) -> bytes:
    return (
        json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogateescape")
        + b"\n"
    )


def request(id_: object, method: str, params: object = None) -> Message:
    message: Message = {"jsonrpc": "2.0", "id": id_, "method": method}
    if params is not None:
        message["params"] = params
    return message


def result(id_: object, value: object) -> Message:
    return {"jsonrpc": "2.0", "id": id_, "result": value}


def error(id_: object, code: int, text: str) -> Message:
    return {"jsonrpc": "2.0", "id": id_, "error": {"code": code, "message": text}}
