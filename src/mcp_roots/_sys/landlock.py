"""Landlock (Linux >= 5.13) through ctypes.
The three system calls, their structures and the access rights.
"""

# ``abi_version()`` says which Landlock ABI the kernel offers (or raises ``LandlockMissing`` with the
# reason); ``restrict_thread()`` confines the calling thread, and every thread or process it creates
# afterwards, to a ruleset. Irreversible. Only this module knows syscall numbers and struct layouts.

from __future__ import annotations

import ctypes
import errno
import os
import stat
import sys
from collections.abc import Iterable

__all__ = [
    "ACCESS_NET_BIND_TCP",
    "ACCESS_NET_CONNECT_TCP",
    "EXACT_PATH",
    "FILE_RIGHTS",
    "FS",
    "SCOPE_ABSTRACT_UNIX_SOCKET",
    "SCOPE_SIGNAL",
    "LandlockMissing",
    "abi_version",
    "build_ruleset",
    "fs_rights_for",
    "restrict_thread",
    "restrict_with",
    "scopes_for",
    "set_no_new_privs",
    "thread_count",
]

# linux/landlock.h; the same numbers on every architecture with the unified syscall table (x86_64,
# aarch64, arm, riscv, s390x, ppc64...), alpha (+110) excepted, which is not supported here.
_SYS_CREATE_RULESET = 444
_SYS_ADD_RULE = 445
_SYS_RESTRICT_SELF = 446
_CREATE_RULESET_VERSION = 1 << 0
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38


class FS:
    """LANDLOCK_ACCESS_FS_* rights, with the ABI that introduced each (comments)."""

    EXECUTE = 1 << 0
    WRITE_FILE = 1 << 1
    READ_FILE = 1 << 2
    READ_DIR = 1 << 3
    REMOVE_DIR = 1 << 4
    REMOVE_FILE = 1 << 5
    MAKE_CHAR = 1 << 6
    MAKE_DIR = 1 << 7
    MAKE_REG = 1 << 8
    MAKE_SOCK = 1 << 9
    MAKE_FIFO = 1 << 10
    MAKE_BLOCK = 1 << 11
    MAKE_SYM = 1 << 12
    REFER = 1 << 13  # ABI 2: link or rename a file into another directory
    TRUNCATE = 1 << 14  # ABI 3: truncate(2), ftruncate(2), O_TRUNC
    IOCTL_DEV = 1 << 15  # ABI 5: ioctl(2) on character and block devices


ACCESS_NET_BIND_TCP = 1 << 0  # ABI 4
ACCESS_NET_CONNECT_TCP = 1 << 1  # ABI 4
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1  # ABI 6

# Not a Landlock right: a flag on a rule's rights saying that the path is canonical and must still resolve
# to itself when the rule is made (roots; not system paths such as /bin, a symlink on merged-/usr systems).
EXACT_PATH = 1 << 63

# The rights that mean something on a file that is not a directory; a rule on such a file may only
# carry these (the kernel answers EINVAL otherwise).
FILE_RIGHTS = FS.EXECUTE | FS.WRITE_FILE | FS.READ_FILE | FS.TRUNCATE | FS.IOCTL_DEV

_ABI1_FS = (1 << 13) - 1  # EXECUTE .. MAKE_SYM


def fs_rights_for(abi: int) -> int:
    """Every filesystem right the kernel of this ABI can handle (what a ruleset denies unless granted)."""
    rights = _ABI1_FS
    if abi >= 2:
        rights |= FS.REFER
    if abi >= 3:
        rights |= FS.TRUNCATE
    if abi >= 5:
        rights |= FS.IOCTL_DEV
    return rights


def scopes_for(abi: int) -> int:
    """Every scope the kernel of this ABI can restrict."""
    return SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0


class _RulesetAttr(ctypes.Structure):
    # struct landlock_ruleset_attr. Always passed whole: an older kernel accepts a longer struct whose
    # fields it does not know are zero (copy_struct_from_user), and we zero what the ABI lacks.
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneathAttr(ctypes.Structure):
    # struct landlock_path_beneath_attr is __attribute__((packed)): 12 bytes, no padding.
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class LandlockMissing(Exception):
    """The kernel offers no usable Landlock; ``reason`` says why in words a user can act on."""

    def __init__(self, reason: str, errno_value: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.errno = errno_value


_libc: ctypes.CDLL | None = None


def _lib() -> ctypes.CDLL:
    global _libc
    if _libc is None:
        lib = ctypes.CDLL(None, use_errno=True)
        lib.syscall, lib.prctl  # noqa: B018 (bound now, in the parent, not in each forked child)
        _libc = lib
    return _libc


def _syscall(number: int, *args: object) -> int:
    result: int = _lib().syscall(ctypes.c_long(number), *args)
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return result


def abi_version() -> int:
    """The Landlock ABI version of this kernel (>= 1), or ``LandlockMissing`` naming why there is none."""
    if sys.platform != "linux":
        raise LandlockMissing(f"Landlock is a Linux feature; this is {sys.platform}")
    try:
        return _syscall(
            _SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION)
        )
    except OSError as exc:
        raise _missing(exc) from None


