"""``build_server``: an ``MCPServer`` with the official filesystem server's tools, each family registered
on one toolbox (reading, writing, listing), guarded by the ``RootsGuard`` given.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp.server import MCPServer
from mcp.server.auth.provider import TokenVerifier
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import RequestStateSecurity
from mcp.shared.exceptions import MCPError
from mcp_types import METHOD_NOT_FOUND, CallToolResult, TextContent

from .. import RootsGuard, __version__
from ..adapters import lowlevel_of
from . import _listing, _reading, _writing
from ._arguments import argument_error
from ._common import UnknownMethods
from ._toolbox import Settings, Toolbox

__all__ = ["build_server"]

#: The SDK's handlers for what serve does not have (prompts, resources): left out, so that serve declares
#: only the tools capability, and a client asking for them gets "Method not found" (as from the official
#: server).
_NOT_SERVED = (
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/read",
    "resources/templates/list",
    "resources/subscribe",
    "resources/unsubscribe",
)

_INSTRUCTIONS = (
    "Files in the allowed directories (see list_allowed_directories). Paths may be absolute or relative "
    "to the first allowed directory; anything outside, including through symlinks, is refused."
)


def build_server(
    guard: RootsGuard,
    settings: Settings | None = None,
    *,
    name: str = "mcp-roots-filesystem",
    request_state_security: RequestStateSecurity | None = None,
    token_verifier: TokenVerifier | None = None,
) -> MCPServer:
    """An ``MCPServer`` with the official filesystem server's tools, guarded by ``guard``
    (``settings.read_only`` leaves out write_file, edit_file, create_directory and move_file).

    ``request_state_security`` seals the 2026-07-28 multi-round-trip state; the SDK's default is a key of
    this process only, so replicas behind a load balancer must share one (``shared_request_state(file)``).

    ``token_verifier``: over HTTP, only requests with a bearer token it accepts reach the server (the SDK's
    bearer-auth middleware, on every method of the endpoint); ``TokenFile`` is the one ``serve`` uses.

    Args:
        guard: The guard whose roots bound every tool.
        settings: The tools' limits and ``read_only`` (default ``Settings()``).
        name: The server's name, as ``initialize`` reports it.
        request_state_security: The key that seals the 2026-07-28 request state (default: this process's).
        token_verifier: Over HTTP, who may call (default: anyone who reaches the endpoint).
    """
    # The SDK's resource-server mode: its bearer middleware on the endpoint, no OAuth routes (neither an
    # authorization server nor a resource URL is configured; the issuer is required by the settings only).
    auth = (
        None
        if token_verifier is None
        else AuthSettings.model_validate({"issuer_url": "http://127.0.0.1", "resource_server_url": None})
    )
    server = MCPServer(
        name,
        version=__version__,
        instructions=_INSTRUCTIONS,
        request_state_security=request_state_security,
        token_verifier=token_verifier,
        auth=auth,
    )
    handlers = lowlevel_of(server)._request_handlers
    for method in _NOT_SERVED:
        handlers.pop(method, None)
    guard.install(server)
    box = Toolbox(guard, settings or Settings(), server)
    # The official server's order: reading, writing, then listing tools.
    _reading.register(box)
    _writing.register(box)
    _listing.register(box)
    _check_arguments(server)
    server.middleware.append(_log_unknown_methods(UnknownMethods()))
    return server


def _check_arguments(server: MCPServer) -> None:
    """Check a call's arguments against its tool's input schema before anything else reads them (first in
    the server's middleware, before the guard's): a bad argument is refused in the schema's words
    (``path must be a string, not an integer``), not in a validator's."""
    schemas: dict[str, dict[str, Any]] = {}

    async def checked(ctx: Any, call_next: Any) -> Any:
        params = ctx.params
        if ctx.method == "tools/call" and isinstance(params, Mapping):
            if not schemas:
                schemas.update({tool.name: tool.input_schema for tool in await server.list_tools()})
            name, arguments = params.get("name"), params.get("arguments")
            schema = schemas.get(name) if isinstance(name, str) else None
            if isinstance(name, str) and schema is not None and isinstance(arguments, Mapping | None):
                error = argument_error(name, schema, arguments or {})
                if error is not None:
                    return CallToolResult(content=[TextContent(type="text", text=error)], is_error=True)
        return await call_next(ctx)

    server.middleware.insert(0, checked)


def _log_unknown_methods(unknown: UnknownMethods) -> Any:
    """The middleware that notes each request the SDK answers -32601 (``unknown.note``)."""

    async def log_once(ctx: Any, call_next: Any) -> Any:
        try:
            return await call_next(ctx)
        except MCPError as exc:
            if exc.code == METHOD_NOT_FOUND and isinstance(ctx.method, str):
                unknown.note(ctx.method)
            raise

    return log_once
