"""Race-free file operations relative to a directory descriptor: nothing opened here can leave it.

Linux >= 5.6 resolves a path in one step with ``openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)``;
elsewhere (or where seccomp refuses openat2) a component walk with ``O_NOFOLLOW`` keeps a stack of directory
descriptors, so ``..`` pops the stack and never opens a physical parent. Synchronous stdlib code only.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import logging
import os
import platform
import secrets
import stat
import sys
from dataclasses import dataclass
from pathlib import Path

from ._errors import PathOutsideRoots

__all__ = ["Entry"]

logger = logging.getLogger("mcp_roots")

O_PATH: int = getattr(os, "O_PATH", 0)  # 0 (O_RDONLY) where the platform has no O_PATH
O_CLOEXEC: int = getattr(os, "O_CLOEXEC", 0)
O_NOFOLLOW: int = getattr(os, "O_NOFOLLOW", 0)
O_DIRECTORY: int = getattr(os, "O_DIRECTORY", 0)
O_NONBLOCK: int = getattr(os, "O_NONBLOCK", 0)
O_TMPFILE: int = getattr(os, "O_TMPFILE", 0)
O_CREAT: int = os.O_CREAT
DIR_FLAGS = O_PATH | O_DIRECTORY | O_CLOEXEC  # a directory used only as dir_fd
LIST_FLAGS = os.O_RDONLY | O_DIRECTORY | O_CLOEXEC  # a directory we read entries from

AT_FDCWD = -100
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_BENEATH = 0x08
SYMLOOP_MAX = 40
# openat2 answers EAGAIN when a rename or mount raced a '..' step; after this many in a row the walk takes
# over for that call (it needs no retry: it never looks at a physical parent).
EAGAIN_RETRIES = 64

_PROC_DEV: int | None
try:
    _PROC_DEV = os.stat("/proc").st_dev if sys.platform.startswith("linux") else None
except OSError:  # pragma: no cover - no procfs mounted
    _PROC_DEV = None


# --- Outcomes the callers map to public errors ---------------------------------------------------------


class Escape(Exception):
    """Internal: resolving the path would leave the directory (``..`` past it, an absolute symlink, or a
    relative symlink that climbs out). The caller decides whether another root may take it."""


class NotRegularFile(Exception):
    """Internal: the path names a FIFO, device or socket, which a read or write must not touch."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.kind = kind


def file_kind(mode: int) -> str:
    """A short human name of a file type: 'a FIFO', 'a socket'..."""
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    return "not a regular file"


def _oserror(code: int) -> OSError:
    return OSError(code, os.strerror(code))


# --- openat2 through ctypes ------------------------------------------------------------------------------


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


_OPENAT2_NR = {"x86_64": 437, "aarch64": 437}.get(platform.machine()) if sys.platform == "linux" else None


def _load_libc() -> tuple[ctypes._CFuncPtr | None, ctypes._CFuncPtr | None]:  # type: ignore[name-defined]
    """libc's ``syscall`` (bound for openat2) and ``fstatfs``, on the Linux machines we know openat2's
    number for; (None, None) elsewhere."""
    if _OPENAT2_NR is None:
        return None, None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        syscall, fstatfs = libc.syscall, libc.fstatfs
    except (OSError, AttributeError):  # pragma: no cover - no libc syscall()
        return None, None
    # No argtypes: converting through them costs ~0.7 us a call, a third of what the call itself costs
    # in Python. Every call site passes small ints (C int, which libffi sign-extends to the register
    # width), bytes (char *) and a ctypes.byref pointer, which ctypes passes as they are.
    syscall.restype = ctypes.c_long
    fstatfs.restype = ctypes.c_int
    fstatfs.argtypes = [ctypes.c_int, ctypes.c_void_p]
    return syscall, fstatfs


_syscall, _fstatfs = _load_libc()
_FS_ENCODING, _FS_ERRORS = sys.getfilesystemencoding(), sys.getfilesystemencodeerrors()
_HOW_SIZE = ctypes.sizeof(_OpenHow)
# One prebuilt open_how (and the pointer ctypes passes for it) per (flags, mode, resolve): an openat2 call
# then allocates nothing but the encoded path. The combinations in use are few (the callers' flags).
_hows: dict[tuple[int, int, int], tuple[_OpenHow, object]] = {}

