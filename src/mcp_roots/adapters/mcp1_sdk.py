"""The private corners of the official ``mcp`` 1.x SDK that mcp-roots relies on.
Each is in one place, checked, and raises ``SDKChanged`` when the SDK moved it.
"""

# The private corners of the official ``mcp`` 1.x SDK that mcp-roots relies on, each in one place, checked
# at install time (and where it is used) and raising ``SDKChanged`` when the SDK moved it;
# ``adapters/mcp1.py``
# imports them from here. Also how ``roots/list`` is sent on a session (the public ``send_request``, with an
# untyped result: the cache judges each entry).

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import mcp.types as types
from mcp.server.fastmcp import Context, FastMCP
from mcp.server.lowlevel.server import Server
from mcp.server.session import ServerSession
from mcp.shared.context import RequestContext
from mcp.shared.exceptions import McpError
from mcp.shared.message import ServerMessageMetadata
from pydantic import BaseModel, ConfigDict

from ..errors import SDKChanged
from ..roots._facts import ConnectionEnded

__all__ = [
    "can_elicit",
    "check_private_corners",
    "components",
    "installed_ports",
    "lowlevel_of",
    "prompt_manager",
    "record_port",
    "refusal",
    "request_context_of",
    "resource_manager",
    "send_elicitation",
    "send_roots_list",
    "session_of",
    "template_of",
    "tool_manager",
    "wrap_dispatch",
]

_DISPATCH = "_handle_message"
_DISPATCH_PARAMETERS = ["message", "session", "lifespan_context", "raise_exceptions"]
_TOOL_MANAGER = "_tool_manager"
_LOWLEVEL_SERVER = "_mcp_server"
_RESOURCE_MANAGER = "_resource_manager"
_PROMPT_MANAGER = "_prompt_manager"
# Where install() records the ports it wired into a low-level server (an attribute of our own).
_INSTALLED = "_mcp_roots_ports"

Dispatch = Callable[..., Awaitable[None]]


def _changed(what: str) -> SDKChanged:
    return SDKChanged(
        f"mcp-roots cannot find {what} (the mcp 1.x SDK changed); please report this with your mcp version"
    )


def lowlevel_of(server: object) -> Server[Any, Any]:
    """The low-level ``Server`` of a FastMCP (its private ``_mcp_server``), or ``server`` itself."""
    if isinstance(server, Server):
        return server
    low = getattr(server, _LOWLEVEL_SERVER, None)
    if not isinstance(low, Server):
        raise _changed(f"the low-level server of FastMCP (FastMCP.{_LOWLEVEL_SERVER})")
    return low


def refusal(message: str) -> types.CallToolResult:
    """An mcp 1.x tool result with ``isError: true`` carrying ``message``."""
    return types.CallToolResult(content=[types.TextContent(type="text", text=message)], isError=True)


def _manager(server: FastMCP, name: str, methods: tuple[str, ...], what: str) -> Any:
    manager = getattr(server, name, None)
    if not all(callable(getattr(manager, method, None)) for method in methods):
        raise _changed(f"FastMCP's {what} registry (FastMCP.{name}.{' / '.join(methods)})")
    return manager


def tool_manager(server: FastMCP) -> Any:
    return _manager(server, _TOOL_MANAGER, ("call_tool", "get_tool", "list_tools"), "tool")


def prompt_manager(server: FastMCP) -> Any:
    return _manager(server, _PROMPT_MANAGER, ("get_prompt", "list_prompts"), "prompt")


def resource_manager(server: FastMCP) -> Any:
    return _manager(
        server, _RESOURCE_MANAGER, ("get_resource", "list_resources", "list_templates"), "resource"
    )


def check_private_corners(server: object) -> None:
    """Every private corner above, checked once when the guard is installed on ``server``."""
    dispatch = getattr(type(lowlevel_of(server)), _DISPATCH, None)
    if not callable(dispatch):
        raise _changed(f"the message dispatch of the low-level Server (Server.{_DISPATCH})")
    parameters = list(inspect.signature(dispatch).parameters)[1:]
    if parameters != _DISPATCH_PARAMETERS:
        raise _changed(f"Server.{_DISPATCH}({', '.join(_DISPATCH_PARAMETERS)}): it takes {parameters}")
    if isinstance(server, FastMCP):
        tool_manager(server)
        prompt_manager(server)
        resource_manager(server)


def wrap_dispatch(server: object, wrap: Callable[[Dispatch], Dispatch]) -> None:
    """Replace the low-level server's message dispatch (``Server._handle_message``) by ``wrap(dispatch)``."""
    low = lowlevel_of(server)
    setattr(low, _DISPATCH, wrap(getattr(low, _DISPATCH)))


