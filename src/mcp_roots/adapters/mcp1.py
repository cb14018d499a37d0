"""The official ``mcp`` 1.x adapter: ``mcp.server.fastmcp.FastMCP`` and the low-level ``Server`` (legacy era;
stdio and streamable HTTP).

mcp 1.x keeps one ``ServerSession`` per connection, which keys the connection's roots, but offers no
middleware, and its notification handlers are not told which session a notification came from. So the
adapter wraps the low-level server's message dispatch (``Server._handle_message``) to see ``initialized``
and ``roots/list_changed``, and FastMCP's tool and resource managers, where it hands each call to the one
guarded-call algorithm (``mcp_roots.guard._calls``). ``roots/list`` goes out through the public
``send_request``.
"""

from __future__ import annotations

import inspect
import logging
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio
import mcp.types as types
from mcp.server.fastmcp import Context, FastMCP
from mcp.server.fastmcp.exceptions import ResourceError, ToolError
from mcp.server.lowlevel.server import Server
from mcp.server.session import ServerSession
from mcp.shared.context import RequestContext
from mcp.shared.exceptions import McpError
from mcp.shared.message import ServerMessageMetadata
from pydantic import BaseModel, ConfigDict

from ..errors import RootsError, RootsUnavailable, SDKChanged
from ..guard._audit import Handler, audit_handlers, parameters_of, warn_unguarded
from ..guard._calls import NOT_INSTALLED, GuardNotInstalled, own_spec, resource_read, tool_call
from ..paths._rootset import RootSet
from ..roots._policy import ConnectionRoots, GuardPolicy

__all__ = ["Mcp1Adapter", "refusal"]

logger = logging.getLogger("mcp_roots")

# The private corners this adapter touches, checked at install time (see _check_private_corners).
_DISPATCH = "_handle_message"
_DISPATCH_PARAMETERS = ["message", "session", "lifespan_context", "raise_exceptions"]
_TOOL_MANAGER = "_tool_manager"
_LOWLEVEL_SERVER = "_mcp_server"
_RESOURCE_MANAGER = "_resource_manager"
_PROMPT_MANAGER = "_prompt_manager"
# Where install() records the guards it wired into a low-level server (an attribute of our own).
_INSTALLED = "_mcp_roots_policies"


def refusal(message: str) -> types.CallToolResult:
    """An mcp 1.x tool result with ``isError: true`` carrying ``message``."""
    return types.CallToolResult(content=[types.TextContent(type="text", text=message)], isError=True)


class _Refused(RootsError):
    """A guarded body's refusal, raised through FastMCP's tool runner (which would turn a returned
    result into a validation error for a tool with an output schema) and answered by the adapter."""


@dataclass(frozen=True)
class _Request:
    """A request seen at the dispatch, before the SDK made its ``RequestContext``."""

    session: Any
    request_id: Any


def _refuse_prompt(message: str) -> Any:
    """A guarded prompt's refusal from inside FastMCP's prompt rendering (sent as the request's error)."""
    raise _Refused(message)


def _template_of(manager: Any, uri: str) -> tuple[Any, dict[str, Any]]:
    """The resource template FastMCP would read ``uri`` through and its parameters, or (None, {}) for a
    concrete resource or no match (FastMCP's ``ResourceManager.get_resource`` order)."""
    if any(str(resource.uri) == uri for resource in manager.list_resources()):
        return None, {}
    for template in manager.list_templates():
        try:
            params = template.matches(uri)
        except Exception:  # the template refused the URI itself: FastMCP will say so
            continue
        if params:
            return template, params
    return None, {}


class _RawRootsResult(BaseModel):
    """A ``roots/list`` answer as sent: the cache judges each entry (the typed ``ListRootsResult`` would
    reject the whole answer for one entry that is not a ``file:`` URI)."""

    model_config = ConfigDict(extra="allow")
    roots: Any = None


def _sdk_changed(what: str) -> SDKChanged:
    return SDKChanged(
        f"mcp-roots cannot find {what} (the mcp 1.x SDK changed); please report this with your mcp version"
    )


def _lowlevel_of(server: object) -> Server[Any, Any]:
    if isinstance(server, Server):
        return server
    low = getattr(server, _LOWLEVEL_SERVER, None)
    if not isinstance(low, Server):
        raise _sdk_changed(f"the low-level server of FastMCP (FastMCP.{_LOWLEVEL_SERVER})")
    return low


