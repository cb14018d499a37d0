"""One budget for the bytes of answers in flight over HTTP.
Per process and per session; a read reserves its answer's bytes before it reads.
"""

# One budget for the bytes of answers in flight over HTTP, per process and per session (per connection for a
# request without a session): a read reserves the bytes its answer will take, serialized, before it reads; the
# reservation is freed once the answer has been written out to the client's connection, or the connection is
# gone. A read past the budget waits briefly for others to finish, then fails with a one-line error.
#
# ``AnswerAccounting`` is the ASGI middleware that gives each HTTP request its ``Ledger`` (found by a tool
# through the Starlette request the SDK hands it) and frees it when the request's answer is out.

from __future__ import annotations

import re
from collections.abc import Hashable
from dataclasses import dataclass

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = [
    "DEFAULT_PROCESS_BYTES",
    "DEFAULT_SESSION_BYTES",
    "DEFAULT_WAIT_SECONDS",
    "AnswerAccounting",
    "AnswerBudget",
    "BudgetExceeded",
    "Ledger",
    "answer_bytes",
    "escape_overhead",
    "ledger_of",
]

MIB = 1024 * 1024
#: What an answer holds per byte of the text it carries, until the client has read it: the text is in
#: ``content`` and in ``structuredContent`` (as the official server answers), and the serialized answer is
#: held twice, by the response and by the server's write buffer (measured: test_serve_http_limits.py).
HELD_COPIES = 4
#: All answers in flight in one process: four reads of the largest file (16 MiB: 64 MiB held each).
DEFAULT_PROCESS_BYTES = 320 * MIB
#: One session's (or one connection's) answers in flight: room for one read of the largest file.
DEFAULT_SESSION_BYTES = 80 * MIB
#: How long a read waits for room before it fails.
DEFAULT_WAIT_SECONDS = 5.0
#: An answer's envelope: the JSON-RPC and SSE framing around the text, the tool's structured result.
ENVELOPE_BYTES = 1024

_SCOPE_KEY = "mcp_roots.answers"
# Characters JSON writes as two characters (\" \\ \n \r \t \b \f), and the other controls, as six (\u00XX).
_SHORT_ESCAPES = ('"', "\\", "\n", "\r", "\t", "\b", "\f")
_LONG_ESCAPES = re.compile(r"[\x00-\x07\x0b\x0e-\x1f]")


class BudgetExceeded(Exception):
    """A read's answer found no room in the budget within the wait; the message is the client's line."""


def escape_overhead(text: str) -> int:
    """The bytes JSON adds to ``text`` in escapes (its UTF-8 length plus this is its serialized length)."""
    short = sum(text.count(char) for char in _SHORT_ESCAPES)
    return short + 5 * len(_LONG_ESCAPES.findall(text))


def answer_bytes(size: int) -> int:
    """What the process holds for an answer carrying ``size`` bytes of serialized text (or base64) until
    the client has read it: ``HELD_COPIES`` of it and the envelope."""
    return HELD_COPIES * size + ENVELOPE_BYTES


class AnswerBudget:
    """The bytes reserved for answers in flight, per process and per key (a session or a connection)."""

    def __init__(
        self,
        process_bytes: int = DEFAULT_PROCESS_BYTES,
        session_bytes: int = DEFAULT_SESSION_BYTES,
        wait_seconds: float = DEFAULT_WAIT_SECONDS,
    ) -> None:
        if process_bytes < 1 or session_bytes < 1:
            raise ValueError("answer budgets must be at least 1 byte")
        self.process_bytes = process_bytes
        self.session_bytes = min(session_bytes, process_bytes)
        self.wait_seconds = wait_seconds
        self.held = 0
        #: the most ever held at once (what the tests compare with the budget)
        self.peak = 0
        #: reads refused for want of room
        self.refused = 0
        self._by_key: dict[Hashable, int] = {}
        self._freed: anyio.Event | None = None

    def _fits(self, key: Hashable, size: int) -> bool:
        return (
            self.held + size <= self.process_bytes and self._by_key.get(key, 0) + size <= self.session_bytes
        )

    async def acquire(self, key: Hashable, size: int) -> None:
        """Reserve ``size`` bytes for ``key``, waiting up to ``wait_seconds`` for room."""
        if size > self.session_bytes:
            self.refused += 1
            raise BudgetExceeded(
                f"the answer would hold {size} bytes, more than the {self.session_bytes} bytes one session "
                "may have in flight (serve --max-session-answer-bytes); read less at once (head, tail)"
            )
        with anyio.move_on_after(self.wait_seconds):
            while not self._fits(key, size):
                if self._freed is None:
                    self._freed = anyio.Event()
                await self._freed.wait()
            self.held += size
            self._by_key[key] = self._by_key.get(key, 0) + size
            self.peak = max(self.peak, self.held)
            return
        self.refused += 1
        raise BudgetExceeded(
            f"busy: answers to other calls fill the {self.process_bytes} bytes this server keeps for "
            f"answers in flight (or this session's {self.session_bytes}); try again"
        )

    def release(self, key: Hashable, size: int) -> None:
        if size <= 0:
            return
        self.held -= size
        left = self._by_key.get(key, 0) - size
        if left > 0:
            self._by_key[key] = left
        else:
            self._by_key.pop(key, None)
        if self._freed is not None:
            self._freed.set()
            self._freed = None


@dataclass
class Ledger:
    """One HTTP request's reservations, freed together when its answer is out."""

    budget: AnswerBudget
    key: Hashable
    held: int = 0

    async def reserve(self, size: int) -> None:
        await self.budget.acquire(self.key, size)
        self.held += size

    def release(self) -> None:
        held, self.held = self.held, 0
        self.budget.release(self.key, held)


def ledger_of(request: object) -> Ledger | None:
    """The ledger of the HTTP request a tool call came in (the SDK's ``request_context.request``), or
    None (stdio, or a server without the middleware)."""
    scope = getattr(request, "scope", None)
    ledger = scope.get(_SCOPE_KEY) if isinstance(scope, dict) else None
    return ledger if isinstance(ledger, Ledger) else None


def _key_of(scope: Scope) -> Hashable:
    for name, value in scope.get("headers", ()):
        if name == b"mcp-session-id":
            return ("session", bytes(value))
    return ("connection", tuple(scope.get("client") or ()), id(scope))


class AnswerAccounting:
    """ASGI middleware: each HTTP request gets a ``Ledger``; its reservations are freed once the answer's
    last byte has left the process's buffers (the last body message is sent after a drain), or the
    request ended otherwise (an error, the client gone)."""

    def __init__(self, app: ASGIApp, budget: AnswerBudget) -> None:
        self.app = app
        self.budget = budget

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        ledger = Ledger(self.budget, _key_of(scope))
        scope[_SCOPE_KEY] = ledger

        async def send_drained(message: Message) -> None:
            last = message["type"] == "http.response.body" and not message.get("more_body", False)
            if last and ledger.held and message.get("body"):
                # The server writes a body at once and buffers what the client has not read; the next
                # send waits until that buffer has drained. Split the last message so that its end does.
                await send({**message, "more_body": True})
                message = {"type": "http.response.body", "body": b"", "more_body": False}
            await send(message)

        try:
            await self.app(scope, receive, send_drained)
        finally:
            ledger.release()
