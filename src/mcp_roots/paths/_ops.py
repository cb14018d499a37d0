"""The bodies of RootSet's file operations: open, read, write, list, stat, mkdir, remove, rename.

Each is a few lines over the Router (which root, which relative path, which refusal) and _beneath (the
descriptor-relative system calls). RootSet's methods call these and add nothing.
"""

from __future__ import annotations

import errno
import fcntl
import io
import os
import posixpath
import stat
from pathlib import Path
from typing import IO, Any

from .._sys import linux
from .._sys.posix import O_NONBLOCK
from ..errors import FileTooLarge, InvalidPath, PathOutsideRoots, RootsError
from . import _beneath
from ._beneath import CREATING, open_beneath, oserror, strategy
from ._descriptors import Descriptor
from ._fileops import drop_set_id_bits, mkdir_at, open_regular, read_fd, remove_at, write_atomic
from ._router import Router
from ._text import PATH_TYPES, SYMLOOP_MAX, describe, split
from ._tree import LIST_FLAGS, Entry, Leave, OnError, Visit, descend, list_entries
from ._tree import walk as walk_tree

__all__ = [
    "fd_beneath",
    "listdir",
    "mkdir",
    "open_fd",
    "open_file",
    "open_read",
    "read_bytes",
    "remove",
    "rename",
    "scandir",
    "stat_path",
    "walk",
    "write_bytes",
]

#: The read modes open_file builds itself (True: binary), as the builtin would with buffering=-1.
_READ_MODES = {"r": False, "rt": False, "rb": True}
_FileIO, _BufferedReader = io.FileIO, io.BufferedReader
_fstat = os.fstat
_S_IFMT = 0o170000  # stat.S_IFMT() is a call; the mask is POSIX's


def _open_for_reading(root: Descriptor, rel: str) -> tuple[int, os.stat_result]:
    # The descriptor is read from only: O_NONBLOCK may stay where it changes nothing (see open_regular).
    return open_regular(root.fd, rel, os.O_RDONLY, 0, plain_dev=root.plain_dev)


def _regular_beneath(root: Descriptor, rel: str, flags: int, mode: int) -> tuple[int, os.stat_result]:
    """``open_regular`` for a read-only open on the hot path (``Router.fast``'s op), its regular-file case
    inlined (one frame less): opened O_NONBLOCK, kept only if fstat says a regular file, O_NONBLOCK
    cleared unless its filesystem is the root's plain one. Anything else -- a FIFO, a device, a
    directory, a socket's ENXIO -- is closed and left to ``open_regular``, which opens it again without
    blocking and words the refusal."""
    try:
        fd = open_beneath(root.fd, rel, flags | O_NONBLOCK, mode)
    except OSError as exc:
        if exc.errno != errno.ENXIO:
            raise
        return open_regular(root.fd, rel, flags, mode, plain_dev=root.plain_dev)
    try:
        st = _fstat(fd)
        if st.st_mode & _S_IFMT == stat.S_IFREG:
            if st.st_dev != root.plain_dev:
                fcntl.fcntl(fd, fcntl.F_SETFL, flags)  # as open_regular: O_NONBLOCK off
            return fd, st
    except BaseException:
        os.close(fd)
        raise
    os.close(fd)
    return open_regular(root.fd, rel, flags, mode, plain_dev=root.plain_dev)


def fd_beneath(root: Descriptor, rel: str, flags: int, mode: int) -> int:
    """RootSet.open_fd's op for ``Router.fast``: RootSet.open_fd makes that one call itself, and calls
    :func:`open_fd` only when it answers None. An open that creates nothing, of more than one name, is
    openat2's one call as in the read op (a failure goes to ``open_beneath``, which words it)."""
    quick = _beneath.quick_beneath
    if quick is not None and "/" in rel and not flags & CREATING:
        fd = quick(root.fd, rel.encode(), flags | os.O_CLOEXEC, 0)
        if fd >= 0:
            return fd
    return open_beneath(root.fd, rel, flags, mode)


def _read_open(router: Router, path: object) -> tuple[int, os.stat_result, str]:
    """A regular file opened read-only beneath its root, with its fstat and the checked text of ``path``:
    the hot path (one frame, ``Router.read_fast``), else :func:`_read_open_past`."""
    if type(path) is not str and type(path) in PATH_TYPES:
        path = str(path)  # once, here: the router and the caller both want the text
    hit = router.read_fast(path)
    if hit is None:
        return _read_open_past(router, path)
    return hit[0], hit[1], path  # type: ignore[return-value]  # read_fast took it: a str


def _read_open_past(router: Router, path: object) -> tuple[int, os.stat_result, str]:
    """:func:`_read_open` once ``Router.read_fast`` has said None (it opened nothing that stays open):
    ``Router.fast`` with the read op, which takes the shapes and indexes read_fast leaves, else the
    general path, which words every refusal."""
    hit = router.fast(path, _regular_beneath, os.O_RDONLY, 0)
    if hit is not None:
        return hit[0], hit[1], path  # type: ignore[return-value]  # Router.fast took it: a str
    text = router.absolute(path)
    fd, st = router.at(text, _open_for_reading)
    return fd, st, text