#: True while openat2 is in use; flipped to False once per process when the kernel (ENOSYS) or a seccomp
#: filter (EPERM) refuses it. Tests set it to False to force the walk.
use_openat2: bool = _syscall is not None


def strategy() -> str:
    """The resolution strategy this process uses: ``"openat2"`` or ``"walk"``."""
    return "openat2" if use_openat2 else "walk"


_BENEATH = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS


def _how(flags: int, mode: int, resolve: int = _BENEATH) -> object:
    """The ctypes pointer to a prebuilt ``open_how`` for these fields."""
    key = (flags, mode, resolve)
    found = _hows.get(key)
    if found is None:
        how = _OpenHow(flags, mode, resolve)
        found = _hows[key] = (how, ctypes.byref(how))  # the pointer object keeps ``how`` alive
    return found[1]


_NO_SYMLINKS = _how(O_PATH | O_CLOEXEC, 0, RESOLVE_NO_SYMLINKS)


def _openat2_refused(dirfd: int) -> bool:
    """After an EPERM: does openat2 refuse even a harmless call (seccomp), or was the EPERM genuine?"""
    assert _syscall is not None
    fd = _syscall(_OPENAT2_NR, dirfd, b".", _how(O_PATH | O_CLOEXEC, 0), _HOW_SIZE)
    if fd >= 0:
        os.close(fd)
        return False
    return ctypes.get_errno() in (errno.EPERM, errno.ENOSYS)


def _stop_openat2(why: str) -> None:
    global use_openat2
    if use_openat2:
        use_openat2 = False
        logger.warning("openat2 is unavailable (%s); using the O_NOFOLLOW component walk instead", why)


def open_beneath(dirfd: int, rel: str, flags: int, mode: int = 0) -> int:
    """Open ``rel`` relative to ``dirfd`` without ever leaving it, and return the new descriptor.

    ``rel`` is a relative path ('' or '.' is the directory itself). Symlinks inside are followed (relative
    ones only), procfs magic links are refused (ELOOP). Raises :class:`Escape` when the path would leave
    ``dirfd``, OSError otherwise. ``O_CLOEXEC`` is always added.
    """
    flags |= O_CLOEXEC
    if mode and not (flags & O_CREAT or (O_TMPFILE and flags & O_TMPFILE == O_TMPFILE)):
        mode = 0
    if "/" not in rel and rel not in ("", ".", "..") and not flags & O_PATH:
        # One plain name: an openat with O_NOFOLLOW cannot leave dirfd, and costs less than openat2
        # through ctypes. A symlink there (ELOOP; ENOTDIR or EMLINK on some systems) takes the full path.
        try:
            return os.open(rel, flags | O_NOFOLLOW, mode, dir_fd=dirfd)
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK) or flags & O_NOFOLLOW:
                raise
    if use_openat2 and _syscall is not None:
        found = _hows.get((flags, mode, _BENEATH))
        how = found[1] if found is not None else _how(flags, mode)
        path = rel.encode(_FS_ENCODING, _FS_ERRORS) if rel else b"."
        fd: int = _syscall(_OPENAT2_NR, dirfd, path, how, _HOW_SIZE)
        retries = EAGAIN_RETRIES - 1
        while fd < 0:
            code = ctypes.get_errno()
            if code in (errno.EAGAIN, errno.EINTR):
                if not retries:
                    break
                retries -= 1
                fd = _syscall(_OPENAT2_NR, dirfd, path, how, _HOW_SIZE)
                continue
            if code == errno.EXDEV:
                raise Escape(rel)
            if code == errno.ENOSYS or (code == errno.EPERM and _openat2_refused(dirfd)):
                _stop_openat2(os.strerror(code))
                break
            if code == errno.ENOTDIR and rel in ("", ".", "/"):
                return _reopen_self(dirfd, flags, mode)
            raise _oserror(code)
        else:
            return fd
    return walk_open(dirfd, rel, flags, mode)


