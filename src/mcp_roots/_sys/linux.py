"""Linux system calls and facts through ctypes.
openat2, renameat2, fstatfs, and the procfs magic-link rule.
"""

# Every name here is None/False (or answers "unknown") on a machine this module has no numbers for, so the
# callers fall back to the portable walk. Syscall numbers: arch/x86/entry/syscalls/syscall_64.tbl and
# include/uapi/asm-generic/unistd.h (aarch64).

from __future__ import annotations

import ctypes
import errno
import os
import sys
from collections.abc import Callable

__all__ = [
    "OPENAT2",
    "PLAIN_FILESYSTEMS",
    "PROC_DEV",
    "RENAME_EXCHANGE",
    "RENAME_NOREPLACE",
    "Openat2",
    "filesystem_type",
    "is_magic_link",
    "renameat2",
]

AT_FDCWD = -100
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_BENEATH = 0x08
RENAME_NOREPLACE = 0x1
RENAME_EXCHANGE = 0x2

_MACHINE = os.uname().machine if sys.platform.startswith("linux") else ""  # as platform.machine()
_OPENAT2_NR = {"x86_64": 437, "aarch64": 437}.get(_MACHINE)
_RENAMEAT2_NR = {"x86_64": 316, "aarch64": 276}.get(_MACHINE)

_FS_ENCODING, _FS_ERRORS = sys.getfilesystemencoding(), sys.getfilesystemencodeerrors()


# --- procfs -------------------------------------------------------------------------------------------

PROC_DEV: int | None
try:
    PROC_DEV = os.stat("/proc").st_dev if sys.platform.startswith("linux") else None
except OSError:  # pragma: no cover - no procfs mounted
    PROC_DEV = None


def is_magic_link(st_dev: int | None, target: str) -> bool:
    """Whether a symlink on device ``st_dev`` reading ``target`` is a procfs "magic" link
    (/proc/<pid>/fd/N, cwd, root, exe, ns/...), which jumps anywhere without a path. Ordinary procfs links
    such as /proc/self -> '1234' or /proc/mounts -> 'self/mounts' are relative and plain. ``st_dev`` None
    (the link could not be examined) counts as magic: when in doubt, refuse."""
    if PROC_DEV is None:
        return False
    if st_dev is None:
        return True
    # 'pipe:[12]', 'socket:[3]', 'anon_inode:inotify', 'net:[4026]': any 'type:' form is a magic link.
    return st_dev == PROC_DEV and (target.startswith("/") or ":" in target)


def fd_path(fd: int) -> str | None:
    """The current absolute path of what ``fd`` refers to, as the kernel names it, or None."""
    try:
        path = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None
    if not path.startswith("/") or path.endswith(" (deleted)"):
        return None
    return path


def reopen_path(fd: int) -> str:
    """The /proc name that re-opens the very inode ``fd`` holds (no name is looked up again)."""
    return f"/proc/self/fd/{fd}"


# --- libc ---------------------------------------------------------------------------------------------


def _load_libc() -> ctypes.CDLL | None:
    if not _MACHINE:
        return None
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:  # pragma: no cover - no libc
        return None


_libc = _load_libc()


def _function(name: str) -> ctypes._CFuncPtr | None:  # type: ignore[name-defined]
    try:
        return getattr(_libc, name) if _libc is not None else None
    except AttributeError:  # pragma: no cover - an old libc
        return None


_syscall = _function("syscall") if _OPENAT2_NR is not None else None
if _syscall is not None:
    # No argtypes: converting through them costs ~0.7 us a call, a third of what the call itself costs
    # in Python. Every call site passes small ints (C int, which libffi sign-extends to the register
    # width), bytes (char *) and a ctypes.byref pointer, which ctypes passes as they are.
    _syscall.restype = ctypes.c_long

_fstatfs = _function("fstatfs")
if _fstatfs is not None:
    _fstatfs.restype = ctypes.c_int
    _fstatfs.argtypes = [ctypes.c_int, ctypes.c_void_p]


# --- openat2 ------------------------------------------------------------------------------------------


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


_HOW_SIZE = ctypes.sizeof(_OpenHow)


