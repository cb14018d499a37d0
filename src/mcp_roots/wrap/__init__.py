"""``mcp-roots wrap``: any stdio MCP server, confined by the kernel.
Confined to the client's roots, clipped to the operator's ceiling.
"""

# ``mcp-roots wrap``: any stdio MCP server, confined by the kernel to the client's roots clipped to the
# operator's ceiling (an application, on the public face and the sandbox, roots and guard faces).
#
# ``_options`` (the operator's bounds), ``_wire`` (JSON-RPC lines on pipes, bounded), ``_schema`` (path names
# anywhere in the arguments), ``_plan`` (what the child may touch beside its roots; the commands refused;
# starting it confined), ``_child`` (one confined server), ``_modern`` (the 2026-07-28 era: discover,
# per-request roots, the pool), ``_checks`` (paths checked before forwarding), ``_proxy`` (host <-> wrap <->
# child), ``command`` (the options and the run). The names below are imported on first use (PEP 562): the
# command starts the first child before it imports the proxy, the event loop and the roots cache.

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_names

if TYPE_CHECKING:
    from ._options import Options
    from ._plan import Plan, make_plan
    from ._proxy import Proxy

__all__ = ["Options", "Plan", "Proxy", "make_plan"]

_LAZY = {"Options": "._options", "Plan": "._plan", "Proxy": "._proxy", "make_plan": "._plan"}


__getattr__, __dir__ = lazy_names(__name__, _LAZY)
