"""Capabilities and mount namespaces through ctypes.
Dropping every capability of the calling thread; the private mount namespace
with read-only binds that holds a confined child's protected set.
"""

# ``drop_capabilities()`` empties the calling thread's bounding, ambient, permitted, effective and inheritable
# sets (per thread, inherited by what it starts; with no_new_privs an exec cannot give them back);
# ``capabilities()`` reads them. ``private_mounts()`` moves the calling process into a mount namespace of its
# own (and a user namespace where it lacks CAP_SYS_ADMIN: only in a single-threaded process, the kernel says
# EINVAL otherwise), ``bind()`` binds a path onto itself (read-only on request). Only this module knows their
# numbers and structures.

from __future__ import annotations

import ctypes
import os

__all__ = [
    "Capabilities",
    "attach_tree",
    "bind",
    "capabilities",
    "clone_tree",
    "close_on_exec_from",
    "drop_bounding_set",
    "drop_capabilities",
    "enter_root",
    "fork",
    "has_capability",
    "mount_proc",
    "mount_tmpfs",
    "parent_death_signal",
    "private_mounts",
]

CAP_SYS_ADMIN = 21
CAP_SETPCAP = 8

_SYS_CAPGET = 125
_SYS_CAPSET = 126
_SYS_MOUNT_SETATTR = 442  # x86_64 and the unified table (aarch64, riscv...)
_CAP_VERSION_3 = 0x20080522
_PR_CAPBSET_READ = 23
_PR_CAPBSET_DROP = 24
_PR_CAP_AMBIENT = 47
_PR_CAP_AMBIENT_IS_SET = 1
_PR_CAP_AMBIENT_CLEAR_ALL = 4

_CLONE_NEWNS = 0x00020000
_CLONE_NEWPID = 0x20000000
_PR_SET_PDEATHSIG = 1
_CLONE_NEWUSER = 0x10000000
_MS_BIND = 4096
_MS_REC = 16384
_MS_PRIVATE = 1 << 18
_MOUNT_ATTR_RDONLY = 0x1
_AT_FDCWD = -100
_AT_RECURSIVE = 0x8000
_AT_EMPTY_PATH = 0x1000
_SYS_OPEN_TREE = 428
_SYS_MOVE_MOUNT = 429
_SYS_PIVOT_ROOT = 155  # x86_64
_SYS_CLOSE_RANGE = 436  # x86_64 and the unified table
_CLOSE_RANGE_CLOEXEC = 4
_OPEN_TREE_CLONE = 1
_MOVE_MOUNT_F_EMPTY_PATH = 0x4
_MNT_DETACH = 2
_MS_NOSUID = 2
_MS_NODEV = 4


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


class _MountAttr(ctypes.Structure):
    _fields_ = [
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    ]


_libc = ctypes.CDLL(None, use_errno=True)
#: The same symbols called with the GIL held (``fork``: no other thread may take it meanwhile).
_libc_gil = ctypes.PyDLL(None, use_errno=True)
# Bound here once (ctypes keeps each on first use), not in every forked child that calls them: binding
# one there writes fresh pages of the child, which are copied for it.
_libc.syscall, _libc.mount, _libc.unshare, _libc.umount2, _libc.prctl, _libc_gil.fork  # noqa: B018


def _check(result: int, what: str) -> int:
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")
    return result


def _prctl(option: int, arg: int = 0, arg3: int = 0) -> int:
    return int(
        _libc.prctl(
            ctypes.c_int(option),
            ctypes.c_ulong(arg),
            ctypes.c_ulong(arg3),
            ctypes.c_ulong(0),
            ctypes.c_ulong(0),
        )
    )


def _last_cap() -> int:
    try:
        with open("/proc/sys/kernel/cap_last_cap") as f:
            return int(f.read())
    except (OSError, ValueError):
        return 63


#: The highest capability number this kernel knows (read once, before any confinement).
LAST_CAP = _last_cap()


class Capabilities:
    """The calling thread's capability sets, as bit masks (bit N: capability N)."""

    def __init__(self, effective: int, permitted: int, inheritable: int, bounding: int, ambient: int) -> None:
        self.effective = effective
        self.permitted = permitted
        self.inheritable = inheritable
        self.bounding = bounding
        self.ambient = ambient

    def empty(self) -> bool:
        return not (self.effective or self.permitted or self.inheritable or self.bounding or self.ambient)


def capabilities() -> Capabilities:
    """The calling thread's five capability sets."""
    header = _CapHeader(_CAP_VERSION_3, 0)
    data = (_CapData * 2)()
    _check(_libc.syscall(ctypes.c_long(_SYS_CAPGET), ctypes.byref(header), data), "capget")
    effective = data[0].effective | data[1].effective << 32
    permitted = data[0].permitted | data[1].permitted << 32
    inheritable = data[0].inheritable | data[1].inheritable << 32
    bounding = ambient = 0
    for cap in range(LAST_CAP + 1):
        if _prctl(_PR_CAPBSET_READ, cap) == 1:
            bounding |= 1 << cap
        if _prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_IS_SET, cap) == 1:
            ambient |= 1 << cap
    return Capabilities(effective, permitted, inheritable, bounding, ambient)


