"""The official ``mcp`` 2.x adapter: ``MCPServer`` and the low-level ``Server``, both protocol eras.

Legacy connections get a RootsCache each, fed by a context-tier middleware (initialize, initialized,
roots/list_changed); on 2026-07-28 the same middleware asks for the roots of a call by multi-round-trip
(``InputRequiredResult`` with a ``roots/list`` input request) and checks guarded tools' arguments by name,
whichever side of ``@server.tool()`` ``@guard.paths`` stands on.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import weakref
from collections.abc import Callable, Mapping
from typing import Any, NoReturn

import anyio
from mcp.server import MCPServer
from mcp.server.connection import Connection
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CONNECTION_CLOSED,
    INVALID_PARAMS,
    INVALID_REQUEST,
    CallToolResult,
    InputRequiredResult,
    ListRootsRequest,
    TextContent,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from .._errors import InvalidPath, InvalidRootURI, PathOutsideRoots, RootsUnavailable, SDKChanged
from .._guard import (
    NOT_INSTALLED,
    ConnectionRoots,
    GuardedFunction,
    GuardPolicy,
    Handler,
    audit_handlers,
    call_roots,
    guarded_call,
    guarded_function_of,
    not_installed_error,
    parameters_of,
    strict_refusal,
    warn_unguarded,
)
from .._rootset import RootSet
from .._uri import uri_to_path

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


class _Registry:
    """An ``MCPServer``'s registered tools and resource templates (its private ``_tool_manager`` and
    ``_resource_manager``); empty for a low-level ``Server``, whose handlers are the user's own."""

    def __init__(self, server: Any) -> None:
        self.tools = self.resources = None
        if not isinstance(server, MCPServer):
            return
        self.tools = getattr(server, "_tool_manager", None)
        self.resources = getattr(server, "_resource_manager", None)
        for name, manager, methods in (
            ("_tool_manager", self.tools, ("get_tool", "list_tools")),
            ("_resource_manager", self.resources, ("list_templates",)),
        ):
            for method in methods:
                if not callable(getattr(manager, method, None)):
                    raise SDKChanged(
                        f"mcp-roots cannot find MCPServer's registry (the mcp SDK changed: "
                        f"MCPServer.{name}.{method} is gone); please report this with your mcp version"
                    )

    def tool(self, name: str) -> Any:
        return self.tools.get_tool(name) if self.tools is not None else None

    def template(self, uri: str) -> tuple[Any, Mapping[str, Any]]:
        """The first resource template matching ``uri`` and the parameters it extracts, or (None, {})."""
        if self.resources is None:
            return None, {}
        for template in self.resources.list_templates():
            try:
                params = template.matches(uri)
            except Exception:  # the template's own security policy refused it: the SDK will say so
                continue
            if params is not None:
                return template, params
        return None, {}

    def handlers(self) -> list[Handler]:
        if self.tools is None or self.resources is None:
            return []
        found = []
        for tool in self.tools.list_tools():
            found.append(Handler("tool", tool.name, tool.fn, parameters_of(tool.fn, Context)))
        for template in self.resources.list_templates():
            found.append(
                Handler(
                    "resource template",
                    template.uri_template,
                    template.fn,
                    parameters_of(template.fn, Context),
                    checked_by_uri=template.uri_template[:5].lower() == "file:",
                )
            )
        return found


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


