"""The private corners of the official ``mcp`` 2.x SDK that mcp-roots relies on.
Each is in one place, checked, and raises ``SDKChanged`` when the SDK moved it.
"""

# The private corners of the official ``mcp`` 2.x SDK that mcp-roots relies on, each in one place, checked
# where it is used and raising ``SDKChanged`` when the SDK moved it; ``adapters/mcp2.py``,
# ``adapters/fastmcp4.py`` (whose servers are mcp 2.x servers underneath), ``broker/`` and
# ``filesystem/_stdio.py`` import them from here. Also what both ports read of a ``Connection`` (its era, the
# client's roots capability), how they send ``roots/list`` on it, and the question that asks for the roots.

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import Any

from mcp.server import MCPServer
from mcp.server.connection import Connection, NotifyOnlyOutbound
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.mcpserver import Context
from mcp.server.stdio import stdio_server
from mcp.shared.direct_dispatcher import DIRECT_TRANSPORT_KIND
from mcp.shared.exceptions import MCPError
from mcp.shared.transport_context import TransportContext
from mcp_types import CONNECTION_CLOSED, InputRequiredResult, ListRootsRequest
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ..errors import SDKChanged
from ..roots._facts import ConnectionEnded

__all__ = [
    "ROOTS_INPUT_KEY",
    "Registry",
    "check_stdio_server",
    "connection_of",
    "declares_roots",
    "is_modern",
    "lowlevel_of",
    "middleware_of",
    "request_channel",
    "request_context_of",
    "roots_question",
    "send_roots_list",
    "stream_of",
]

ROOTS_INPUT_KEY = "mcp_roots.roots"
"""The key of the ``roots/list`` input request the ports send in an ``InputRequiredResult``."""


def roots_question() -> InputRequiredResult:
    """The 2026-07-28 answer that asks the client for its roots: one ``roots/list`` input request."""
    return InputRequiredResult(input_requests={ROOTS_INPUT_KEY: ListRootsRequest()})


def is_modern(connection: Connection) -> bool:
    """The connection speaks 2026-07-28 (roots come with each request, by multi-round-trip)."""
    return connection.protocol_version in MODERN_PROTOCOL_VERSIONS


def declares_roots(connection: Connection) -> bool | None:
    """Whether the client declared the roots capability; None when the connection saw no handshake
    (stateless HTTP: no capabilities recorded)."""
    caps = connection.client_capabilities
    return None if caps is None else caps.roots is not None


async def send_roots_list(
    connection: Connection, waiting: Sequence[ServerRequestContext[Any, Any]]
) -> object:
    """``roots/list`` on a legacy ``connection`` (``roots._facts.SendRootsList``), as the raw result: the
    typed path rejects the whole answer when one entry is not a ``file:`` URI, and the cache judges each
    entry itself. Tied to a call that waits for the answer where there is one: on streamable HTTP the
    request then rides that call's open response stream, which exists for sure, rather than the standalone
    GET stream, which the client may not have opened (yet)."""
    live = [ctx for ctx in waiting if ctx.session.can_send_request]
    try:
        if live:
            return await request_channel(live[-1]).send_raw_request("roots/list", None)
        return await connection.send_raw_request("roots/list", None)
    except MCPError as exc:
        if exc.code == CONNECTION_CLOSED:
            raise ConnectionEnded() from exc
        raise  # kept by the cache: the last valid roots (or none), never the fallback


def _changed(what: str) -> SDKChanged:
    return SDKChanged(
        f"mcp-roots cannot find {what} (the mcp SDK changed); please report this with your mcp version"
    )


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


def request_context_of(ctx: object) -> ServerRequestContext[Any, Any]:
    """Accept MCPServer's tool Context or the low-level ServerRequestContext."""
    if isinstance(ctx, ServerRequestContext):
        return ctx
    if isinstance(ctx, Context):
        return ctx.request_context
    raise TypeError(
        f"expected an mcp Context or ServerRequestContext, got {type(ctx).__name__}; declare a parameter "
        "typed `Context` on your tool and pass it to guard.roots(ctx)"
    )


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