def lookup_without_symlinks(path: str) -> int:
    """Look the absolute ``path`` up by name from ``/`` refusing every symlink on the way
    (``openat2(AT_FDCWD, path, O_PATH, RESOLVE_NO_SYMLINKS)``) and return 0 when it exists, else the errno
    (ELOOP: a component is a symlink; ENOSYS: openat2 is not usable here).

    Success means: every component exists, every non-final one is a directory, and none is a symlink;
    so ``path`` (absolute, without '.', '..' or empty components) is its own canonical form right now.
    """
    if _syscall is None:
        return errno.ENOSYS
    fd: int = _syscall(_OPENAT2_NR, AT_FDCWD, path.encode(_FS_ENCODING, _FS_ERRORS), _NO_SYMLINKS, _HOW_SIZE)
    if fd < 0:
        return ctypes.get_errno() or errno.EIO
    os.close(fd)
    return 0


def _reopen_self(fd: int, flags: int, mode: int) -> int:
    """Open what ``fd`` (an O_PATH descriptor of a file root) refers to, with real access flags."""
    if stat.S_ISDIR(os.fstat(fd).st_mode):
        return os.open(".", flags, mode, dir_fd=fd)
    # The /proc/self/fd link re-opens the very inode the descriptor holds: no name is looked up again.
    return os.open(f"/proc/self/fd/{fd}", flags & ~O_CREAT, mode)


# --- The walk ----------------------------------------------------------------------------------------------


def _is_magic(dirfd: int, name: str, target: str) -> bool:
    if _PROC_DEV is None:
        return False
    try:
        st = os.lstat(name, dir_fd=dirfd)
    except OSError:
        return True
    return st.st_dev == _PROC_DEV and (target.startswith("/") or ":" in target)


def walk_open(dirfd: int, rel: str, flags: int, mode: int = 0) -> int:
    """The portable twin of :func:`open_beneath`: one component at a time, ``O_NOFOLLOW``, a stack of
    directory descriptors. Same contract."""
    flags |= O_CLOEXEC
    follow_last = not flags & O_NOFOLLOW
    trailing_slash = rel.endswith("/")
    pending = [c for c in reversed(rel.split("/")) if c and c != "."]
    stack: list[int] = []  # descriptors we own; the current directory is stack[-1], else dirfd
    hops = 0
    try:
        while pending:
            cur = stack[-1] if stack else dirfd
            name = pending.pop()
            if name == "..":
                if not stack:
                    raise Escape(rel)
                os.close(stack.pop())
                continue
            last = not pending and not trailing_slash
            if last:
                failure: OSError | None = None
                try:
                    fd = os.open(name, flags | O_NOFOLLOW, mode, dir_fd=cur)
                except OSError as exc:
                    if exc.errno not in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
                        raise
                    fd, failure = -1, exc
                if fd >= 0 and not (flags & O_PATH and stat.S_ISLNK(os.fstat(fd).st_mode)):
                    return fd
                if fd >= 0:
                    os.close(fd)
                try:
                    target = os.readlink(name, dir_fd=cur)
                except OSError:
                    raise (failure or _oserror(errno.ENOTDIR)) from None
                if not follow_last:
                    raise _oserror(errno.ELOOP)
                trailing_slash = target.endswith("/")
            else:
                fd = os.open(name, (O_PATH or os.O_RDONLY) | O_NOFOLLOW | O_CLOEXEC, dir_fd=cur)
                kind = os.fstat(fd).st_mode
                if stat.S_ISDIR(kind):
                    stack.append(fd)
                    continue
                os.close(fd)
                if not stat.S_ISLNK(kind):
                    raise _oserror(errno.ENOTDIR)
                target = os.readlink(name, dir_fd=cur)
            hops += 1
            if hops > SYMLOOP_MAX or _is_magic(cur, name, target):
                raise _oserror(errno.ELOOP)
            if target.startswith("/"):
                raise Escape(rel)
            pending.extend(c for c in reversed(target.split("/")) if c and c != ".")
            if not pending:  # a link to '.'
                trailing_slash = True
        cur = stack[-1] if stack else dirfd
        try:
            return os.open(".", flags, mode, dir_fd=cur)
        except NotADirectoryError:  # pragma: no cover - dirfd is a file root
            return _reopen_self(cur, flags, mode)
    finally:
        for fd in stack:
            os.close(fd)


# --- Root descriptors --------------------------------------------------------------------------------------


