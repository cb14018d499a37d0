"""The official ``mcp`` 2.x port: ``MCPServer`` and the low-level ``Server``.
Both protocol eras.
"""

# A context-tier middleware, first in the server's chain, reports each legacy connection's lifecycle
# (initialize, initialized, roots/list_changed) and hands ``tools/call``, ``prompts/get`` and
# ``resources/read`` to the one guarded-call algorithm (``mcp_roots.guard._calls``) with the facts of the
# request (era, capability, connection, the roots it carried). This module says only how an outcome reads
# on mcp 2.x: an ``InputRequiredResult`` asking for the roots, an ``isError`` result or a JSON-RPC error. The
# SDK's private corners are in ``mcp2_sdk``.

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, INVALID_REQUEST, CallToolResult, ErrorData, TextContent

from ..guard._audit import Handler
from ..guard._calls import resource_read, tool_call
from ..guard._port import SdkPort
from ..roots._facts import PROMPT, READ, TOOL, NeedRoots, RequestFacts
from .mcp2_ask import can_elicit, consent_question, principal_of, send_elicitation, split_responses
from .mcp2_sdk import (
    ROOTS_INPUT_KEY,
    Registry,
    connection_of,
    declares_roots,
    is_modern,
    middleware_of,
    request_context_of,
    roots_question,
    send_roots_list,
    stream_of,
)

__all__ = ["ROOTS_INPUT_KEY", "Mcp2Adapter", "Mcp2Port", "refusal"]

# The wire form of the answer that asks for the roots, made once by the SDK's own model and dump (as its
# runner dumps a model a middleware returns); each call gets a copy, so no model is built and dumped per call.
_ASK = roots_question().model_dump(by_alias=True, mode="json", exclude_none=True)


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


class Mcp2Port(SdkPort, abstract=True):
    """What the ports on ``mcp`` 2.x servers share (this one, and ``fastmcp4``'s, whose servers run on it):
    ``roots/list`` sent on a ``Connection``, and the legacy lifecycle read from the SDK's request context."""

    async def send_roots_list(self, connection: Any, waiting: Sequence[Any]) -> object:
        return await send_roots_list(connection, waiting)

    async def elicit(self, facts: RequestFacts, params: dict[str, object]) -> object:
        return await send_elicitation(facts.request, params)

    def on_initialize(self, ctx: ServerRequestContext[Any, Any]) -> None:
        """``initialize`` on the connection of ``ctx`` (after the SDK handled it)."""
        connection = connection_of(ctx)
        caps = (ctx.params or {}).get("capabilities")
        roots = caps.get("roots") if isinstance(caps, Mapping) else None
        declared = isinstance(roots, Mapping)
        list_changed = isinstance(roots, Mapping) and bool(roots.get("listChanged"))
        if self.initialize_seen(connection, declared=declared, list_changed=list_changed):
            connection.exit_stack.push_async_callback(self.connection_closed, connection)

    async def on_initialized(self, ctx: ServerRequestContext[Any, Any]) -> None:
        """``notifications/initialized`` on the connection of ``ctx``: lives as long as the connection (the
        SDK runs each notification as its own task and cancels them when the connection ends)."""
        connection = connection_of(ctx)
        if self.initialize_seen(connection, declared=False, list_changed=False):  # no initialize seen
            connection.exit_stack.push_async_callback(self.connection_closed, connection)
        await self.initialized(
            connection,
            cannot_ask=None
            if connection.has_standalone_channel
            else "this connection has no back-channel (stateless HTTP)",
            # streamable HTTP: a roots/list sent now would go to the standalone GET stream, which the
            # client opens only after initialized; the first guarded call sends it instead
            send_now=connection.session_id is None,
        )