def open_file(
    router: Router,
    path: object,
    mode: str,
    buffering: int,
    encoding: str | None,
    errors: str | None,
    newline: str | None,
) -> IO[Any]:
    """RootSet.open: the builtin ``open`` with the path resolved and opened beneath a root."""
    binary = _READ_MODES.get(mode) if type(mode) is str else None
    if (
        binary is not None
        and buffering == -1
        and type(buffering) is int
        and ((encoding is None and errors is None and newline is None) or not binary)
    ):
        buffered = open_read(router, path)
        if binary:
            return buffered
        try:  # what the builtin wraps around the same buffer for a text read
            wrapper = io.TextIOWrapper(buffered, encoding, errors, newline)
            wrapper.mode = mode  # type: ignore[misc]
            return wrapper
        except BaseException:
            buffered.close()
            raise
    text = router.absolute(path)

    def opener(_name: str, flags: int) -> int:
        return router.at(text, lambda root, rel: open_regular(root.fd, rel, flags, 0o666, allow_dir=True)[0])

    return open(text, mode, buffering, encoding, errors, newline, opener=opener)


def open_read(router: Router, path: object) -> io.BufferedReader:
    """``open(path, 'rb')`` beneath a root, RootSet.open's commonest call (it calls this itself): the
    file object the builtin builds, minus two system calls it cannot avoid -- the opener path re-sets
    O_CLOEXEC (ioctl FIOCLEX) and asks isatty (ioctl TCGETS), and a regular file, the only kind opened
    here, is never a terminal. :func:`_read_open` with its first step inlined."""
    text = path if type(path) is str else str(path) if type(path) in PATH_TYPES else None
    hit = router.read_fast(text) if text is not None else None
    if hit is None:
        fd, st, text = _read_open_past(router, text if text is not None else path)
    else:
        fd, st = hit
    try:
        raw = _FileIO(fd, "r")  # fstats once more, as the builtin does; on failure fd is still ours
    except BaseException:
        os.close(fd)
        raise
    try:
        raw.name = text  # what the builtin names it: the path as given (made absolute)
        blksize = st.st_blksize
        return _BufferedReader(raw, blksize if blksize > 1 else io.DEFAULT_BUFFER_SIZE)
    except BaseException:
        raw.close()
        raise


def open_fd(router: Router, path: object, flags: int, mode: int) -> int:
    """RootSet.open_fd past the hot path (see :func:`fd_beneath`): ``os.open`` confined to the roots."""
    text = router.absolute(path)
    return router.at(text, lambda root, rel: open_beneath(root.fd, rel, flags, mode))


def read_bytes(router: Router, path: object, max_bytes: int | None) -> bytes:
    """RootSet.read_bytes: a regular file's contents, FileTooLarge past ``max_bytes``."""
    if max_bytes is not None and max_bytes < 0:
        raise ValueError(f"max_bytes must be None or >= 0, not {max_bytes!r}")
    fd, st, text = _read_open(router, path)
    try:
        return read_fd(fd, max_bytes, st.st_size)
    except OverflowError:
        raise FileTooLarge(f"{describe(text)} is larger than max_bytes={max_bytes}") from None
    finally:
        os.close(fd)


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
        target = router.absolute(followed)
    raise router.outside(first, "too many levels of symbolic links")


def listdir(router: Router, path: object) -> list[str]:
    """RootSet.listdir."""
    text = router.absolute(path)
    fd = router.at(text, _open_listing)
    try:
        return os.listdir(fd)
    finally:
        os.close(fd)


def _open_listing(root: Descriptor, rel: str) -> int:
    return open_beneath(root.fd, rel, LIST_FLAGS)


def scandir(router: Router, path: object) -> list[Entry]:
    """RootSet.scandir: entries with kinds and sizes; a symlink's target counts only inside the roots."""
    text = router.absolute(path)
    fd = router.at(text, _open_listing)
    try:
        base = linux.fd_path(fd) or router.canonical(text)
        raw = list_entries(fd)
    finally:
        os.close(fd)
    entries = []
    for name, st in raw:
        full = posixpath.join(base, name)
        shown: os.stat_result | None = st
        if stat.S_ISLNK(st.st_mode):
            try:
                shown = stat_path(router, full)
            except (OSError, RootsError):
                shown = None  # dangling, a loop, or outside the roots: only the link itself is shown
        entries.append(
            Entry(
                name=name,
                path=Path(full),
                is_dir=shown is not None and stat.S_ISDIR(shown.st_mode),
                is_file=shown is not None and stat.S_ISREG(shown.st_mode),
                is_symlink=stat.S_ISLNK(st.st_mode),
                size=(shown or st).st_size,
            )
        )
    return entries


def walk(
    router: Router, path: object, visit: Visit, leave: Leave | None, on_error: OnError | None, sort: bool
) -> None:
    """RootSet.walk: the directory is opened beneath a root, then walked by ``_tree.walk``."""
    text = router.absolute(path)
    fd = router.at(text, _open_listing)
    try:
        walk_tree(fd, visit, leave=leave, on_error=on_error, sort=sort)
    finally:
        os.close(fd)