def open_root(path: str) -> Descriptor:
    """Open the canonical root ``path`` one component at a time from ``/`` with ``O_NOFOLLOW``: a root
    whose path now contains a symlink was replaced since it was canonicalized, and is refused."""
    fd = os.open("/", (O_PATH or os.O_RDONLY) | O_DIRECTORY | O_CLOEXEC)
    try:
        for name in [c for c in path.split("/") if c]:
            nfd = os.open(name, (O_PATH or os.O_RDONLY) | O_NOFOLLOW | O_CLOEXEC, dir_fd=fd)
            os.close(fd)
            fd = nfd
            mode = os.fstat(fd).st_mode
            if stat.S_ISLNK(mode):
                raise PathOutsideRoots(
                    f"Access denied: the root {path!r} was replaced (a component is now a symlink)"
                )
        st = os.fstat(fd)
        mode = st.st_mode
        if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
            raise PathOutsideRoots(f"Access denied: the root {path!r} is now {file_kind(mode)}")
        plain_dev = st.st_dev if filesystem_type(fd) in PLAIN_FILESYSTEMS else -1
        return Descriptor(fd, stat.S_ISDIR(mode), plain_dev)
    except BaseException:
        os.close(fd)
        raise


# Filesystems (statfs f_type) whose regular files are read and written through the page cache: there
# O_NONBLOCK changes nothing for read(2)/write(2) (only RWF_NOWAIT or io_uring make such I/O non-blocking),
# unlike FUSE, procfs, sysfs, debugfs/tracefs or network filesystems, which may honour it.
PLAIN_FILESYSTEMS = frozenset(
    {
        0xEF53,  # ext2, ext3, ext4
        0x58465342,  # xfs
        0x9123683E,  # btrfs
        0x01021994,  # tmpfs
        0x858458F6,  # ramfs
        0xF2F52010,  # f2fs
    }
)


def filesystem_type(fd: int) -> int | None:
    """statfs ``f_type`` of the filesystem ``fd`` is on (Linux), or None."""
    if _fstatfs is None:
        return None
    buf = ctypes.create_string_buffer(256)  # struct statfs is 120 bytes on x86_64 and aarch64
    if _fstatfs(fd, buf) != 0:
        return None
    return ctypes.c_long.from_buffer(buf).value


class Descriptor:
    """An owned descriptor, closed when the last reference goes: an operation in another thread that still
    holds it keeps the number from being reused under it.

    ``plain_dev`` is the root's st_dev when its filesystem is one of PLAIN_FILESYSTEMS, else -1. While the
    descriptor is open it pins that filesystem, so its device number cannot be handed to another mount: a
    file with the same st_dev is on the same (plain) filesystem."""

    __slots__ = ("fd", "is_dir", "plain_dev")

    def __init__(self, fd: int, is_dir: bool, plain_dev: int = -1) -> None:
        self.fd = fd
        self.is_dir = is_dir
        self.plain_dev = plain_dev

    def __del__(self) -> None:
        # TypeError: the os module is already torn down at interpreter exit.
        with contextlib.suppress(OSError, TypeError):
            os.close(self.fd)


#: At most this many root descriptors stay open per RootSet (the oldest is dropped first): a set of
#: 10,000 roots must not exhaust RLIMIT_NOFILE.
MAX_OPEN_ROOTS = 64


class RootDescriptors:
    """The lazily opened descriptors of one RootSet's roots, keyed by canonical root path."""

    __slots__ = ("_open", "lengths")

    def __init__(self) -> None:
        self._open: dict[str, Descriptor] = {}
        # The distinct lengths of the root paths, longest first, set by RootSet when it is built (it is
        # frozen; this holder is its per-set scratch space).
        self.lengths: tuple[int, ...] = ()

    def get(self, path: str) -> Descriptor:
        found = self._open.get(path)
        if found is not None:
            return found
        found = open_root(path)
        while len(self._open) >= MAX_OPEN_ROOTS:
            try:
                del self._open[next(iter(self._open))]
            except (RuntimeError, StopIteration, KeyError):  # another thread got there first
                break
        self._open[path] = found
        return found

    def __len__(self) -> int:
        return len(self._open)

    def close(self) -> None:
        # Dropping the references closes each descriptor now, or when an operation in flight lets go.
        self._open = {}


def fd_path(fd: int) -> str | None:
    """The current absolute path of what ``fd`` refers to, as the kernel names it, or None."""
    try:
        path = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None
    if not path.startswith("/") or path.endswith(" (deleted)"):
        return None
    return path


# --- Operations on an open directory ---------------------------------------------------------------


