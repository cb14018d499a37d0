"""The ``fastmcp`` 4.x adapter (PrefectHQ's ``fastmcp.FastMCP``, which runs on ``mcp`` 2.x), both eras.

A fastmcp ``Middleware``, first in the server's chain, sees ``initialize``, the notifications and every
``tools/call``. Legacy connections keep a RootsCache each, run by the same ``mcp`` 2.x connection code as
``adapters/mcp2.py``; on 2026-07-28 a guarded call is first answered with a ``roots/list`` input request. A
guarded tool is found by name in fastmcp's registry and its arguments are checked in the middleware, so the
tool's signature (and its input schema) stays its own and the decorator order does not matter.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import Any

import mcp_types
from fastmcp import Context, FastMCP
from fastmcp.exceptions import ResourceError, ToolError
from fastmcp.resources.base import ResourceResult
from fastmcp.resources.template import ResourceTemplate
from fastmcp.server.dependencies import FastMCPRequestContext
from fastmcp.server.middleware import CallNext, Middleware, MiddlewareContext
from fastmcp.tools.base import InputRequiredToolResult, ToolResult
from fastmcp.tools.function_tool import FunctionTool
from mcp.server.context import ServerRequestContext
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from .._errors import InvalidPath, InvalidRootURI, PathOutsideRoots, RootsUnavailable, SDKChanged
from .._guard import (
    GuardedFunction,
    GuardPolicy,
    Handler,
    audit_handlers,
    call_roots,
    client_error_text,
    guarded_call,
    guarded_function_of,
    parameters_of,
    strict_refusal,
    warn_unguarded,
)
from .._rootset import RootSet
from .._uri import uri_to_path
from .mcp2 import ROOTS_INPUT_KEY, Mcp2Adapter, connection_of

__all__ = ["FastMCP4Adapter", "refusal"]

logger = logging.getLogger("mcp_roots")

# The private corner this adapter touches: fastmcp's per-request wrapper keeps the SDK's request context
# (its "escape hatch") as `_srctx`; the mcp 2.x connection code needs it. Checked at install time.
_SDK_CONTEXT_FIELD = "_srctx"
# For the audit (`mcp-roots audit`, a synchronous listing): the local provider's registry of components.
_COMPONENTS = "_components"


def refusal(message: str) -> ToolResult:
    """A fastmcp tool result with ``isError: true`` carrying ``message``."""
    return ToolResult(content=[mcp_types.TextContent(type="text", text=message)], is_error=True)


def _raise_refusal(message: str) -> Any:
    """A guarded body's refusal: fastmcp shows a ``ToolError``'s message as the call's one-line error
    (a returned result would have to match the tool's output schema)."""
    raise ToolError(message)


def _refuse_read(message: str) -> Any:
    """A refused ``resources/read``: fastmcp's resource error, which the client sees as one line."""
    logger.info("refused resources/read: %s", message)
    raise ResourceError(message)


def _runs_wrapper(fn: object, spec: GuardedFunction) -> bool:
    """Whether ``fn`` (what fastmcp registered, often its own wrapper of the user's function) runs the
    wrapper @guard.paths returned, not the bare function underneath it."""
    for _ in range(8):  # a few layers of framework wrappers at most
        if fn is None or fn is spec.fn:
            return False
        if fn is spec.wrapper:
            return True
        fn = getattr(fn, "__wrapped__", None)
    return False


def _check_private_corners(server: FastMCP) -> None:
    if not isinstance(getattr(server, "middleware", None), list):
        raise SDKChanged(
            "mcp-roots cannot find fastmcp's middleware list (fastmcp changed: FastMCP.middleware is not a "
            "list); please report this with your fastmcp version"
        )
    if not isinstance(getattr(server.local_provider, _COMPONENTS, None), dict):
        raise SDKChanged(
            "mcp-roots cannot list fastmcp's registered components (fastmcp changed: "
            f"LocalProvider.{_COMPONENTS}); please report this with your fastmcp version"
        )
    fields = {f.name for f in dataclasses.fields(FastMCPRequestContext)}
    if _SDK_CONTEXT_FIELD not in fields:
        raise SDKChanged(
            "mcp-roots cannot find the SDK request context inside fastmcp's request context (fastmcp "
            f"changed: FastMCPRequestContext.{_SDK_CONTEXT_FIELD} is gone); please report this with your "
            "fastmcp version"
        )


def _sdk_context(ctx: Context | None) -> ServerRequestContext[Any, Any]:
    """The ``mcp`` 2.x request context behind a fastmcp ``Context`` (see ``_SDK_CONTEXT_FIELD``)."""
    request_context = ctx.request_context if ctx is not None else None
    if request_context is None:
        raise RootsUnavailable(
            "mcp-roots can tell the roots only during an MCP request (no request context is active)"
        )
    sdk_ctx = getattr(request_context, _SDK_CONTEXT_FIELD, None)
    if not isinstance(sdk_ctx, ServerRequestContext):
        raise SDKChanged(
            "mcp-roots cannot find the SDK request context inside fastmcp's request context (fastmcp "
            f"changed: FastMCPRequestContext.{_SDK_CONTEXT_FIELD}); please report this with your fastmcp "
            "version"
        )
    return sdk_ctx


def _is_modern(sdk_ctx: ServerRequestContext[Any, Any]) -> bool:
    return sdk_ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


def _declares_roots(sdk_ctx: ServerRequestContext[Any, Any]) -> bool:
    caps = connection_of(sdk_ctx).client_capabilities
    return caps is not None and caps.roots is not None


class FastMCP4Adapter:
    """One guard's wiring into ``fastmcp`` 4.x servers (see ``mcp_roots._guard`` for the interface)."""

    def __init__(self, policy: GuardPolicy | None) -> None:
        # None: an adapter that only reads a server (mcp-roots audit), never installs or serves.
        self.policy: GuardPolicy = policy  # type: ignore[assignment]
        # The mcp 2.x connection code (initialize, initialized, list_changed, roots/list), shared.
        self.sdk = Mcp2Adapter(policy)

    def install(self, server: Any) -> None:
        """Put the guard's middleware first in the server's fastmcp middleware chain."""
        _check_private_corners(server)
        if any(isinstance(m, RootsMiddleware) and m.adapter is self for m in server.middleware):
            return
        server.middleware.insert(0, RootsMiddleware(self, server))

    def handlers(self, server: Any) -> list[Handler]:
        """The tools and resource templates registered on ``server`` itself (for the audit)."""
        components = getattr(server.local_provider, _COMPONENTS, None)
        if not isinstance(components, dict):
            raise SDKChanged(
                "mcp-roots cannot list fastmcp's registered components (fastmcp changed: "
                f"LocalProvider.{_COMPONENTS}); please report this with your fastmcp version"
            )
        found = []
        for component in components.values():
            fn = getattr(component, "fn", None)
            if isinstance(component, FunctionTool):
                found.append(Handler("tool", component.name, fn, parameters_of(fn, Context)))
            elif isinstance(component, ResourceTemplate) and fn is not None:
                uri = component.uri_template
                found.append(
                    Handler(
                        "resource template", uri, fn, parameters_of(fn, Context), uri[:5].lower() == "file:"
                    )
                )
        return found

    def swap_in_wrappers(self, server: Any) -> None:
        """Where @guard.paths stood above @server.tool, fastmcp registered the bare function: put the
        guard's wrapper in its place at startup, so that a call reaching the tool by a way this middleware
        does not see (fastmcp's hashed names for app tools) refuses instead of running unchecked."""
        components = getattr(server.local_provider, _COMPONENTS, None)
        for component in components.values() if isinstance(components, dict) else ():
            spec = guarded_function_of(getattr(component, "fn", None))
            if (
                isinstance(component, FunctionTool)
                and spec is not None
                and spec.policy is self.policy
                and spec.wrapper is not None
            ):
                component.fn = spec.wrapper

    def installed(self, server: Any) -> list[GuardPolicy]:
        """The policies of the guards installed on ``server``."""
        return [m.adapter.policy for m in getattr(server, "middleware", []) if isinstance(m, RootsMiddleware)]

    async def roots(self, ctx: Any) -> RootSet:
        """The roots in force for the request of the fastmcp ``Context`` ``ctx``, outside a guarded call."""
        if not isinstance(ctx, Context):
            raise TypeError(
                f"expected a fastmcp Context, got {type(ctx).__name__}; declare a parameter typed "
                "`Context` on your tool and pass it to guard.roots(ctx)"
            )
        sdk_ctx = _sdk_context(ctx)
        if _is_modern(sdk_ctx):
            if not _declares_roots(sdk_ctx):
                return self.policy.no_capability_fallback()
            raise RootsUnavailable(
                "on a 2026-07-28 connection the client's roots arrive with the tool call; decorate the tool "
                "with @guard.paths(...) (no names is fine) so mcp-roots can ask for them"
            )
        return await self.sdk.roots_for(sdk_ctx)

    async def _roots_for_call(
        self, spec: GuardedFunction, context: MiddlewareContext[mcp_types.CallToolRequestParams]
    ) -> RootSet | ToolResult:
        """The roots a guarded call runs with, or the result that answers the call instead (an input
        request for the roots, on 2026-07-28)."""
        ctx = context.fastmcp_context
        sdk_ctx = _sdk_context(ctx)
        if not _is_modern(sdk_ctx):
            return await self.sdk.roots_for(sdk_ctx)
        if not _declares_roots(sdk_ctx):
            return self.policy.no_capability_fallback()
        responses = ctx.input_responses if ctx is not None else None
        answer = responses.get(ROOTS_INPUT_KEY) if responses else None
        if isinstance(answer, mcp_types.ListRootsResult):
            entries = [root.model_dump(mode="json", by_alias=True) for root in answer.roots]
            return await self.policy.roots_from_client_answer({"roots": entries})
        # Before asking the client: a path outside the operator's ceiling is refused whatever the client
        # would answer, so it costs no round trip.
        if self.policy.ceiling is not None:
            spec.precheck(self.policy.ceiling, context.message.arguments or {})
        return InputRequiredToolResult(
            mcp_types.InputRequiredResult(input_requests={ROOTS_INPUT_KEY: mcp_types.ListRootsRequest()})
        )

    async def call_tool(
        self,
        server: FastMCP,
        context: MiddlewareContext[mcp_types.CallToolRequestParams],
        call_next: CallNext[mcp_types.CallToolRequestParams, ToolResult],
    ) -> ToolResult:
        tool = await server.get_tool(context.message.name)
        fn = getattr(tool, "fn", None)
        if self.policy.strict and fn is not None:
            why = strict_refusal(fn, context.message.name)
            if why is not None:
                logger.warning("refused %s(): %s", context.message.name, why)
                return refusal(why)
        spec = guarded_function_of(fn)
        if spec is None or spec.policy is not self.policy:
            # Unguarded, or guarded by another RootsGuard (whose wrapper refuses if it was not installed).
            return await call_next(context)
        if isinstance(tool, FunctionTool) and spec.wrapper is not None and tool.fn is not spec.wrapper:
            # @guard.paths stood above @server.tool: fastmcp registered the bare function. Run the wrapper
            # instead, so that the body's OS errors and refusals become one readable line too.
            tool.fn = spec.wrapper
        arguments: Mapping[str, Any] = context.message.arguments or {}
        try:
            roots = await self._roots_for_call(spec, context)
            if isinstance(roots, ToolResult):
                return roots
            checked = spec.check(roots, arguments)
        except (PathOutsideRoots, InvalidPath, RootsUnavailable) as exc:
            logger.info("refused %s(): %s", spec.name, exc)
            return refusal(str(exc))
        message = context.message.model_copy(update={"arguments": checked})
        try:
            with guarded_call(spec, roots, _raise_refusal):
                return await call_next(context.copy(message=message))
        except ToolError as exc:
            # fastmcp wraps what the body raised; a refusal or an OS error is one readable line for the
            # client (whichever side of @mcp.tool @guard.paths stands on), not "Error calling tool".
            text = client_error_text(exc)
            if text is None:
                raise
            logger.info("refused %s(): %s", spec.name, text)
            return refusal(text)

    async def read_resource(
        self,
        server: FastMCP,
        context: MiddlewareContext[mcp_types.ReadResourceRequestParams],
        call_next: CallNext[mcp_types.ReadResourceRequestParams, ResourceResult],
    ) -> ResourceResult:
        """``resources/read``: a ``file:`` URI is checked against the connection's roots, and a resource
        template under ``@guard.paths`` gets its path parameters checked, before the handler runs."""
        uri = str(context.message.uri)
        template = await server.get_resource_template(uri)
        spec = guarded_function_of(getattr(template, "fn", None))
        if spec is not None and spec.policy is not self.policy:
            spec = None  # another guard's business: its wrapper refuses if that guard is not installed
        is_file = uri[:5].lower() == "file:"
        if not is_file and spec is None:
            return await call_next(context)
        try:
            if spec is not None and not _runs_wrapper(getattr(template, "fn", None), spec):
                raise RootsUnavailable(
                    f"@guard.paths stands above @server.resource on {spec.name}(): fastmcp registered the "
                    "unchecked function; put @guard.paths below the resource decorator"
                )
            roots = await self._roots_for_read(context)
            if is_file:
                roots.resolve(uri_to_path(uri))
            params = template.matches(uri) if template is not None else None
            checked = spec.check(roots, params or {}) if spec is not None else None
        except (PathOutsideRoots, InvalidPath, InvalidRootURI, RootsUnavailable) as exc:
            _refuse_read(str(exc))
        if spec is None:
            with call_roots(roots):
                return await call_next(context)
        with guarded_call(spec, roots, _refuse_read, checked):
            return await call_next(context)

    async def _roots_for_read(
        self, context: MiddlewareContext[mcp_types.ReadResourceRequestParams]
    ) -> RootSet:
        sdk_ctx = _sdk_context(context.fastmcp_context)
        if not _is_modern(sdk_ctx):
            return await self.sdk.roots_for(sdk_ctx)
        if not _declares_roots(sdk_ctx):
            return self.policy.no_capability_fallback()
        # A 2026-07-28 read carries no roots, and this adapter does not yet ask for them on a read: refuse
        # rather than guess (fail closed).
        raise RootsUnavailable(
            "mcp-roots cannot yet check a resources/read against the client's roots on a 2026-07-28 "
            "connection with fastmcp 4; the read is refused"
        )


class RootsMiddleware(Middleware):
    """The fastmcp middleware of one guard on one server."""

    def __init__(self, adapter: FastMCP4Adapter, server: FastMCP) -> None:
        self.adapter = adapter
        self.server = server
        self.audited = False

    async def on_message(self, context: MiddlewareContext[Any], call_next: CallNext[Any, Any]) -> Any:
        if not self.audited:
            # Startup, as far as a server can tell: tools are registered by the time the first message
            # arrives (they are often decorated after install()).
            self.audited = True
            policy = self.adapter.policy
            rows = audit_handlers(self.adapter.handlers(self.server), [policy])
            warn_unguarded(rows, strict=policy.strict)
            self.adapter.swap_in_wrappers(self.server)
        return await call_next(context)

    async def on_initialize(
        self,
        context: MiddlewareContext[mcp_types.InitializeRequest],
        call_next: CallNext[mcp_types.InitializeRequest, mcp_types.InitializeResult | None],
    ) -> mcp_types.InitializeResult | None:
        result = await call_next(context)
        # Record only; never await the client here (initialize runs inline: that would deadlock).
        self.adapter.sdk.open_connection(_sdk_context(context.fastmcp_context))
        return result

    async def on_notification(
        self,
        context: MiddlewareContext[mcp_types.Notification[Any, Any]],
        call_next: CallNext[mcp_types.Notification[Any, Any], Any],
    ) -> Any:
        if context.method == "notifications/roots/list_changed":
            sdk_ctx = _sdk_context(context.fastmcp_context)
            state = self.adapter.policy.connection(connection_of(sdk_ctx))
            if state is not None:
                state.cache.notify_changed()
            return await call_next(context)
        if context.method == "notifications/initialized":
            result = await call_next(context)
            # Lives as long as the connection: the SDK runs each notification as its own task and cancels
            # them when the connection ends.
            await self.adapter.sdk.serve_connection(_sdk_context(context.fastmcp_context))
            return result
        return await call_next(context)

    async def on_call_tool(
        self,
        context: MiddlewareContext[mcp_types.CallToolRequestParams],
        call_next: CallNext[mcp_types.CallToolRequestParams, ToolResult],
    ) -> ToolResult:
        return await self.adapter.call_tool(self.server, context, call_next)

    async def on_read_resource(
        self,
        context: MiddlewareContext[mcp_types.ReadResourceRequestParams],
        call_next: CallNext[mcp_types.ReadResourceRequestParams, ResourceResult],
    ) -> ResourceResult:
        return await self.adapter.read_resource(self.server, context, call_next)
