"""The private corners of ``fastmcp`` 4.x that mcp-roots relies on, each in one place, checked at install time
(and where it is used) and raising ``SDKChanged`` when fastmcp moved it; ``adapters/fastmcp4.py`` imports
them from here.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from fastmcp import Context
from fastmcp.server.dependencies import FastMCPRequestContext
from mcp.server.context import ServerRequestContext

from ..errors import SDKChanged

__all__ = ["check_private_corners", "components_of", "sdk_context"]

# fastmcp's per-request wrapper keeps the SDK's request context (its "escape hatch") as `_srctx`; the mcp 2.x
# connection code needs it.
_SDK_CONTEXT_FIELD = "_srctx"
# For the audit (`mcp-roots audit`, a synchronous listing): the local provider's registry of components.
_COMPONENTS = "_components"


def _changed(what: str) -> SDKChanged:
    return SDKChanged(
        f"mcp-roots cannot find {what} (fastmcp changed); please report this with your fastmcp version"
    )


def check_private_corners(server: Any) -> None:
    """Every private corner below, checked once when the guard is installed on ``server``."""
    if not isinstance(getattr(server, "middleware", None), list):
        raise _changed("fastmcp's middleware list (FastMCP.middleware is not a list)")
    components_of(server)
    fields = {f.name for f in dataclasses.fields(FastMCPRequestContext)}
    if _SDK_CONTEXT_FIELD not in fields:
        raise _changed(
            "the SDK request context inside fastmcp's request context "
            f"(FastMCPRequestContext.{_SDK_CONTEXT_FIELD} is gone)"
        )


def components_of(server: Any) -> dict[str, Any]:
    """The components registered on ``server`` itself (its local provider's registry)."""
    components = getattr(getattr(server, "local_provider", None), _COMPONENTS, None)
    if not isinstance(components, dict):
        raise _changed(f"fastmcp's registered components (LocalProvider.{_COMPONENTS})")
    return components


def sdk_context(ctx: Context | None) -> ServerRequestContext[Any, Any] | None:
    """The ``mcp`` 2.x request context behind a fastmcp ``Context``; None outside an MCP request."""
    request_context = ctx.request_context if ctx is not None else None
    if request_context is None:
        return None
    sdk_ctx = getattr(request_context, _SDK_CONTEXT_FIELD, None)
    if not isinstance(sdk_ctx, ServerRequestContext):
        raise _changed(
            "the SDK request context inside fastmcp's request context "
            f"(FastMCPRequestContext.{_SDK_CONTEXT_FIELD})"
        )
    return sdk_ctx
