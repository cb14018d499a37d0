"""seccomp-BPF through ctypes.
The system-call filter a confined child gets beside its Landlock ruleset.
"""

# ``program(network=..., write=..., path_metadata=...)`` builds the filter (x86_64 only),
# ``apply_to_thread()`` installs it on the calling thread (inherited by what it creates afterwards;
# irreversible), ``probe()`` says whether the kernel can.
# Only this module knows the filter's syscall numbers and the layout of ``struct seccomp_data``.

from __future__ import annotations

import ctypes
import errno
import os
import struct
import sys
from collections.abc import Iterable
from functools import lru_cache

__all__ = [
    "DENIED_PATH_METADATA",
    "DESCRIPTOR_METADATA",
    "FILE_SETATTR",
    "IOCTLS_REFUSED",
    "OTHER_PROCESS_CALLS",
    "REFUSED_ALWAYS",
    "apply_to_thread",
    "prepared",
    "probe",
    "program",
]

AUDIT_ARCH_X86_64 = 0xC000003E
_X32_SYSCALL_BIT = 0x40000000
_LAST_KNOWN_SYSCALL = 469  # file_setattr (Linux 6.17); numbers above answer ENOSYS (a filter cannot
# judge a system call it does not know: a newer kernel's path-based metadata call would pass)

# x86_64 system call numbers (arch/x86/entry/syscalls/syscall_64.tbl).
_IOCTL = 16
_SOCKET = 41
_CONNECT = 42
_SOCKETPAIR = 53
_UTIMENSAT = 280
_IO_URING = (425, 426, 427)  # setup, enter, register: io_uring runs socket/connect/setxattr past the filter

#: Metadata by path (or by a descriptor plus a path, which reaches any file an O_PATH descriptor can
#: name): chmod, chown, lchown, utime, setxattr, lsetxattr, removexattr, lremovexattr, utimes, fchownat,
#: futimesat, fchmodat, fchmodat2, setxattrat, removexattrat, file_setattr. Refused with EPERM. The
#: descriptor forms (fchmod, fchown, fsetxattr, fremovexattr, futimens = utimensat(fd, NULL)) stay allowed.
DENIED_PATH_METADATA: tuple[int, ...] = (
    90,
    92,
    94,
    132,
    188,
    189,
    197,
    198,
    235,
    260,
    261,
    268,
    452,
    463,
    466,
    469,
)

#: Metadata through a descriptor: fchmod, fchown, fsetxattr, fremovexattr (and utimensat, futimens's call).
#: Refused too for a child that may not write (``write=False``): it could change the metadata of any file it
#: may open for reading and owns (the kernel checks ownership, not the open mode).
DESCRIPTOR_METADATA: tuple[int, ...] = (91, 93, 190, 199)

#: file_setattr (inode flags and project attributes by path): refused even with ``path_metadata=True``,
#: like the FS_IOC_SETFLAGS/FS_IOC_FSSETXATTR ioctls below (a build does not set immutable flags).
FILE_SETATTR = 469

#: ioctl requests refused whatever the descriptor: typing into a terminal (TIOCSTI, TIOCLINUX) and setting
#: inode flags or project attributes (immutable, append-only) through a descriptor opened for reading.
IOCTLS_REFUSED: tuple[int, ...] = (0x5412, 0x541C, 0x40086602, 0x40046602, 0x401C5820)

#: Objects a child did not make and cannot be confined to its own: System V IPC (shmget, shmat, shmctl,
#: semget, semop, semctl, shmdt, msgget, msgsnd, msgrcv, msgctl, semtimedop), the keyrings (add_key,
#: request_key, keyctl), perf_event_open, userfaultfd, and every inotify and fanotify call (inotify_init,
#: inotify_add_watch, inotify_rm_watch, inotify_init1, fanotify_init, fanotify_mark): a watch needs no
#: read right on what it watches, and the filter cannot see which folder it names. Refused with EPERM.
REFUSED_ALWAYS: tuple[int, ...] = (
    29, 30, 31, 64, 65, 66, 67, 68, 69, 70, 71, 220,
    248, 249, 250,
    298, 323,
    253, 254, 255, 294, 300, 301,
)  # fmt: skip

#: Calls that change another process's limits, scheduling or memory placement, by the pid in their first
#: argument: prlimit64, sched_setparam, sched_setscheduler, sched_setaffinity, sched_setattr,
#: migrate_pages, move_pages. Allowed for pid 0 (the caller itself) only: EPERM for any other pid, the
#: caller's own pid or thread id spelt out included (a filter cannot know it).
OTHER_PROCESS_CALLS: tuple[int, ...] = (302, 142, 144, 203, 314, 256, 279)
#: setpriority(which, who, prio) and ioprio_set(which, who, ioprio): allowed for who 0 with which the
#: process or the process group (the child's own: it starts a session of its own); the user (every
#: process of the uid) and any other id answer EPERM.
_SETPRIORITY = 141
_IOPRIO_SET = 251
_PRIO_PROCESS, _PRIO_PGRP = 0, 1
_IOPRIO_WHO_PROCESS, _IOPRIO_WHO_PGRP = 1, 2

