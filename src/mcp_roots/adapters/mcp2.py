"""The official ``mcp`` 2.x port: ``MCPServer`` and the low-level ``Server``, both protocol eras.

A context-tier middleware, first in the server's chain, feeds each legacy connection's RootsCache
(initialize, initialized, roots/list_changed) and hands ``tools/call``, ``prompts/get`` and
``resources/read`` to the one guarded-call algorithm (``mcp_roots.guard._calls``). This module supplies only
how to get a call's roots (the cache, or the roots sent with a 2026-07-28 request), how to ask the client (an
``InputRequiredResult`` with a ``roots/list`` input request), how to refuse and how to run the next
handler. The SDK's private corners are in ``mcp2_sdk``.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import Any, NoReturn

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    CallToolResult,
    ErrorData,
    InputRequiredResult,
    ListRootsRequest,
    TextContent,
)

from ..guard._audit import Handler, audit_handlers, parameters_of, warn_unguarded
from ..guard._calls import NeedRoots, own_spec, resource_read, tool_call
from ..paths._rootset import RootSet
from ..roots._policy import GuardPolicy
from .mcp2_connections import Connections, declares_roots, is_modern
from .mcp2_sdk import Registry, connection_of, middleware_of, stream_of

__all__ = ["ROOTS_INPUT_KEY", "Mcp2Adapter", "refusal"]

logger = logging.getLogger("mcp_roots")

ROOTS_INPUT_KEY = "mcp_roots.roots"
"""The key of the ``roots/list`` input request this adapter sends in an ``InputRequiredResult``."""

# The wire form of the answer that asks for the roots, made once by the SDK's own model and dump (as its
# runner dumps a model a middleware returns); each call gets a copy, so no model is built and dumped per call.
_ASK = InputRequiredResult(input_requests={ROOTS_INPUT_KEY: ListRootsRequest()}).model_dump(
    by_alias=True, mode="json", exclude_none=True
)


def refusal(message: str) -> CallToolResult:
    """A tool result with ``isError: true`` carrying ``message``."""
    return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True)


class _RootsRequired(MCPError, NeedRoots):
    """The roots of a 2026-07-28 request must be asked of the client. An ``MCPError`` so that MCPServer's
    tool runner lets it through to the middleware (it turns any other exception into a tool error)."""

    ERROR = ErrorData(
        code=INVALID_REQUEST,
        message="the client's roots arrive by multi-round-trip on 2026-07-28, and only the mcp-roots "
        "middleware can ask for them: guard.install(server) was not called",
    )

    def __init__(self) -> None:
        # What MCPError.__init__ sets, with one ErrorData for all (raised on every first round of a
        # guarded call; never changed): no model validated per call.
        Exception.__init__(self, self.ERROR.code, self.ERROR.message, None)
        self.error = self.ERROR


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


class Mcp2Adapter:
    """One guard's port into ``mcp`` 2.x servers (a :class:`mcp_roots.guard._calls.CallPort`)."""

    brokering = True
    framework_errors: tuple[type[BaseException], ...] = ()  # MCPServer passes a returned result through

    def __init__(self, policy: GuardPolicy | None) -> None:
        # None: an adapter that only reads a server (mcp-roots audit), never installs or serves.
        self.policy: GuardPolicy = policy  # type: ignore[assignment]
        self.connections = Connections(policy)

    def install(self, server: Any) -> None:
        """Put the guard's middleware first in the server's context-tier middleware list, so that a
        ``roots/list_changed`` is recorded before any request that arrived after it is handled."""
        middleware = middleware_of(server)
        if any(isinstance(m, _Middleware) and m.adapter is self for m in middleware):
            return
        middleware.insert(0, _Middleware(self, Registry(server)))

    def handlers(self, server: Any) -> list[Handler]:
        """The tools, resource templates and prompts ``server`` has registered (for the audit)."""
        return [
            Handler(
                kind,
                name,
                c.fn,
                parameters_of(c.fn, Context),
                kind == "resource template" and name[:5].lower() == "file:",
            )
            for kind, name, c in Registry(server).components()
        ]

    def installed(self, server: Any) -> list[GuardPolicy]:
        """The policies of the guards installed on ``server``."""
        middleware = getattr(server, "middleware", None) or []
        return [m.adapter.policy for m in middleware if isinstance(m, _Middleware)]

    # -- the port --

    def ask(self, request: Any) -> dict[str, Any]:
        """The wire form of ``InputRequiredResult`` with this adapter's ``roots/list`` input request."""
        return {**_ASK, "inputRequests": {k: dict(v) for k, v in _ASK["inputRequests"].items()}}

    def refuse(self, message: str) -> CallToolResult:
        return refusal(message)

    def refuse_in_body(self, message: str) -> CallToolResult:
        return refusal(message)

    def refuse_read(self, message: str, uri: str) -> NoReturn:
        """A JSON-RPC error (resource results have no ``isError``)."""
        raise MCPError(INVALID_PARAMS, message, {"uri": uri})

    def roots_now(self, request: ServerRequestContext[Any, Any]) -> RootSet | None:
        connection = connection_of(request)
        return None if is_modern(connection) else self.policy.roots_now(connection)

    async def roots(self, ctx: Any) -> RootSet:
        """The roots in force for the request ``ctx`` (a tool ``Context`` or a ``ServerRequestContext``).

        On a 2026-07-28 request from a client with roots, this raises the multi-round-trip signal: the
        middleware answers the call with an input request and the handler runs again with the roots.
        """
        return await self.call_roots(_request_context_of(ctx))

    async def call_roots(self, request: ServerRequestContext[Any, Any]) -> RootSet:
        connection = connection_of(request)
        if is_modern(connection):
            if not declares_roots(connection):
                return self.policy.no_capability_fallback()
            raise _RootsRequired()
        return await self.connections.roots(request)

    def roots_answer(
        self, ctx: ServerRequestContext[Any, Any]
    ) -> tuple[ServerRequestContext[Any, Any], object, object | None]:
        """The request without this adapter's input response, that response, and the client channel it
        came on (``stream_of``): only a 2026-07-28 request from a client that declared roots can carry one
        (a legacy connection's roots come from its cache, and a client without the capability cannot
        widen the fallback)."""
        params, answer = _take_roots_answer(ctx.params or {})
        if answer is None:
            return ctx, None, None
        connection = connection_of(ctx)
        if not is_modern(connection) or not declares_roots(connection):
            logger.warning("ignored roots sent with a request on a connection that cannot send them")
            return dataclasses.replace(ctx, params=params), None, None
        return dataclasses.replace(ctx, params=params), answer, stream_of(ctx)


