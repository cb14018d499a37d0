"""What a confined child must not manage, tried for real.
One attempt per run, as a script of its own; it prints one JSON line.
"""

# ``python -I -S attempts.py NAME [ARG...]`` makes the attempt NAME and prints one JSON line:
# ``{"ok": true, "value": ...}`` when the kernel let it through, ``{"ok": false, "errno": N, "error":
# "EPERM"}``
# when it refused. The tests run it unconfined first (the attempt works) and then confined (it is refused);
# ``mcp-roots doctor`` runs it confined to prove each promise on this machine. Each attempt that succeeds
# changes nothing: it sets a limit, priority or host name to the value it already has. Standard library only
# (it runs in a child that may read little); system-call numbers are x86_64's.

from __future__ import annotations

import ctypes
import errno
import json
import os
import select
import socket
import sys
from collections.abc import Callable

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _sys(number: int, *args: object) -> int:
    result = int(_libc.syscall(ctypes.c_long(number), *args))
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return result


class _Rlimit(ctypes.Structure):
    _fields_ = [("cur", ctypes.c_uint64), ("max", ctypes.c_uint64)]


def prlimit(pid: str, soft: str = "") -> object:
    """prlimit64(pid, RLIMIT_NOFILE, its current value, or the soft limit ``soft``)."""
    old = _Rlimit()
    _sys(302, ctypes.c_int(int(pid)), 7, None, ctypes.byref(old))
    new = _Rlimit(int(soft) if soft else old.cur, old.max)
    _sys(302, ctypes.c_int(int(pid)), 7, ctypes.byref(new), None)
    return [new.cur, new.max]


def setpriority(which: str, who: str, value: str = "") -> object:
    """setpriority(which, who, the current priority or ``value``): which 0 process, 1 group, 2 user."""
    nice = int(value) if value else os.getpriority(int(which), int(who))
    os.setpriority(int(which), int(who), nice)
    return nice


def sched_setaffinity(pid: str) -> object:
    cpus = os.sched_getaffinity(int(pid))
    os.sched_setaffinity(int(pid), cpus)
    return len(cpus)


def sched_setscheduler(pid: str) -> object:
    policy = os.sched_getscheduler(int(pid))
    os.sched_setscheduler(int(pid), policy, os.sched_param(0))
    return policy


def sched_setparam(pid: str) -> object:
    os.sched_setparam(int(pid), os.sched_getparam(int(pid)))
    return 0


def ioprio_set(pid: str) -> object:
    """ioprio_set(IOPRIO_WHO_PROCESS, pid, best effort at the level ioprio_get reports)."""
    current = _sys(252, 1, ctypes.c_int(int(pid)))
    value = current if current >> 13 else (2 << 13 | 4)
    _sys(251, 1, ctypes.c_int(int(pid)), ctypes.c_int(value))
    return value


def migrate_pages(pid: str) -> object:
    """migrate_pages(pid) from node 0 to node 0: nothing moves."""
    mask = ctypes.c_ulong(1)
    return _sys(256, ctypes.c_int(int(pid)), ctypes.c_ulong(64), ctypes.byref(mask), ctypes.byref(mask))


def shm(key: str) -> object:
    """Attach the System V shared-memory segment ``key`` and read its first bytes."""
    _libc.shmat.restype = ctypes.c_void_p
    shmid = _sys(29, ctypes.c_int(int(key)), ctypes.c_size_t(0), 0)
    address = _libc.shmat(shmid, None, 0o10000)  # SHM_RDONLY
    if address in (None, ctypes.c_void_p(-1).value):
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return ctypes.string_at(address, 32).rstrip(b"\0").decode(errors="replace")


def msg(key: str) -> object:
    """Receive a message from the System V queue ``key`` without waiting."""
    qid = _sys(68, ctypes.c_int(int(key)), 0)
    buf = ctypes.create_string_buffer(8 + 64)
    size = _sys(70, qid, buf, ctypes.c_size_t(64), ctypes.c_long(0), 0o4000)  # IPC_NOWAIT
    return buf.raw[8 : 8 + size].decode(errors="replace")


def sem(key: str) -> object:
    """Read the first value of the System V semaphore set ``key``."""
    semid = _sys(64, ctypes.c_int(int(key)), 0, 0)
    return _sys(66, semid, 0, 12)  # GETVAL


def key(description: str) -> object:
    """Find a "user" key by description in the keyrings this process can search, and read it."""
    serial = _sys(249, b"user", description.encode(), None, 0)
    buf = ctypes.create_string_buffer(256)
    size = _sys(250, 11, serial, buf, ctypes.c_size_t(256))  # KEYCTL_READ
    return buf.raw[: min(size, 256)].decode(errors="replace")


def inotify(directory: str, wait: str = "0") -> object:
    """Watch ``directory``; with ``wait`` > 0 print "watching" and report the first name created there."""
    fd = _sys(294, os.O_CLOEXEC)
    _sys(254, fd, os.fsencode(directory), 0x100)  # IN_CREATE
    if float(wait) <= 0:
        return "watching"
    _say("watching")
    if not select.select([fd], [], [], float(wait))[0]:
        return None
    data = os.read(fd, 4096)
    length = int.from_bytes(data[12:16], sys.byteorder)
    return data[16 : 16 + length].rstrip(b"\0").decode(errors="replace")


