"""The private corners of the official ``mcp`` 2.x SDK that mcp-roots relies on, each in one place, checked
where it is used and raising ``SDKChanged`` when the SDK moved it; ``adapters/mcp2.py``,
``adapters/fastmcp4.py``, ``broker/`` and ``filesystem/_stdio.py`` import them from here.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

from mcp.server import MCPServer
from mcp.server.connection import Connection, NotifyOnlyOutbound
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.mcpserver import Context
from mcp.server.stdio import stdio_server
from mcp.shared.direct_dispatcher import DIRECT_TRANSPORT_KIND
from mcp.shared.transport_context import TransportContext

from ..errors import SDKChanged

__all__ = [
    "Registry",
    "check_stdio_server",
    "connection_of",
    "lowlevel_of",
    "middleware_of",
    "request_channel",
    "stream_of",
]


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