def _refuse_prompt(message: str) -> NoReturn:
    """A refused ``prompts/get``: a JSON-RPC error (prompt results have no ``isError``)."""
    raise MCPError(INVALID_PARAMS, message)


def _swap_in_wrapper(component: Any, policy: GuardPolicy) -> Any:
    """The function a registered tool, template or prompt runs; where @guard.paths stood above the
    framework's decorator (it registered the bare function), the guard's wrapper is put in its place."""
    fn = getattr(component, "fn", None)
    spec = own_spec(fn, policy)
    if spec is not None and spec.wrapper is not None and fn is not spec.wrapper:
        component.fn = fn = spec.wrapper
    return fn


class _Middleware:
    """The context-tier middleware of one guard on one server."""

    def __init__(self, adapter: Mcp2Adapter, registry: Registry) -> None:
        self.adapter = adapter
        self.registry = registry
        self.audited = False

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        adapter = self.adapter
        if not self.audited:
            # Startup, as far as a server can tell: tools are registered by the time the first message
            # arrives (they are often decorated after install()).
            self.audited = True
            policy = adapter.policy
            rows = audit_handlers(adapter.handlers(self.registry.server), [policy])
            warn_unguarded(rows, strict=policy.strict)
        method = ctx.method
        if method in ("tools/call", "prompts/get"):
            # One guarded call for both: a prompt differs in its registry and in how a refusal is said.
            is_tool = method == "tools/call"
            ctx, answer, stream = adapter.roots_answer(ctx)
            params = ctx.params or {}
            name = params.get("name")
            name = name if isinstance(name, str) else ""
            component = self.registry.tool(name) if is_tool else self.registry.prompt(name)
            arguments = params.get("arguments")
            request = ctx
            result: HandlerResult = await tool_call(
                adapter,
                request,
                name=name,
                fn=_swap_in_wrapper(component, adapter.policy) if component is not None else None,
                arguments=arguments if isinstance(arguments, Mapping) else {},
                answer=answer,
                stream=stream,
                run=lambda: call_next(request),
                kind="tool" if is_tool else "prompt",
                refuse=None if is_tool else _refuse_prompt,
            )
            return result
        if method == "resources/read":
            ctx, answer, stream = adapter.roots_answer(ctx)
            uri = (ctx.params or {}).get("uri")
            if not isinstance(uri, str):
                return await call_next(ctx)
            template, _ = self.registry.template(uri)
            fn = _swap_in_wrapper(template, adapter.policy) if template is not None else None
            request = ctx
            result = await resource_read(
                adapter,
                request,
                uri=uri,
                fn=fn,
                runs_wrapper=True,
                answer=answer,
                stream=stream,
                run=lambda: call_next(request),
            )
            return result
        if method == "initialize":
            result = await call_next(ctx)
            # Record only; never await the client here (initialize runs inline: that would deadlock).
            adapter.connections.open_connection(ctx)
            return result
        if method == "notifications/initialized":
            state = adapter.policy.connection(connection_of(ctx))
            if state is not None and state.served:
                logger.debug("ignoring a repeated notifications/initialized")
                return None
            await call_next(ctx)
            await adapter.connections.serve_connection(ctx)
            return None
        if method == "notifications/roots/list_changed":
            adapter.connections.notify_changed(ctx)
        return await call_next(ctx)
