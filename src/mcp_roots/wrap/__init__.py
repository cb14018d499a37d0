"""``mcp-roots wrap``: any stdio MCP server, confined by the kernel to the client's roots clipped to the
operator's ceiling (an application, on the public face and the sandbox, roots and guard faces).

``_wire`` (JSON-RPC lines on pipes, bounded), ``_schema`` (path names anywhere in the arguments),
``_plan`` (what the child may touch beside its roots; the commands refused), ``_child`` (one confined
server), ``_modern`` (the 2026-07-28 era: discover, per-request roots, the pool), ``_checks`` (paths checked
before forwarding), ``_proxy`` (host <-> wrap <-> child), ``command`` (the options and the run).
"""

from ._plan import Plan, make_plan
from ._proxy import Options, Proxy

__all__ = ["Options", "Plan", "Proxy", "make_plan"]
