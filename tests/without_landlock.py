"""Run a command on a kernel whose Landlock looks absent: a seccomp filter answers the Landlock system calls
with an error, as a container runtime's profile or an old kernel would. ``NOSECCOMP`` instead makes the
seccomp filter look absent (the ``seccomp`` call answers ENOSYS, ``prctl(PR_SET_SECCOMP)`` EINVAL; x86_64).

    python tests/without_landlock.py ENOSYS|EPERM|EOPNOTSUPP|NOSECCOMP COMMAND [ARG...]

This is how the tests simulate "Landlock absent" honestly: the real kernel refuses the real system call,
and the code under test probes it the way it always does. The filter (x86_64 and aarch64 syscall numbers
444-446) is inherited across exec and by every child; it cannot be removed.
"""

from __future__ import annotations

import ctypes
import errno
import os
import sys

_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_SECCOMP_RET_ALLOW = 0x7FFF0000
_SECCOMP_RET_ERRNO = 0x00050000
_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_RET_K = 0x06  # BPF_RET | BPF_K
_LANDLOCK_SYSCALLS = (444, 445, 446)


class _SockFilter(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_uint16),
        ("jt", ctypes.c_uint8),
        ("jf", ctypes.c_uint8),
        ("k", ctypes.c_uint32),
    ]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def deny_landlock(error: int) -> None:
    """Install a seccomp filter that fails the Landlock system calls with ``error``."""
    program = [_SockFilter(_LD_W_ABS, 0, 0, 0)]  # A = seccomp_data.nr
    for position, number in enumerate(_LANDLOCK_SYSCALLS):
        remaining = len(_LANDLOCK_SYSCALLS) - position - 1
        # equal: jump to the "error" return after the remaining tests and the "allow" return
        program.append(_SockFilter(_JEQ_K, remaining + 1, 0, number))
    program.append(_SockFilter(_RET_K, 0, 0, _SECCOMP_RET_ALLOW))
    program.append(_SockFilter(_RET_K, 0, 0, _SECCOMP_RET_ERRNO | error))
    _install(program)


def deny_seccomp() -> None:
    """Install a filter under which no further filter can be installed (x86_64: seccomp is 317, prctl 157)."""
    program = [
        _SockFilter(_LD_W_ABS, 0, 0, 0),  # A = nr
        _SockFilter(_JEQ_K, 4, 0, 317),  # seccomp(): ENOSYS
        _SockFilter(_JEQ_K, 0, 2, 157),  # prctl(): look at its option; anything else: allow
        _SockFilter(_LD_W_ABS, 0, 0, 16),  # A = args[0] (low word)
        _SockFilter(_JEQ_K, 2, 0, _PR_SET_SECCOMP),
        _SockFilter(_RET_K, 0, 0, _SECCOMP_RET_ALLOW),
        _SockFilter(_RET_K, 0, 0, _SECCOMP_RET_ERRNO | errno.ENOSYS),
        _SockFilter(_RET_K, 0, 0, _SECCOMP_RET_ERRNO | errno.EINVAL),
    ]
    _install(program)


def _install(program: list[_SockFilter]) -> None:
    filters = (_SockFilter * len(program))(*program)
    fprog = _SockFprog(len(program), filters)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP)")


if __name__ == "__main__":
    if sys.argv[1] == "NOSECCOMP":
        deny_seccomp()
    else:
        deny_landlock(getattr(errno, sys.argv[1]))
    os.execvp(sys.argv[2], sys.argv[2:])
