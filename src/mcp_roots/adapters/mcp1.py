"""The official ``mcp`` 1.x port: ``FastMCP`` and the low-level ``Server``.
Legacy era; stdio and streamable HTTP.
"""

# The official ``mcp`` 1.x port: ``mcp.server.fastmcp.FastMCP`` and the low-level ``Server`` (legacy era;
# stdio and streamable HTTP). mcp 1.x keeps one ``ServerSession`` per connection, which keys its roots, but
# has no middleware, and does not tell notification handlers their session: the port wraps the low-level
# dispatch (``initialized``, ``roots/list_changed``, ``prompts/get``; a low-level server's ``tools/call`` and
# ``resources/read``) and FastMCP's tool and resource managers, handing each call to the one guarded-call
# algorithm (``mcp_roots.guard._calls``) with the request's facts. The SDK's corners are in ``mcp1_sdk``.

from __future__ import annotations

import functools
import weakref
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import mcp.types as types
from mcp.server.fastmcp import Context, FastMCP
from mcp.server.fastmcp.exceptions import ResourceError, ToolError
from mcp.server.session import ServerSession
from mcp.shared.context import RequestContext

from ..errors import RootsError
from ..guard._audit import Handler
from ..guard._calls import resource_read, tool_call
from ..guard._port import PolicyArgument, SdkPort
from ..roots._facts import HANDLER, PROMPT, READ, TOOL, RequestFacts
from .mcp1_dispatch import DispatchRequest, ErrorAnswer, answer, for_the_connection, keep_tasks_with_runs
from .mcp1_sdk import (
    Dispatch,
    can_elicit,
    check_private_corners,
    components,
    installed_ports,
    prompt_manager,
    record_port,
    refusal,
    request_context_of,
    resource_manager,
    send_elicitation,
    send_roots_list,
    session_of,
    template_of,
    tool_manager,
    wrap_dispatch,
)

__all__ = ["Mcp1Adapter", "refusal"]


class _Refused(RootsError):
    """A guarded body's refusal, raised through FastMCP's tool runner (which would turn a returned
    result into a validation error for a tool with an output schema) and answered by the port."""


#: What a low-level server's dispatch hands to the algorithm (a FastMCP's calls go through its managers).
_AT_DISPATCH = (types.GetPromptRequest, types.CallToolRequest, types.ReadResourceRequest)


