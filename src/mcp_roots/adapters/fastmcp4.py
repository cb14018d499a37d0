"""The ``fastmcp`` 4.x port (PrefectHQ's ``fastmcp.FastMCP``, on ``mcp`` 2.x).
Both protocol eras.
"""

# A fastmcp ``Middleware``, first in the server's chain, sees ``initialize``, the notifications, every
# ``tools/call``, ``prompts/get`` and ``resources/read``: it reports the legacy lifecycle as the ``mcp`` 2.x
# port does (``adapters/mcp2.py``) and hands each call to the one guarded-call algorithm
# (``mcp_roots.guard._calls``) with the facts of the request. On 2026-07-28 a question (the roots, consent)
# is fastmcp's input-required result of the tool, prompt or read, and the retry's answers are its context's
# input responses. fastmcp says what it cannot do: ask from a hand-written handler. This module says only how
# an outcome reads on fastmcp; its private corners are in ``fastmcp4_sdk``.

from __future__ import annotations

from typing import Any

import mcp_types
from fastmcp import Context, FastMCP
from fastmcp.exceptions import PromptError, ResourceError, ToolError
from fastmcp.prompts.base import InputRequiredPromptResult, PromptResult
from fastmcp.prompts.function_prompt import FunctionPrompt
from fastmcp.resources.base import InputRequiredResourceResult, ResourceResult
from fastmcp.resources.template import ResourceTemplate
from fastmcp.server.middleware import CallNext, Middleware, MiddlewareContext
from fastmcp.tools.base import InputRequiredToolResult, ToolResult
from fastmcp.tools.function_tool import FunctionTool

from ..guard._audit import Handler
from ..guard._calls import resource_read, tool_call
from ..guard._port import SdkPort
from ..roots._facts import HANDLER, PROMPT, READ, TOOL, RequestFacts
from .fastmcp4_sdk import check_private_corners, components_of, sdk_context
from .mcp2 import Mcp2Port
from .mcp2_ask import can_elicit, consent_answer, consent_request, principal_of
from .mcp2_sdk import ROOTS_INPUT_KEY, connection_of, declares_roots, is_modern, roots_question, stream_of

__all__ = ["FastMCP4Adapter", "refusal"]

_CANNOT_ASK = {
    HANDLER: "on a 2026-07-28 connection the client's roots arrive with the tool call; decorate the tool "
    "with @guard.paths(...) (no names is fine) so mcp-roots can ask for them",
}
"""Where fastmcp cannot answer a request with a question for the roots, and what the refusal says."""


def refusal(message: str) -> ToolResult:
    """A fastmcp tool result with ``isError: true`` carrying ``message``."""
    return ToolResult(content=[mcp_types.TextContent(type="text", text=message)], is_error=True)


_Asked = InputRequiredToolResult | InputRequiredPromptResult | InputRequiredResourceResult


def _input_required(facts: RequestFacts, question: mcp_types.InputRequiredResult) -> _Asked:
    """``question`` as fastmcp's input-required result of the request's kind (its wire handler sends it)."""
    if facts.kind == PROMPT:
        return InputRequiredPromptResult(question)
    if facts.kind == READ:
        return InputRequiredResourceResult(question)
    return InputRequiredToolResult(question)