def stat_path(router: Router, path: object) -> os.stat_result:
    """RootSet.stat: symlinks followed while they stay inside."""
    text = router.absolute(path)
    flags = strategy().probe_flags
    fd = router.at(text, lambda root, rel: open_beneath(root.fd, rel, flags))
    try:
        return os.fstat(fd)
    finally:
        os.close(fd)


def mkdir(router: Router, path: object, parents: bool, exist_ok: bool) -> None:
    """RootSet.mkdir. With ``parents``, the deepest existing ancestor is found by bisection and the
    missing levels are created from its descriptor by ``_tree.descend`` (mkdirat, then openat
    O_NOFOLLOW): a loop linear in the depth, not recursion, so a tree thousands of levels deep is fine."""
    text = router.absolute(path)
    parts = split(text)
    try:
        _mkdir_one(router, text, parts, exist_ok)
        return
    except FileNotFoundError:
        if not parents or len(parts) < 2:
            raise
    root_path = router.index.innermost_prefix(text)
    if ".." in parts or root_path is None:
        # Rare shapes ('..' inside, a root reached through a symlink): up until a level can be made,
        # then down again, one level at a time.
        # A prefix ending in '..' is a step, not a directory to make.
        depth = len(parts) - 1
        while True:
            try:
                if parts[depth - 1] != "..":
                    _mkdir_one(router, "/" + "/".join(parts[:depth]), parts[:depth], True)
                    break
            except FileNotFoundError:
                pass
            if depth <= 1:
                raise
            depth -= 1
        for i in range(depth + 1, len(parts)):
            if parts[i - 1] != "..":
                _mkdir_one(router, "/" + "/".join(parts[:i]), parts[:i], True)
        _mkdir_one(router, text, parts, exist_ok)
        return
    lo, hi = len(split(root_path)), len(parts) - 1  # parts[:lo] exists (the root); parts[:hi + 1] does not
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if _is_directory(router, "/" + "/".join(parts[:mid])):
            lo = mid
        else:
            hi = mid - 1
    missing = parts[lo:-1]
    dir_flags = strategy().dir_flags

    def create_levels(root: Descriptor, rel: str) -> None:
        fd = open_beneath(root.fd, rel, dir_flags)
        try:
            os.close(descend(fd, missing, dir_flags, create=True))
        finally:
            os.close(fd)

    router.at("/" + "/".join(parts[:lo]), create_levels)
    _mkdir_one(router, text, parts, exist_ok)


def _is_directory(router: Router, text: str) -> bool:
    try:
        return stat.S_ISDIR(stat_path(router, text).st_mode)
    except FileNotFoundError:
        return False


def _mkdir_one(router: Router, text: str, parts: list[str], exist_ok: bool) -> None:
    if parts and ".." not in parts and router.index.exact("/" + "/".join(parts)) is not None:
        if exist_ok:
            return
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), text)
    try:
        router.in_parent(text, lambda dirfd, name: mkdir_at(dirfd, name), "created")
    except FileExistsError:
        if not exist_ok or not stat.S_ISDIR(stat_path(router, text).st_mode):
            raise


def remove(router: Router, path: object, recursive: bool) -> None:
    """RootSet.remove: a file, a symlink (never its target), an empty directory, or with ``recursive``
    a whole tree walked through descriptors without following symlinks (a loop, not recursion)."""
    router.in_parent(path, lambda dirfd, name: remove_at(dirfd, name, recursive), "removed")


def rename(router: Router, src: object, dst: object, replace: bool) -> None:
    """RootSet.rename: both ends inside the roots; the final names are not followed."""
    src_text = router.absolute(src)
    dst_text = router.absolute(dst)
    move = os.rename if replace else rename_noreplace

    def from_parent(src_dir: int, src_name: str) -> None:
        def to_parent(dst_dir: int, dst_name: str) -> None:
            try:
                move(src_name, dst_name, src_dir_fd=src_dir, dst_dir_fd=dst_dir)
            except OSError as exc:
                raise OSError(exc.errno, exc.strerror, src_text, None, dst_text) from None

        router.in_parent(dst_text, to_parent, "replaced")

    router.in_parent(src_text, from_parent, "renamed")


def rename_noreplace(src: str, dst: str, *, src_dir_fd: int, dst_dir_fd: int) -> None:
    """A rename that fails with EEXIST instead of replacing: renameat2(RENAME_NOREPLACE); where the system
    or the filesystem lacks it, link + unlink for a file (atomic too), else a checked rename (racy)."""
    try:
        linux.renameat2(src_dir_fd, src, dst_dir_fd, dst, linux.RENAME_NOREPLACE)
        return
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOSYS):  # EINVAL: the filesystem lacks NOREPLACE
            raise
    st = os.stat(src, dir_fd=src_dir_fd, follow_symlinks=False)
    if not stat.S_ISDIR(st.st_mode):
        os.link(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd, follow_symlinks=False)
        os.unlink(src, dir_fd=src_dir_fd)
        return
    try:
        os.stat(dst, dir_fd=dst_dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        os.rename(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)
        return
    raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), dst)