class Mcp2Adapter(Mcp2Port):
    """One guard's port into ``mcp`` 2.x servers."""

    brokering = True  # MCPServer passes a returned result through: no framework_errors
    need_roots: type[NeedRoots] = _RootsRequired

    def install(self, server: Any) -> None:
        """Put the guard's middleware first in the server's context-tier middleware list, so that a
        ``roots/list_changed`` is recorded before any request that arrived after it is handled."""
        middleware = middleware_of(server)
        if any(isinstance(m, _Middleware) and m.adapter is self for m in middleware):
            return
        name = getattr(server, "name", None)
        self.server_name = name if isinstance(name, str) and name else self.server_name
        middleware.insert(0, _Middleware(self, Registry(server)))

    def handlers(self, server: Any) -> list[Handler]:
        """The tools, resource templates and prompts ``server`` has registered (for the audit)."""
        return [Handler.of(kind, name, c.fn, Context) for kind, name, c in Registry(server).components()]

    def ports_on(self, server: Any) -> list[SdkPort]:
        return [m.adapter for m in getattr(server, "middleware", None) or [] if isinstance(m, _Middleware)]

    def facts(self, ctx: Any, kind: str) -> RequestFacts:
        """The facts of the request ``ctx`` (a middleware's ``ServerRequestContext`` or a tool's ``Context``)
        of ``kind``; ``facts.request`` is the request without the roots it carried (this port's input
        response, which the SDK's handlers must not see)."""
        request = request_context_of(ctx)
        connection = connection_of(request)
        modern = is_modern(connection)
        consenting = self.policy is not None and self.policy.consent is not None
        cleaned, answer, consent, state = split_responses(request.params)
        if cleaned is not None:
            request = dataclasses.replace(request, params=cleaned)
        stream = stream_of(request) if modern and (answer is not None or consenting) else None
        return RequestFacts(
            request,
            kind,
            modern=modern,
            declared=declares_roots(connection),
            connection=connection,
            answer=answer,
            stream=stream,
            elicit=consenting and can_elicit(connection),
            principal=principal_of() if consenting else None,
            consent_answer=consent,
            request_state=state,
        )

    # -- the outcomes --

    def ask(self, facts: RequestFacts) -> dict[str, Any]:
        """The wire form of ``InputRequiredResult`` with this adapter's ``roots/list`` input request."""
        return {**_ASK, "inputRequests": {k: dict(v) for k, v in _ASK["inputRequests"].items()}}

    def ask_consent(self, facts: RequestFacts, params: dict[str, object], state: str) -> dict[str, Any]:
        return consent_question(params, state)

    def refuse(self, facts: RequestFacts, message: str, in_body: bool = False) -> CallToolResult:
        """A tool's ``isError`` result; a JSON-RPC error for a prompt or a read (their results have no
        ``isError``)."""
        if facts.kind == TOOL:
            return refusal(message)
        _refuse_request(facts, message)


def _refuse_request(facts: RequestFacts, message: str) -> NoReturn:
    if facts.kind == READ:
        raise MCPError(INVALID_PARAMS, message, {"uri": (facts.request.params or {}).get("uri")})
    raise MCPError(INVALID_PARAMS, message)


class _Middleware:
    """The context-tier middleware of one guard on one server."""

    def __init__(self, adapter: Mcp2Adapter, registry: Registry) -> None:
        self.adapter = adapter
        self.registry = registry

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        adapter = self.adapter
        adapter.audit_once(self.registry.server)
        method = ctx.method
        if method == "tools/call" or method == "prompts/get":
            # One guarded call for both: a prompt differs in its registry and in how a refusal is said.
            is_tool = method == "tools/call"
            facts = adapter.facts(ctx, TOOL if is_tool else PROMPT)
            request = facts.request
            params = request.params or {}
            name = params.get("name")
            name = name if isinstance(name, str) else ""
            arguments = params.get("arguments")
            result: HandlerResult = await tool_call(
                adapter,
                facts,
                name=name,
                component=self.registry.tool(name) if is_tool else self.registry.prompt(name),
                arguments=arguments if isinstance(arguments, Mapping) else {},
                run=lambda: call_next(request),
            )
            return result
        if method == "resources/read":
            facts = adapter.facts(ctx, READ)
            request = facts.request
            uri = (request.params or {}).get("uri")
            if not isinstance(uri, str):
                return await call_next(request)
            result = await resource_read(
                adapter,
                facts,
                uri=uri,
                component=self.registry.template(uri)[0],
                run=lambda: call_next(request),
            )
            return result
        if method == "initialize":
            result = await call_next(ctx)
            adapter.on_initialize(ctx)
            return result
        if method == "notifications/initialized":
            if adapter.initialized_seen_before(connection_of(ctx)):
                return None  # a repeated notifications/initialized, ignored quietly
            await call_next(ctx)
            await adapter.on_initialized(ctx)
            return None
        if method == "notifications/roots/list_changed":
            adapter.roots_changed(connection_of(ctx))
        return await call_next(ctx)