class Openat2:
    """``openat2(2)`` with prebuilt ``open_how`` structures: a call allocates nothing but the encoded path.

    ``beneath(dirfd, path, flags, mode)`` resolves with RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS and returns
    the descriptor or ``-errno``; ``no_symlinks(path)`` looks an absolute path up from '/' refusing every
    symlink (RESOLVE_NO_SYMLINKS) and returns 0 or the errno."""

    BENEATH = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS

    def __init__(self, syscall: ctypes._CFuncPtr, number: int, o_path: int, o_cloexec: int) -> None:  # type: ignore[name-defined]
        self._syscall = syscall
        self._number = number
        # One prebuilt open_how (and the pointer ctypes passes for it) per (flags, mode, resolve). The
        # combinations in use are few (the callers' flags).
        self._hows: dict[tuple[int, int, int], object] = {}
        self.beneath = self._make_beneath()
        self.no_symlinks = self._make_no_symlinks(self._how(o_path | o_cloexec, 0, RESOLVE_NO_SYMLINKS))
        self._probe = self._how(o_path | o_cloexec, 0, self.BENEATH)

    def _how(self, flags: int, mode: int, resolve: int) -> object:
        key = (flags, mode, resolve)
        found = self._hows.get(key)
        if found is None:
            how = _OpenHow(flags, mode, resolve)
            found = self._hows[key] = ctypes.byref(how)  # the pointer object keeps ``how`` alive
        return found

    def _make_beneath(self) -> Callable[[int, bytes, int, int], int]:
        # A closure, not a method: the hot call reads its state from cells, not from attributes.
        syscall, number, make_how, get_errno = self._syscall, self._number, self._how, ctypes.get_errno
        # Keyed by flags | mode << 32 (an int: no tuple to build and hash per call).
        hows: dict[int, object] = {}
        resolve = self.BENEATH

        def beneath(dirfd: int, path: bytes, flags: int, mode: int) -> int:
            """The descriptor, or -errno."""
            try:  # the hot call: one dict probe (a try costs nothing until it catches)
                how = hows[flags | mode << 32]
            except KeyError:
                how = hows[flags | mode << 32] = make_how(flags, mode, resolve)
            fd: int = syscall(number, dirfd, path, how, _HOW_SIZE)
            if fd < 0:
                return -(get_errno() or errno.EIO)
            return fd

        return beneath

    def raw_beneath(self, flags: int, mode: int) -> tuple[Callable[..., int], int, object, int]:
        """The pieces of ``beneath(dirfd, path, flags, mode)`` for fixed flags, for a hot path that makes
        the call itself, with no Python frame between it and libffi: ``call(number, dirfd, path, how,
        size)`` returns the descriptor, or -1 with the errno in ``ctypes.get_errno()``."""
        return self._syscall, self._number, self._how(flags, mode, self.BENEATH), _HOW_SIZE

    def _make_no_symlinks(self, how: object) -> Callable[[str], int]:
        syscall, number, get_errno, close = self._syscall, self._number, ctypes.get_errno, os.close

        def no_symlinks(path: str) -> int:
            """0 when the absolute ``path`` exists and the kernel met no symlink looking it up, else the
            errno (ELOOP: a symlink)."""
            encoded = path.encode() if path.isascii() else path.encode(_FS_ENCODING, _FS_ERRORS)
            fd: int = syscall(number, AT_FDCWD, encoded, how, _HOW_SIZE)
            if fd < 0:
                return get_errno() or errno.EIO
            close(fd)
            return 0

        return no_symlinks

    def refused(self, dirfd: int) -> bool:
        """After an EPERM: does openat2 refuse even a harmless call (seccomp), or was the EPERM genuine?"""
        fd: int = self._syscall(self._number, dirfd, b".", self._probe, _HOW_SIZE)
        if fd >= 0:
            os.close(fd)
            return False
        return ctypes.get_errno() in (errno.EPERM, errno.ENOSYS)


def _openat2() -> Openat2 | None:
    if _syscall is None or _OPENAT2_NR is None:
        return None
    return Openat2(_syscall, _OPENAT2_NR, getattr(os, "O_PATH", 0), getattr(os, "O_CLOEXEC", 0))


#: openat2 on this machine, or None where this module has no syscall number for it. (Whether the kernel
#: accepts it is learnt on the first call: ENOSYS or a seccomp EPERM.)
OPENAT2: Openat2 | None = _openat2()


# --- renameat2 ----------------------------------------------------------------------------------------


def renameat2(src_dir: int, src: str, dst_dir: int, dst: str, flags: int) -> None:
    """``renameat2(2)``: RENAME_EXCHANGE swaps two names atomically, RENAME_NOREPLACE refuses to replace.
    Raises OSError (ENOSYS where the call or this machine's number for it is missing)."""
    if _syscall is None or _RENAMEAT2_NR is None:
        raise OSError(errno.ENOSYS, os.strerror(errno.ENOSYS), src, None, dst)
    result = _syscall(
        _RENAMEAT2_NR,
        src_dir,
        src.encode(_FS_ENCODING, _FS_ERRORS),
        dst_dir,
        dst.encode(_FS_ENCODING, _FS_ERRORS),
        ctypes.c_uint(flags),
    )
    if result != 0:
        code = ctypes.get_errno() or errno.EIO
        raise OSError(code, os.strerror(code), src, None, dst)


# --- statfs -------------------------------------------------------------------------------------------

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
    """statfs ``f_type`` of the filesystem ``fd`` is on, or None where it cannot be had."""
    if _fstatfs is None:
        return None
    buf = ctypes.create_string_buffer(256)  # struct statfs is 120 bytes on x86_64 and aarch64
    if _fstatfs(fd, buf) != 0:
        return None
    return ctypes.c_long.from_buffer(buf).value
