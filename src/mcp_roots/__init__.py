"""mcp-roots: a trustworthy filesystem boundary for MCP servers.
The public API is what ``__all__`` lists; every module behind it is private.
"""

# The exceptions and the signatures' Protocols are defined here on import; every other name is imported on
# first use (PEP 562), so that a command that needs a few parts (``mcp-roots wrap``: RootSet and RootsCache,
# not the RootsGuard facade and its adapters) loads only those, and nothing here loads (or needs) an SDK:
# ``RootsProvider`` and ``ConsentRequest`` need `mcp`.

from typing import TYPE_CHECKING

from ._lazy import lazy_names
from ._types import Argv, SupportedContext, SupportedServer
from .errors import (
    BrokerError,
    BrokeringUnavailable,
    ConfigError,
    FileTooLarge,
    GuardNotInstalled,
    InvalidPath,
    InvalidRootURI,
    PathOutsideRoots,
    ReadOnlyPath,
    RootsError,
    RootsUnavailable,
    SandboxUnavailable,
    SDKChanged,
)

if TYPE_CHECKING:
    from ._rootsguard import RootsGuard
    from .paths._root import Access
    from .paths._rootset import Root, RootSet
    from .paths._tree import Entry, TreeEntry
    from .paths._uri import path_to_uri, uri_to_path
    from .roots._cache import RootsCache
    from .roots._provider import ConsentRequest, RootsProvider
    from .roots._sources import clip_to_ceiling, fallback_roots

__version__ = "0.1.0"

#: Each name imported on first use, and the module it comes from.
_LAZY = {
    "RootsGuard": "._rootsguard",
    "Access": ".paths._root",
    "Root": ".paths._rootset",
    "RootSet": ".paths._rootset",
    "Entry": ".paths._tree",
    "TreeEntry": ".paths._tree",
    "path_to_uri": ".paths._uri",
    "uri_to_path": ".paths._uri",
    "RootsCache": ".roots._cache",
    "ConsentRequest": ".roots._provider",
    "RootsProvider": ".roots._provider",
    "clip_to_ceiling": ".roots._sources",
    "fallback_roots": ".roots._sources",
}


__getattr__, __dir__ = lazy_names(__name__, _LAZY)


__all__ = [
    "Access",
    "Argv",
    "BrokerError",
    "BrokeringUnavailable",
    "ConfigError",
    "ConsentRequest",
    "Entry",
    "FileTooLarge",
    "GuardNotInstalled",
    "InvalidPath",
    "InvalidRootURI",
    "PathOutsideRoots",
    "ReadOnlyPath",
    "Root",
    "RootSet",
    "RootsCache",
    "RootsError",
    "RootsGuard",
    "RootsProvider",
    "RootsUnavailable",
    "SDKChanged",
    "SandboxUnavailable",
    "SupportedContext",
    "SupportedServer",
    "TreeEntry",
    "__version__",
    "clip_to_ceiling",
    "fallback_roots",
    "path_to_uri",
    "uri_to_path",
]
