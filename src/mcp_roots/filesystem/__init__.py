"""A drop-in for the official ``@modelcontextprotocol/server-filesystem``, built on mcp-roots' public API.

``build_server(guard, Settings(...))`` returns an ``MCPServer`` with the official server's 14 tools (same
names, arguments and result shapes); ``mcp-roots serve`` runs it. Every file is touched through the
race-free ``RootSet`` operations of the roots in force for the connection. ``shared_request_state(file)``
gives replicas behind a load balancer one key for the 2026-07-28 multi-round-trip state.
"""

from ._state import shared_request_state
from ._tools import READ_ONLY_TOOLS, WRITE_TOOLS, Settings, build_server
from ._walk import Limits

__all__ = ["READ_ONLY_TOOLS", "WRITE_TOOLS", "Limits", "Settings", "build_server", "shared_request_state"]
