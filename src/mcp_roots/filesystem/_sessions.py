"""The legacy-era session table, bounded per credential.
One client flooding it does not lock out the clients of another token.
"""

# ``SessionQuota`` is Starlette middleware inside the SDK's app, after its bearer authentication (the
# request's ``user`` names the credential). It learns a session from the ``Mcp-Session-Id`` of the answer to a
# request that carried none, forgets it on a successful DELETE, a 404 for it, or when it has been idle as long
# as the SDK's idle timeout, and answers 503 to a request that would open one more session for a credential
# at its bound: any request without ``Mcp-Session-Id`` that the SDK routes to the legacy era, as the SDK
# decides it (no ``MCP-Protocol-Version``, or a handshake version there), whatever its method or other
# headers. The SDK's own table bound (``--max-sessions``) still holds for all credentials together.

from __future__ import annotations

import time
from collections.abc import Callable

from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["SessionQuota", "opens_session"]


def _header(scope: Scope, name: bytes) -> bytes | None:
    """The first value of header ``name`` (lower case), as the SDK reads it."""
    for key, value in scope.get("headers", ()):
        if key == name:
            return bytes(value)
    return None


def opens_session(scope: Scope) -> bool:
    """Whether the SDK's stateful streamable-HTTP manager opens a legacy session for this request: no
    session id, and no ``MCP-Protocol-Version`` or a handshake-era one (any other goes to the stateless
    2026-07-28 entry). The same reading as the SDK's: the first value of each header."""
    if _header(scope, b"mcp-session-id") is not None:
        return False
    version = _header(scope, b"mcp-protocol-version")
    return version is None or version.decode("latin-1") in HANDSHAKE_PROTOCOL_VERSIONS


class SessionQuota:
    """ASGI middleware: at most ``per_credential`` open legacy sessions per credential."""

    def __init__(
        self,
        app: ASGIApp,
        per_credential: int,
        idle_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.app = app
        self.per_credential = per_credential
        self.idle_seconds = idle_seconds
        self.clock = clock
        #: credential -> session id -> when last used
        self.sessions: dict[str, dict[bytes, float]] = {}

    def _credential(self, scope: Scope) -> str:
        user = scope.get("user")
        name = getattr(user, "username", "") if getattr(user, "is_authenticated", False) else ""
        return str(name) or "anonymous"

    def _open(self, credential: str) -> dict[bytes, float]:
        table = self.sessions.setdefault(credential, {})
        cutoff = self.clock() - self.idle_seconds
        for session, seen in list(table.items()):
            if seen < cutoff:  # the SDK has closed it by now
                del table[session]
        return table

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        credential = self._credential(scope)
        table = self._open(credential)
        session = _header(scope, b"mcp-session-id")
        if session is not None:
            if session in table:
                table[session] = self.clock()
        elif opens_session(scope) and len(table) >= self.per_credential:
            message = (
                f"Too many open sessions for this credential ({self.per_credential}); close one (DELETE) "
                "or let one go idle"
            )
            body = {"jsonrpc": "2.0", "id": None, "error": {"code": -32603, "message": message}}
            await JSONResponse(body, status_code=503)(scope, receive, send)
            return

        async def watch(message: Message) -> None:
            if message["type"] == "http.response.start":
                status = message["status"]
                answered = dict((k.lower(), v) for k, v in message.get("headers", ())).get(b"mcp-session-id")
                if session is None and answered is not None and status < 400:
                    table[bytes(answered)] = self.clock()
                elif session is not None and (
                    status == 404 or (scope["method"] == "DELETE" and status < 300)
                ):
                    table.pop(session, None)
            await send(message)

        await self.app(scope, receive, watch)
