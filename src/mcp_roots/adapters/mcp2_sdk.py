"""The seams of the mcp 2.x SDK that mcp-roots reaches through its underscore names, in one module: each
access is checked at use and raises ``SDKChanged`` naming what moved, so an SDK upgrade fails loudly here.
"""

from __future__ import annotations

import inspect
from typing import Any

from mcp.server import MCPServer
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from .._errors import SDKChanged

__all__ = ["check_stdio_server", "lowlevel_of"]


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
