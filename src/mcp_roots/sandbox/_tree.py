"""The child's whole tree ends with it: a PID namespace of its own, whose first process reaps and whose end
kills every process in it, whatever session or group it moved to (``split_tree``, ``end``).
"""

# The forked child (single-threaded, unshare(CLONE_NEWPID) done) forks the namespace's first process, which
# either starts the program itself (``first_starts``: it confines itself and spawns it, then passes signals
# on to it) or forks the process that confines itself and execs the program. The forked child stays outside
# as the caller's Popen: it passes signals on, and exits with the program's status once the namespace is
# gone. ConfinedProcess.wait() waits for that end too (after a SIGKILL).

from __future__ import annotations

import contextlib
import os
import resource
import select
import signal
import subprocess
import sys
from collections.abc import Callable
from typing import Any, NoReturn

from .._sys import privileges

__all__ = ["FORWARDED", "ConfinedProcess", "end", "read_all", "split_tree", "tree_command"]

#: The signals the process outside passes on to the program (``Popen.send_signal``/``terminate``).
FORWARDED: tuple[int, ...] = (
    signal.SIGHUP,
    signal.SIGINT,
    signal.SIGQUIT,
    signal.SIGTERM,
    signal.SIGUSR1,
    signal.SIGUSR2,
    signal.SIGWINCH,
    signal.SIGALRM,
)


def _close_all_but(*keep: int) -> None:
    # Every descriptor the fork inherited (the caller's pipes, subprocess's error pipe) but ``keep``: the
    # caller's Popen returns, and its pipes end, when only the program holds them.
    low = 0
    for fd in sorted(keep):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, 1 << 20)


def read_all(fd: int) -> bytes:
    """Everything written to the pipe ``fd`` until its last writer closes it."""
    chunks = []
    while chunk := os.read(fd, 64):
        chunks.append(chunk)
    return b"".join(chunks)


def split_tree(tree_fd: int, first_starts: Callable[[], int] | None = None) -> None:
    """In the forked child (its next child starts a PID namespace): fork the namespace's first process and,
    from it, the program's process, where this returns. The first process writes its pid to ``tree_fd``
    for the caller. Never returns in the other two: each ends with ``os._exit``. With ``first_starts``
    the first process starts the program itself by calling it (it returns the program's pid) and this
    never returns: signals reach the program through the first process."""
    me = os.pidfd_open(os.getpid())
    status_r, status_w = os.pipe()
    pid_r, pid_w = os.pipe()
    first = privileges.fork()
    if first == 0:
        if first_starts is not None:
            _first_process_starting(me, status_r, status_w, pid_r, pid_w, tree_fd, first_starts)
        if _first_process(me, status_r, status_w, pid_r, pid_w, tree_fd):
            return  # the program's process (the first process never returns: it exits)
    try:
        _outside(first, me, status_r, status_w, pid_r, pid_w, tree_fd, relay=first_starts is not None)
    finally:
        os._exit(255)


def _outside(
    first: int, me: int, status_r: int, status_w: int, pid_r: int, pid_w: int, tree_fd: int, *, relay: bool
) -> None:
    for fd in (status_w, pid_w, me):
        os.close(fd)
    with contextlib.suppress(OSError):
        os.write(tree_fd, str(first).encode())
    _close_all_but(status_r, pid_r)
    told = read_all(pid_r)
    os.close(pid_r)
    program = first if relay else int(told) if told.isdigit() else 0  # relay: the first process passes on

    def forward(signum: int, _frame: Any) -> None:
        with contextlib.suppress(OSError):
            os.kill(program, signum)

    if program:
        for signum in FORWARDED:
            signal.signal(signum, forward)
    said = read_all(status_r)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(first, 0)  # returns once the namespace is empty: its first process ends last
    status = int(said) if said.isdigit() else signal.SIGKILL
    if os.WIFEXITED(status):
        os._exit(os.WEXITSTATUS(status))
    signum = os.WTERMSIG(status)
    with contextlib.suppress(OSError, ValueError):  # SIGKILL keeps its action; a core stays the program's
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        signal.signal(signum, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [signum])
    os.kill(os.getpid(), signum)
    os._exit(128 + signum)


def _die_with_outside(me: int) -> None:
    """A first process ends when the process outside does (SIGKILL at its death), or now if it has ended
    already (``me``: a pidfd of the process outside, readable once it has exited)."""
    privileges.parent_death_signal(signal.SIGKILL)
    poller = select.poll()
    poller.register(me, select.POLLIN)
    if poller.poll(0):  # the process outside ended before the line above: nothing to wait for
        os._exit(1)