def fanotify(directory: str) -> object:
    """fanotify_init and a mark on ``directory`` (opens of its files)."""
    fd = _sys(300, 0, os.O_RDONLY)  # FAN_CLASS_NOTIF
    _sys(301, fd, 1, ctypes.c_uint64(0x20 | 0x08000000), -100, os.fsencode(directory))  # FAN_OPEN|ON_CHILD
    return "marked"


def perf_event_open() -> object:
    attr = (ctypes.c_uint8 * 128)()
    ctypes.memmove(attr, (1).to_bytes(4, "little") + (128).to_bytes(4, "little"), 8)  # SOFTWARE, size
    return _sys(298, attr, 0, -1, -1, 0) >= 0


def userfaultfd() -> object:
    return _sys(323, os.O_CLOEXEC | 1) >= 0  # UFFD_USER_MODE_ONLY


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


def capabilities() -> object:
    """The effective, permitted, inheritable, bounding and ambient sets (hex masks)."""
    header = _CapHeader(0x20080522, 0)
    data = (ctypes.c_uint32 * 6)()
    _sys(125, ctypes.byref(header), data)
    bounding = ambient = 0
    for cap in range(64):
        found = _libc.prctl(23, ctypes.c_ulong(cap), 0, 0, 0)
        if found < 0:
            break
        bounding |= found << cap
        ambient |= max(_libc.prctl(47, 1, ctypes.c_ulong(cap), 0, 0), 0) << cap
    sets = (data[0] | data[3] << 32, data[1] | data[4] << 32, data[2] | data[5] << 32, bounding, ambient)
    return dict(
        zip(("effective", "permitted", "inheritable", "bounding", "ambient"), map(hex, sets), strict=True)
    )


def syslog() -> object:
    return _sys(103, 9, None, 0)  # SYSLOG_ACTION_SIZE_UNREAD: CAP_SYSLOG whatever dmesg_restrict says


def sethostname() -> object:
    name = socket.gethostname().encode()
    _sys(170, name, ctypes.c_size_t(len(name)))
    return name.decode()


def finit_module() -> object:
    """finit_module(-1): EBADF with CAP_SYS_MODULE (the check passed), EPERM without."""
    return _sys(313, -1, b"", 0)


def read(path: str) -> object:
    with open(path, "rb") as f:
        return len(f.read())


def write(path: str) -> object:
    """Append nothing to ``path``, opened for writing (the open is the attempt; the file is unchanged)."""
    with open(path, "ab"):
        return "opened for writing"


def rename(source: str, target: str) -> object:
    """Rename ``source`` to ``target`` and back."""
    os.rename(source, target)
    os.rename(target, source)
    return "renamed and back"


def kill(pid: str) -> object:
    os.kill(int(pid), 0)
    return "signal 0 delivered"


def tcp(port: str = "9") -> object:
    with socket.socket() as s:
        s.settimeout(2)
        try:
            s.connect(("127.0.0.1", int(port)))
        except ConnectionRefusedError:
            return "socket made, connect answered"
    return "connected"


def chmod(path: str) -> object:
    """chmod ``path`` to the mode it has (nothing changes; the call is the attempt)."""
    os.chmod(path, os.stat(path).st_mode & 0o7777)
    return "chmod by path"


def unix(path: str) -> object:
    """Connect to the unix socket file ``path``."""
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(2)
        s.connect(path)
    return "connected"


def abstract(name: str) -> object:
    """Connect to the abstract unix socket ``name``."""
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(2)
        s.connect("\0" + name)
    return "connected"


def daemon(mark: str) -> object:
    """Start a daemon (fork, setsid, fork) that sleeps 30 s with ``mark`` in its command line, and return."""
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):  # the caller's pipes end with the child, not with its daemon
                os.dup2(null, fd)
            os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(30)", mark])
        os._exit(0)
    os.wait()
    return "daemon started"


def sysv() -> object:
    """A private System V shared-memory segment, made and removed."""
    shmid = _sys(29, 0, ctypes.c_size_t(4096), 0o1600)  # IPC_PRIVATE, IPC_CREAT | 0600
    _sys(31, shmid, 0, None)  # IPC_RMID
    return shmid


def keyring() -> object:
    """The serial of the user's keyring (KEYCTL_GET_KEYRING_ID, KEY_SPEC_USER_KEYRING)."""
    return _sys(250, 0, ctypes.c_int(-4), 0)


def setuid(uid: str = "65534") -> object:
    os.setuid(int(uid))
    return os.getuid()


ATTEMPTS: dict[str, Callable[..., object]] = {
    f.__name__: f
    for f in (
        prlimit,
        setpriority,
        sched_setaffinity,
        sched_setscheduler,
        sched_setparam,
        ioprio_set,
        migrate_pages,
        shm,
        msg,
        sem,
        key,
        inotify,
        fanotify,
        perf_event_open,
        userfaultfd,
        capabilities,
        syslog,
        sethostname,
        finit_module,
        setuid,
        read,
        write,
        rename,
        kill,
        tcp,
        chmod,
        unix,
        abstract,
        daemon,
        sysv,
        keyring,
    )
}


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ATTEMPTS:
        _say(json.dumps({"ok": False, "error": f"usage: attempts.py {{{','.join(ATTEMPTS)}}} [ARG...]"}))
        return 2
    try:
        value = ATTEMPTS[argv[0]](*argv[1:])
    except OSError as exc:
        code = exc.errno or 0
        _say(json.dumps({"ok": False, "errno": code, "error": errno.errorcode.get(code, str(code))}))
        return 1
    _say(json.dumps({"ok": True, "value": value}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
