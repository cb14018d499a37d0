"""Open and read: ``RootSet.open``, ``open_fd``, ``read_bytes`` and ``stat``.
A regular file is opened without blocking on a FIFO, and read within a limit.
"""

# Each operation is a few lines over the Router (which root, which relative path, which refusal) and
# ``_beneath`` (the descriptor-relative system calls). A read is ``Router.read_fast``, else the general
# route; ``open_fd``'s lane op, :func:`fd_beneath`, lives here too.

from __future__ import annotations

import errno
import io
import os
import stat
from typing import IO, Any

from .._sys.posix import O_NONBLOCK
from ..errors import FileTooLarge, NotRegularFile
from . import _beneath
from ._beneath import CREATING, open_beneath, oserror, regular, strategy
from ._descriptors import Descriptor
from ._router import Router
from ._text import describe, file_kind

__all__ = [
    "fd_beneath",
    "open_fd",
    "open_file",
    "open_read",
    "open_regular",
    "read_bytes",
    "read_fd",
    "stat_path",
]

#: The read modes open_file builds itself (True: binary), as the builtin would with buffering=-1.
_READ_MODES = {"r": False, "rt": False, "rb": True}
_FileIO, _BufferedReader = io.FileIO, io.BufferedReader


def open_regular(
    dirfd: int, rel: str, flags: int, mode: int = 0o666, *, allow_dir: bool = False, plain_dev: int = -1
) -> tuple[int, os.stat_result]:
    """Open a regular file beneath ``dirfd`` and return it with its fstat: the open is O_NONBLOCK, then
    the regular-file rule (:func:`_beneath.regular`; ``plain_dev``, a root descriptor's, only for a
    descriptor that is only read from). FIFOs, devices and sockets raise NotRegularFile without
    blocking. A directory raises IsADirectoryError unless ``allow_dir`` and the access is read-only."""
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
        st = regular(fd, plain_dev, flags)
        if st is not None:
            return fd, st
        st = os.fstat(fd)
        if not stat.S_ISDIR(st.st_mode):
            raise NotRegularFile(file_kind(st.st_mode))
        if not allow_dir or flags & (os.O_WRONLY | os.O_RDWR):
            raise oserror(errno.EISDIR)
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


def _open_for_reading(root: Descriptor, rel: str) -> tuple[int, os.stat_result]:
    # The descriptor is read from only: O_NONBLOCK may stay where it changes nothing (see open_regular).
    return open_regular(root.fd, rel, os.O_RDONLY, 0, plain_dev=root.plain_dev)


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
    """The general route's read, once ``Router.read_fast`` has said None (it opened nothing that stays
    open): a regular file opened read-only beneath its root, with its fstat and the text of ``path``;
    it takes every path and words every refusal."""
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
    here, is never a terminal. ``Router.read_fast`` first, else :func:`_read_open`."""
    hit = router.read_fast(path)
    fd, st, text = hit if hit is not None else _read_open(router, path)
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
    hit = router.read_fast(path)
    fd, st, text = hit if hit is not None else _read_open(router, path)
    try:
        return read_fd(fd, max_bytes, st.st_size)
    except OverflowError:
        raise FileTooLarge(f"{describe(text)} is larger than max_bytes={max_bytes}") from None
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