class Mcp1Adapter(SdkPort):
    """One guard's port into ``mcp`` 1.x servers."""

    framework_errors: tuple[type[BaseException], ...] = (ToolError,)

    def __init__(self, policy: PolicyArgument) -> None:
        super().__init__(policy)
        self._installed: set[int] = set()
        # Sessions whose messages went through an installed server's dispatch: a request on any other
        # session comes from a server where guard.install(server) was never called.
        self._sessions: weakref.WeakSet[ServerSession] = weakref.WeakSet()

    def install(self, server: Any) -> None:
        """Wrap the low-level server's message dispatch (and a FastMCP's tool and resource managers) once."""
        check_private_corners(server)
        if id(server) in self._installed:
            return
        self._installed.add(id(server))
        name = getattr(server, "name", None)  # shown in a consent question
        self.server_name = name if isinstance(name, str) and name else self.server_name
        record_port(server, self)
        wrap_dispatch(server, lambda dispatch: self._dispatch(server, dispatch))
        keep_tasks_with_runs(server)
        if isinstance(server, FastMCP):
            self._wrap_managers(server)

    def _dispatch(self, server: Any, dispatch: Dispatch) -> Dispatch:
        fastmcp = isinstance(server, FastMCP)

        async def handle_message(
            message: Any, session: ServerSession, lifespan_context: Any, raise_exceptions: bool = False
        ) -> None:
            self.audit_once(server)
            self._sessions.add(session)
            request = getattr(message, "request", None)
            if isinstance(request, types.ClientRequest) and isinstance(
                request.root, types.GetPromptRequest if fastmcp else _AT_DISPATCH
            ):
                await self._at_dispatch(
                    server,
                    message,
                    session,
                    lambda: dispatch(message, session, lifespan_context, raise_exceptions),
                )
                return
            if isinstance(message, types.ClientNotification):
                if isinstance(message.root, types.RootsListChangedNotification):
                    # Recorded before the notification's handlers run and before any request that
                    # arrived after it is handled (each message is a task started in arrival order).
                    self.roots_changed(session)
                elif isinstance(message.root, types.InitializedNotification):
                    await dispatch(message, session, lifespan_context, raise_exceptions)
                    # Outside the SDK's dispatch on purpose: it records warnings for the whole task.
                    facts = self.facts(DispatchRequest(session, None), HANDLER)
                    self.initialize_seen(
                        session, declared=bool(facts.declared), list_changed=facts.list_changed
                    )
                    # The first roots/list goes out with the first call that needs roots, tied to it: here
                    # the port cannot tell stdio from HTTP, which drops a request sent before the GET stream.
                    serve = functools.partial(self.initialized, session, cannot_ask=None, send_now=False)
                    await for_the_connection(serve)
                    return
            await dispatch(message, session, lifespan_context, raise_exceptions)

        return handle_message

    async def _at_dispatch(
        self, server: Any, responder: Any, session: ServerSession, run: Callable[[], Awaitable[None]]
    ) -> None:
        """Through the one algorithm at the dispatch: ``prompts/get`` (mcp 1.x has no prompt hook that sees
        the request) and, on a low-level server (no registry: the user's handlers call the guarded
        functions), ``tools/call`` and ``resources/read``. A refusal before the handler runs answers the
        request here: an error, or a tool's ``isError`` result."""
        request = responder.request.root
        facts = functools.partial(self.facts, DispatchRequest(session, responder.request_id))
        params = request.params
        if isinstance(request, types.ReadResourceRequest):
            try:
                outcome = await resource_read(self, facts(READ), uri=str(params.uri), component=None, run=run)
            except ResourceError as exc:  # a low-level read's refusal (FastMCP's own never gets here)
                outcome = ErrorAnswer(str(exc))
        else:
            fastmcp = isinstance(server, FastMCP)  # then only prompts come here
            outcome = await tool_call(
                self,
                facts(PROMPT if isinstance(request, types.GetPromptRequest) else TOOL),
                name=params.name,
                component=prompt_manager(server).get_prompt(params.name) if fastmcp else None,
                arguments=params.arguments or {},
                run=run,
            )
        if isinstance(outcome, (ErrorAnswer, types.CallToolResult)):
            await answer(responder, outcome.message if isinstance(outcome, ErrorAnswer) else outcome)

    def handlers(self, server: Any) -> list[Handler]:
        """FastMCP's tools, resource templates and prompts (for the audit); none for a low-level server,
        whose handlers are the user's own dispatch functions."""
        return [Handler.of(kind, name, c.fn, Context) for kind, name, c in components(server)]

    def ports_on(self, server: Any) -> list[SdkPort]:
        return installed_ports(server)

    # -- the facts of a request --

    def facts(
        self, ctx: Context[Any, Any, Any] | RequestContext[Any, Any, Any] | DispatchRequest | None, kind: str
    ) -> RequestFacts:
        """The facts of the request ``ctx`` (FastMCP's ``Context``, a ``RequestContext``, what the dispatch
        saw; None: no MCP request behind the call); mcp 1.x speaks the legacy era only."""
        if ctx is None:
            return RequestFacts(None, kind, modern=False, declared=None, connection=None)
        request = ctx if isinstance(ctx, DispatchRequest) else request_context_of(ctx)
        session = session_of(request)
        params = session.client_params
        roots_cap = params.capabilities.roots if params is not None else None
        consenting = self.policy is not None and self.policy.consent is not None
        return RequestFacts(
            request,
            kind,
            modern=False,
            declared=None if params is None else roots_cap is not None,
            list_changed=bool(roots_cap is not None and roots_cap.listChanged),
            connection=session,
            seen=session in self._sessions,
            send=self.send_roots_list,
            elicit=consenting and can_elicit(session),
        )

    async def elicit(self, facts: RequestFacts, params: dict[str, object]) -> object:
        """``elicitation/create`` on the call's session, tied to the call (consent)."""
        session = session_of(facts.request)
        return await send_elicitation(session, params, getattr(facts.request, "request_id", None))

    async def send_roots_list(self, connection: Any, waiting: Sequence[Any]) -> object:
        return await send_roots_list(connection, [request.request_id for request in waiting])

    # -- the outcomes --

    def ask(self, facts: RequestFacts) -> types.CallToolResult:
        # mcp 1.x speaks the legacy era only: roots are never asked by an input request.
        return refusal("mcp-roots cannot ask for roots by multi-round-trip on mcp 1.x")

    def refuse(self, facts: RequestFacts, message: str, in_body: bool = False) -> Any:
        """A tool's ``isError`` result (from inside FastMCP's tool runner, raised: it would turn a returned
        result into a validation error for a tool with an output schema); a prompt's error answer; FastMCP's
        resource error for a read (the client sees one line)."""
        if facts.kind == READ:
            raise ResourceError(message)
        if in_body:
            raise _Refused(message)
        return ErrorAnswer(message) if facts.kind == PROMPT else refusal(message)

    # -- FastMCP tools and resources: where the algorithm runs --

    def _wrap_managers(self, server: FastMCP) -> None:
        tools = tool_manager(server)
        call_tool: Callable[..., Awaitable[Any]] = tools.call_tool
        get_tool: Callable[[str], Any] = tools.get_tool

        async def guarded_call_tool(
            name: str, arguments: dict[str, Any], context: Any = None, convert_result: bool = False
        ) -> Any:
            return await tool_call(
                self,
                self.facts(context.request_context if isinstance(context, Context) else None, TOOL),
                name=name,
                component=get_tool(name),
                arguments=arguments,
                run=lambda: call_tool(name, arguments, context=context, convert_result=convert_result),
            )

        tools.call_tool = guarded_call_tool
        # A resources/read is checked where FastMCP looks the resource up (FastMCP.read_resource calls
        # _resource_manager.get_resource, which also runs a template's function).
        resources = resource_manager(server)
        get_resource: Callable[..., Awaitable[Any]] = resources.get_resource

        async def guarded_get_resource(uri: Any, context: Any = None) -> Any:
            return await resource_read(
                self,
                self.facts(context.request_context if isinstance(context, Context) else None, READ),
                uri=str(uri),
                component=template_of(resources, str(uri)),
                run=lambda: get_resource(uri, context=context),
            )

        resources.get_resource = guarded_get_resource
