"""What is done to one name in an open directory: open a regular file (never blocking on a FIFO), read it
whole within a limit, replace it atomically keeping its owner and permission bits (never set-user-id,
set-group-id or sticky), make a directory, remove a file or a whole tree (through the one tree walk).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import secrets
import stat

from .._sys.posix import O_CLOEXEC, O_CREAT, O_DIRECTORY, O_NOFOLLOW, O_NONBLOCK
from ..errors import NotRegularFile
from ._beneath import open_beneath, oserror, strategy
from ._text import cut_to_bytes, describe, file_kind
from ._tree import LIST_FLAGS, TreeEntry, walk

__all__ = [
    "TEMP_NAME_BYTES",
    "drop_set_id_bits",
    "keep_metadata",
    "mkdir_at",
    "open_regular",
    "read_fd",
    "remove_at",
    "write_atomic",
]

#: Bytes of the final name kept in a temporary name: '.' + 200 + '.' + 12 hex + '.tmp' = 218 <= NAME_MAX.
TEMP_NAME_BYTES = 200
#: The permission bits new content may carry over from the file it replaces: rwx for user, group and
#: others. Set-user-id, set-group-id and sticky (0o7000) never are: they were granted to the old content.
KEPT_MODE_BITS = 0o777


def open_regular(
    dirfd: int, rel: str, flags: int, mode: int = 0o666, *, allow_dir: bool = False, plain_dev: int = -1
) -> tuple[int, os.stat_result]:
    """Open a regular file beneath ``dirfd`` and return it with its fstat. FIFOs, devices and sockets raise
    NotRegularFile without blocking (the open is O_NONBLOCK; the flag is cleared again for a regular
    file). A directory raises IsADirectoryError unless ``allow_dir`` and the access is read-only.

    ``plain_dev`` (a root descriptor's, for a descriptor that is only read from) lets O_NONBLOCK stay set
    on a regular file of that device: a plain filesystem ignores it, and clearing it costs a system call."""
    try:
        fd = open_beneath(dirfd, rel, flags | O_NONBLOCK, mode)
    except OSError as exc:
        if exc.errno != errno.ENXIO:  # a socket, or a FIFO opened for writing with no reader
            raise
        try:
            probe = open_beneath(dirfd, rel, strategy().probe_flags)
        except OSError as again:
            if again.errno != errno.ENXIO:
                raise
            # Without O_PATH a socket cannot be opened at all, not even to be fstat'ed (ENXIO).
            raise NotRegularFile("a socket") from None
        try:
            raise NotRegularFile(file_kind(os.fstat(probe).st_mode)) from None
        finally:
            os.close(probe)
    try:
        st = os.fstat(fd)
        kind = st.st_mode
        if not stat.S_ISREG(kind):
            if stat.S_ISDIR(kind):
                if not allow_dir or flags & (os.O_WRONLY | os.O_RDWR):
                    raise oserror(errno.EISDIR)
                return fd, st
            raise NotRegularFile(file_kind(kind))
        if not flags & O_NONBLOCK and st.st_dev != plain_dev:
            fcntl.fcntl(fd, fcntl.F_SETFL, flags)  # one F_SETFL: creation and access bits are ignored by it
        return fd, st
    except BaseException:
        os.close(fd)
        raise


def read_fd(fd: int, max_bytes: int | None, size: int) -> bytes:
    """Read a whole file whose fstat says ``size`` bytes (it may have grown), at most ``max_bytes`` (None:
    no limit); raises OverflowError past the limit."""
    chunks: list[bytes] = []
    total = 0
    want = max(size + 1, 8192) if max_bytes is None else min(max(size + 1, 8192), max_bytes + 1)
    while True:
        chunk = os.read(fd, want)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        total += len(chunk)
        if max_bytes is not None and total > max_bytes:
            raise OverflowError(total)
        want = 65536 if max_bytes is None else min(65536, max_bytes + 1 - total)


def _check_name(name: str) -> None:
    if not name or name in (".", "..") or "/" in name:
        raise oserror(errno.EINVAL)


def keep_metadata(fd: int, old: os.stat_result, name: str = "") -> None:
    """Give the new content open at ``fd`` (a regular file about to replace the one ``old`` describes) the
    owner and permission bits the old file had, and never its set-user-id, set-group-id or sticky bit.

    The owner is set first (fchown to the old uid and gid, skipped when they already match: a chown
    clears the set-id bits of a file, and root's would otherwise hand the old owner new content with
    root's choice of bits). Where the owner cannot be kept (EPERM: someone else's file, or a group we are
    not in), this refuses with PermissionError naming ``name``: replacing would change who owns the file.
    Then fchmod to ``S_IMODE(old) & 0o777``. The broker's ``files/write`` calls this too."""
    now = os.fstat(fd)
    if (now.st_uid, now.st_gid) != (old.st_uid, old.st_gid):
        try:
            os.fchown(fd, old.st_uid, old.st_gid)
        except PermissionError:
            raise PermissionError(
                errno.EPERM,
                f"cannot keep the owner ({old.st_uid}:{old.st_gid}) of {describe(name)}; refusing to "
                "replace it with a file owned by someone else",
                name or None,
            ) from None
    os.fchmod(fd, stat.S_IMODE(old.st_mode) & KEPT_MODE_BITS)


def write_atomic(dirfd: int, name: str, data: bytes) -> None:
    """Replace ``name`` in the directory ``dirfd`` atomically: a temporary file in the same directory,
    written, fsynced, then renamed over ``name``. An existing file's owner and permission bits are kept
    (:func:`keep_metadata`: never set-id or sticky bits). The temporary file never survives a failure."""
    _check_name(name)
    try:
        old: os.stat_result | None = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
    except FileNotFoundError:
        old = None
    tmp = f".{cut_to_bytes(name, TEMP_NAME_BYTES)}.{secrets.token_hex(6)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | O_CREAT | os.O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o666, dir_fd=dirfd)
    try:
        try:
            if old is not None:
                keep_metadata(fd, old, name)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(tmp, name, src_dir_fd=dirfd, dst_dir_fd=dirfd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dirfd)
        raise
    try:  # make the rename itself durable; a directory opened O_PATH cannot be fsynced
        dfd = os.open(".", os.O_RDONLY | O_DIRECTORY | O_CLOEXEC, dir_fd=dirfd)
    except OSError:  # pragma: no cover - no read permission on the directory
        return
    try:
        os.fsync(dfd)
    except OSError:  # pragma: no cover - some filesystems refuse directory fsync
        pass
    finally:
        os.close(dfd)


def drop_set_id_bits(fd: int) -> None:
    """Clear set-user-id, set-group-id and sticky on a file rewritten in place (a file root): root's
    write(2) keeps them, and they were granted to the old content."""
    mode = os.fstat(fd).st_mode
    if stat.S_IMODE(mode) & ~KEPT_MODE_BITS:
        os.fchmod(fd, stat.S_IMODE(mode) & KEPT_MODE_BITS)


def remove_at(dirfd: int, name: str, recursive: bool) -> None:
    """Remove ``name`` (a file, a symlink itself, or a directory) from ``dirfd``. A recursive remove walks
    the tree with :func:`_tree.walk` (through descriptors, O_NOFOLLOW, two descriptors whatever the depth;
    a directory moved meanwhile stops it), so no symlink is ever followed."""
    _check_name(name)
    st = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(name, dir_fd=dirfd)
        return
    if recursive:
        fd = os.open(name, LIST_FLAGS | O_NOFOLLOW, dir_fd=dirfd)
        try:
            walk(fd, _unlink_or_enter, leave=_rmdir, sort=False)
        finally:
            os.close(fd)
    os.rmdir(name, dir_fd=dirfd)


def _unlink_or_enter(dir_fd: int, entry: TreeEntry) -> bool:
    if entry.is_dir:
        return True
    with contextlib.suppress(FileNotFoundError):
        os.unlink(entry.name, dir_fd=dir_fd)
    return False


def _rmdir(dir_fd: int, entry: TreeEntry) -> None:
    os.rmdir(entry.name, dir_fd=dir_fd)


def mkdir_at(dirfd: int, name: str, mode: int = 0o777) -> None:
    _check_name(name)
    os.mkdir(name, mode, dir_fd=dirfd)
