"""mcp-roots: a trustworthy filesystem boundary for MCP servers.

The public API is what ``__all__`` lists; every module behind it is private. The names that need the `mcp`
SDK (``RootsProvider``, ``ConsentRequest``) are imported on first use, so that the path guard, ``RootsGuard``
and the ``mcp-roots`` command work without loading (or having) an SDK.
"""

from typing import TYPE_CHECKING, Any

from ._rootsguard import RootsGuard
from .errors import (
    BrokerError,
    BrokeringUnavailable,
    ConfigError,
    FileTooLarge,
    InvalidPath,
    InvalidRootURI,
    PathOutsideRoots,
    RootsError,
    RootsUnavailable,
    SandboxUnavailable,
    SDKChanged,
)
from .paths._rootset import Root, RootSet
from .paths._tree import Entry, TreeEntry
from .paths._uri import path_to_uri, uri_to_path
from .roots._cache import RootsCache
from .roots._sources import clip_to_ceiling, fallback_roots

if TYPE_CHECKING:
    from .roots._provider import ConsentRequest, RootsProvider

__version__ = "0.1.0.dev0"

_LAZY = {"ConsentRequest": ".roots._provider", "RootsProvider": ".roots._provider"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'mcp_roots' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "BrokerError",
    "BrokeringUnavailable",
    "ConfigError",
    "ConsentRequest",
    "Entry",
    "FileTooLarge",
    "InvalidPath",
    "InvalidRootURI",
    "PathOutsideRoots",
    "Root",
    "RootSet",
    "RootsCache",
    "RootsError",
    "RootsGuard",
    "RootsProvider",
    "RootsUnavailable",
    "SDKChanged",
    "SandboxUnavailable",
    "TreeEntry",
    "__version__",
    "clip_to_ceiling",
    "fallback_roots",
    "path_to_uri",
    "uri_to_path",
]
