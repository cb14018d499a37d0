"""The processes a probe starts: each server runs in a process group of its own, found again through /proc
and killed whole when the probe ends, even by Ctrl-C; nothing it did not start is ever signalled. And who
listens on a port: a server is ready when the listener is its own, not whoever else took the port.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time

__all__ = ["child_groups", "descends_from", "kill_groups", "kill_strays", "listeners"]


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, process group) of ``pid``, or None when it is gone (or there is no /proc)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read()
    except OSError:
        return None
    fields = text[text.rindex(b")") + 2 :].split()
    return int(fields[1]), int(fields[2])


def _pids() -> list[int]:
    try:
        return [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return []


def child_groups() -> set[int]:
    """The process groups led by children of this process (what start_new_session made)."""
    me = os.getpid()
    groups: set[int] = set()
    for pid in _pids():
        found = _stat(pid)
        if found is not None and found[0] == me and found[1] == pid:
            groups.add(pid)
    return groups


def kill_groups(groups: set[int]) -> None:
    """SIGKILL each group that still has a member, and return once none has a live one (a server started
    through ``tree_command`` heads a PID namespace: its first process, in the group, ends only after every
    process in it, those that left the group too). A group id cannot be reused while a member lives, so
    this never reaches a process the probe did not start."""
    alive = {found[1] for pid in _pids() if (found := _stat(pid)) is not None}
    for group in groups & alive:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signal.SIGKILL)
    for _ in range(500):  # a bound (about 5 s): SIGKILL cannot be refused, a process in D state may wait
        if not groups & {found[1] for pid in _pids() if (found := _live(pid)) is not None}:
            return
        time.sleep(0.01)


def _live(pid: int) -> tuple[int, int] | None:
    """``_stat`` of a process that is not a zombie (a zombie has ended; its parent has yet to reap it)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read()
    except OSError:
        return None
    if text[text.rindex(b")") + 2 :][:1] == b"Z":
        return None
    return _stat(pid)


def _in_tree(pid: int, top: str) -> bool:
    """Whether process ``pid`` works in, or holds something open in, the directory tree ``top``."""
    prefix = top.rstrip("/") + "/"
    try:
        links = [os.readlink(f"/proc/{pid}/cwd")]
    except OSError:
        return False
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd")[:4096]:
            with contextlib.suppress(OSError):
                links.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
    return any(link == top or link.startswith(prefix) for link in links)


def kill_strays(top: str) -> int:
    """SIGKILL every other process that works in or holds open something beneath ``top`` (the scratch tree: a
    server's child that left its process group, a daemon it started); through a pidfd checked again, so a
    reused pid is never signalled. The number killed."""
    me = os.getpid()
    killed = 0
    for pid in _pids():
        if pid == me or not _in_tree(pid, top):
            continue
        try:
            pidfd = os.pidfd_open(pid)
        except OSError:
            continue
        try:
            if _in_tree(pid, top):  # still the process judged above: the pidfd now pins it
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
                killed += 1
        except OSError:
            pass
        finally:
            os.close(pidfd)
    return killed


def descends_from(pid: int, ancestor: int) -> bool:
    """True when ``pid`` is ``ancestor`` or one of its descendants (through /proc)."""
    for _ in range(64):  # a bound: parent chains are short, and a vanished process ends the walk
        if pid == ancestor:
            return True
        found = _stat(pid)
        if found is None or found[0] in (0, pid):
            return False
        pid = found[0]
    return False


def listeners(port: int) -> set[int] | None:
    """The processes that hold a listening TCP socket on ``port`` (any address, IPv4 or IPv6), or None where
    this cannot be told (no /proc): a port picked free a moment ago may since have gone to another server."""
    sockets: set[str] = set()
    readable = False
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, encoding="ascii") as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        readable = True
        for row in rows:
            fields = row.split()  # sl local_address rem_address st ... inode
            if len(fields) > 9 and fields[3] == "0A" and int(fields[1].rpartition(":")[2], 16) == port:
                sockets.add(f"socket:[{fields[9]}]")
    if not readable:
        return None
    holders: set[int] = set()
    for pid in _pids() if sockets else ():
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    if os.readlink(f"/proc/{pid}/fd/{fd}") in sockets:
                        holders.add(pid)
                        break
    return holders
