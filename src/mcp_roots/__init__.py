"""mcp-roots: a trustworthy filesystem boundary for MCP servers.

The public API is what ``__all__`` lists; every module behind it is private.
"""

from ._beneath import Entry
from ._errors import FileTooLarge, InvalidPath, InvalidRootURI, PathOutsideRoots, RootsError, RootsUnavailable
from ._rootset import Root, RootSet
from ._uri import path_to_uri, uri_to_path

__version__ = "0.1.0.dev0"

__all__ = [
    "Entry",
    "FileTooLarge",
    "InvalidPath",
    "InvalidRootURI",
    "PathOutsideRoots",
    "Root",
    "RootSet",
    "RootsError",
    "RootsUnavailable",
    "__version__",
    "path_to_uri",
    "uri_to_path",
]