def has_capability(cap: int) -> bool:
    """Whether this thread holds ``cap`` in its effective set (one ``capget``: a spawn's child asks it)."""
    header = _CapHeader(_CAP_VERSION_3, 0)
    data = (_CapData * 2)()
    _check(_libc.syscall(ctypes.c_long(_SYS_CAPGET), ctypes.byref(header), data), "capget")
    return bool((data[0].effective | data[1].effective << 32) >> cap & 1)


def drop_capabilities() -> None:
    """Empty every capability set of the calling thread. The bounding set can only be emptied with
    CAP_SETPCAP; without it (an unprivileged user) it stays full, which no_new_privs makes harmless (an exec
    grants nothing from file capabilities or setuid bits). Irreversible."""
    drop_bounding_set()
    # Clearing the ambient set needs no privilege; EINVAL only on kernels older than 4.3 (which have none).
    if _prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL) != 0 and ctypes.get_errno() != 22:
        _check(-1, "prctl(PR_CAP_AMBIENT_CLEAR_ALL)")
    empty = (_CapData * 2)()
    header = _CapHeader(_CAP_VERSION_3, 0)
    _check(_libc.syscall(ctypes.c_long(_SYS_CAPSET), ctypes.byref(header), empty), "capset")


def drop_bounding_set() -> None:
    """Empty the calling thread's bounding set where it holds CAP_SETPCAP (else leave it: no_new_privs makes
    it harmless). The other sets are untouched: a thread may still switch user with them, then drop them."""
    header = _CapHeader(_CAP_VERSION_3, 0)
    data = (_CapData * 2)()
    _check(_libc.syscall(ctypes.c_long(_SYS_CAPGET), ctypes.byref(header), data), "capget")
    if data[0].effective >> CAP_SETPCAP & 1:
        for cap in range(LAST_CAP + 1):
            _check(_prctl(_PR_CAPBSET_DROP, cap), f"prctl(PR_CAPBSET_DROP, {cap})")


def private_mounts(uid: int, gid: int, *, new_user_namespace: bool, new_pid_namespace: bool = False) -> None:
    """Move the calling process into a mount namespace of its own whose mounts propagate nowhere. With
    ``new_user_namespace`` (a caller without CAP_SYS_ADMIN) inside a user namespace too, where ``uid`` and
    ``gid`` map to themselves (files keep their owners; git's ownership check holds); with
    ``new_pid_namespace`` its next child is the first process (pid 1) of a PID namespace of its own. Needs
    a single-threaded process for the user namespace."""
    flags = _CLONE_NEWNS | (_CLONE_NEWUSER if new_user_namespace else 0)
    flags |= _CLONE_NEWPID if new_pid_namespace else 0
    what = (
        "unshare("
        + "|".join(
            name
            for name, bit in (
                ("CLONE_NEWUSER", _CLONE_NEWUSER),
                ("CLONE_NEWNS", _CLONE_NEWNS),
                ("CLONE_NEWPID", _CLONE_NEWPID),
            )
            if flags & bit
        )
        + ")"
    )
    _check(_libc.unshare(ctypes.c_int(flags)), what)
    if new_user_namespace:
        for name, text in (
            ("setgroups", "deny"),
            ("uid_map", f"{uid} {uid} 1"),
            ("gid_map", f"{gid} {gid} 1"),
        ):
            fd = os.open(f"/proc/self/{name}", os.O_WRONLY | os.O_CLOEXEC)
            try:
                os.write(fd, text.encode())
            finally:
                os.close(fd)
    _check(
        _libc.mount(None, b"/", None, ctypes.c_ulong(_MS_REC | _MS_PRIVATE), None), "mount --make-rprivate /"
    )


def bind(path: str, *, read_only: bool) -> None:
    """Bind ``path`` (and the mounts beneath it) onto itself: a rename or removal of it now answers EBUSY;
    with ``read_only`` every write beneath it answers EROFS."""
    encoded = os.fsencode(path)
    _check(
        _libc.mount(encoded, encoded, None, ctypes.c_ulong(_MS_BIND | _MS_REC), None),
        f"bind mount of {path!r}",
    )
    if read_only:
        attr = _MountAttr(_MOUNT_ATTR_RDONLY, 0, 0, 0)
        _check(
            _libc.syscall(
                ctypes.c_long(_SYS_MOUNT_SETATTR),
                ctypes.c_int(_AT_FDCWD),
                encoded,
                ctypes.c_uint(_AT_RECURSIVE),
                ctypes.byref(attr),
                ctypes.c_size_t(ctypes.sizeof(attr)),
            ),
            f"mount_setattr(MOUNT_ATTR_RDONLY) of {path!r}",
        )