def _refuse_read(message: str, uri: str) -> NoReturn:
    """A refused ``resources/read``: a JSON-RPC error (resource results have no ``isError``)."""
    logger.info("refused resources/read: %s", message)
    raise MCPError(INVALID_PARAMS, message, {"uri": uri})


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

    def __init__(self, policy: GuardPolicy | None) -> None:
        # None: an adapter that only reads a server (mcp-roots audit), never installs or serves.
        self.policy: GuardPolicy = policy  # type: ignore[assignment]

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
        middleware.insert(0, _Middleware(self, _Registry(server)))
        # So that tools can also use the client-brokered files/* methods through guard.files(ctx).
        from ..broker import enable_brokering

        enable_brokering(server)

    def handlers(self, server: Any) -> list[Handler]:
        """The tools and resource templates ``server`` has registered (for the audit)."""
        return _Registry(server).handlers()

    def installed(self, server: Any) -> list[GuardPolicy]:
        """The policies of the guards installed on ``server``."""
        middleware = getattr(server, "middleware", None) or []
        return [m.adapter.policy for m in middleware if isinstance(m, _Middleware)]

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
                    # GET stream, which the client may not have opened (yet); the SDK drops messages for
                    # a stream that is not there.
                    return await request_channel(waiting[-1]).send_raw_request("roots/list", None)
                return await connection.send_raw_request("roots/list", None)
            except MCPError as exc:
                if exc.code == CONNECTION_CLOSED:
                    # The connection is ending and its task group is about to cancel this refresh; a
                    # "failed" warning for a client that merely went away would be noise.
                    logger.debug("roots/list abandoned: the connection closed")
                    await anyio.sleep_forever()
                # -32601 / -32600 "not supported" (roots switched off in the host), like any other failed
                # answer, keeps the last valid roots (or none), never the fallback; the client's next
                # list_changed brings a new request. The cache logs it.
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
        if state.served:
            return
        state.served = True
        if not connection.has_standalone_channel:
            self.policy.cannot_ask(state, "this connection has no back-channel (stateless HTTP)")
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
            caps = connection.client_capabilities
            if caps is not None and caps.roots is not None:
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
        state.waiting.append(request_ctx)
        try:
            roots = await state.cache.fresh(self.policy.timeout)
        finally:
            state.waiting.remove(request_ctx)
        return self.policy.served_roots(roots)

    # -- tool calls --

    async def call_tool(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext, registry: _Registry
    ) -> HandlerResult:
        params, answer = self._roots_answer(ctx)
        if params is not ctx.params:
            ctx = dataclasses.replace(ctx, params=params)
        name = params.get("name")
        tool = registry.tool(name) if isinstance(name, str) else None
        fn = getattr(tool, "fn", None)
        if self.policy.strict and fn is not None:
            why = strict_refusal(fn, str(name))
            if why is not None:
                logger.warning("refused %s(): %s", name, why)
                return refusal(why)
        spec = self._guarded(tool)
        arguments = params.get("arguments")
        arguments = arguments if isinstance(arguments, Mapping) else {}
        try:
            try:
                roots = await self.policy.roots_from_client_answer(answer) if answer is not None else None
            except RootsUnavailable as exc:
                self.policy.log_refusal(str(name), exc)
                return refusal(str(exc))
            if spec is None:
                if roots is not None:
                    with call_roots(roots):
                        return await call_next(ctx)
                return await call_next(ctx)
            try:
                if roots is None:
                    if self.policy.ceiling is not None:
                        # A path outside the ceiling is refused before the client is asked for anything.
                        spec.precheck(self.policy.ceiling, arguments)
                    roots = await self.roots_for(ctx)
                checked = spec.check(roots, arguments)
            except (PathOutsideRoots, InvalidPath, RootsUnavailable) as exc:
                self.policy.log_refusal(spec.name, exc)
                return refusal(str(exc))
            self.policy.call_passed()
            ctx = dataclasses.replace(ctx, params={**params, "arguments": checked})
            with guarded_call(spec, roots, refusal):
                return await call_next(ctx)
        except _RootsRequired:
            return InputRequiredResult(input_requests={ROOTS_INPUT_KEY: ListRootsRequest()})

    async def read_resource(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext, registry: _Registry
    ) -> HandlerResult:
        """``resources/read``: a ``file:`` URI is checked against the same roots as tools, and a resource
        template under ``@guard.paths`` gets its path parameters checked, before the handler runs."""
        params, answer = self._roots_answer(ctx)
        if params is not ctx.params:
            ctx = dataclasses.replace(ctx, params=params)
        uri = params.get("uri")
        if not isinstance(uri, str):
            return await call_next(ctx)
        template, template_params = registry.template(uri)
        spec = self._guarded(template)
        is_file = uri[:5].lower() == "file:"
        if not is_file and spec is None:
            return await call_next(ctx)
        try:
            if answer is not None:
                roots = await self.policy.roots_from_client_answer(answer)
            else:
                roots = await self.roots_for(ctx)
            if is_file:
                roots.resolve(uri_to_path(uri))
            checked = spec.check(roots, template_params) if spec is not None else None
        except _RootsRequired:
            return InputRequiredResult(input_requests={ROOTS_INPUT_KEY: ListRootsRequest()})
        except (PathOutsideRoots, InvalidPath, InvalidRootURI, RootsUnavailable) as exc:
            _refuse_read(str(exc), uri)
        if spec is not None:
            with guarded_call(spec, roots, functools.partial(_refuse_read, uri=uri), checked):
                return await call_next(ctx)
        with call_roots(roots):
            return await call_next(ctx)

    def _roots_answer(self, ctx: ServerRequestContext[Any, Any]) -> tuple[Mapping[str, Any], object]:
        """The request's params without this adapter's input response, and that response: only a
        2026-07-28 request from a client that declared roots can carry one (a legacy connection's roots
        come from its cache, and a client without the capability cannot widen the fallback)."""
        params, answer = _take_roots_answer(ctx.params or {})
        if answer is not None:
            connection = connection_of(ctx)
            caps = connection.client_capabilities
            if not _is_modern(connection) or caps is None or caps.roots is None:
                logger.warning("ignored roots sent with a request on a connection that cannot send them")
                answer = None
        return params, answer

    def _guarded(self, tool: Any) -> GuardedFunction | None:
        spec = guarded_function_of(getattr(tool, "fn", None))
        # A tool guarded by another RootsGuard is that guard's business (its wrapper refuses every call
        # if that guard was never installed).
        if spec is None or spec.policy is not self.policy:
            return None
        if tool.fn is not spec.wrapper and spec.wrapper is not None:
            # @guard.paths stood above @server.tool() (or .resource()): the SDK registered the bare
            # function. Run the wrapper instead, so that the body gets canonical paths and its OS errors
            # and refusals become readable errors too.
            tool.fn = spec.wrapper
        return spec


