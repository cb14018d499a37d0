"""Every exception mcp-roots raises, in one place, under one base class.
Read top to bottom, it is a map of what can go wrong.
"""

# Read top to bottom, this file is a map of what can go wrong: a bad URI, a bad path, a path outside the
# roots, or roots that cannot be had at all.

from __future__ import annotations

import errno
import os

__all__ = [
    "BrokerError",
    "BrokeringUnavailable",
    "ConfigError",
    "FileTooLarge",
    "GuardNotInstalled",
    "InvalidPath",
    "InvalidRootURI",
    "NotRegularFile",
    "PathOutsideRoots",
    "ReadOnlyPath",
    "RootsError",
    "RootsUnavailable",
    "SDKChanged",
    "SandboxUnavailable",
    "os_error_line",
]


class RootsError(Exception):
    """Base class of every error raised by mcp-roots."""


# --- Input that is malformed before any filesystem is consulted -------------------------------------


class InvalidRootURI(RootsError, ValueError):
    """A root URI broke a rule of the URI contract (scheme, host, encoding, query or fragment)."""


class InvalidPath(RootsError, ValueError):
    """A path is not a usable path at all: empty, not a string, a NUL byte, too long, or not resolvable
    to something an operation can act on."""


class ConfigError(RootsError, ValueError):
    """A fallback-roots source is unusable: a bad entry in the flag or ``MCP_ROOTS``, a config file that is
    not valid JSON or not the expected shape, or a project root that does not exist. The message names the
    source (and, for a file, the line)."""


class FileTooLarge(RootsError, ValueError):
    """A read found more bytes than the ``max_bytes`` the caller allowed."""


# --- Paths that are well formed but not allowed ------------------------------------------------------


class PathOutsideRoots(RootsError, PermissionError):
    """A path's canonical location lies outside every allowed root (or resolving it tried to leave one)."""


class ReadOnlyPath(PathOutsideRoots):
    """A write was asked where the innermost root holding the path (or a root the write would move or
    remove) has the access ``"read"``. A :class:`PathOutsideRoots`, so whatever refuses those refuses it."""


# --- Roots that cannot be obtained -------------------------------------------------------------------


class RootsUnavailable(RootsError):
    """No roots could be obtained: the client did not answer, refused, or no fallback is configured."""


class GuardNotInstalled(RootsError):
    """A guarded function ran on a server where ``guard.install(server)`` never ran."""


# --- Kernel confinement of subprocesses and of the server process ----------------------------------


class SandboxUnavailable(RootsError):
    """The kernel cannot confine a process here (no Landlock: not Linux, kernel < 5.13, disabled at boot,
    blocked by seccomp; or too old an ABI for what was asked; or a process that already has threads).
    The message names the reason. ``allow_unconfined=True`` runs subprocesses without it, with a warning."""


# --- Client-brokered file operations (the files/* methods) ------------------------------------------


class BrokerError(RootsError):
    """A ``files/*`` operation failed.

    Args:
        message: What failed, in words.
        reason: The draft's name for it (``FILE_NOT_FOUND``, ``PERMISSION_DENIED``...).
        code: Its JSON-RPC error code.
        data: The error's ``data`` object (``reason`` is added to it).
    """

    def __init__(
        self, message: str, *, reason: str, code: int, data: dict[str, object] | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.reason = reason
        self.code = code
        self.data: dict[str, object] = {"reason": reason, **(data or {})}


class BrokeringUnavailable(RootsError):
    """The client does not offer client-brokered file access (no ``roots.filesystemBrokering``), or the
    connection cannot carry server-to-client requests (2026-07-28, stateless HTTP)."""


# --- The mcp SDK ---------------------------------------------------------------------------------------


class SDKChanged(RootsError, RuntimeError):
    """The installed mcp SDK no longer has a shape mcp-roots relies on (a private seam moved); upgrade
    mcp-roots or pin mcp to a tested version."""


# --- Internal outcomes (never raised to a user: the callers turn them into the errors above) -----------


class NotRegularFile(Exception):
    """Internal: the path names a FIFO, device or socket, which a read or write must not touch. ``kind``
    says which ('a FIFO'); RootSet's operations raise :class:`InvalidPath` naming the path instead, the
    broker its INVALID_PATH reason."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.kind = kind


# --- OS errors as one line for a client ----------------------------------------------------------------

_OS_ERROR_WORDS = {
    errno.ENOENT: "No such file",
    errno.ENOTDIR: "Not a directory",
    errno.EISDIR: "Is a directory",
    errno.EEXIST: "Already exists",
    errno.ENOTEMPTY: "Directory not empty",
    errno.EACCES: "Permission denied",
    errno.EPERM: "Operation not permitted",
    errno.ENOSPC: "No space left on device",
    errno.EROFS: "Read-only file system",
    errno.ENAMETOOLONG: "File name too long",
    errno.ELOOP: "Too many levels of symbolic links",
    errno.EXDEV: "Cannot move across file systems",
}
"""The one table from an OS error to the words a client reads (the rest use the OS's own text)."""


def os_error_line(exc: OSError, where: str | None = None) -> str:
    """``exc`` as one readable line naming the file: ``No such file: '/p/notes.txt'`` (``where`` names it
    when the error itself carries no file name)."""
    words = _OS_ERROR_WORDS.get(exc.errno or 0) or exc.strerror or type(exc).__name__
    names = [n for n in (exc.filename, exc.filename2) if n is not None] or ([] if where is None else [where])
    return f"{words}: " + " -> ".join(repr(os.fsdecode(n)) for n in names) if names else words