def record_port(server: object, port: object) -> None:
    low = lowlevel_of(server)
    setattr(low, _INSTALLED, [*getattr(low, _INSTALLED, []), port])


def installed_ports(server: object) -> list[Any]:
    return list(getattr(lowlevel_of(server), _INSTALLED, []))


def request_context_of(ctx: object) -> RequestContext[Any, Any, Any]:
    """Accept FastMCP's tool ``Context`` or the low-level ``RequestContext`` (``server.request_context``)."""
    if isinstance(ctx, Context):
        return ctx.request_context
    if isinstance(ctx, RequestContext):
        return ctx
    raise TypeError(
        f"expected an mcp Context or RequestContext, got {type(ctx).__name__}; declare a parameter typed "
        "`Context` on your tool (or pass server.request_context in a low-level handler) to guard.roots(ctx)"
    )


def components(server: object) -> list[tuple[str, str, Any]]:
    """(kind, name, component) of every tool, resource template and prompt of a FastMCP, for the audit;
    none for a low-level server, whose handlers are the user's own dispatch functions."""
    if not isinstance(server, FastMCP):
        return []
    found: list[tuple[str, str, Any]] = [("tool", t.name, t) for t in tool_manager(server).list_tools()]
    found += [("resource template", t.uri_template, t) for t in resource_manager(server).list_templates()]
    found += [("prompt", p.name, p) for p in prompt_manager(server).list_prompts()]
    return found


def session_of(request: Any) -> ServerSession:
    """The ``ServerSession`` of a request (its ``RequestContext``'s, or the one the dispatch saw)."""
    session = getattr(request, "session", None)
    if not isinstance(session, ServerSession):
        raise _changed("the ServerSession of a request (RequestContext.session)")
    return session


def template_of(manager: Any, uri: str) -> Any:
    """The resource template FastMCP would read ``uri`` through, or None for a concrete resource or no
    match (FastMCP's ``ResourceManager.get_resource`` order)."""
    if any(str(resource.uri) == uri for resource in manager.list_resources()):
        return None
    for template in manager.list_templates():
        try:
            params = template.matches(uri)
        except Exception:  # the template refused the URI itself: FastMCP will say so
            continue
        if params:
            return template
    return None


class _RawRootsResult(BaseModel):
    """A ``roots/list`` answer as sent: the cache judges each entry (the typed ``ListRootsResult`` would
    reject the whole answer for one entry that is not a ``file:`` URI)."""

    model_config = ConfigDict(extra="allow")
    roots: Any = None


async def send_roots_list(session: ServerSession, waiting: Sequence[Any]) -> object:
    """``roots/list`` on ``session`` (``roots._facts.SendRootsList``; ``waiting``: the request ids of the
    calls waiting, newest last). Tied to a waiting call: on streamable HTTP the request then rides that
    call's open response stream rather than the standalone GET stream, which the client may not have opened
    (yet); the SDK drops messages for a stream that is not there."""
    metadata = ServerMessageMetadata(related_request_id=waiting[-1]) if waiting else None
    request = types.ServerRequest(types.ListRootsRequest(method="roots/list"))
    try:
        result = await session.send_request(request, _RawRootsResult, metadata=metadata)
    except McpError as exc:
        if exc.error.code == types.CONNECTION_CLOSED:
            raise ConnectionEnded() from exc
        # -32601 / -32600 "not supported" (roots switched off in the host), like any other failed answer,
        # keeps the last valid roots (or none), never the fallback (the cache logs it).
        raise
    return {"roots": result.roots}


class _RawAnswer(BaseModel):
    """An ``elicitation/create`` answer as sent: the consent layer reads it strictly itself."""

    model_config = ConfigDict(extra="allow")


def can_elicit(session: ServerSession) -> bool:
    """Whether the client on ``session`` declared form elicitation (``{}`` is form, as 2025-06-18 had it)."""
    params = session.client_params
    elicitation = None if params is None else params.capabilities.elicitation
    if elicitation is None:
        return False
    return getattr(elicitation, "form", None) is not None or getattr(elicitation, "url", None) is None


async def send_elicitation(session: ServerSession, params: dict[str, Any], related: Any) -> object:
    """``elicitation/create`` (form) with ``params`` on ``session``, tied to the request ``related`` (on
    streamable HTTP it rides that call's response stream); the raw answer."""
    metadata = ServerMessageMetadata(related_request_id=related) if related is not None else None
    form = types.ElicitRequestFormParams.model_validate(params)
    request = types.ServerRequest(types.ElicitRequest(method="elicitation/create", params=form))
    result = await session.send_request(request, _RawAnswer, metadata=metadata)
    return result.model_dump(by_alias=True)
