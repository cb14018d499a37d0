"""``serve --http`` as a service: the filesystem server's streamable-HTTP app behind bearer-token
authentication (the SDK's hooks), the answer budget, a readiness endpoint, and uvicorn with the connection
limits of the seam; the listening socket is bound before anything starts, so a bad or taken port is one line.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import resource
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from mcp.server import MCPServer
from starlette.middleware import Middleware
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..errors import ConfigError
from ._budget import AnswerAccounting, AnswerBudget
from ._sessions import SessionQuota
from ._uvicorn import ConnectionLimits, ConnectionStats, check_uvicorn, guarded_protocol, uvicorn_config

__all__ = [
    "DEFAULT_IDLE_SECONDS",
    "DEFAULT_MAX_SESSIONS",
    "READY_PATH",
    "HttpOptions",
    "HttpService",
    "bind",
    "connection_cap",
    "raise_descriptor_limit",
]

logger = logging.getLogger("mcp_roots")

#: The path a load balancer's health check asks; no token needed, and it says nothing but "ready".
READY_PATH = "/ready"
#: Legacy-era sessions open at once (the SDK's default is 10,000), and how long one may sit idle (the
#: SDK's: 30 minutes). A filesystem session that says nothing for 10 minutes starts again.
DEFAULT_MAX_SESSIONS = 1000
DEFAULT_IDLE_SECONDS = 600.0
#: Descriptors kept for file work (opening beneath the roots, walks) below the connection cap.
RESERVED_DESCRIPTORS = 256
#: The accept-failure log: at most one line per this many seconds.
ACCEPT_LOG_SECONDS = 10.0


@dataclass(frozen=True)
class HttpOptions:
    """How ``serve --http`` serves."""

    port: int
    host: str = "127.0.0.1"
    limits: ConnectionLimits = field(default_factory=ConnectionLimits)
    max_sessions: int = DEFAULT_MAX_SESSIONS
    #: open legacy sessions per credential (a token of the token file); None: ``max_sessions``
    sessions_per_credential: int | None = None
    idle_seconds: float = DEFAULT_IDLE_SECONDS
    log_level: str = "WARNING"


def raise_descriptor_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard one (where allowed); the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (OSError, ValueError):
            pass
    return int(soft)


def bind(host: str, port: int) -> socket.socket:
    """The listening socket, or ``ConfigError`` naming the port and the reason."""
    if not 0 <= port <= 65535:
        raise ConfigError(f"--http {port}: not a TCP port (0 to 65535)")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        reason = "another process listens there" if exc.errno == errno.EADDRINUSE else exc.strerror or exc
        raise ConfigError(f"--http {port}: cannot listen on {host}:{port}: {reason}") from None
    sock.setblocking(False)
    return sock


class _Readiness:
    """ASGI middleware: ``GET /ready`` answers 200 once the app has started (its lifespan) and until it
    stops, else 503; the answer carries nothing else. Every other request goes on to the app."""

    def __init__(self, app: ASGIApp, on_ready: Callable[[], None] | None = None) -> None:
        self.app = app
        self.ready = False
        self.on_ready = on_ready

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, self._watch_receive(receive), self._watch_send(send))
            return
        if scope["type"] == "http" and scope["path"] == READY_PATH:
            ok = self.ready and scope["method"] in ("GET", "HEAD")
            await Response(status_code=200 if ok else 503)(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _watch_send(self, send: Send) -> Send:
        async def watched(message: Message) -> None:
            await send(message)
            if message["type"] == "lifespan.startup.complete":
                self.ready = True
                if self.on_ready is not None:
                    self.on_ready()

        return watched

    def _watch_receive(self, receive: Receive) -> Receive:
        async def watched() -> Message:
            message = await receive()
            if message["type"] == "lifespan.shutdown":
                self.ready = False
            return message

        return watched


class HttpService:
    """The app, its budget and its limits, and the run of uvicorn on a bound socket."""

    def __init__(
        self,
        server: MCPServer,
        options: HttpOptions,
        budget: AnswerBudget | None = None,
        on_ready: Callable[[], None] | None = None,
    ) -> None:
        check_uvicorn()
        self.options = options
        self.budget = budget or AnswerBudget()
        self.stats = ConnectionStats()
        app = server.streamable_http_app(
            host=options.host,
            max_sessions=options.max_sessions,
            session_idle_timeout=options.idle_seconds,
        )
        # Innermost of the app's middleware: after the SDK's bearer auth, which names the credential.
        quota = options.sessions_per_credential or options.max_sessions
        app.user_middleware.append(
            Middleware(SessionQuota, per_credential=quota, idle_seconds=options.idle_seconds)
        )
        self.readiness = _Readiness(AnswerAccounting(app, self.budget), on_ready)
        self.app: ASGIApp = self.readiness
        level = options.log_level.upper()
        self.config = uvicorn_config(
            self.app,
            guarded_protocol(options.limits, self.stats),
            log_level=level,
            access_log=level in ("DEBUG", "INFO"),
        )
        self.server = uvicorn.Server(self.config)

    async def serve(self, sock: socket.socket) -> None:
        """Serve on ``sock`` until told to stop (SIGINT, SIGTERM, or ``self.server.should_exit``)."""
        asyncio.get_running_loop().set_exception_handler(_AcceptLog().handle)
        await self.server.serve(sockets=[sock])


class _AcceptLog:
    """The event loop's exception handler: a failed accept (out of descriptors or memory) is logged one
    line at most every ``ACCEPT_LOG_SECONDS``, with the count since; anything else as asyncio would."""

    def __init__(self) -> None:
        self.last = -ACCEPT_LOG_SECONDS
        self.since = 0

    def handle(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if not str(context.get("message", "")).startswith("socket.accept() out of system resource"):
            loop.default_exception_handler(context)
            return
        self.since += 1
        now = time.monotonic()
        if now - self.last >= ACCEPT_LOG_SECONDS:
            logger.warning(
                "cannot accept connections: %s (%d failed accepts); retrying",
                context.get("exception"),
                self.since,
            )
            self.last, self.since = now, 0


def connection_cap(requested: int | None, soft_limit: int) -> int:
    """The connection cap: ``requested`` (or 1000), kept ``RESERVED_DESCRIPTORS`` below the descriptor
    limit; ``ConfigError`` if that leaves none."""
    room = soft_limit - RESERVED_DESCRIPTORS
    if requested is None:
        requested = min(ConnectionLimits().max_connections, room)
    if requested < 1 or requested > room:
        raise ConfigError(
            f"--max-connections {requested}: must be 1 to {room} (the descriptor limit {soft_limit} less "
            f"{RESERVED_DESCRIPTORS} kept for file work)"
        )
    return requested
