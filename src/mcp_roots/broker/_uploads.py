"""Chunked uploads of files/write.
A staging file beside the target, renamed over it after the last chunk.
"""

# Chunked uploads of files/write: a staging file beside the target, written chunk by chunk at checked
# offsets, renamed over the target after the last chunk; discarded on failure, expiry, revocation or close.
# Every step goes through the descriptor of the target's directory that was checked when the upload began.
# The staging file is private (0600) until the commit gives it the kept mode, so an upload's bytes are never
# readable by anyone the target's owner and mode would refuse; a slot is reserved before the first await,
# so no interleaving of first chunks opens more than ``MAX_UPLOADS``.

from __future__ import annotations

import contextlib
import logging
import os
import posixpath
import secrets
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TypeAlias

import anyio

from ..paths._beneath import strategy
from ..paths._rename import rename_noreplace
from ..paths._rootset import Root, RootSet
from ..paths._text import cut_to_bytes
from ..paths._write import TEMP_NAME_BYTES, keep_metadata, new_file_mode
from . import _protocol as p
from ._grants import Grants, Revoked
from ._hostops import check_target, join, look

__all__ = [
    "MAX_UPLOADS",
    "STAGING_MODE",
    "Upload",
    "Uploads",
    "commit_staging",
    "create_staging",
    "new_file_mode",
    "pwrite_all",
]

logger = logging.getLogger("mcp_roots")

MAX_UPLOADS = 16
"""Chunked uploads open at once per broker; more is QUOTA_EXCEEDED (kind "uploads")."""
STAGING_MODE = 0o600
"""A staging file's mode until the commit: only the broker's own user may open it."""


@dataclass
class Upload:
    """One upload in progress: the checked directory (``dir_fd``) it lands in, the target's ``name`` and
    the staging file's (``tmp``) there, and the staging file's open descriptor. ``path`` is the target
    relative to the root, for messages and revocations."""

    id: str
    root: Root
    path: str
    dir_fd: int
    name: str
    tmp: str
    fd: int
    last_active: float
    written: int = 0
    if_match: str | None = None
    create_only: bool = False
    lock: anyio.Lock = field(default_factory=anyio.Lock)