def _missing(exc: OSError) -> LandlockMissing:
    release = os.uname().release
    if exc.errno == errno.ENOSYS:
        why = (
            f"the kernel ({release}) has no Landlock system calls (Linux < 5.13, built without "
            "CONFIG_SECURITY_LANDLOCK, or a seccomp filter answers ENOSYS)"
        )
    elif exc.errno == errno.EOPNOTSUPP:
        why = (
            f"Landlock is built into the kernel ({release}) but not enabled "
            "(add 'landlock' to the lsm= boot parameter)"
        )
    elif exc.errno == errno.EPERM:
        why = (
            "the Landlock system calls are refused (EPERM): a seccomp filter (container runtime?) blocks them"
        )
    else:
        why = f"the Landlock probe failed: {exc.strerror or exc}"
    return LandlockMissing(why, exc.errno)


def _resolved(fd: int, path: str) -> str:
    """Where ``fd`` (opened from ``path``) is, by /proc; where there is no /proc (a root of the child's own
    without one), by resolving ``path`` again."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except FileNotFoundError:
        return os.path.realpath(path)


def restrict_thread(
    rules: Iterable[tuple[str, int]], *, handled_fs: int, handled_net: int = 0, scoped: int = 0
) -> list[str]:
    """Confine the calling thread (and all it creates from now on) to ``rules``: (path, rights) pairs.
    Rights with ``EXACT_PATH`` set refuse a path that no longer resolves to itself.

    A directory's rights apply to everything beneath it; a file's are masked to ``FILE_RIGHTS``. Paths that
    do not exist, or that this user may not reach, are skipped and returned (nothing to grant). Sets
    no_new_privs on the thread first, as Landlock requires of an unprivileged caller. Raises ``OSError`` if
    a rule or the restriction fails, in which case the thread may already have no_new_privs set, but is
    otherwise unconfined.
    """
    skipped: list[str] = []
    ruleset = build_ruleset(
        rules, handled_fs=handled_fs, handled_net=handled_net, scoped=scoped, skipped=skipped
    )
    try:
        restrict_with(ruleset)
    finally:
        os.close(ruleset)
    return skipped


def build_ruleset(
    rules: Iterable[tuple[str, int]],
    *,
    handled_fs: int,
    handled_net: int = 0,
    scoped: int = 0,
    skipped: list[str] | None = None,
) -> int:
    """The ruleset of ``restrict_thread`` as a descriptor (close-on-exec), confining nothing yet: built
    once, before a fork, it holds the inodes the rules name (a path swapped later changes nothing), and
    the child only calls ``restrict_with``. Paths skipped are appended to ``skipped``."""
    attr = _RulesetAttr(handled_fs, handled_net, scoped)
    ruleset = _syscall(
        _SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)), ctypes.c_uint32(0)
    )
    try:
        for path, rights in rules:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except (FileNotFoundError, NotADirectoryError, PermissionError):
                # Absent, or out of this user's reach (a child started as another user): nothing to grant.
                if skipped is not None:
                    skipped.append(path)
                continue
            try:
                if rights & EXACT_PATH and _resolved(fd, path) != path:
                    # A canonical root whose path now resolves elsewhere: a component was swapped for a
                    # symlink since the RootSet was built. Granting the new target could widen access.
                    raise OSError(
                        errno.ELOOP, "the path no longer resolves to itself (a symlink was swapped in)"
                    )
                if not stat.S_ISDIR(os.fstat(fd).st_mode):
                    rights &= FILE_RIGHTS
                rights &= handled_fs
                if rights:
                    rule = _PathBeneathAttr(rights, fd)
                    _syscall(
                        _SYS_ADD_RULE,
                        ctypes.c_int(ruleset),
                        ctypes.c_int(_RULE_PATH_BENEATH),
                        ctypes.byref(rule),
                        ctypes.c_uint32(0),
                    )
            except OSError as exc:
                raise OSError(exc.errno, f"Landlock rule for {path!r}: {exc.strerror}") from None
            finally:
                os.close(fd)
    except BaseException:
        os.close(ruleset)
        raise
    return ruleset


def restrict_with(ruleset: int) -> None:
    """Confine the calling thread to a ruleset of ``build_ruleset`` (no_new_privs set first)."""
    set_no_new_privs()
    _syscall(_SYS_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0))


def set_no_new_privs() -> None:
    # prctl(PR_SET_NO_NEW_PRIVS, 1): per thread, inherited, irreversible; execve can no longer grant
    # privileges (setuid bits, file capabilities), which is what lets an unprivileged thread self-restrict.
    if (
        _lib().prctl(
            ctypes.c_int(_PR_SET_NO_NEW_PRIVS),
            ctypes.c_ulong(1),
            ctypes.c_ulong(0),
            ctypes.c_ulong(0),
            ctypes.c_ulong(0),
        )
        != 0
    ):
        code = ctypes.get_errno()
        raise OSError(code, f"prctl(PR_SET_NO_NEW_PRIVS): {os.strerror(code)}")


def thread_count() -> int:
    """How many threads this process has now (every thread, not only Python's), from /proc."""
    return len(os.listdir("/proc/self/task"))
