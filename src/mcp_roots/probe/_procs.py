"""The processes a probe starts: each server runs in a process group of its own, found again through /proc
and killed whole when the probe ends, even by Ctrl-C; nothing it did not start is ever signalled.
"""

from __future__ import annotations

import contextlib
import os
import signal

__all__ = ["child_groups", "kill_groups"]


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
    """SIGKILL each group that still has a member. A group id cannot be reused while a member lives, so this
    never reaches a process the probe did not start."""
    alive = {found[1] for pid in _pids() if (found := _stat(pid)) is not None}
    for group in groups & alive:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signal.SIGKILL)
