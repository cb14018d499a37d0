"""How the ``mcp`` 2.x port asks a legacy-era client for its roots: one RootsCache per ``Connection``,
opened at ``initialize``, run from ``notifications/initialized`` for as long as the connection lives, told
of ``roots/list_changed``, and fed by raw ``roots/list`` requests (shared by ``adapters/mcp2.py`` and
``adapters/fastmcp4.py``, whose servers are mcp 2.x servers underneath).
"""

from __future__ import annotations

import dataclasses
import logging
import weakref
from collections.abc import Callable, Mapping
from typing import Any

import anyio
from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ..errors import RootsUnavailable
from ..guard._calls import NOT_INSTALLED, not_installed_error
from ..paths._rootset import RootSet
from ..roots._policy import ConnectionRoots, GuardPolicy
from .mcp2_sdk import connection_of, request_channel

__all__ = ["Connections", "declares_roots", "is_modern"]

logger = logging.getLogger("mcp_roots")


def is_modern(connection: Connection) -> bool:
    """The connection speaks 2026-07-28 (roots come with each request, by multi-round-trip)."""
    return connection.protocol_version in MODERN_PROTOCOL_VERSIONS


def declares_roots(connection: Connection) -> bool:
    caps = connection.client_capabilities
    return caps is not None and caps.roots is not None


class Connections:
    """One guard's legacy-era connections on mcp 2.x servers."""

    def __init__(self, policy: GuardPolicy | None) -> None:
        self.policy: GuardPolicy = policy  # type: ignore[assignment]

    async def roots(self, request: ServerRequestContext[Any, Any]) -> RootSet:
        """The roots of a legacy-era request: the connection's fresh roots (waiting, bounded, for an
        answer still due), or the fallback where the connection cannot send roots."""
        connection = connection_of(request)
        state = self.policy.connection(connection)
        if state is None:
            if declares_roots(connection):
                # The client declared roots in an initialize the guard never saw: the guard is not wired
                # into this server. Its roots are the only authority; the fallback would be a wider one.
                logger.error("guard.roots(): %s", NOT_INSTALLED)
                raise not_installed_error()
            # No handshake seen on this connection: stateless HTTP.
            return self.policy.no_lifecycle_fallback()
        if not state.cache_started:
            # Streamable HTTP: the first roots/list waits for the first guarded call (see serve_connection).
            state.cache_started = True
            state.cache.start()
        state.waiting.append(request)
        try:
            roots = await state.cache.fresh(self.policy.timeout)
        finally:
            state.waiting.remove(request)
        return self.policy.served_roots(roots)

    def open_connection(self, ctx: ServerRequestContext[Any, Any]) -> ConnectionRoots:
        connection = connection_of(ctx)
        existing = self.policy.connection(connection)
        if existing is not None:
            return existing
        caps = (ctx.params or {}).get("capabilities")
        roots_cap = caps.get("roots") if isinstance(caps, Mapping) else None
        state = self.policy.open_connection(
            connection,
            self._fetcher(connection),
            declared=isinstance(roots_cap, Mapping),
            list_changed=isinstance(roots_cap, Mapping) and bool(roots_cap.get("listChanged")),
        )
        connection.exit_stack.push_async_callback(self.policy.close_connection, connection)
        return state

    def _fetcher(self, connection: Connection) -> Callable[[], Any]:
        # A weak reference: the policy's map holds this connection's state weakly by the connection, and a
        # strong one from inside the state would keep both alive if the exit stack never ran.
        connection_ref = weakref.ref(connection)

        async def fetch() -> object:
            # The raw result, not ListRootsResult: the typed path rejects the whole answer when one entry is
            # not a file: URI. The cache judges each entry itself.
            connection = connection_ref()
            if connection is None:
                raise RootsUnavailable("the connection has ended")
            state = self.policy.connection(connection)
            waiting = [c for c in state.waiting if c.session.can_send_request] if state is not None else []
            try:
                if waiting:
                    # Tied to a call that waits for the answer: on streamable HTTP the request then rides
                    # that call's open response stream, which exists for sure, rather than the standalone
                    # GET stream, which the client may not have opened (yet).
                    return await request_channel(waiting[-1]).send_raw_request("roots/list", None)
                return await connection.send_raw_request("roots/list", None)
            except MCPError as exc:
                if exc.code == CONNECTION_CLOSED:
                    # The connection is ending and its task group is about to cancel this refresh.
                    logger.debug("roots/list abandoned: the connection closed")
                    await anyio.sleep_forever()
                raise  # kept by the cache: the last valid roots (or none), never the fallback

        return fetch

    async def serve_connection(self, ctx: ServerRequestContext[Any, Any]) -> None:
        """Run this connection's roots refresh for as long as the connection lives (the SDK runs each
        notification handler as its own task and cancels them when the connection ends)."""
        connection = connection_of(ctx)
        state = self.policy.connection(connection)
        if state is None:
            state = self.open_connection(dataclasses.replace(ctx, params=None))
        if state.served:
            return
        state.served = True
        if not connection.has_standalone_channel:
            self.policy.cannot_ask(state, "this connection has no back-channel (stateless HTTP)")
        if connection.session_id is None:
            state.cache_started = True
            state.cache.start()
        # else streamable HTTP: a roots/list sent now would go to the standalone GET stream, which the
        # client opens only after initialized; the first guarded call starts the cache instead.
        await state.cache.run()

    def notify_changed(self, ctx: ServerRequestContext[Any, Any]) -> None:
        state = self.policy.connection(connection_of(ctx))
        if state is not None:
            state.cache.notify_changed()
