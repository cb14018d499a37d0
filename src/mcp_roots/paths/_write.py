"""Write: ``RootSet.write_bytes``, and the atomic replace of one name in an open directory that keeps the
replaced file's owner and permission bits (never set-user-id, set-group-id or sticky; the broker's
``files/write`` uses it too).
"""

from __future__ import annotations

import contextlib
import errno
import os
import posixpath
import stat

from .._sys import linux
from .._sys.posix import O_CLOEXEC, O_CREAT, O_DIRECTORY, O_NOFOLLOW
from ..errors import InvalidPath, NotRegularFile, PathOutsideRoots
from ._beneath import oserror
from ._open import open_file
from ._router import Router
from ._text import SYMLOOP_MAX, check_name, cut_to_bytes, describe, ending, file_kind, split

__all__ = [
    "KEPT_MODE_BITS",
    "TEMP_NAME_BYTES",
    "drop_set_id_bits",
    "keep_metadata",
    "new_file_mode",
    "write_atomic",
    "write_bytes",
]

#: Bytes of the final name kept in a temporary name: '.' + 200 + '.' + 12 hex + '.tmp' = 218 <= NAME_MAX.
TEMP_NAME_BYTES = 200
#: The permission bits new content may carry over from the file it replaces: rwx for user, group and
#: others. Set-user-id, set-group-id and sticky (0o7000) never are: they were granted to the old content.
KEPT_MODE_BITS = 0o777


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


def new_file_mode() -> int:
    """The mode a file created now gets (0o666 less the process's umask), read from /proc/self/status so
    that no thread changes the umask to learn it; 0o644 where that cannot be read."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o644


def write_atomic(dirfd: int, name: str, data: bytes) -> None:
    """Replace ``name`` in the directory ``dirfd`` atomically: a temporary file in the same directory,
    written, fsynced, then renamed over ``name``. An existing file's owner and permission bits are kept
    (:func:`keep_metadata`: never set-id or sticky bits); a new file gets :func:`new_file_mode`. The
    temporary file is created 0600 and gets its mode before any content is written (an existing file's) or
    once it is all written (a new file's), so no one that mode would refuse can open it and read the content
    through that descriptor. The temporary file never survives a failure."""
    check_name(name)
    try:
        old: os.stat_result | None = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
    except FileNotFoundError:
        old = None
    if old is not None and not (stat.S_ISREG(old.st_mode) or stat.S_ISLNK(old.st_mode)):
        # Only a regular file is replaced, as open(name, 'wb') would only write one: never a directory,
        # a FIFO, a socket or a device (the builtin would block on a FIFO or write to the device).
        if stat.S_ISDIR(old.st_mode):
            raise oserror(errno.EISDIR)
        raise NotRegularFile(file_kind(old.st_mode))
    # 12 hex digits from the kernel's CSPRNG: what secrets.token_hex(6) is, without importing secrets.
    tmp = f".{cut_to_bytes(name, TEMP_NAME_BYTES)}.{os.urandom(6).hex()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | O_CREAT | os.O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600, dir_fd=dirfd)
    try:
        try:
            if old is not None:
                keep_metadata(fd, old, name)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
            if old is None:
                os.fchmod(fd, new_file_mode())
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


def _is_file_root(router: Router, text: str) -> bool:
    parts = split(text)
    root_path = router.index.exact("/" + "/".join(parts)) if ".." not in parts else None
    if root_path is None:
        return False
    descriptor = router.root_descriptor(root_path)
    try:
        return not descriptor.is_dir
    finally:
        router.release(descriptor)


def write_bytes(router: Router, path: object, data: bytes) -> None:
    """RootSet.write_bytes: atomic replace through a temporary file in the same directory; a final
    symlink is followed (by name, each step confined again) while it stays inside the roots."""
    first = router.absolute(path)
    target = first
    for _ in range(SYMLOOP_MAX + 1):
        slash = "/" if ending(target) == "/" else ""
        if _is_file_root(router, target):
            with open_file(router, target, "wb", -1, None, None, None) as f:
                drop_set_id_bits(f.fileno())
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            return

        def write_or_follow(dirfd: int, name: str) -> str | None:
            try:
                st = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
            except FileNotFoundError:
                st = None
            if st is not None and stat.S_ISLNK(st.st_mode):
                link = os.readlink(name, dir_fd=dirfd)
                if linux.is_magic_link(st.st_dev, link):  # its text is not where it leads
                    raise oserror(errno.ELOOP)
                where = linux.fd_path(dirfd)
                if where is None:  # pragma: no cover - no procfs
                    raise InvalidPath(f"{describe(name)} is a symlink; cannot follow it here")
                return posixpath.join(where, link)
            write_atomic(dirfd, name, data)
            return None

        try:
            followed = router.in_parent(target, write_or_follow, "written")
        except PathOutsideRoots:
            if target == first:
                raise
            # Never name where an outside link points: the refusal names the path as given.
            raise router.outside(first, f"its final symlink leads to {target!r}, outside") from None
        if followed is None:
            return
        if slash:  # 'link/' names a directory, whatever the link's text ends in: no file to write there
            followed = followed.rstrip("/")
            while followed.endswith("/."):
                followed = followed[:-2].rstrip("/")
        target = router.absolute(followed + slash)
    raise router.outside(first, "too many levels of symbolic links")