def _check_private_corners(server: object) -> None:
    low = _lowlevel_of(server)
    dispatch = getattr(type(low), _DISPATCH, None)
    if not callable(dispatch):
        raise _sdk_changed(f"the message dispatch of the low-level Server (Server.{_DISPATCH})")
    parameters = list(inspect.signature(dispatch).parameters)[1:]
    if parameters != _DISPATCH_PARAMETERS:
        raise _sdk_changed(f"Server.{_DISPATCH}({', '.join(_DISPATCH_PARAMETERS)}): it takes {parameters}")
    if isinstance(server, FastMCP):
        manager = getattr(server, _TOOL_MANAGER, None)
        if not all(callable(getattr(manager, name, None)) for name in ("call_tool", "get_tool")):
            raise _sdk_changed(f"FastMCP's tool registry (FastMCP.{_TOOL_MANAGER}.call_tool / get_tool)")
        prompts = getattr(server, _PROMPT_MANAGER, None)
        if not all(callable(getattr(prompts, name, None)) for name in ("get_prompt", "list_prompts")):
            raise _sdk_changed(
                f"FastMCP's prompt registry (FastMCP.{_PROMPT_MANAGER}.get_prompt / list_prompts)"
            )
        resources = getattr(server, _RESOURCE_MANAGER, None)
        if not all(
            callable(getattr(resources, name, None))
            for name in ("get_resource", "list_resources", "list_templates")
        ):
            raise _sdk_changed(
                f"FastMCP's resource registry (FastMCP.{_RESOURCE_MANAGER}.get_resource / list_resources / "
                "list_templates)"
            )


def _request_context_of(ctx: object) -> RequestContext[Any, Any, Any]:
    """Accept FastMCP's tool ``Context`` or the low-level ``RequestContext`` (``server.request_context``)."""
    if isinstance(ctx, Context):
        return ctx.request_context
    if isinstance(ctx, RequestContext):
        return ctx
    raise TypeError(
        f"expected an mcp Context or RequestContext, got {type(ctx).__name__}; declare a parameter typed "
        "`Context` on your tool (or pass server.request_context in a low-level handler) to guard.roots(ctx)"
    )


