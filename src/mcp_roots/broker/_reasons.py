"""One table from exception types to files/* error reasons.
It covers everything a host operation can raise.
"""

# Decided by type (and, for a bare OSError, by errno), never by message text. Messages name the relative
# path only: host paths and other roots are not the server's business. Anything not in the table is an
# IO_ERROR: no raw exception reaches a server.

from __future__ import annotations

import errno
from collections.abc import Mapping

from pydantic import ValidationError

from ..errors import (
    BrokerError,
    FileTooLarge,
    InvalidPath,
    InvalidRootURI,
    NotRegularFile,
    PathOutsideRoots,
    RootsError,
)
from ._grants import Revoked, Unconsented
from ._protocol import Reason, broker_error
from ._wire import error_of

__all__ = ["TooDeep", "WatchTooLarge", "error_for"]


class TooDeep(Exception):
    """A walk or a create went deeper than the host allows."""


class WatchTooLarge(Exception):
    """A watched tree has more entries than one watch may hold."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"more than {limit} entries")
        self.limit = limit


# Most specific first: the first row whose type matches decides. (TimeoutError is an OSError.)
REASONS: tuple[tuple[type[BaseException], Reason, str], ...] = (
    (Revoked, "PERMISSION_DENIED", "lies in a folder whose consent the user revoked"),
    (Unconsented, "PERMISSION_DENIED", "was moved to a folder the user did not consent to"),
    (PathOutsideRoots, "PERMISSION_DENIED", "leads outside its root"),
    (FileTooLarge, "QUOTA_EXCEEDED", "is larger than the file limit"),
    (WatchTooLarge, "QUOTA_EXCEEDED", "has more entries than one watch may hold"),
    (NotRegularFile, "INVALID_PATH", "is not a regular file"),
    (InvalidPath, "INVALID_PATH", "cannot be used here"),
    (InvalidRootURI, "INVALID_PATH", "cannot be used here"),
    (TooDeep, "IO_ERROR", "is nested too deeply"),
    (RecursionError, "IO_ERROR", "is nested too deeply"),
    (TimeoutError, "TIMEOUT", "did not finish in time"),
    (FileNotFoundError, "FILE_NOT_FOUND", "does not exist"),
    (FileExistsError, "CONCURRENCY_CONFLICT", "already exists"),
    (PermissionError, "PERMISSION_DENIED", "the operating system refused access"),
    (IsADirectoryError, "INVALID_PATH", "is a directory"),
    (NotADirectoryError, "INVALID_PATH", "is not a directory"),
    (OverflowError, "INVALID_PARAMS", "names a number out of range"),
    (MemoryError, "QUOTA_EXCEEDED", "needs more memory than the host has"),
    (RootsError, "IO_ERROR", "cannot be used"),
)

ERRNO_REASONS: Mapping[int, tuple[Reason, str]] = {
    errno.ELOOP: ("INVALID_PATH", "has too many levels of symbolic links"),
    errno.ENAMETOOLONG: ("INVALID_PATH", "is too long"),
    errno.ENOTEMPTY: ("IO_ERROR", "is a folder that is not empty"),
    errno.EMFILE: ("IO_ERROR", "cannot be opened now (the host is out of file descriptors)"),
    errno.ENFILE: ("IO_ERROR", "cannot be opened now (the host is out of file descriptors)"),
    errno.EXDEV: ("PERMISSION_DENIED", "leads outside its root"),
}


def error_for(exc: BaseException, rel: str) -> BrokerError:
    """The protocol error for ``exc`` raised while working on ``rel`` (relative to its root)."""
    if isinstance(exc, BrokerError):
        return exc
    if isinstance(exc, ValidationError):
        return error_of(exc)
    shown = repr(rel or ".")
    data: dict[str, object] = {"path": rel}
    if isinstance(exc, Revoked):
        data["consent"] = "revoked"
    elif isinstance(exc, Unconsented):
        data["consent"] = "denied"
    if isinstance(exc, (FileTooLarge, WatchTooLarge)):
        data["kind"] = "file" if isinstance(exc, FileTooLarge) else "watch-entries"
        if isinstance(exc, WatchTooLarge):
            data["limit"] = exc.limit
    for kind, reason, why in REASONS:
        if isinstance(exc, kind):
            return broker_error(reason, f"{shown} {why}", **data)
    if isinstance(exc, OSError):
        reason, why = ERRNO_REASONS.get(exc.errno or 0, ("IO_ERROR", exc.strerror or type(exc).__name__))
        return broker_error(reason, f"{shown}: {why}", **data)
    return broker_error("IO_ERROR", f"{shown}: the host could not complete the operation", **data)
