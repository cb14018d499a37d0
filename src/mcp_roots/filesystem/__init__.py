"""A drop-in for the official ``@modelcontextprotocol/server-filesystem`` on mcp-roots' public API:
``build_server(guard, Settings(...))`` gives the ``MCPServer`` that ``mcp-roots serve`` runs. The names load
the mcp SDK when first used, so that ``mcp-roots serve`` can say when it is not installed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_names

if TYPE_CHECKING:
    from ._server import build_server
    from ._state import shared_request_state
    from ._toolbox import READ_ONLY_TOOLS, WRITE_TOOLS, Settings
    from ._walk import Limits

__all__ = ["READ_ONLY_TOOLS", "WRITE_TOOLS", "Limits", "Settings", "build_server", "shared_request_state"]

_HOMES = {
    "READ_ONLY_TOOLS": "._toolbox",
    "WRITE_TOOLS": "._toolbox",
    "Settings": "._toolbox",
    "Limits": "._walk",
    "build_server": "._server",
    "shared_request_state": "._state",
}

__getattr__, __dir__ = lazy_names(__name__, _HOMES)
