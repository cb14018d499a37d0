"""What to connect to, chosen by what the caller hands the probe: a command line (stdio), or a server object
of this process (mcp 2.x, fastmcp 4.x or mcp 1.x, told apart by the package its class comes from).
"""

from __future__ import annotations

import importlib.metadata
import shlex
from collections.abc import Sequence
from typing import Any

from ._session import Target

__all__ = ["target_for"]


def target_for(server: Any) -> Target:
    """A probe target for ``server``: an argv list or a shell-like string (``{root}`` is the scratch root), or
    an ``MCPServer`` / low-level ``Server`` (mcp 2.x or 1.x), or a ``fastmcp.FastMCP``. TypeError
    otherwise."""
    if isinstance(server, str) or (
        isinstance(server, Sequence) and len(server) > 0 and all(isinstance(a, str) for a in server)
    ):
        from ._mcp2 import StdioTarget

        return StdioTarget(shlex.split(server) if isinstance(server, str) else list(server))
    package = type(server).__module__.split(".")[0]
    if package == "fastmcp":
        from ._fastmcp4 import FastmcpTarget

        return FastmcpTarget(server)
    if package == "mcp":
        if int(importlib.metadata.version("mcp").split(".")[0]) >= 2:
            from ._mcp2 import InMemoryTarget

            return InMemoryTarget(server)
        from ._mcp1 import Mcp1Target

        return Mcp1Target(server)
    raise TypeError(
        f"cannot probe a {type(server).__name__}: give a command line (a list of strings, '{{root}}' for the "
        "scratch root) or an mcp 2.x MCPServer/Server, an mcp 1.x FastMCP/Server, or a fastmcp.FastMCP"
    )