def _first_process(me: int, status_r: int, status_w: int, pid_r: int, pid_w: int, tree_fd: int) -> bool:
    """The namespace's first process: True in the program's process (forked from it), else it reaps until
    the program ends, tells its status, and exits (the kernel then kills the rest of the namespace)."""
    try:
        for signum in (*FORWARDED, signal.SIGPIPE):
            signal.signal(signum, signal.SIG_DFL)  # a first process ignores what it does not handle
        os.close(status_r)
        os.close(pid_r)
        _die_with_outside(me)
        program = privileges.fork()
        if program == 0:
            os.setsid()  # a session and group of its own again, inside (setpriority(PRIO_PGRP, 0) is its own)
            os.close(status_w)
            os.close(me)
            with contextlib.suppress(OSError):
                os.close(tree_fd)
            with contextlib.suppress(OSError):  # /proc is still the caller's: its number there
                os.write(pid_w, os.readlink("/proc/self").encode())
            os.close(pid_w)
            return True
        _reap_until(program, status_w)
    except BaseException:
        os._exit(255)


def _reap_until(program: int, status_w: int) -> NoReturn:
    """The first process's last step: reap every process of the namespace until ``program`` ends, write its
    status to ``status_w`` and exit (the kernel then kills the rest of the namespace)."""
    _close_all_but(status_w)
    while True:
        pid, status = os.waitpid(-1, 0)
        if pid == program:
            os.write(status_w, str(status).encode())
            os._exit(0)


def _first_process_starting(
    me: int, status_r: int, status_w: int, pid_r: int, pid_w: int, tree_fd: int, starts: Callable[[], int]
) -> NoReturn:
    """The namespace's first process that starts the program itself (``starts``: it confines this process
    and spawns the program): it passes the signals the process outside sends on to the program, reaps
    until the program ends, tells its status and exits (the kernel then kills the rest of the namespace)."""
    try:
        for fd in (status_r, pid_r, pid_w):
            os.close(fd)
        _die_with_outside(me)
        os.close(me)
        with contextlib.suppress(OSError):
            os.close(tree_fd)
        # Out of the outside's group: a signal to that group (mcp-roots run passes Ctrl-C on so) reaches
        # the program once, through the process outside.
        os.setsid()
        program = 0

        def relay(signum: int, _frame: Any) -> None:
            if program:
                with contextlib.suppress(OSError):
                    os.kill(program, signum)

        # A first process gets from outside only the signals it handles: these, held until the program
        # exists (it starts with none blocked).
        signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED)
        for signum in FORWARDED:
            signal.signal(signum, relay)
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        program = starts()
        signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED)
        _reap_until(program, status_w)
    except BaseException:
        os._exit(255)


class ConfinedProcess(subprocess.Popen[Any]):
    """A ``subprocess.Popen`` whose child heads a PID namespace of its own: ``wait()`` returns once every
    process it started is gone too, and ``end()`` ends them all."""

    _tree: int | None = None

    def hold_tree(self, pidfd: int | None) -> None:
        """Keep ``pidfd`` (the namespace's first process): its end is the end of the whole tree."""
        self._tree = pidfd

    def wait(self, timeout: float | None = None) -> int:
        code = super().wait(timeout)
        tree = self._tree
        if tree is not None:
            poller = select.poll()
            poller.register(tree, select.POLLIN)
            if not poller.poll(None if timeout is None else max(0, int(timeout * 1000))):
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
            self._tree = None
            with contextlib.suppress(OSError):
                os.close(tree)
        return code

    def end(self) -> None:
        """SIGKILL the child and every process descended from it, whatever session or group it moved to,
        and return once all are gone (reaped)."""
        end(self)

    def __del__(self) -> None:
        tree, self._tree = self._tree, None
        if tree is not None:
            with contextlib.suppress(OSError):
                os.close(tree)
        super().__del__()


def end(process: subprocess.Popen[Any]) -> None:
    """End a child started by the sandbox and everything it started: SIGKILL to its process group (it heads
    a session of its own) and reap it; a ``ConfinedProcess`` (a PID namespace) also waits until every
    descendant is gone, those that left the group included. Returns at once for one already ended."""
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(process.pid, signal.SIGKILL)
    process.wait()


def tree_command(argv: list[str]) -> list[str]:
    """``argv`` through the launcher (``_launch``): for a program started by someone else's spawn (an SDK's),
    unconfined, whose every descendant ends with it where the kernel allows a PID namespace."""
    return [sys.executable, "-m", "mcp_roots.sandbox._launch", "--", *argv]
