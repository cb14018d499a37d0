"""Chunked uploads of files/write: a staging file beside the target, written chunk by chunk at checked
offsets, renamed over the target after the last chunk; discarded on failure, expiry, revocation or close.
"""

from __future__ import annotations

import contextlib
import logging
import os
import posixpath
import secrets
import stat
from collections.abc import Callable
from dataclasses import dataclass, field

import anyio

from .._beneath import TEMP_NAME_BYTES
from .._errors import RootsError
from .._pathtext import cut_to_bytes
from .._rootset import Root, RootSet
from . import _protocol as p
from ._hostops import check_target, join, rename

__all__ = ["MAX_UPLOADS", "Upload", "Uploads", "commit_staging", "create_staging", "pwrite_all"]

logger = logging.getLogger("mcp_roots")

MAX_UPLOADS = 16
"""Chunked uploads open at once per broker; more is QUOTA_EXCEEDED (kind "uploads")."""


@dataclass
class Upload:
    """One upload in progress: its staging file (``tmp``, relative to the root) and open descriptor."""

    id: str
    root: Root
    path: str
    tmp: str
    fd: int
    last_active: float
    written: int = 0
    if_match: str | None = None
    create_only: bool = False
    lock: anyio.Lock = field(default_factory=anyio.Lock)


class Uploads:
    """The open uploads of one broker, bounded by ``MAX_UPLOADS``."""

    def __init__(self, rootset_of: Callable[[Root], RootSet], clock: Callable[[], float]) -> None:
        self._open: dict[str, Upload] = {}
        self._rootset_of = rootset_of
        self._clock = clock

    def __len__(self) -> int:
        return len(self._open)

    def get(self, upload_id: str) -> Upload | None:
        return self._open.get(upload_id)

    def check_room(self) -> None:
        if len(self._open) >= MAX_UPLOADS:
            raise p.broker_error(
                "QUOTA_EXCEEDED",
                f"at most {MAX_UPLOADS} uploads may be open at once",
                kind="uploads",
                limit=MAX_UPLOADS,
            )

    def open(
        self, root: Root, rel: str, fd: int, tmp: str, if_match: str | None, create_only: bool
    ) -> Upload:
        upload = Upload(
            secrets.token_urlsafe(16), root, rel, tmp, fd, self._clock(), 0, if_match, create_only
        )
        self._open[upload.id] = upload
        return upload

    def finished(self, upload: Upload) -> None:
        """The upload was committed: forget it and close its descriptor (the staging name is gone)."""
        if self._open.pop(upload.id, None) is not None:
            os.close(upload.fd)

    def touch(self, upload: Upload) -> None:
        upload.last_active = self._clock()

    def expire(self, idle: float) -> None:
        deadline = self._clock() - idle
        self.discard(lambda u: u.last_active < deadline and not u.lock.locked())

    def discard(self, which: Callable[[Upload], bool]) -> None:
        """Close and remove the staging file of every upload ``which`` selects."""
        for upload in [u for u in self._open.values() if which(u)]:
            del self._open[upload.id]
            with contextlib.suppress(OSError):
                os.close(upload.fd)
            with contextlib.suppress(OSError, RootsError):
                self._rootset_of(upload.root).remove(join(upload.root, upload.tmp))
            logger.info("discarded the upload to %r", upload.path)


def staging_name(rel: str) -> str:
    """``.<name>.<random>.upload`` beside the target, relative to the root. The name is cut by its encoded
    bytes, never by characters: '.' + 200 + '.' + 16 hex + '.upload' = 225 bytes <= NAME_MAX, whatever
    the target's name is made of (63 four-byte characters are 252 bytes, a legal name)."""
    parent, name = posixpath.split(rel)
    return posixpath.join(parent, f".{cut_to_bytes(name, TEMP_NAME_BYTES)}.{secrets.token_hex(8)}.upload")


def create_staging(rootset: RootSet, full_tmp: str) -> int:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    return rootset.open_fd(full_tmp, flags, 0o666)


def pwrite_all(fd: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        view = view[written:]
        offset += written


def commit_staging(rootset: RootSet, upload: Upload) -> os.stat_result:
    """Make the staged upload the file: keep the old file's mode, fsync, re-check ``ifMatch`` /
    ``createOnly``, check the staging name is still ours, rename (never replacing under createOnly)."""
    full_tmp, full = join(upload.root, upload.tmp), join(upload.root, upload.path)
    try:
        old = rootset.stat(full)
    except FileNotFoundError:
        old = None
    if old is not None and stat.S_ISREG(old.st_mode):
        os.fchmod(upload.fd, stat.S_IMODE(old.st_mode))
    os.fsync(upload.fd)
    check_target(rootset, full, upload.path, upload.if_match, upload.create_only)
    mine, there = os.fstat(upload.fd), rootset.stat(full_tmp)
    if (mine.st_dev, mine.st_ino) != (there.st_dev, there.st_ino):
        raise p.broker_error(
            "IO_ERROR", f"the staging file of {upload.path!r} was replaced; upload again", path=upload.path
        )
    rename(rootset, full_tmp, full, overwrite=not upload.create_only)
    return os.fstat(upload.fd)
