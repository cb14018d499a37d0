"""The official ``mcp`` 2.x adapter: ``MCPServer`` and the low-level ``Server``, both protocol eras.

Legacy connections get a RootsCache each, fed by a context-tier middleware (initialize, initialized,
roots/list_changed); on 2026-07-28 the same middleware asks for the roots of a call by multi-round-trip
(``InputRequiredResult`` with a ``roots/list`` input request) and checks guarded tools' arguments by name,
whichever side of ``@server.tool()`` ``@guard.paths`` stands on.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping
from typing import Any

import anyio
from mcp.server.connection import Connection
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPError, NoBackChannelError
from mcp_types import (
    CONNECTION_CLOSED,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    CallToolResult,
    InputRequiredResult,
    ListRootsRequest,
    TextContent,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from .._errors import InvalidPath, PathOutsideRoots, RootsUnavailable, SDKChanged
from .._guard import (
    ConnectionRoots,
    GuardedFunction,
    GuardPolicy,
    call_roots,
    guarded_call,
    guarded_function_of,
)
from .._rootset import RootSet

__all__ = ["ROOTS_INPUT_KEY", "Mcp2Adapter", "connection_of", "refusal", "request_channel"]

logger = logging.getLogger("mcp_roots")

ROOTS_INPUT_KEY = "mcp_roots.roots"
"""The key of the ``roots/list`` input request this adapter sends in an ``InputRequiredResult``."""


# --- The SDK's private corners, each isolated here and pinned by tests/test_guard.py -----------------


def connection_of(ctx: Context | ServerRequestContext[Any, Any]) -> Connection:
    """The per-connection ``Connection`` behind a tool's ``Context`` or a middleware's request context.

    mcp 2.3 keeps it on the per-request ``ServerSession`` as the private ``_connection`` (the low-level
    ``Context`` exposes it publicly, the ``MCPServer`` tool context and middleware do not).
    """
    request_ctx = ctx.request_context if isinstance(ctx, Context) else ctx
    connection = getattr(request_ctx.session, "_connection", None)
    if not isinstance(connection, Connection):
        raise SDKChanged(
            "mcp-roots cannot find the per-connection object behind ServerSession (the mcp SDK changed: "
            "ServerSession._connection is gone); please report this with your mcp version"
        )
    return connection


def request_channel(request_ctx: ServerRequestContext[Any, Any]) -> Any:
    """The request-scoped back-channel of a request (on streamable HTTP: its POST's response stream).

    ``ServerSession.send_request(..., metadata=ServerMessageMetadata(related_request_id=...))`` is the
    public way to use it, but it validates the answer as a whole ``ListRootsResult`` (one ``http:`` entry
    fails every root); the raw channel is the private ``ServerSession._request_outbound``.
    """
    channel = getattr(request_ctx.session, "_request_outbound", None)
    if channel is None or not callable(getattr(channel, "send_raw_request", None)):
        raise SDKChanged(
            "mcp-roots cannot find the request-scoped channel of ServerSession (the mcp SDK changed: "
            "ServerSession._request_outbound is gone); please report this with your mcp version"
        )
    return channel


def _tool_lookup(server: Any) -> Callable[[str], Any] | None:
    """``name -> registered tool function`` for an ``MCPServer`` (its private ``_tool_manager``); None
    for a low-level ``Server``, whose handlers are the user's own."""
    if type(server).__name__ != "MCPServer":
        return None
    manager = getattr(server, "_tool_manager", None)
    get_tool = getattr(manager, "get_tool", None)
    if not callable(get_tool):
        raise SDKChanged(
            "mcp-roots cannot find MCPServer's tool registry (the mcp SDK changed: "
            "MCPServer._tool_manager.get_tool is gone); please report this with your mcp version"
        )

    def registered(name: str) -> Any:
        tool = get_tool(name)
        return getattr(tool, "fn", None) if tool is not None else None

    return registered


def _request_context_of(ctx: object) -> ServerRequestContext[Any, Any]:
    """Accept MCPServer's tool Context or the low-level ServerRequestContext."""
    if isinstance(ctx, ServerRequestContext):
        return ctx
    if isinstance(ctx, Context):
        return ctx.request_context
    raise TypeError(
        f"expected an mcp Context or ServerRequestContext, got {type(ctx).__name__}; declare a parameter "
        "typed `Context` on your tool and pass it to guard.roots(ctx)"
    )


def _is_modern(connection: Connection) -> bool:
    return connection.protocol_version in MODERN_PROTOCOL_VERSIONS


def refusal(message: str) -> CallToolResult:
    """A tool result with ``isError: true`` carrying ``message``."""
    return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True)


class _RootsRequired(MCPError):
    """Raised by ``guard.roots(ctx)`` on a 2026-07-28 request whose roots have not come yet; the
    middleware answers the call with an ``InputRequiredResult`` asking for them. An ``MCPError`` so that
    MCPServer's tool runner lets it through (it turns any other exception into a tool error)."""

    def __init__(self) -> None:
        super().__init__(
            INVALID_REQUEST,
            "the client's roots arrive by multi-round-trip on 2026-07-28, and only the mcp-roots "
            "middleware can ask for them: guard.install(server) was not called",
        )


