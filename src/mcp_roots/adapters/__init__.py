"""Which adapter serves a server or a request context: decided by the object's class (module and name,
walked along its MRO), so that no SDK is imported to ask; only the chosen adapter module imports its SDK.

The adapter modules are the only code that imports an MCP SDK or touches its privates. Per framework one
port (``mcp2``, ``fastmcp4``, ``mcp1``: a ``guard._port.GuardPort`` that reports the facts of each request
and turns the outcomes into its framework's results, deciding nothing about roots) and one seam module
holding every private name of that SDK (``mcp2_sdk``, ``fastmcp4_sdk``, ``mcp1_sdk``, each use checked at
install time). The facade (``_rootsguard.Adapter``) installs a port; the one guarded-call algorithm
(``guard._calls``) calls it.
"""

from __future__ import annotations

import functools
import importlib
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "KINDS",
    "Kind",
    "adapter_for_context",
    "adapter_for_server",
    "check_stdio_server",
    "lowlevel_of",
    "refusal",
    "supported_kinds",
]


@functools.lru_cache(maxsize=1)
def _mcp_major() -> int | None:
    """The major version of the installed ``mcp`` distribution (from its metadata; nothing is imported).
    ``importlib.metadata`` is loaded here, on first use: it costs ``import mcp_roots`` about 20 ms."""
    import importlib.metadata

    try:
        return int(importlib.metadata.version("mcp").split(".")[0])
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return None


@dataclass(frozen=True)
class Kind:
    """One kind of object an adapter serves: a class named ``qualname`` defined in ``module``."""

    description: str
    module: str
    qualname: str
    adapter: str  # "module:Class", relative to this package
    server: bool  # a server (install) or a request context (roots)
    applies: Callable[[], bool] = lambda: True  # tells apart same-named classes of two SDK majors

    def matches(self, cls: type) -> bool:
        return cls.__module__ == self.module and cls.__qualname__ == self.qualname and self.applies()


def _is_mcp2() -> bool:
    return _mcp_major() == 2


def _is_mcp1() -> bool:
    return _mcp_major() == 1


def _is_fastmcp4() -> bool:
    """fastmcp 3.x has classes of the same names and modules (on mcp 1.x); only 4.x is served."""
    version = getattr(sys.modules.get("fastmcp"), "__version__", "")
    return isinstance(version, str) and version.startswith("4.")


KINDS: list[Kind] = [
    Kind("mcp 2.x MCPServer", "mcp.server.mcpserver.server", "MCPServer", "mcp2:Mcp2Adapter", True),
    Kind(
        "mcp 2.x low-level Server", "mcp.server.lowlevel.server", "Server", "mcp2:Mcp2Adapter", True, _is_mcp2
    ),
    Kind("mcp 2.x tool Context", "mcp.server.mcpserver.context", "Context", "mcp2:Mcp2Adapter", False),
    Kind(
        "mcp 2.x ServerRequestContext",
        "mcp.server.context",
        "ServerRequestContext",
        "mcp2:Mcp2Adapter",
        False,
        _is_mcp2,
    ),
    Kind(
        "fastmcp 4.x FastMCP",
        "fastmcp.server.server",
        "FastMCP",
        "fastmcp4:FastMCP4Adapter",
        True,
        _is_fastmcp4,
    ),
    Kind(
        "fastmcp 4.x Context",
        "fastmcp.server.context",
        "Context",
        "fastmcp4:FastMCP4Adapter",
        False,
        _is_fastmcp4,
    ),
    Kind("mcp 1.x FastMCP", "mcp.server.fastmcp.server", "FastMCP", "mcp1:Mcp1Adapter", True, _is_mcp1),
    Kind(
        "mcp 1.x low-level Server", "mcp.server.lowlevel.server", "Server", "mcp1:Mcp1Adapter", True, _is_mcp1
    ),
    Kind("mcp 1.x tool Context", "mcp.server.fastmcp.server", "Context", "mcp1:Mcp1Adapter", False, _is_mcp1),
    Kind(
        "mcp 1.x RequestContext", "mcp.shared.context", "RequestContext", "mcp1:Mcp1Adapter", False, _is_mcp1
    ),
]
"""Every kind the adapters serve; an adapter module adds its rows here."""


def supported_kinds(server: bool = True) -> str:
    return ", ".join(kind.description for kind in KINDS if kind.server is server)


def _lookup(obj: object, server: bool) -> type:
    for cls in type(obj).__mro__:
        for kind in KINDS:
            if kind.server is server and kind.matches(cls):
                module_name, _, class_name = kind.adapter.partition(":")
                module = importlib.import_module(f".{module_name}", __name__)
                adapter: type = getattr(module, class_name)
                return adapter
    raise TypeError(
        f"mcp-roots has no adapter for {type(obj).__module__}.{type(obj).__qualname__}; "
        + (
            f"guard.install() supports: {supported_kinds(True)}"
            if server
            else f"guard.roots(ctx) accepts: {supported_kinds(False)} (declare a parameter typed "
            "`Context` on your tool and pass it to guard.roots(ctx))"
        )
    )


def refusal(message: str) -> Any:
    """A ``CallToolResult`` with ``isError: true`` of the ``mcp`` SDK that is installed (2.x or 1.x)."""
    module = importlib.import_module(".mcp1" if _mcp_major() == 1 else ".mcp2", __name__)
    return module.refusal(message)


def adapter_for_server(server: object) -> type:
    """The adapter class that serves ``server`` (``TypeError`` naming the supported kinds otherwise)."""
    return _lookup(server, True)


def adapter_for_context(ctx: object) -> type:
    """The adapter class that understands the request context ``ctx``."""
    return _lookup(ctx, False)


# --- The adapters' internal API for the applications: `serve`'s stdio transport on mcp 2.x ----------------


def lowlevel_of(server: Any) -> Any:
    """The low-level ``Server`` behind an mcp 2.x ``MCPServer`` (a private attribute there), checked by the
    seam (``SDKChanged`` when it moved). Imports the mcp 2.x SDK."""
    from . import mcp2_sdk

    return mcp2_sdk.lowlevel_of(server)


def check_stdio_server() -> None:
    """That mcp 2.x's ``stdio_server()`` still takes the streams ``serve``'s transport hands it
    (``SDKChanged`` if not). Imports the mcp 2.x SDK."""
    from . import mcp2_sdk

    mcp2_sdk.check_stdio_server()