def fork() -> int:
    """fork(2) as libc does it, without Python's before- and after-fork work (``os.register_at_fork``
    handlers, the thread and lock resets): only for a single-threaded process where that work is done
    already (a forked child before its exec), to spare a copy of the pages it touches."""
    return _check(_libc_gil.fork(), "fork")


def close_on_exec_from(low: int) -> None:
    """Mark every descriptor from ``low`` up close-on-exec (``close_range(CLOSE_RANGE_CLOEXEC)``, Linux 5.11):
    what ``subprocess``'s ``close_fds`` does, for a process that spawns rather than execs itself."""
    _check(
        _libc.syscall(
            ctypes.c_long(_SYS_CLOSE_RANGE),
            ctypes.c_uint(low),
            ctypes.c_uint(0xFFFFFFFF),
            ctypes.c_uint(_CLOSE_RANGE_CLOEXEC),
        ),
        "close_range(CLOSE_RANGE_CLOEXEC)",
    )


def parent_death_signal(signum: int) -> None:
    """Have the kernel send ``signum`` to the calling process when the thread that forked it ends."""
    _check(_prctl(_PR_SET_PDEATHSIG, signum), "prctl(PR_SET_PDEATHSIG)")


def clone_tree(path: str) -> int:
    """A detached copy of the mount tree at ``path`` (the mounts beneath it included), as a descriptor
    (close-on-exec); ``attach_tree`` puts it somewhere."""
    return _check(
        _libc.syscall(
            ctypes.c_long(_SYS_OPEN_TREE),
            ctypes.c_int(_AT_FDCWD),
            os.fsencode(path),
            ctypes.c_uint(_OPEN_TREE_CLONE | os.O_CLOEXEC | _AT_RECURSIVE),
        ),
        f"open_tree of {path!r}",
    )


def attach_tree(fd: int, target: str, *, read_only: bool) -> None:
    """Mount the detached tree ``fd`` (``clone_tree``) at ``target``, read-only (every mount in it) on
    request."""
    if read_only:
        attr = _MountAttr(_MOUNT_ATTR_RDONLY, 0, 0, 0)
        _check(
            _libc.syscall(
                ctypes.c_long(_SYS_MOUNT_SETATTR),
                ctypes.c_int(fd),
                b"",
                ctypes.c_uint(_AT_EMPTY_PATH | _AT_RECURSIVE),
                ctypes.byref(attr),
                ctypes.c_size_t(ctypes.sizeof(attr)),
            ),
            f"mount_setattr(MOUNT_ATTR_RDONLY) for {target!r}",
        )
    _check(
        _libc.syscall(
            ctypes.c_long(_SYS_MOVE_MOUNT),
            ctypes.c_int(fd),
            b"",
            ctypes.c_int(_AT_FDCWD),
            os.fsencode(target),
            ctypes.c_uint(_MOVE_MOUNT_F_EMPTY_PATH),
        ),
        f"move_mount to {target!r}",
    )


def mount_tmpfs(target: str) -> None:
    """An empty tmpfs (no devices, no setuid) at ``target``."""
    _check(
        _libc.mount(
            b"tmpfs", os.fsencode(target), b"tmpfs", ctypes.c_ulong(_MS_NOSUID | _MS_NODEV), b"mode=0755"
        ),
        f"mount tmpfs on {target!r}",
    )


def mount_proc(target: str) -> None:
    """A proc filesystem of the caller's PID namespace at ``target`` (no devices, setuid or exec)."""
    _check(
        _libc.mount(b"proc", os.fsencode(target), b"proc", ctypes.c_ulong(_MS_NOSUID | _MS_NODEV | 8), None),
        f"mount proc on {target!r}",
    )


def enter_root(new_root: str) -> None:
    """Make ``new_root`` (a mount point) the root of this mount namespace, the old root detached (gone
    for every process in it), and make the new root's own mount read-only."""
    os.chdir(new_root)
    _check(_libc.syscall(ctypes.c_long(_SYS_PIVOT_ROOT), b".", b"."), "pivot_root")
    _check(_libc.umount2(b".", ctypes.c_int(_MNT_DETACH)), "umount2 of the old root")
    os.chdir("/")
    attr = _MountAttr(_MOUNT_ATTR_RDONLY, 0, 0, 0)
    _check(
        _libc.syscall(
            ctypes.c_long(_SYS_MOUNT_SETATTR),
            ctypes.c_int(_AT_FDCWD),
            b"/",
            ctypes.c_uint(0),
            ctypes.byref(attr),
            ctypes.c_size_t(ctypes.sizeof(attr)),
        ),
        "mount_setattr(MOUNT_ATTR_RDONLY) of the new root",
    )
