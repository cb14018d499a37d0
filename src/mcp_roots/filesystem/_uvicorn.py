"""The seam to uvicorn's HTTP protocol and config classes.
Deadlines and a connection cap, where middleware runs too late.
"""

# The seam to uvicorn's HTTP protocol and config classes, for what middleware cannot do because it runs only
# once a request's headers are in: deadlines for a request's headers and body, a cap on open connections, and
# a deadline for a client that stops reading its answer. ``check_uvicorn()`` confirms at start that uvicorn
# still has the shape this module was written against (uvicorn 0.54, its h11 protocol).

from __future__ import annotations

import asyncio
import inspect
import logging
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from ..errors import ConfigError

__all__ = ["ConnectionLimits", "ConnectionStats", "check_uvicorn", "guarded_protocol", "uvicorn_config"]

logger = logging.getLogger("mcp_roots")

_HOOKS = ("connection_made", "data_received", "connection_lost", "pause_writing", "resume_writing")
_INIT = ("config", "server_state", "app_state", "_loop")


def check_uvicorn() -> None:
    """Raise ``ConfigError`` (one line) if uvicorn's h11 protocol lacks what ``guarded_protocol`` uses."""
    missing = [hook for hook in _HOOKS if not callable(getattr(H11Protocol, hook, None))]
    params = tuple(inspect.signature(H11Protocol.__init__).parameters)[1:]
    config_params = inspect.signature(uvicorn.Config.__init__).parameters
    if missing or params != _INIT or "http" not in config_params or "log_config" not in config_params:
        raise ConfigError(
            f"uvicorn {uvicorn.__version__}: its h11 protocol or Config is not the shape mcp-roots serve "
            f"--http was written against (uvicorn 0.54); missing {missing or list(_INIT)}"
        )


@dataclass(frozen=True)
class ConnectionLimits:
    """What one connection may hold, in seconds and in count."""

    #: open connections at once; one more is closed as soon as it is accepted
    max_connections: int = 1000
    #: from a connection's first byte (or its opening) until a request's headers are all in
    header_seconds: float = 10.0
    #: from a request's headers until its body is all in (with the body's size cap, a minimum rate)
    body_seconds: float = 30.0
    #: how long an answer may wait for a client that does not read it
    write_stall_seconds: float = 60.0


@dataclass
class ConnectionStats:
    """Counts for the tests and the logs."""

    refused: int = 0  # connections over the cap
    timed_out: int = 0  # requests whose headers or body missed their deadline
    stalled: int = 0  # connections whose client stopped reading
    open: set[Any] = field(default_factory=set)


def guarded_protocol(limits: ConnectionLimits, stats: ConnectionStats) -> type[H11Protocol]:
    """uvicorn's h11 protocol with ``limits`` kept; its counts go to ``stats``."""

    class GuardedH11Protocol(H11Protocol):
        _deadline: asyncio.TimerHandle | None = None
        _deadline_for: object = None  # the request the deadline is for (None: the headers of the next one)
        _stall: asyncio.TimerHandle | None = None
        _refused = False

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            if len(stats.open) >= limits.max_connections:
                self._refused = True
                stats.refused += 1
                transport.abort()  # type: ignore[attr-defined]
                return
            stats.open.add(self)
            super().connection_made(transport)  # type: ignore[arg-type]
            self._watch()

        def connection_lost(self, exc: Exception | None) -> None:
            if self._refused:
                return
            stats.open.discard(self)
            self._cancel_deadline()
            self._cancel_stall()
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            self._watch()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            # Idle until the next request: uvicorn's keep-alive timeout closes it; its first byte re-arms.
            self._cancel_deadline()

        def pause_writing(self) -> None:
            super().pause_writing()
            if self._stall is None:
                self._stall = self.loop.call_later(limits.write_stall_seconds, self._stalled)

        def resume_writing(self) -> None:
            super().resume_writing()
            self._cancel_stall()

        def _watch(self) -> None:
            """Arm the deadline of the part of the request still to come (headers, then body)."""
            cycle = self.cycle
            if cycle is None or cycle.response_complete:
                # between requests: the headers of the next one are due (armed at its first byte)
                if self._deadline is None and (cycle is None or self.conn.trailing_data[0]):
                    self._arm(None, limits.header_seconds)
            elif cycle.more_body:
                if self._deadline_for is not cycle:
                    self._arm(cycle, limits.body_seconds)
            else:
                self._cancel_deadline()

        def _arm(self, part: object, seconds: float) -> None:
            self._cancel_deadline()
            self._deadline_for = part
            self._deadline = self.loop.call_later(seconds, self._late)

        def _cancel_deadline(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
            self._deadline = None
            self._deadline_for = None

        def _cancel_stall(self) -> None:
            if self._stall is not None:
                self._stall.cancel()
            self._stall = None

        def _late(self) -> None:
            self._deadline = None
            stats.timed_out += 1
            self.transport.abort()

        def _stalled(self) -> None:
            self._stall = None
            stats.stalled += 1
            self.transport.abort()

    return GuardedH11Protocol


def uvicorn_config(
    app: Any, protocol: type[H11Protocol], *, log_level: str, access_log: bool
) -> uvicorn.Config:
    """uvicorn's config for ``app`` on ``protocol``: logging left to the ``logging`` setup of the command
    (no handlers of uvicorn's own), the access log only when asked."""
    return uvicorn.Config(
        app,
        http=protocol,
        lifespan="on",
        log_config=None,
        log_level=log_level.lower(),
        access_log=access_log,
        ws="none",
        server_header=False,
        proxy_headers=False,
    )
