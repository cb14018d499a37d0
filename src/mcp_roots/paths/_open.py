"""Open and read: ``RootSet.open``, ``open_fd``, ``read_bytes`` and ``stat``.
A regular file is opened without blocking on a FIFO, and read within a limit.
"""

# Each operation is a few lines over the Router (which root, which relative path, which refusal) and
# ``_beneath`` (the descriptor-relative system calls). The ops handed to the router's lanes live here too:
# :func:`read_beneath` (``Router.fast``'s read, which ``Router.read_fast`` makes in place) and
# :func:`fd_beneath`.

from __future__ import annotations

import errno
import fcntl
import io
import os
import stat
from typing import IO, Any

from .._sys.posix import O_NONBLOCK
from ..errors import FileTooLarge, NotRegularFile
from . import _beneath
from ._beneath import CREATING, open_beneath, oserror, strategy
from ._descriptors import Descriptor
from ._router import Router
from ._text import describe, file_kind

__all__ = [
    "fd_beneath",
    "open_fd",
    "open_file",
    "open_read",
    "open_regular",
    "read_beneath",
    "read_bytes",
    "read_fd",
    "stat_path",
]

#: The read modes open_file builds itself (True: binary), as the builtin would with buffering=-1.
_READ_MODES = {"r": False, "rt": False, "rb": True}
_FileIO, _BufferedReader = io.FileIO, io.BufferedReader
_fstat = os.fstat
_S_IFMT = 0o170000  # stat.S_IFMT() is a call; the mask is POSIX's


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


def _open_for_reading(root: Descriptor, rel: str) -> tuple[int, os.stat_result]:
    # The descriptor is read from only: O_NONBLOCK may stay where it changes nothing (see open_regular).
    return open_regular(root.fd, rel, os.O_RDONLY, 0, plain_dev=root.plain_dev)


def read_beneath(root: Descriptor, rel: str, flags: int, mode: int) -> tuple[int, os.stat_result]:
    """``open_regular`` for a read-only open in a lane (``Router.fast``'s op), its regular-file case
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
    """A regular file opened read-only beneath its root, with its fstat and the text of ``path``, once
    ``Router.read_fast`` has said None (it opened nothing that stays open): ``Router.fast`` with the read
    op, which takes the indexes read_fast leaves, else the general route, which words every refusal."""
    hit = router.fast(path, read_beneath, os.O_RDONLY, 0)
    if hit is not None:  # Router.fast took it: a str or a pathlib path
        return hit[0], hit[1], path if type(path) is str else str(path)
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
