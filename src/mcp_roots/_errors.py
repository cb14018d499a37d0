"""Every exception mcp-roots raises, in one place, under one base class.

Read top to bottom, this file is a map of what can go wrong: a bad URI, a bad path, a path outside the
roots, or roots that cannot be had at all.
"""

from __future__ import annotations

__all__ = [
    "FileTooLarge",
    "InvalidPath",
    "InvalidRootURI",
    "PathOutsideRoots",
    "RootsError",
    "RootsUnavailable",
]


class RootsError(Exception):
    """Base class of every error raised by mcp-roots."""


# --- Input that is malformed before any filesystem is consulted -------------------------------------


class InvalidRootURI(RootsError, ValueError):
    """A root URI broke a rule of the URI contract (scheme, host, encoding, query or fragment)."""


class InvalidPath(RootsError, ValueError):
    """A path is not a usable path at all: empty, not a string, a NUL byte, too long, or not resolvable
    to something an operation can act on."""


class FileTooLarge(RootsError, ValueError):
    """A read found more bytes than the ``max_bytes`` the caller allowed."""


# --- Paths that are well formed but not allowed ------------------------------------------------------


class PathOutsideRoots(RootsError, PermissionError):
    """A path's canonical location lies outside every allowed root (or resolving it tried to leave one)."""


# --- Roots that cannot be obtained -------------------------------------------------------------------


class RootsUnavailable(RootsError):
    """No roots could be obtained: the client did not answer, refused, or no fallback is configured."""