_AF_UNIX = 1
_SOCK_STREAM = 1
_SOCK_SEQPACKET = 5
_SOCK_FLAGS = 0o2000000 | 0o4000  # SOCK_CLOEXEC | SOCK_NONBLOCK

# classic BPF opcodes and seccomp return values (linux/filter.h, linux/seccomp.h)
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_AND_K = 0x54
_RET_K = 0x06
_RET_KILL_PROCESS = 0x80000000
_RET_ERRNO = 0x00050000
_RET_ALLOW = 0x7FFF0000

# struct seccomp_data: int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6] (little endian here)
_NR = 0
_ARCH = 4


def _arg_low(index: int) -> int:
    return 16 + 8 * index


def _arg_high(index: int) -> int:
    return 16 + 8 * index + 4


_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_SYS_SECCOMP = 317
_SECCOMP_GET_ACTION_AVAIL = 2


class _SockFilter(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_uint16),
        ("jt", ctypes.c_uint8),
        ("jf", ctypes.c_uint8),
        ("k", ctypes.c_uint32),
    ]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


# An instruction: (code, k, jump-if-true label, jump-if-false label); labels resolve to relative offsets.
_Op = tuple[int, int, str | None, str | None]


def _assemble(ops: Iterable[_Op | str]) -> bytes:
    """Resolve labels (bare strings mark a position) into a packed ``struct sock_filter`` array."""
    listing: list[_Op] = []
    where: dict[str, int] = {}
    for op in ops:
        if isinstance(op, str):
            where[op] = len(listing)
        else:
            listing.append(op)
    packed = bytearray()
    for index, (code, k, on_true, on_false) in enumerate(listing):
        jt = where[on_true] - index - 1 if on_true else 0
        jf = where[on_false] - index - 1 if on_false else 0
        if not (0 <= jt <= 255 and 0 <= jf <= 255):
            raise ValueError("seccomp filter jump out of range")
        packed += struct.pack("=HBBI", code, jt, jf, k)
    return bytes(packed)


@lru_cache(maxsize=8)
def program(*, network: bool, write: bool = True, path_metadata: bool = False) -> bytes:
    """The filter for a confined child. Always: the architecture is x86_64 (else the process is killed: an
    i386 or x32 system call would bypass every rule below), path-based metadata calls and the ioctls above
    answer EPERM, io_uring answers EPERM, unknown newer calls ENOSYS; System V IPC, keyrings,
    perf_event_open, userfaultfd, inotify and fanotify answer EPERM (``REFUSED_ALWAYS``); limits, priority,
    scheduling and memory placement only of the caller itself (``OTHER_PROCESS_CALLS``, setpriority,
    ioprio_set). With ``network=False`` also:
    ``socket()`` of every family, ``connect()``, and ``socketpair()`` other than a connected AF_UNIX
    stream or seqpacket pair (a datagram pair could ``sendto`` a socket file) answer EPERM. With
    ``write=False`` the descriptor forms of the metadata calls answer EPERM as well. ``path_metadata=True``
    (only with ``write=True``) leaves chmod/chown/utime/xattr by path alone, outside the roots too: the
    filter cannot see paths and Landlock has no right for them; ``file_setattr`` stays refused."""
    if path_metadata and not write:
        raise ValueError("path_metadata=True needs write=True (a read-only child has no metadata to change)")
    ops: list[_Op | str] = [
        (_LD_W_ABS, _ARCH, None, None),
        (_JEQ_K, AUDIT_ARCH_X86_64, None, "kill"),
        (_LD_W_ABS, _NR, None, None),
        (_JGE_K, _X32_SYSCALL_BIT, "kill", None),
        (_JGE_K, _LAST_KNOWN_SYSCALL + 1, "enosys", None),
    ]
    by_path = (FILE_SETATTR,) if path_metadata else DENIED_PATH_METADATA
    refused = (*by_path, *_IO_URING, *(() if write else (*DESCRIPTOR_METADATA, _UTIMENSAT)))
    refused = (*refused, *REFUSED_ALWAYS)
    ops += [(_JEQ_K, number, "eperm", None) for number in refused]
    ops += [(_JEQ_K, number, "self_only", None) for number in OTHER_PROCESS_CALLS]
    ops += [(_JEQ_K, _SETPRIORITY, "setpriority", None), (_JEQ_K, _IOPRIO_SET, "ioprio_set", None)]
    if not path_metadata:
        ops += [(_JEQ_K, _UTIMENSAT, "utimensat", None)]
    ops += [(_JEQ_K, _IOCTL, "ioctl", None)]
    if not network:
        ops += [
            (_JEQ_K, _SOCKET, "eperm", None),
            (_JEQ_K, _CONNECT, "eperm", None),
            (_JEQ_K, _SOCKETPAIR, "socketpair", None),
        ]
    ops += [(_RET_K, _RET_ALLOW, None, None)]
    # utimensat(fd, NULL, times, flags) is futimens(fd): allowed; with a path it is refused.
    ops += [
        "utimensat",
        (_LD_W_ABS, _arg_low(1), None, None),
        (_JEQ_K, 0, None, "eperm"),
        (_LD_W_ABS, _arg_high(1), None, None),
        (_JEQ_K, 0, "allow", "eperm"),
    ]
    # A pid is an int to the kernel: the low word decides (a set high word with a zero low word is pid 0).
    ops += ["self_only", (_LD_W_ABS, _arg_low(0), None, None), (_JEQ_K, 0, "allow", "eperm")]
    ops += [
        "setpriority",
        (_LD_W_ABS, _arg_low(0), None, None),
        (_JEQ_K, _PRIO_PROCESS, "who_zero", None),
        (_JEQ_K, _PRIO_PGRP, "who_zero", "eperm"),
        "ioprio_set",
        (_LD_W_ABS, _arg_low(0), None, None),
        (_JEQ_K, _IOPRIO_WHO_PROCESS, "who_zero", None),
        (_JEQ_K, _IOPRIO_WHO_PGRP, "who_zero", "eperm"),
        "who_zero",
        (_LD_W_ABS, _arg_low(1), None, None),
        (_JEQ_K, 0, "allow", "eperm"),
    ]
    # The kernel reads an ioctl request as an unsigned int: compare the low word only.
    ops += ["ioctl", (_LD_W_ABS, _arg_low(1), None, None)]
    ops += [(_JEQ_K, request, "eperm", None) for request in IOCTLS_REFUSED]
    ops += [(_RET_K, _RET_ALLOW, None, None)]
    if not network:
        ops += [
            "socketpair",
            (_LD_W_ABS, _arg_low(0), None, None),
            (_JEQ_K, _AF_UNIX, None, "eperm"),
            (_LD_W_ABS, _arg_low(1), None, None),
            (_AND_K, 0xFFFFFFFF & ~_SOCK_FLAGS, None, None),
            (_JEQ_K, _SOCK_STREAM, "allow", None),
            (_JEQ_K, _SOCK_SEQPACKET, "allow", "eperm"),
        ]
    ops += [
        "allow",
        (_RET_K, _RET_ALLOW, None, None),
        "eperm",
        (_RET_K, _RET_ERRNO | errno.EPERM, None, None),
        "enosys",
        (_RET_K, _RET_ERRNO | errno.ENOSYS, None, None),
        "kill",
        (_RET_K, _RET_KILL_PROCESS, None, None),
    ]
    return _assemble(ops)