class Mcp1Adapter:
    """One guard's port into ``mcp`` 1.x servers (a :class:`mcp_roots.guard._calls.CallPort`)."""

    brokering = False
    framework_errors: tuple[type[BaseException], ...] = (ToolError,)

    def __init__(self, policy: GuardPolicy | None) -> None:
        # None: an adapter that only reads a server (mcp-roots audit), never installs or serves.
        self.policy: GuardPolicy = policy  # type: ignore[assignment]
        self._policies: weakref.WeakKeyDictionary[Any, list[GuardPolicy]] = weakref.WeakKeyDictionary()
        self._installed: set[int] = set()
        # Sessions whose messages went through an installed server's dispatch: a request on any other
        # session comes from a server where guard.install(server) was never called.
        self._sessions: weakref.WeakSet[ServerSession] = weakref.WeakSet()

    def install(self, server: Any) -> None:
        """Wrap the low-level server's message dispatch (and a FastMCP's tool manager) once."""
        _check_private_corners(server)
        if id(server) in self._installed:
            return
        self._installed.add(id(server))
        low = _lowlevel_of(server)
        setattr(low, _INSTALLED, [*getattr(low, _INSTALLED, []), self.policy])
        dispatch: Callable[..., Awaitable[None]] = getattr(low, _DISPATCH)
        audited = False

        async def handle_message(
            message: Any, session: ServerSession, lifespan_context: Any, raise_exceptions: bool = False
        ) -> None:
            nonlocal audited
            if not audited:
                # Startup, as far as a server can tell: tools are registered by the time the first
                # message arrives (they are often decorated after install()).
                audited = True
                rows = audit_handlers(self.handlers(server), [self.policy])
                warn_unguarded(rows, strict=self.policy.strict)
            self._sessions.add(session)
            request = getattr(message, "request", None)
            if isinstance(request, types.ClientRequest) and isinstance(request.root, types.GetPromptRequest):
                await self._get_prompt(
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
                    state = self.policy.connection(session)
                    if state is not None:
                        state.cache.notify_changed()
                elif isinstance(message.root, types.InitializedNotification):
                    await dispatch(message, session, lifespan_context, raise_exceptions)
                    # Outside the SDK's dispatch on purpose: it records warnings for the whole task.
                    await self._serve_connection(session)
                    return
            await dispatch(message, session, lifespan_context, raise_exceptions)

        setattr(low, _DISPATCH, handle_message)
        if isinstance(server, FastMCP):
            self._wrap_tool_manager(server)
            self._wrap_resource_manager(server)

    async def _get_prompt(
        self, server: Any, responder: Any, session: ServerSession, run: Callable[[], Awaitable[None]]
    ) -> None:
        """``prompts/get`` through the one algorithm, at the dispatch (mcp 1.x has no prompt hook that
        sees the request): a refusal before the prompt runs answers the request with an error."""
        params = responder.request.root.params
        prompts = getattr(server, _PROMPT_MANAGER, None) if isinstance(server, FastMCP) else None
        prompt = prompts.get_prompt(params.name) if prompts is not None else None
        refused: list[str] = []
        await tool_call(
            self,
            _Request(session, responder.request_id),
            name=params.name,
            fn=_swap_in_wrapper(prompt, self.policy) if prompt is not None else None,
            arguments=params.arguments or {},
            answer=None,
            run=run,
            kind="prompt",
            refuse=refused.append,
            refuse_in_body=_refuse_prompt,
        )
        if refused:
            with responder:
                await responder.respond(types.ErrorData(code=types.INVALID_PARAMS, message=refused[0]))

    def handlers(self, server: Any) -> list[Handler]:
        """FastMCP's tools, resource templates and prompts (for the audit); none for a low-level server,
        whose handlers are the user's own dispatch functions."""
        if not isinstance(server, FastMCP):
            return []
        _check_private_corners(server)
        found = []
        for tool in getattr(server, _TOOL_MANAGER).list_tools():
            found.append(Handler("tool", tool.name, tool.fn, parameters_of(tool.fn, Context)))
        for template in getattr(server, _RESOURCE_MANAGER).list_templates():
            uri = template.uri_template
            found.append(
                Handler(
                    "resource template",
                    uri,
                    template.fn,
                    parameters_of(template.fn, Context),
                    uri[:5] == "file:",
                )
            )
        for prompt in getattr(server, _PROMPT_MANAGER).list_prompts():
            found.append(Handler("prompt", prompt.name, prompt.fn, parameters_of(prompt.fn, Context)))
        return found

    def installed(self, server: Any) -> list[GuardPolicy]:
        """The policies of the guards installed on ``server``."""
        return list(getattr(_lowlevel_of(server), _INSTALLED, []))

    # -- legacy connections --

    def _open(self, session: ServerSession) -> ConnectionRoots:
        existing = self.policy.connection(session)
        if existing is not None:
            return existing
        params = session.client_params
        roots_cap = params.capabilities.roots if params is not None else None
        return self.policy.open_connection(
            session,
            self._fetcher(session),
            declared=roots_cap is not None,
            list_changed=bool(roots_cap is not None and roots_cap.listChanged),
        )

    def _fetcher(self, session: ServerSession) -> Callable[[], Awaitable[object]]:
        async def fetch() -> object:
            state = self.policy.connection(session)
            waiting = state.waiting if state is not None else []
            # Tied to a call that waits for the answer: on streamable HTTP the request then rides that
            # call's open response stream rather than the standalone GET stream, which the client may not
            # have opened (yet); the SDK drops messages for a stream that is not there.
            metadata = ServerMessageMetadata(related_request_id=waiting[-1]) if waiting else None
            request = types.ServerRequest(types.ListRootsRequest(method="roots/list"))
            try:
                result = await session.send_request(request, _RawRootsResult, metadata=metadata)
            except McpError as exc:
                if exc.error.code == types.CONNECTION_CLOSED:
                    logger.debug("roots/list abandoned: the connection closed")
                    await anyio.sleep_forever()
                # -32601 / -32600 "not supported" (roots switched off in the host), like any other failed
                # answer, keeps the last valid roots (or none), never the fallback (the cache logs it).
                raise
            return {"roots": result.roots}

        return fetch

    async def _serve_connection(self, session: ServerSession) -> None:
        """Run this connection's roots refresh for as long as the connection lives (the SDK cancels its
        message tasks when the connection ends), then forget the connection."""
        state = self._open(session)
        try:
            # The first roots/list goes out with the first call that needs roots, tied to that call: when
            # initialized arrives the adapter cannot tell stdio from streamable HTTP, where a request sent
            # before the client opened its GET stream is dropped.
            await state.cache.run()
        finally:
            with anyio.CancelScope(shield=True):
                await self.policy.close_connection(session)

    async def _roots_for(self, request_ctx: RequestContext[Any, Any, Any] | _Request) -> RootSet:
        session = request_ctx.session
        if not isinstance(session, ServerSession):
            raise _sdk_changed("the ServerSession of a request (RequestContext.session)")
        if session not in self._sessions:
            logger.error("refused a request for roots: %s", NOT_INSTALLED)
            raise GuardNotInstalled(NOT_INSTALLED)
        state = self.policy.connection(session)
        if state is None:
            if session.client_params is None:
                # No handshake on this session: stateless streamable HTTP.
                return self.policy.no_lifecycle_fallback()
            state = self._open(session)
        if not state.cache_started:
            state.cache_started = True
            state.cache.start()
        state.waiting.append(request_ctx.request_id)
        try:
            roots = await state.cache.fresh(self.policy.timeout)
        finally:
            state.waiting.remove(request_ctx.request_id)
        return self.policy.served_roots(roots)

    async def roots(self, ctx: Any) -> RootSet:
        """The roots in force for the request ``ctx`` (FastMCP's ``Context`` or a ``RequestContext``)."""
        return await self._roots_for(_request_context_of(ctx))

    # -- the port --

    def ask(self, request: Any) -> types.CallToolResult:
        # mcp 1.x speaks the legacy era only: roots are never asked by an input request.
        return refusal("mcp-roots cannot ask for roots by multi-round-trip on mcp 1.x")

    def refuse(self, message: str) -> types.CallToolResult:
        return refusal(message)

    def refuse_in_body(self, message: str) -> Any:
        """Raised through FastMCP's tool runner (which would turn a returned result into a validation
        error for a tool with an output schema) and answered as one line by the algorithm."""
        raise _Refused(message)

    def refuse_read(self, message: str, uri: str) -> Any:
        """FastMCP's resource error, which the client sees as one line."""
        raise ResourceError(message)

    def roots_now(self, request: Any) -> RootSet | None:
        session = request.session if isinstance(request, (RequestContext, _Request)) else None
        if not isinstance(session, ServerSession) or session not in self._sessions:
            return None  # call_roots words it
        return self.policy.roots_now(session)

    async def call_roots(self, request: Any) -> RootSet:
        if not isinstance(request, (RequestContext, _Request)):
            raise RootsUnavailable(
                "mcp-roots can tell the roots only during an MCP request (no request context is active)"
            )
        return await self._roots_for(request)

    # -- FastMCP tools and resources: where the algorithm runs --

    def _wrap_tool_manager(self, server: FastMCP) -> None:
        manager = getattr(server, _TOOL_MANAGER)
        call_tool: Callable[..., Awaitable[Any]] = manager.call_tool
        get_tool: Callable[[str], Any] = manager.get_tool

        async def guarded_call_tool(
            name: str, arguments: dict[str, Any], context: Any = None, convert_result: bool = False
        ) -> Any:
            tool = get_tool(name)
            return await tool_call(
                self,
                context.request_context if isinstance(context, Context) else None,
                name=name,
                fn=_swap_in_wrapper(tool, self.policy),
                arguments=arguments,
                answer=None,
                run=lambda: call_tool(name, arguments, context=context, convert_result=convert_result),
            )

        manager.call_tool = guarded_call_tool

    def _wrap_resource_manager(self, server: FastMCP) -> None:
        """Check a ``resources/read`` where FastMCP looks the resource up (``FastMCP.read_resource`` calls
        ``_resource_manager.get_resource``, which also runs a template's function)."""
        manager = getattr(server, _RESOURCE_MANAGER)
        get_resource: Callable[..., Awaitable[Any]] = manager.get_resource

        async def guarded_get_resource(uri: Any, context: Any = None) -> Any:
            uri_text = str(uri)
            template, _ = _template_of(manager, uri_text)
            return await resource_read(
                self,
                context.request_context if isinstance(context, Context) else None,
                uri=uri_text,
                fn=_swap_in_wrapper(template, self.policy),
                runs_wrapper=True,
                answer=None,
                run=lambda: get_resource(uri, context=context),
            )

        manager.get_resource = guarded_get_resource


def _swap_in_wrapper(component: Any, policy: GuardPolicy) -> Any:
    """What a registered tool or template runs; where @guard.paths stood above FastMCP's decorator (it
    registered the bare function), the guard's wrapper is put in its place."""
    fn = getattr(component, "fn", None)
    spec = own_spec(fn, policy)
    if spec is not None and spec.wrapper is not None and fn is not spec.wrapper:
        component.fn = fn = spec.wrapper
    return fn
