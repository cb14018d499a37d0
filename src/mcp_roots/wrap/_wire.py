"""Raw JSON-RPC over stdio for wrap: one JSON object per line on a pipe, bounded in length and in what parsing
it may cost (a line too costly to parse is handed on unparsed, ``Unparsed``), read and written from the event
loop with non-blocking descriptors. Messages stay plain dicts: no model sits between the peers.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
from collections import deque
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.to_thread

from ._options import DEFAULT_MAX_MESSAGE_BYTES

__all__ = [
    "PARSE_FACTOR",
    "Lines",
    "Unparsed",
    "Writer",
    "encode",
    "error",
    "invalid",
    "invalid_reply",
    "parse_cost",
    "request",
    "result",
    "valid_id",
]

logger = logging.getLogger("mcp_roots.wrap")

_READ_CHUNK = 256 * 1024
#: Lines longer than this are parsed on a worker thread: the event loop keeps reading the other peer.
_THREAD_PARSE = 64 * 1024
#: The parsed form of one message may take at most this many times --max-message-bytes (``parse_cost``).
PARSE_FACTOR = 4
#: What one JSON value may cost parsed, at most, beside its text: an empty dict and its slot in the parent.
_VALUE_COST = 128
#: The bound for a small --max-message-bytes: what a message's parsed form may take, whatever its size.
_PARSE_FLOOR = 1024 * 1024
INVALID_REQUEST = -32600

Message = dict[str, Any]

_ID = rb'(-?\d{1,18}|"(?:[^"\\\n]|\\.){0,256}")'
_HEAD_ID = re.compile(rb'\A\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*' + _ID + rb"\s*[,}]")
_TAIL_ID = re.compile(rb'[,{]\s*"id"\s*:\s*' + _ID + rb'\s*(?:,\s*"jsonrpc"\s*:\s*"2\.0"\s*)?\}\s*\Z')
_EDGE = 512


@dataclass(frozen=True)
class Unparsed:
    """A line whose parsed form would cost more than the bound: kept as bytes, with its top-level ``id``
    when it stands first or last in the line (where SDKs write it), and where in the line it is."""

    raw: bytes
    id: int | str | None
    id_span: tuple[int, int] | None
    cost: int

    @property
    def balanced(self) -> bool:
        """Braces and brackets close as often as they open (a cheap sign of one whole JSON object)."""
        raw = self.raw
        return raw.count(b"{") == raw.count(b"}") and raw.count(b"[") == raw.count(b"]")

    def refusal(self) -> str:
        return (
            f"a message of {len(self.raw)} bytes whose parsed form would take about {self.cost} bytes, "
            "more than wrap holds for one message (see --max-message-bytes)"
        )

    def with_id(self, new_id: object) -> bytes:
        """The line with its id replaced by ``new_id`` (the line otherwise as it came)."""
        assert self.id_span is not None
        start, end = self.id_span
        return self.raw[:start] + json.dumps(new_id).encode() + self.raw[end:] + b"\n"


def parse_cost(line: bytes) -> int:
    """An upper bound on the bytes ``json.loads(line)`` holds: the text decoded and its strings copied (four
    bytes a character unless ASCII), and every value (each follows ``{ [ , :`` or starts the line) at its
    largest (an empty object in its parent), counted with C-speed byte counts before anything is parsed."""
    values = 1 + sum(line.count(c) for c in (b"{", b"[", b",", b":"))
    width = 1 if line.isascii() else 4
    return 2 * width * len(line) + _VALUE_COST * values


def _find_id(line: bytes) -> tuple[int | str | None, tuple[int, int] | None]:
    for pattern, text, offset in (
        (_HEAD_ID, line[:_EDGE], 0),
        (_TAIL_ID, line[-_EDGE:], max(0, len(line) - _EDGE)),
    ):
        found = pattern.search(text)
        if found is not None:
            try:
                value = json.loads(found.group(1))
            except ValueError:
                continue
            if isinstance(value, int | str):
                return value, (offset + found.start(1), offset + found.end(1))
    return None, None


def valid_id(value: object) -> bool:
    """A JSON-RPC id wrap carries: a string or an integer (not a boolean), or a finite number."""
    if isinstance(value, bool):
        return False
    return isinstance(value, int | str) or (isinstance(value, float) and math.isfinite(value))


def invalid(message: Message) -> str | None:
    """Why ``message`` is not a JSON-RPC request, notification or response that MCP sends, or None."""
    if "method" in message:
        if not isinstance(message["method"], str):
            return "its method is not a string"
        if "id" in message and not valid_id(message["id"]):
            return "its id is not a string or a number"
        if "params" in message and not isinstance(message["params"], dict):
            return "its params are not an object"
        return None
    if "id" not in message:
        return "it has neither a method nor an id"
    if not valid_id(message["id"]) and message["id"] is not None:
        return "its id is not a string or a number"
    if ("result" in message) == ("error" in message):
        return "an answer has either a result or an error"
    if "error" in message and not isinstance(message["error"], dict):
        return "its error is not an object"
    return None


def invalid_reply(message: Message, why: str) -> Message | None:
    """The error answering an invalid request (by its id, or null when the id is what is wrong), or None
    for anything else (dropped)."""
    if "method" not in message or "id" not in message:
        return None
    return error(
        message["id"] if valid_id(message["id"]) else None, INVALID_REQUEST, f"invalid request: {why}"
    )


class Lines:
    """The JSON objects arriving on a pipe, one per line; ``None`` at end of input. A line that is not a JSON
    object, or longer than ``max_bytes``, is dropped with a warning naming ``peer``; one whose parsed form
    would cost more than ``PARSE_FACTOR`` times ``max_bytes`` comes as ``Unparsed``."""

    def __init__(self, fd: int, peer: str, max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> None:
        os.set_blocking(fd, False)
        self._fd = fd
        self._peer = peer
        self._max = max_bytes
        self._buffer = bytearray()
        self._ready: deque[bytes] = deque()
        self._dropping = False
        self._eof = False

    async def receive(self) -> Message | Unparsed | None:
        while True:
            while self._ready:
                line = self._ready.popleft()
                if len(line) > _THREAD_PARSE:
                    message = await anyio.to_thread.run_sync(self._parse, line)
                else:
                    message = self._parse(line)
                if message is not None:
                    return message
            if self._eof:
                return None
            try:
                chunk = os.read(self._fd, _READ_CHUNK)
            except BlockingIOError:
                try:
                    await anyio.wait_readable(self._fd)
                except (anyio.ClosedResourceError, OSError):
                    chunk = b""  # closed under us: the end, and the descriptor is never read again
                else:
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
            elif self._buffer:
                self._buffer += piece
                self._ready.append(bytes(self._buffer))
            else:
                self._ready.append(piece)
            self._buffer = bytearray()  # a new one: a long line's memory goes with it
            start = end + 1
        if not self._dropping:
            self._buffer += chunk[start:]
            if len(self._buffer) > self._max:
                self._too_long()
                self._dropping = True
                self._buffer = bytearray()

    def _too_long(self) -> None:
        logger.warning(
            "dropped a message from %s: longer than %d bytes (--max-message-bytes)", self._peer, self._max
        )

    def _parse(self, line: bytes) -> Message | Unparsed | None:
        line = line.strip()
        if not line:
            return None
        cost = parse_cost(line)
        if cost > PARSE_FACTOR * max(self._max, _PARSE_FLOOR):
            id_, span = _find_id(line)
            return Unparsed(line, id_, span, cost)
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

    async def send(self, message: Message | bytes) -> None:
        data = memoryview(message if isinstance(message, bytes) else encode(message))
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