def _raw_capabilities(params: Mapping[str, Any] | None) -> Mapping[str, Any]:
    caps = (params or {}).get("capabilities")
    return caps if isinstance(caps, Mapping) else {}


def _take_roots_answer(params: Mapping[str, Any]) -> tuple[Mapping[str, Any], object]:
    """``params`` without this adapter's input response, and that response (None when absent)."""
    responses = params.get("inputResponses")
    if not isinstance(responses, Mapping) or ROOTS_INPUT_KEY not in responses:
        return params, None
    rest = {k: v for k, v in responses.items() if k != ROOTS_INPUT_KEY}
    cleaned = {k: v for k, v in params.items() if k != "inputResponses"}
    if rest:
        cleaned["inputResponses"] = rest
    return cleaned, responses[ROOTS_INPUT_KEY]


# --- The adapter -------------------------------------------------------------------------------------


class Mcp2Adapter:
    """One guard's wiring into ``mcp`` 2.x servers (see ``mcp_roots._guard`` for the interface)."""

    def __init__(self, policy: GuardPolicy) -> None:
        self.policy = policy

    def install(self, server: Any) -> None:
        """Put the guard's middleware first in the server's public context-tier middleware list, so that
        a ``roots/list_changed`` is recorded before any request that arrived after it is handled."""
        middleware = getattr(server, "middleware", None)
        if not isinstance(middleware, list):
            raise SDKChanged(
                f"mcp-roots cannot find the middleware list of {type(server).__name__} (the mcp SDK "
                "changed: .middleware is gone); please report this with your mcp version"
            )
        if any(isinstance(m, _Middleware) and m.adapter is self for m in middleware):
            return
        middleware.insert(0, _Middleware(self, _tool_lookup(server)))
        # So that tools can also use the client-brokered files/* methods through guard.files(ctx).
        from ..broker import enable_brokering

        enable_brokering(server)

    # -- legacy connections --

    def open_connection(self, ctx: ServerRequestContext[Any, Any]) -> ConnectionRoots:
        connection = connection_of(ctx)
        roots_cap = _raw_capabilities(ctx.params).get("roots")
        declared = isinstance(roots_cap, Mapping)
        list_changed = isinstance(roots_cap, Mapping) and bool(roots_cap.get("listChanged"))
        existing = self.policy.connection(connection)
        if existing is not None:
            return existing
        state = self.policy.open_connection(
            connection, self._fetcher(connection), declared=declared, list_changed=list_changed
        )
        policy = self.policy
        connection.exit_stack.push_async_callback(policy.close_connection, connection)
        return state

    def _fetcher(self, connection: Connection) -> Callable[[], Any]:
        async def fetch() -> object:
            # The raw result, not ListRootsResult: the typed path rejects the whole answer when one entry is
            # not a file: URI. The cache judges each entry itself.
            state = self.policy.connection(connection)
            waiting = [c for c in state.waiting if c.session.can_send_request] if state is not None else []
            try:
                if waiting:
                    # Tied to a call that waits for the answer: on streamable HTTP the request then rides
                    # that call's open response stream, which exists for sure, rather than the standalone
                    # GET stream, which the client may not have opened (yet); the SDK drops messages for
                    # a stream that is not there.
                    return await request_channel(waiting[-1]).send_raw_request("roots/list", None)
                return await connection.send_raw_request("roots/list", None)
            except NoBackChannelError:
                self.policy.mark_unsupported(
                    self.policy.connection(connection), "this connection has no back-channel (stateless HTTP)"
                )
                raise
            except MCPError as exc:
                if exc.code == CONNECTION_CLOSED:
                    # The connection is ending and its task group is about to cancel this refresh; a
                    # "failed" warning for a client that merely went away would be noise.
                    logger.debug("roots/list abandoned: the connection closed")
                    await anyio.sleep_forever()
                if exc.code == METHOD_NOT_FOUND or (
                    exc.code == INVALID_REQUEST and "not supported" in exc.message.lower()
                ):
                    self.policy.mark_unsupported(
                        self.policy.connection(connection),
                        f"the client answered roots/list with {exc.code} {exc.message!r}",
                    )
                raise

        return fetch

    async def serve_connection(self, ctx: ServerRequestContext[Any, Any]) -> None:
        """Run this connection's roots refresh for as long as the connection lives.

        The SDK runs each notification handler as its own task in the connection's task group and
        cancels them when the connection ends, so the cache's worker lives exactly as long as the
        connection; the connection's exit stack closes the cache.
        """
        connection = connection_of(ctx)
        state = self.policy.connection(connection)
        if state is None:
            state = self.open_connection(dataclasses.replace(ctx, params=None))
        if not connection.has_standalone_channel:
            self.policy.mark_unsupported(state, "this connection has no back-channel (stateless HTTP)")
        if connection.session_id is None:
            state.cache_started = True
            state.cache.start()
        # else streamable HTTP: a roots/list sent now would go to the standalone GET stream, which the
        # client opens only after initialized (the SDK drops what it cannot deliver); the first guarded call
        # starts the cache instead, and the request rides that call's response stream.
        await state.cache.run()

    # -- roots for handlers --

    async def roots(self, ctx: Any) -> RootSet:
        """The roots in force for the request ``ctx`` (a tool ``Context`` or a ``ServerRequestContext``).

        On a 2026-07-28 request from a client with roots, this raises the multi-round-trip signal: the
        middleware answers the call with an input request and the handler runs again with the roots.
        """
        return await self.roots_for(_request_context_of(ctx))

    async def roots_for(self, request_ctx: ServerRequestContext[Any, Any]) -> RootSet:
        connection = connection_of(request_ctx)
        if _is_modern(connection):
            caps = connection.client_capabilities
            if caps is None or caps.roots is None:
                return self.policy.no_capability_fallback()
            raise _RootsRequired()
        state = self.policy.connection(connection)
        if state is None:
            # No initialize seen on this connection: stateless HTTP, or the guard was installed late.
            return self.policy.no_lifecycle_fallback()
        if not state.cache_started:
            # Streamable HTTP: the first roots/list waits for the first guarded call (see serve_connection).
            state.cache_started = True
            state.cache.start()
        state.waiting.append(request_ctx)
        try:
            return await state.cache.fresh(self.policy.timeout)
        finally:
            state.waiting.remove(request_ctx)

    # -- tool calls --

    async def call_tool(
        self,
        ctx: ServerRequestContext[Any, Any],
        call_next: CallNext,
        registered: Callable[[str], Any] | None,
    ) -> HandlerResult:
        params, answer = _take_roots_answer(ctx.params or {})
        if params is not ctx.params:
            ctx = dataclasses.replace(ctx, params=params)
            connection = connection_of(ctx)
            caps = connection.client_capabilities
            if not _is_modern(connection) or caps is None or caps.roots is None:
                # Only an answer to our own input request counts: a legacy connection's roots come from
                # its cache, and a client without the roots capability cannot widen the fallback.
                logger.warning("ignored roots sent with a tool call on a connection that cannot send them")
                answer = None
        spec = self._guarded(registered, params.get("name"))
        try:
            roots = None
            if answer is not None:
                roots = self._roots_from_answer(answer)
            if spec is not None:
                try:
                    if roots is None:
                        roots = await self.roots_for(ctx)
                    arguments = params.get("arguments")
                    checked = spec.check(roots, arguments if isinstance(arguments, Mapping) else {})
                except (PathOutsideRoots, InvalidPath, RootsUnavailable) as exc:
                    logger.info("refused %s(): %s", spec.name, exc)
                    return refusal(str(exc))
                ctx = dataclasses.replace(ctx, params={**params, "arguments": checked})
                with guarded_call(spec, roots, refusal):
                    return await call_next(ctx)
            if roots is not None:
                with call_roots(roots):
                    return await call_next(ctx)
            return await call_next(ctx)
        except _RootsRequired:
            return InputRequiredResult(input_requests={ROOTS_INPUT_KEY: ListRootsRequest()})

    def _guarded(self, registered: Callable[[str], Any] | None, name: object) -> GuardedFunction | None:
        if registered is None or not isinstance(name, str):
            return None
        spec = guarded_function_of(registered(name))
        # A tool guarded by another RootsGuard is that guard's business (its wrapper refuses every call
        # if that guard was never installed).
        return spec if spec is not None and spec.policy is self.policy else None

    def _roots_from_answer(self, answer: object) -> RootSet:
        entries = answer.get("roots") if isinstance(answer, Mapping) else None
        if not isinstance(entries, list):
            raise RootsUnavailable("the client's roots answer is malformed: 'roots' is not a list")
        return self.policy.roots_from_client_answer([e for e in entries if isinstance(e, Mapping)])


class _Middleware:
    """The context-tier middleware of one guard on one server."""

    def __init__(self, adapter: Mcp2Adapter, registered: Callable[[str], Any] | None) -> None:
        self.adapter = adapter
        self.registered = registered

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        method = ctx.method
        if method == "initialize":
            result = await call_next(ctx)
            # Record only; never await the client here (initialize runs inline: that would deadlock).
            self.adapter.open_connection(ctx)
            return result
        if method == "notifications/initialized":
            await call_next(ctx)
            await self.adapter.serve_connection(ctx)
            return None
        if method == "notifications/roots/list_changed":
            state = self.adapter.policy.connection(connection_of(ctx))
            if state is not None:
                state.cache.notify_changed()
            return await call_next(ctx)
        if method == "tools/call":
            return await self.adapter.call_tool(ctx, call_next, self.registered)
        return await call_next(ctx)