_libc: ctypes.CDLL | None = None


def _lib() -> ctypes.CDLL:
    global _libc
    if _libc is None:
        lib = ctypes.CDLL(None, use_errno=True)
        lib.syscall, lib.prctl  # noqa: B018 (bound now, in the parent, not in each forked child)
        _libc = lib
    return _libc


@lru_cache(maxsize=1)
def probe() -> str | None:
    """None where this process can install the filter, else the reason (for ``doctor`` and refusals)."""
    if sys.platform != "linux":
        return f"seccomp is a Linux feature; this is {sys.platform}"
    machine = os.uname().machine  # what platform.machine() reads, without importing platform
    if machine != "x86_64" or struct.calcsize("P") != 8:
        return f"the system-call filter is written for x86_64 only; this is {machine}"
    for action in (_RET_ERRNO, _RET_KILL_PROCESS):
        value = ctypes.c_uint32(action)
        result = _lib().syscall(
            ctypes.c_long(_SYS_SECCOMP),
            ctypes.c_uint(_SECCOMP_GET_ACTION_AVAIL),
            ctypes.c_uint(0),
            ctypes.byref(value),
        )
        if result != 0:
            code = ctypes.get_errno()
            return f"the kernel ({os.uname().release}) refuses seccomp filters: {os.strerror(code)}"
    return None


@lru_cache(maxsize=8)
def prepared(filter_program: bytes) -> tuple[_SockFprog, ctypes.Array[_SockFilter]]:
    """``filter_program`` as the kernel takes it (kept alive together). Made before a fork, so the child
    only installs it."""
    count = len(filter_program) // ctypes.sizeof(_SockFilter)
    filters = (_SockFilter * count).from_buffer_copy(filter_program)
    return _SockFprog(count, filters), filters


def apply_to_thread(filter_program: bytes) -> None:
    """Install ``filter_program`` on the calling thread (no_new_privs must already be set). Irreversible."""
    fprog, _ = prepared(filter_program)
    if (
        _lib().prctl(
            ctypes.c_int(_PR_SET_SECCOMP),
            ctypes.c_ulong(_SECCOMP_MODE_FILTER),
            ctypes.byref(fprog),
            ctypes.c_ulong(0),
            ctypes.c_ulong(0),
        )
        != 0
    ):
        code = ctypes.get_errno()
        raise OSError(code, f"prctl(PR_SET_SECCOMP): {os.strerror(code)}")