def stream_of(request_ctx: ServerRequestContext[Any, Any]) -> object | None:
    """The object that lives exactly as long as the one client channel that carried this 2026-07-28
    request, to be compared by identity; None where the SDK shows none (stateless HTTP: every request is
    its own exchange, and a fresh ``Connection`` is made for each request on every transport).

    A duplex stream (stdio, a memory stream pair) served by ``serve_dual_era_loop`` gives each of its
    requests' connections the one ``NotifyOnlyOutbound`` it made for that stream (public). An in-process
    client (``Client(server)``, a ``DirectDispatcher`` pair) shows only its ``TransportContext``, made once
    per pair, behind the request channel's private ``_inner`` (see :func:`request_channel`). A corner
    that moved only costs the reuse of an unchanged roots answer, so it is looked up, never required.
    """
    outbound = connection_of(request_ctx).outbound
    if isinstance(outbound, NotifyOnlyOutbound):
        return outbound
    inner = getattr(getattr(request_ctx.session, "_request_outbound", None), "_inner", None)
    transport = getattr(inner, "transport", None)
    if isinstance(transport, TransportContext) and transport.kind == DIRECT_TRANSPORT_KIND:
        return transport
    return None


def middleware_of(server: object) -> list[Any]:
    """The context-tier middleware list of an ``MCPServer`` or a low-level ``Server`` (public, but
    checked: the guard's whole wiring hangs on it)."""
    middleware = getattr(server, "middleware", None)
    if not isinstance(middleware, list):
        raise SDKChanged(
            f"mcp-roots cannot find the middleware list of {type(server).__name__} (the mcp SDK "
            "changed: .middleware is gone); please report this with your mcp version"
        )
    return middleware


class Registry:
    """An ``MCPServer``'s registered tools, resource templates and prompts (its private ``_tool_manager``,
    ``_resource_manager`` and ``_prompt_manager``); empty for a low-level ``Server``."""

    def __init__(self, server: Any) -> None:
        self.server = server
        self.tools = self.resources = self.prompts = None
        if not isinstance(server, MCPServer):
            return
        self.tools = getattr(server, "_tool_manager", None)
        self.resources = getattr(server, "_resource_manager", None)
        self.prompts = getattr(server, "_prompt_manager", None)
        for name, manager, methods in (
            ("_tool_manager", self.tools, ("get_tool", "list_tools")),
            ("_resource_manager", self.resources, ("list_templates",)),
            ("_prompt_manager", self.prompts, ("get_prompt", "list_prompts")),
        ):
            for method in methods:
                if not callable(getattr(manager, method, None)):
                    raise _changed(f"MCPServer's registry (MCPServer.{name}.{method})")

    def tool(self, name: str) -> Any:
        return self.tools.get_tool(name) if self.tools is not None else None

    def prompt(self, name: str) -> Any:
        return self.prompts.get_prompt(name) if self.prompts is not None else None

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

    def components(self) -> list[tuple[str, str, Any]]:
        """(kind, name, component) of every tool, resource template and prompt, for the audit."""
        if self.tools is None or self.resources is None or self.prompts is None:
            return []
        found: list[tuple[str, str, Any]] = [("tool", t.name, t) for t in self.tools.list_tools()]
        found += [("resource template", t.uri_template, t) for t in self.resources.list_templates()]
        found += [("prompt", p.name, p) for p in self.prompts.list_prompts()]
        return found


# --- the stdio transport of `mcp-roots serve` (filesystem/_stdio.py) ---------------------------------------


def lowlevel_of(server: MCPServer) -> Server[Any]:
    """The low-level ``Server`` behind an ``MCPServer`` (a private attribute in mcp 2.3), checked."""
    lowlevel = getattr(server, "_lowlevel_server", None)
    if not isinstance(lowlevel, Server):
        raise SDKChanged("mcp's MCPServer._lowlevel_server is gone or no longer a mcp.server.lowlevel.Server")
    for name in ("run", "create_initialization_options"):
        if not callable(getattr(lowlevel, name, None)):
            raise SDKChanged(f"mcp's lowlevel Server.{name} is gone")
    return lowlevel


def check_stdio_server() -> None:
    """That ``stdio_server()`` still takes the ``stdin=`` and ``stdout=`` streams the transport gives it."""
    parameters = inspect.signature(stdio_server).parameters
    if "stdin" not in parameters or "stdout" not in parameters:
        raise SDKChanged("mcp's stdio_server() no longer takes stdin= and stdout= streams")