class _Middleware:
    """The context-tier middleware of one guard on one server."""

    def __init__(self, adapter: Mcp2Adapter, registry: _Registry) -> None:
        self.adapter = adapter
        self.registry = registry
        self.audited = False

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if not self.audited:
            # Startup, as far as a server can tell: tools are registered by the time the first message
            # arrives (they are often decorated after install()).
            self.audited = True
            policy = self.adapter.policy
            warn_unguarded(audit_handlers(self.registry.handlers(), [policy]), strict=policy.strict)
        method = ctx.method
        if method == "initialize":
            result = await call_next(ctx)
            # Record only; never await the client here (initialize runs inline: that would deadlock).
            self.adapter.open_connection(ctx)
            return result
        if method == "notifications/initialized":
            state = self.adapter.policy.connection(connection_of(ctx))
            if state is not None and state.served:
                # A repeated initialized: the connection is already served. Ignored quietly, as the
                # contract says (not handed to the SDK again, no traceback).
                logger.debug("ignoring a repeated notifications/initialized")
                return None
            await call_next(ctx)
            await self.adapter.serve_connection(ctx)
            return None
        if method == "notifications/roots/list_changed":
            state = self.adapter.policy.connection(connection_of(ctx))
            if state is not None:
                state.cache.notify_changed()
            return await call_next(ctx)
        if method == "tools/call":
            return await self.adapter.call_tool(ctx, call_next, self.registry)
        if method == "resources/read":
            return await self.adapter.read_resource(ctx, call_next, self.registry)
        return await call_next(ctx)