class FastMCP4Adapter(Mcp2Port):
    """One guard's port into ``fastmcp`` 4.x servers."""

    framework_errors: tuple[type[BaseException], ...] = (ToolError,)

    def install(self, server: Any) -> None:
        """Put the guard's middleware first in the server's fastmcp middleware chain."""
        check_private_corners(server)
        if any(isinstance(m, RootsMiddleware) and m.adapter is self for m in server.middleware):
            return
        name = getattr(server, "name", None)
        self.server_name = name if isinstance(name, str) and name else self.server_name
        server.middleware.insert(0, RootsMiddleware(self, server))

    def handlers(self, server: Any) -> list[Handler]:
        """The tools, prompts and resource templates registered on ``server`` itself (for the audit)."""
        found = []
        for component in components_of(server).values():
            fn = getattr(component, "fn", None)
            if isinstance(component, FunctionTool):
                found.append(Handler.of("tool", component.name, fn, Context, component))
            elif isinstance(component, FunctionPrompt):
                found.append(Handler.of("prompt", component.name, fn, Context, component))
            elif isinstance(component, ResourceTemplate) and fn is not None:
                found.append(Handler.of("resource template", component.uri_template, fn, Context))
        return found

    def ports_on(self, server: Any) -> list[SdkPort]:
        return [m.adapter for m in getattr(server, "middleware", []) if isinstance(m, RootsMiddleware)]

    def facts(self, ctx: Context | None, kind: str) -> RequestFacts:
        """The facts of the request behind fastmcp's ``ctx`` (a request of ``kind``; None: no request)."""
        if ctx is not None and not isinstance(ctx, Context):
            raise TypeError(
                f"expected a fastmcp Context, got {type(ctx).__name__}; declare a parameter typed "
                "`Context` on your tool and pass it to guard.roots(ctx)"
            )
        sdk_ctx = sdk_context(ctx)
        if sdk_ctx is None:  # no MCP request behind the call
            return RequestFacts(None, kind, modern=False, declared=None, connection=None)
        connection = connection_of(sdk_ctx)
        modern, declared = is_modern(connection), declares_roots(connection)
        consenting = self.policy.consent is not None and declared is False
        answer = stream = consent = state = None
        responses = ctx.input_responses if modern and ctx is not None else None
        if declared and responses:
            sent = responses.get(ROOTS_INPUT_KEY)
            if isinstance(sent, mcp_types.ListRootsResult):
                answer = {"roots": [root.model_dump(mode="json", by_alias=True) for root in sent.roots]}
                stream = stream_of(sdk_ctx)
        elif consenting and modern:
            stream = stream_of(sdk_ctx)
            consent, state = consent_answer(responses, ctx.request_state if ctx is not None else None)
        return RequestFacts(
            sdk_ctx,
            kind,
            modern=modern,
            declared=declared,
            connection=connection,
            answer=answer,
            stream=stream,
            cannot_ask=_CANNOT_ASK.get(kind),
            elicit=consenting and can_elicit(connection),
            principal=principal_of() if consenting else None,
            consent_answer=consent,
            request_state=state,
        )

    def ask_consent(self, facts: RequestFacts, params: dict[str, object], state: str) -> _Asked:
        return _input_required(facts, consent_request(params, state))

    # -- the outcomes --

    def ask(self, facts: RequestFacts) -> _Asked:
        return _input_required(facts, roots_question())

    def refuse(self, facts: RequestFacts, message: str, in_body: bool = False) -> ToolResult:
        """A tool's ``isError`` result; from inside fastmcp's runner a ``ToolError``, whose message fastmcp
        shows as the call's one line (a returned result would have to match the tool's output schema);
        fastmcp's prompt or resource error for the others."""
        if facts.kind == PROMPT:
            raise PromptError(message)
        if facts.kind == READ:
            raise ResourceError(message)
        if in_body:
            raise ToolError(message)
        return refusal(message)


class RootsMiddleware(Middleware):
    """The fastmcp middleware of one guard on one server."""

    def __init__(self, adapter: FastMCP4Adapter, server: FastMCP) -> None:
        self.adapter = adapter
        self.server = server

    async def on_message(self, context: MiddlewareContext[Any], call_next: CallNext[Any, Any]) -> Any:
        self.adapter.audit_once(self.server, swap=True)
        return await call_next(context)

    async def on_initialize(
        self,
        context: MiddlewareContext[mcp_types.InitializeRequest],
        call_next: CallNext[mcp_types.InitializeRequest, mcp_types.InitializeResult | None],
    ) -> mcp_types.InitializeResult | None:
        result = await call_next(context)
        sdk_ctx = sdk_context(context.fastmcp_context)
        if sdk_ctx is not None:
            self.adapter.on_initialize(sdk_ctx)
        return result

    async def on_notification(
        self,
        context: MiddlewareContext[mcp_types.Notification[Any, Any]],
        call_next: CallNext[mcp_types.Notification[Any, Any], Any],
    ) -> Any:
        sdk_ctx = sdk_context(context.fastmcp_context)
        if sdk_ctx is not None and context.method == "notifications/roots/list_changed":
            self.adapter.roots_changed(connection_of(sdk_ctx))
        result = await call_next(context)
        if sdk_ctx is not None and context.method == "notifications/initialized":
            await self.adapter.on_initialized(sdk_ctx)
        return result

    async def on_call_tool(
        self,
        context: MiddlewareContext[mcp_types.CallToolRequestParams],
        call_next: CallNext[mcp_types.CallToolRequestParams, ToolResult],
    ) -> ToolResult:
        result: ToolResult = await tool_call(
            self.adapter,
            self.adapter.facts(context.fastmcp_context, TOOL),
            name=context.message.name,
            component=await self.server.get_tool(context.message.name),
            arguments=context.message.arguments or {},
            run=lambda: call_next(context),
        )
        return result

    async def on_get_prompt(
        self,
        context: MiddlewareContext[mcp_types.GetPromptRequestParams],
        call_next: CallNext[mcp_types.GetPromptRequestParams, PromptResult],
    ) -> PromptResult:
        prompt = await self.server.get_prompt(context.message.name)
        result: PromptResult = await tool_call(
            self.adapter,
            self.adapter.facts(context.fastmcp_context, PROMPT),
            name=context.message.name,
            component=prompt if isinstance(prompt, FunctionPrompt) else None,
            arguments=context.message.arguments or {},
            run=lambda: call_next(context),
        )
        return result

    async def on_read_resource(
        self,
        context: MiddlewareContext[mcp_types.ReadResourceRequestParams],
        call_next: CallNext[mcp_types.ReadResourceRequestParams, ResourceResult],
    ) -> ResourceResult:
        uri = str(context.message.uri)
        facts = self.adapter.facts(context.fastmcp_context, READ)
        result: ResourceResult = await resource_read(
            self.adapter,
            facts,
            uri=uri,
            component=await self.server.get_resource_template(uri),
            run=lambda: call_next(context),
            swap=False,  # fastmcp runs its own wrapper of the template's function
        )
        return result