def open_file(dirfd: int, rel: str, flags: int, mode: int = 0o666) -> int:
    """Open a regular file beneath ``dirfd``. FIFOs, devices and sockets raise NotRegularFile without
    blocking (the open is O_NONBLOCK; the flag is cleared again for a regular file). A directory opened
    read-only is returned (the builtin open reports it itself)."""
    return open_regular(dirfd, rel, flags, mode, allow_dir=True)[0]


def open_regular(
    dirfd: int, rel: str, flags: int, mode: int = 0o666, *, allow_dir: bool = False, plain_dev: int = -1
) -> tuple[int, os.stat_result]:
    """:func:`open_file` that also returns the file's fstat; a directory raises IsADirectoryError unless
    ``allow_dir`` (and the access is read-only).

    ``plain_dev`` (a :class:`Descriptor`'s, for a descriptor that is only read from) lets O_NONBLOCK stay
    set on a regular file of that device: a plain filesystem ignores it, and clearing it costs a system
    call."""
    try:
        fd = open_beneath(dirfd, rel, flags | O_NONBLOCK, mode)
    except OSError as exc:
        if exc.errno != errno.ENXIO:  # a socket, or a FIFO opened for writing with no reader
            raise
        probe = open_beneath(dirfd, rel, O_PATH or os.O_RDONLY)
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
                    raise _oserror(errno.EISDIR)
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
        raise _oserror(errno.EINVAL)


def write_atomic(dirfd: int, name: str, data: bytes) -> None:
    """Replace ``name`` in the directory ``dirfd`` atomically: a temporary file in the same directory,
    written, fsynced, then renamed over ``name``. The temporary file never survives a failure."""
    _check_name(name)
    try:
        old_mode: int | None = stat.S_IMODE(os.stat(name, dir_fd=dirfd, follow_symlinks=False).st_mode)
    except FileNotFoundError:
        old_mode = None
    tmp = f".{name[:200]}.{secrets.token_hex(6)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | O_CREAT | os.O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o666, dir_fd=dirfd)
    try:
        try:
            if old_mode is not None:
                os.fchmod(fd, old_mode)
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


def remove_at(dirfd: int, name: str, recursive: bool) -> None:
    """Remove ``name`` (a file, a symlink itself, or a directory) from ``dirfd``. A recursive remove opens
    every directory with O_NOFOLLOW relative to its parent's descriptor, so no symlink is ever followed."""
    _check_name(name)
    st = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(name, dir_fd=dirfd)
        return
    if recursive:
        _empty_tree(dirfd, name)
    os.rmdir(name, dir_fd=dirfd)


def _empty_tree(dirfd: int, name: str) -> None:
    fd = os.open(name, LIST_FLAGS | O_NOFOLLOW, dir_fd=dirfd)
    try:
        with os.scandir(fd) as entries:
            children = [(e.name, e.is_dir(follow_symlinks=False)) for e in entries]
        for child, is_dir in children:
            if is_dir:
                _empty_tree(fd, child)
                os.rmdir(child, dir_fd=fd)
            else:
                os.unlink(child, dir_fd=fd)
    finally:
        os.close(fd)


def mkdir_at(dirfd: int, name: str, mode: int = 0o777) -> None:
    _check_name(name)
    os.mkdir(name, mode, dir_fd=dirfd)


@dataclass(frozen=True)
class Entry:
    """One directory entry, as :meth:`RootSet.scandir` lists it.

    ``path`` is the entry's canonical location (its directory's canonical path plus ``name``; a symlink is
    not followed for it). ``is_dir``/``is_file`` follow a symlink only when its target lies inside the
    roots; ``is_symlink`` says whether the entry itself is one. ``size`` is the size in bytes of what
    ``is_dir``/``is_file`` describe (the link itself when its target is outside or missing).
    """

    name: str
    path: Path
    is_dir: bool
    is_file: bool
    is_symlink: bool
    size: int


def list_entries(dirfd: int) -> list[tuple[str, os.stat_result]]:
    """Names and lstat results of a directory opened for listing (``dirfd`` stays open)."""
    out: list[tuple[str, os.stat_result]] = []
    with os.scandir(dirfd) as entries:
        for e in entries:
            try:
                out.append((e.name, e.stat(follow_symlinks=False)))
            except FileNotFoundError:  # removed while listing
                continue
    return out
