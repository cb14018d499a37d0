"""``serve --http``'s options checked and turned into the service's parts: the token file (made if missing),
the connection limits, the session table's bounds, the answer budget; each bad value one ``ConfigError``.
"""

from __future__ import annotations

import argparse
import functools
import math
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mcp.server import MCPServer

from ..errors import ConfigError
from ._auth import TokenFile, default_token_path, ensure_token_file
from ._budget import DEFAULT_PROCESS_BYTES, DEFAULT_SESSION_BYTES, AnswerBudget
from ._http import (
    DEFAULT_IDLE_SECONDS,
    DEFAULT_MAX_SESSIONS,
    HttpOptions,
    HttpService,
    bind,
    connection_cap,
    raise_descriptor_limit,
)
from ._uvicorn import ConnectionLimits

__all__ = ["HttpSetup"]


def print_nothing(text: str) -> None:
    """The default ``say``: nothing is shown."""


def _seconds(value: float | None, flag: str, default: float) -> float:
    if value is None:
        return default
    if not (math.isfinite(value) and value > 0):
        raise ConfigError(f"{flag} must be a positive number of seconds, not {value:g}")
    return float(value)


def _count(value: int | None, flag: str, default: int) -> int:
    if value is None:
        return default
    if value < 1:
        raise ConfigError(f"{flag} must be at least 1, not {value}")
    return int(value)


@dataclass
class HttpSetup:
    """What ``serve --http`` runs with."""

    options: HttpOptions
    tokens: TokenFile | None  # None: --allow-unauthenticated
    budget: AnswerBudget
    say: Callable[[str], None] = print_nothing

    @classmethod
    def from_args(cls, args: argparse.Namespace, *, say: Callable[[str], None]) -> HttpSetup:
        port = int(args.http)
        if not 0 <= port <= 65535:
            raise ConfigError(f"--http {port}: not a TCP port (0 to 65535)")
        if args.allow_unauthenticated and args.token_file is not None:
            raise ConfigError("--allow-unauthenticated and --token-file contradict each other; give one")
        tokens = None
        if not args.allow_unauthenticated:
            path = Path(args.token_file) if args.token_file is not None else default_token_path()
            if ensure_token_file(path):
                say(
                    f"mcp-roots serve: wrote a new bearer token to {path} (mode 0600); clients send it as "
                    "'Authorization: Bearer TOKEN'"
                )
            tokens = TokenFile(path)
        defaults = ConnectionLimits()
        limits = ConnectionLimits(
            max_connections=connection_cap(args.max_connections, raise_descriptor_limit()),
            header_seconds=_seconds(args.header_timeout, "--header-timeout", defaults.header_seconds),
            body_seconds=_seconds(args.body_timeout, "--body-timeout", defaults.body_seconds),
        )
        process = _count(args.max_answer_bytes, "--max-answer-bytes", DEFAULT_PROCESS_BYTES)
        session = _count(args.max_session_answer_bytes, "--max-session-answer-bytes", DEFAULT_SESSION_BYTES)
        options = HttpOptions(
            port=port,
            limits=limits,
            max_sessions=_count(args.max_sessions, "--max-sessions", DEFAULT_MAX_SESSIONS),
            sessions_per_credential=None
            if args.max_sessions_per_token is None
            else _count(args.max_sessions_per_token, "--max-sessions-per-token", 1),
            idle_seconds=_seconds(args.session_idle_timeout, "--session-idle-timeout", DEFAULT_IDLE_SECONDS),
            log_level=args.log_level,
        )
        return cls(options, tokens, AnswerBudget(process, session), say)

    def service(self, server: MCPServer) -> HttpService:
        ready = functools.partial(self.say, "mcp-roots serve: ready")
        return HttpService(server, self.options, self.budget, on_ready=ready)

    def bind(self) -> socket.socket:
        """The listening socket; says the URL and who may use it (one line each, on stderr)."""
        sock = bind(self.options.host, self.options.port)
        host, port = sock.getsockname()[:2]
        self.say(f"mcp-roots serve: serving http://{host}:{port}/mcp")
        if self.tokens is None:
            self.say("mcp-roots serve: no token (--allow-unauthenticated): every local user can use it")
        else:
            self.say(
                f"mcp-roots serve: token file {self.tokens.path} (clients send 'Authorization: Bearer TOKEN' "
                "with a token from it)"
            )
        return sock
