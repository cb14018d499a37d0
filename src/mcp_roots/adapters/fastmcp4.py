"""The ``fastmcp`` 4.x adapter (PrefectHQ's ``fastmcp.FastMCP``, which runs on ``mcp`` 2.x), both eras.

A fastmcp ``Middleware``, first in the server's chain, sees ``initialize``, the notifications, every
``tools/call`` and ``resources/read``, and hands the calls to the one guarded-call algorithm
(``mcp_roots.guard._calls``). Legacy connections keep a RootsCache each, run by the ``mcp`` 2.x port
(``adapters/mcp2.py``); on 2026-07-28 a guarded call is first answered with a ``roots/list`` input request.
This module supplies only how to get a call's roots, ask the client, refuse and run the next handler.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import Any

import mcp_types
from fastmcp import Context, FastMCP
from fastmcp.exceptions import PromptError, ResourceError, ToolError
from fastmcp.prompts.base import InputRequiredPromptResult, PromptResult
from fastmcp.prompts.function_prompt import FunctionPrompt
from fastmcp.resources.base import ResourceResult
from fastmcp.resources.template import ResourceTemplate
from fastmcp.server.dependencies import FastMCPRequestContext
from fastmcp.server.middleware import CallNext, Middleware, MiddlewareContext
from fastmcp.tools.base import InputRequiredToolResult, ToolResult
from fastmcp.tools.function_tool import FunctionTool
from mcp.server.context import ServerRequestContext
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ..errors import RootsUnavailable, SDKChanged
from ..guard._audit import Handler, audit_handlers, parameters_of, warn_unguarded
from ..guard._calls import NeedRoots, own_spec, resource_read, tool_call
from ..paths._rootset import RootSet
from ..roots._policy import GuardPolicy
from .mcp2 import ROOTS_INPUT_KEY
from .mcp2_connections import Connections
from .mcp2_sdk import connection_of, stream_of

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


def _runs_wrapper(fn: object, wrapper: object, bare: object) -> bool:
    """Whether ``fn`` (what fastmcp registered, often its own wrapper of the user's function) runs the
    ``wrapper`` @guard.paths returned, not the ``bare`` function underneath it."""
    for _ in range(8):  # a few layers of framework wrappers at most
        if fn is None or fn is bare:
            return False
        if fn is wrapper:
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


@dataclass(frozen=True)
class _Request:
    """One request as the port sees it: fastmcp's context, and whether it is a ``resources/read``."""

    ctx: Context | None
    read: bool = False


class FastMCP4Adapter:
    """One guard's port into ``fastmcp`` 4.x servers (a :class:`mcp_roots.guard._calls.CallPort`)."""

    brokering = False
    framework_errors: tuple[type[BaseException], ...] = (ToolError,)

    def __init__(self, policy: GuardPolicy | None) -> None:
        # None: an adapter that only reads a server (mcp-roots audit), never installs or serves.
        self.policy: GuardPolicy = policy  # type: ignore[assignment]
        # The mcp 2.x connection code (initialize, initialized, list_changed, roots/list), shared.
        self.connections = Connections(policy)

    def install(self, server: Any) -> None:
        """Put the guard's middleware first in the server's fastmcp middleware chain."""
        _check_private_corners(server)
        if any(isinstance(m, RootsMiddleware) and m.adapter is self for m in server.middleware):
            return
        server.middleware.insert(0, RootsMiddleware(self, server))

    def _components(self, server: Any) -> dict[str, Any]:
        components = getattr(server.local_provider, _COMPONENTS, None)
        if not isinstance(components, dict):
            raise SDKChanged(
                "mcp-roots cannot list fastmcp's registered components (fastmcp changed: "
                f"LocalProvider.{_COMPONENTS}); please report this with your fastmcp version"
            )
        return components

    def handlers(self, server: Any) -> list[Handler]:
        """The tools and resource templates registered on ``server`` itself (for the audit)."""
        found = []
        for component in self._components(server).values():
            fn = getattr(component, "fn", None)
            if isinstance(component, FunctionTool):
                found.append(Handler("tool", component.name, fn, parameters_of(fn, Context)))
            elif isinstance(component, FunctionPrompt):
                found.append(Handler("prompt", component.name, fn, parameters_of(fn, Context)))
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
        for component in self._components(server).values():
            if isinstance(component, (FunctionTool, FunctionPrompt)):
                _swap_in_wrapper(component, self.policy)

    def installed(self, server: Any) -> list[GuardPolicy]:
        """The policies of the guards installed on ``server``."""
        return [m.adapter.policy for m in getattr(server, "middleware", []) if isinstance(m, RootsMiddleware)]

    # -- the port --

    def ask(self, request: Any) -> InputRequiredToolResult:
        return InputRequiredToolResult(
            mcp_types.InputRequiredResult(input_requests={ROOTS_INPUT_KEY: mcp_types.ListRootsRequest()})
        )

    def refuse(self, message: str) -> ToolResult:
        return refusal(message)

    def refuse_in_body(self, message: str) -> Any:
        """fastmcp shows a ``ToolError``'s message as the call's one-line error (a returned result would
        have to match the tool's output schema)."""
        raise ToolError(message)

    def refuse_read(self, message: str, uri: str) -> Any:
        raise ResourceError(message)

    async def roots(self, ctx: Any) -> RootSet:
        """The roots in force for the request of the fastmcp ``Context`` ``ctx``, outside a guarded call."""
        if not isinstance(ctx, Context):
            raise TypeError(
                f"expected a fastmcp Context, got {type(ctx).__name__}; declare a parameter typed "
                "`Context` on your tool and pass it to guard.roots(ctx)"
            )
        sdk_ctx = _sdk_context(ctx)
        if _is_modern(sdk_ctx) and _declares_roots(sdk_ctx):
            raise RootsUnavailable(
                "on a 2026-07-28 connection the client's roots arrive with the tool call; decorate the tool "
                "with @guard.paths(...) (no names is fine) so mcp-roots can ask for them"
            )
        return await self.call_roots(_Request(ctx))

    def roots_now(self, request: _Request) -> RootSet | None:
        sdk_ctx = _sdk_context(request.ctx)
        return None if _is_modern(sdk_ctx) else self.policy.roots_now(connection_of(sdk_ctx))

    async def call_roots(self, request: _Request) -> RootSet:
        sdk_ctx = _sdk_context(request.ctx)
        if not _is_modern(sdk_ctx):
            return await self.connections.roots(sdk_ctx)
        if not _declares_roots(sdk_ctx):
            return self.policy.no_capability_fallback()
        if request.read:
            # A 2026-07-28 read carries no roots, and this adapter does not yet ask for them on a read:
            # refuse rather than guess (fail closed).
            raise RootsUnavailable(
                "mcp-roots cannot yet check a resources/read against the client's roots on a 2026-07-28 "
                "connection with fastmcp 4; the read is refused"
            )
        raise NeedRoots()

    def roots_answer(self, ctx: Context | None) -> tuple[object, object | None]:
        """The roots the client sent with this 2026-07-28 call (its input response), or None, and the
        client channel it came on (``stream_of``)."""
        if ctx is None or ctx.request_context is None:
            return None, None
        sdk_ctx = _sdk_context(ctx)
        if not _is_modern(sdk_ctx) or not _declares_roots(sdk_ctx):
            return None, None
        responses = ctx.input_responses
        answer = responses.get(ROOTS_INPUT_KEY) if responses else None
        if isinstance(answer, mcp_types.ListRootsResult):
            roots = [root.model_dump(mode="json", by_alias=True) for root in answer.roots]
            return {"roots": roots}, stream_of(sdk_ctx)
        return None, None

    async def call_tool(
        self,
        server: FastMCP,
        context: MiddlewareContext[mcp_types.CallToolRequestParams],
        call_next: CallNext[mcp_types.CallToolRequestParams, ToolResult],
    ) -> ToolResult:
        name = context.message.name
        tool = await server.get_tool(name)
        answer, stream = self.roots_answer(context.fastmcp_context)
        fn = (
            _swap_in_wrapper(tool, self.policy)
            if isinstance(tool, FunctionTool)
            else getattr(tool, "fn", None)
        )
        result: ToolResult = await tool_call(
            self,
            _Request(context.fastmcp_context),
            name=name,
            fn=fn,
            arguments=context.message.arguments or {},
            answer=answer,
            stream=stream,
            run=lambda: call_next(context),
        )
        return result

    async def get_prompt(
        self,
        server: FastMCP,
        context: MiddlewareContext[mcp_types.GetPromptRequestParams],
        call_next: CallNext[mcp_types.GetPromptRequestParams, PromptResult],
    ) -> PromptResult:
        name = context.message.name
        prompt = await server.get_prompt(name)
        answer, stream = self.roots_answer(context.fastmcp_context)
        fn = _swap_in_wrapper(prompt, self.policy) if isinstance(prompt, FunctionPrompt) else None
        result: PromptResult = await tool_call(
            self,
            _Request(context.fastmcp_context),
            name=name,
            fn=fn,
            arguments=context.message.arguments or {},
            answer=answer,
            stream=stream,
            run=lambda: call_next(context),
            kind="prompt",
            refuse=_refuse_prompt,
            ask=_ask_prompt,
        )
        return result

    async def read_resource(
        self,
        server: FastMCP,
        context: MiddlewareContext[mcp_types.ReadResourceRequestParams],
        call_next: CallNext[mcp_types.ReadResourceRequestParams, ResourceResult],
    ) -> ResourceResult:
        uri = str(context.message.uri)
        template = await server.get_resource_template(uri)
        fn = getattr(template, "fn", None)
        spec = own_spec(fn, self.policy)
        result: ResourceResult = await resource_read(
            self,
            _Request(context.fastmcp_context, read=True),
            uri=uri,
            fn=fn,
            runs_wrapper=spec is None or _runs_wrapper(fn, spec.wrapper, spec.fn),
            answer=None,
            run=lambda: call_next(context),
        )
        return result


def _ask_prompt(request: Any) -> InputRequiredPromptResult:
    return InputRequiredPromptResult(
        mcp_types.InputRequiredResult(input_requests={ROOTS_INPUT_KEY: mcp_types.ListRootsRequest()})
    )


def _refuse_prompt(message: str) -> Any:
    """A refused ``prompts/get``: fastmcp's prompt error, which the client sees as one line."""
    raise PromptError(message)


def _swap_in_wrapper(component: Any, policy: GuardPolicy) -> Any:
    """What a registered tool runs; where @guard.paths stood above @server.tool (fastmcp registered the
    bare function), the guard's wrapper is put in its place."""
    fn = getattr(component, "fn", None)
    spec = own_spec(fn, policy)
    if spec is not None and spec.wrapper is not None and fn is not spec.wrapper:
        component.fn = fn = spec.wrapper
    return fn


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
        self.adapter.connections.open_connection(_sdk_context(context.fastmcp_context))
        return result

    async def on_notification(
        self,
        context: MiddlewareContext[mcp_types.Notification[Any, Any]],
        call_next: CallNext[mcp_types.Notification[Any, Any], Any],
    ) -> Any:
        if context.method == "notifications/roots/list_changed":
            self.adapter.connections.notify_changed(_sdk_context(context.fastmcp_context))
            return await call_next(context)
        if context.method == "notifications/initialized":
            result = await call_next(context)
            # Lives as long as the connection: the SDK runs each notification as its own task and cancels
            # them when the connection ends.
            await self.adapter.connections.serve_connection(_sdk_context(context.fastmcp_context))
            return result
        return await call_next(context)

    async def on_call_tool(
        self,
        context: MiddlewareContext[mcp_types.CallToolRequestParams],
        call_next: CallNext[mcp_types.CallToolRequestParams, ToolResult],
    ) -> ToolResult:
        return await self.adapter.call_tool(self.server, context, call_next)

    async def on_get_prompt(
        self,
        context: MiddlewareContext[mcp_types.GetPromptRequestParams],
        call_next: CallNext[mcp_types.GetPromptRequestParams, PromptResult],
    ) -> PromptResult:
        return await self.adapter.get_prompt(self.server, context, call_next)

    async def on_read_resource(
        self,
        context: MiddlewareContext[mcp_types.ReadResourceRequestParams],
        call_next: CallNext[mcp_types.ReadResourceRequestParams, ResourceResult],
    ) -> ResourceResult:
        return await self.adapter.read_resource(self.server, context, call_next)
