"""What the files/* operations return: file facts, folder entries, consent answers, changes.
Plain frozen records, built from the host's validated answers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["ConsentGrant", "DirEntry", "FileChange", "FileInfo"]


@dataclass(frozen=True)
class FileInfo:
    """What the host reports about a file.

    Args:
        type: What the path is.
        size: Its size in bytes.
        mtime: Its modification time (seconds since the epoch).
        etag: Its version, to pass as ``if_match``.
    """

    type: Literal["file", "directory", "symlink", "other"]
    size: int
    mtime: float
    etag: str


@dataclass(frozen=True)
class DirEntry:
    """One entry of a folder, as :meth:`BrokeredFiles.list` lists it.

    Args:
        name: The entry's name.
        type: What it is.
        size: Its size in bytes.
        mtime: Its modification time (seconds since the epoch).
    """

    name: str
    type: Literal["file", "directory", "symlink", "other"]
    size: int
    mtime: float


@dataclass(frozen=True)
class ConsentGrant:
    """The user's answer to :meth:`BrokeredFiles.consent`. True only when everything asked for was granted.

    Args:
        granted: The paths granted (as given).
        denied: The paths denied (as given).
        access: What was asked for.
    """

    granted: list[str]
    denied: list[str]
    access: Literal["read", "write"]

    def __bool__(self) -> bool:
        return bool(self.granted) and not self.denied


@dataclass(frozen=True)
class FileChange:
    """One change a watch saw.

    Args:
        path: What changed, relative to ``root``.
        kind: How it changed.
        root: The root's URI.
    """

    path: str
    kind: Literal["created", "modified", "deleted"]
    root: str | None = None
