"""``build_server``: an ``MCPServer`` with the official filesystem server's tools, each family registered
on one toolbox (reading, writing, listing), guarded by the ``RootsGuard`` given.
"""

from __future__ import annotations

from mcp.server import MCPServer
from mcp.server.mcpserver import RequestStateSecurity

from .. import RootsGuard
from . import _listing, _reading, _writing
from ._toolbox import Settings, Toolbox

__all__ = ["build_server"]

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
) -> MCPServer:
    """An ``MCPServer`` with the official filesystem server's tools, guarded by ``guard``
    (``settings.read_only`` leaves out write_file, edit_file, create_directory and move_file).

    ``request_state_security`` seals the 2026-07-28 multi-round-trip state; the SDK's default is a key of
    this process only, so replicas behind a load balancer must share one (``shared_request_state(file)``).
    """
    server = MCPServer(name, instructions=_INSTRUCTIONS, request_state_security=request_state_security)
    guard.install(server)
    box = Toolbox(guard, settings or Settings(), server)
    # The official server's order: reading, writing, then listing tools.
    _reading.register(box)
    _writing.register(box)
    _listing.register(box)
    return server
