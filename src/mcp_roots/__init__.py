"""mcp-roots: a trustworthy filesystem boundary for MCP servers.

The public API is what ``__all__`` lists; every module behind it is private.
"""

from ._beneath import Entry
from ._cache import RootsCache
from ._errors import (
    BrokerError,
    BrokeringUnavailable,
    ConfigError,
    FileTooLarge,
    InvalidPath,
    InvalidRootURI,
    PathOutsideRoots,
    RootsError,
    RootsUnavailable,
)
from ._provider import ConsentRequest, RootsProvider
from ._rootset import Root, RootSet
from ._server import RootsGuard
from ._sources import clip_to_ceiling, fallback_roots
from ._uri import path_to_uri, uri_to_path

__version__ = "0.1.0.dev0"

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
    "__version__",
    "clip_to_ceiling",
    "fallback_roots",
    "path_to_uri",
    "uri_to_path",
]