class Uploads:
    """The open uploads of one broker, bounded by ``MAX_UPLOADS``."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._open: dict[str, Upload] = {}
        self._reserved = 0
        self._clock = clock

    def __len__(self) -> int:
        return len(self._open)

    def get(self, upload_id: str) -> Upload | None:
        return self._open.get(upload_id)

    @contextlib.contextmanager
    def reserving(self) -> Iterator[None]:
        """Hold one upload slot from now (before the first await of a first chunk) until :meth:`open` fills
        it or the block ends: counted at the check, so no interleaving exceeds ``MAX_UPLOADS``."""
        self.check_room()
        self._reserved += 1
        try:
            yield
        finally:
            self._reserved -= 1

    def check_room(self) -> None:
        if len(self._open) + self._reserved >= MAX_UPLOADS:
            raise p.broker_error(
                "QUOTA_EXCEEDED",
                f"at most {MAX_UPLOADS} uploads may be open at once",
                kind="uploads",
                limit=MAX_UPLOADS,
            )

    def open(self, root: Root, rel: str, staged: Staged, if_match: str | None, create_only: bool) -> Upload:
        dir_fd, name, tmp, fd = staged
        upload = Upload(
            secrets.token_urlsafe(16),
            root,
            rel,
            dir_fd,
            name,
            tmp,
            fd,
            self._clock(),
            0,
            if_match,
            create_only,
        )
        self._open[upload.id] = upload
        return upload

    def finished(self, upload: Upload) -> None:
        """The upload was committed: forget it and close its descriptors (the staging name is gone)."""
        if self._open.pop(upload.id, None) is not None:
            os.close(upload.fd)
            os.close(upload.dir_fd)

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
            with contextlib.suppress(OSError):
                os.unlink(upload.tmp, dir_fd=upload.dir_fd)
            with contextlib.suppress(OSError):
                os.close(upload.dir_fd)
            logger.info("discarded the upload to %r", upload.path)


Staged: TypeAlias = "tuple[int, str, str, int]"
"""A staging file just made: (checked directory descriptor, target name, staging name, its descriptor)."""


def staging_name(name: str) -> str:
    """``.<name>.<random>.upload``, beside the target. The name is cut by its encoded bytes, never by
    characters: '.' + 200 + '.' + 16 hex + '.upload' = 225 bytes <= NAME_MAX, whatever the target's name
    is made of (63 four-byte characters are 252 bytes, a legal name)."""
    return f".{cut_to_bytes(name, TEMP_NAME_BYTES)}.{secrets.token_hex(8)}.upload"


def create_staging(rootset: RootSet, root: Root, rel: str, checks: Grants) -> Staged:
    """Open the target's directory beneath the root, check it, and create the staging file in it
    (``O_CREAT|O_EXCL|O_NOFOLLOW``, mode ``STAGING_MODE``: private to the broker's user while the server
    decides how long the upload stays open); the directory descriptor is kept for every later step."""
    parent, name = posixpath.split(rel)
    dir_fd = rootset.open_fd(join(root, parent), strategy().dir_flags)
    try:
        checks.fence_at(dir_fd, name, "write")
        tmp = staging_name(name)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        return dir_fd, name, tmp, os.open(tmp, flags, STAGING_MODE, dir_fd=dir_fd)
    except BaseException:
        os.close(dir_fd)
        raise


def pwrite_all(fd: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        view = view[written:]
        offset += written


def commit_staging(rootset: RootSet, upload: Upload, checks: Grants) -> os.stat_result:
    """Make the staged upload the file: keep the old file's owner and permission bits (the path layer's
    ``keep_metadata``: never a set-id or sticky bit; an owner this process may not give the new file is a
    PermissionError, so PERMISSION_DENIED, and the file never changes hands), or give a new file the mode
    any file created now gets (:func:`new_file_mode`); fsync, re-check the directory, ``ifMatch`` /
    ``createOnly`` (a fenced look) and that the staging name is still ours, then rename in the checked
    directory (the path layer's no-replace rename under createOnly)."""
    full = join(upload.root, upload.path)
    try:
        old = look(rootset, full, checks.fence_read)
    except FileNotFoundError:
        old = None
    if old is not None and stat.S_ISREG(old.st_mode):
        keep_metadata(upload.fd, old, upload.path)
    else:
        os.fchmod(upload.fd, new_file_mode())
    os.fsync(upload.fd)
    checks.fence_at(upload.dir_fd, upload.name, "write")
    check_target(rootset, full, upload.path, upload.if_match, upload.create_only, checks.fence_read)
    mine = os.fstat(upload.fd)
    there = os.stat(upload.tmp, dir_fd=upload.dir_fd, follow_symlinks=False)
    if (mine.st_dev, mine.st_ino) != (there.st_dev, there.st_ino):
        raise p.broker_error(
            "IO_ERROR", f"the staging file of {upload.path!r} was replaced; upload again", path=upload.path
        )
    if upload.create_only:
        rename_noreplace(upload.tmp, upload.name, src_dir_fd=upload.dir_fd, dst_dir_fd=upload.dir_fd)
    else:
        in_force = checks.in_force()
        if in_force:
            with contextlib.suppress(FileNotFoundError):
                there = os.stat(upload.name, dir_fd=upload.dir_fd, follow_symlinks=False)
                if checks.holds_revoked(there, in_force):
                    raise Revoked(upload.path)
        os.rename(upload.tmp, upload.name, src_dir_fd=upload.dir_fd, dst_dir_fd=upload.dir_fd)
    return os.fstat(upload.fd)
