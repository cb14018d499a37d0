"""The program started from the namespace's first process by ``posix_spawn`` (a vfork: none of this
process's pages copied), as ``subprocess`` would have exec'd it: its search of PATH, environment, descriptors.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .._sys import privileges
from ._plan import Confinement
from ._root import RootLayout, private_root

__all__ = ["SWITCHES_USER", "ExecFailed", "ExecPlan", "exec_plan", "first_starts", "start", "user_switch"]


class ExecFailed(Exception):
    """No candidate could be executed: ``errno`` is the one ``subprocess`` would report."""

    def __init__(self, errno_value: int) -> None:
        super().__init__(errno_value)
        self.errno = errno_value


@dataclass(frozen=True)
class ExecPlan:
    """What ``subprocess`` computes before its fork, computed the same way."""

    candidates: tuple[bytes, ...]  # the paths tried in turn (PATH searched for a bare name)
    argv: tuple[bytes, ...]
    env: Mapping[bytes, bytes] | None  # None: this process's environment
    close_fds: bool
    pass_fds: tuple[int, ...]
    shown: Any  # the executable as given: the file name of the error


def exec_plan(argv: Any, options: Mapping[str, Any]) -> ExecPlan | None:
    """``subprocess.Popen``'s own reading of ``argv`` and ``options`` (shell, executable, env, PATH), or
    None where it would take something this does not do (the caller then forks the program)."""
    shell = bool(options.get("shell", False))
    executable = options.get("executable")
    args: list[Any]
    if isinstance(argv, (str, bytes)):
        args = [argv]
    elif isinstance(argv, os.PathLike):
        if shell:
            return None  # subprocess raises TypeError: let it
        args = [argv]
    else:
        args = list(argv)
    if shell:
        args = ["/bin/sh", "-c", *args]
        if executable:
            args[0] = executable
    if not args:
        return None
    if executable is None:
        executable = args[0]
    program = os.fsencode(executable)
    env = options.get("env")
    if os.path.dirname(program):
        candidates: tuple[bytes, ...] = (program,)
    else:
        candidates = tuple(os.path.join(os.fsencode(folder), program) for folder in os.get_exec_path(env))
    return ExecPlan(
        candidates,
        tuple(os.fsencode(arg) for arg in args),
        None if env is None else {os.fsencode(k): os.fsencode(v) for k, v in env.items()},
        bool(options.get("close_fds", True)) or bool(options.get("pass_fds")),
        tuple(options.get("pass_fds", ())),
        executable,
    )


def start(plan: ExecPlan) -> int:
    """In the namespace's first process, confined already: spawn the program in a session of its own with
    no signal blocked, only 0-2 and ``pass_fds`` open in it (``close_fds``); its pid. Raises
    ``ExecFailed`` with the error ``subprocess`` would report (the first that is not ENOENT/ENOTDIR)."""
    if plan.close_fds:
        privileges.close_on_exec_from(3)
        for fd in plan.pass_fds:
            os.set_inheritable(fd, True)
    env: Mapping[Any, Any] = plan.env if plan.env is not None else os.environ
    first = 0
    last = errno.ENOENT
    for path in plan.candidates:
        try:
            os.stat(path)  # a PATH folder without it costs no process (each spawn tried takes a pid)
            return os.posix_spawn(path, list(plan.argv), env, setsid=True, setsigmask=())
        except OSError as exc:
            last = exc.errno or errno.ENOENT
            if last not in (errno.ENOENT, errno.ENOTDIR) and not first:
                first = last
    raise ExecFailed(first or last)


def first_starts(
    current: Confinement,
    layout: RootLayout | None,
    ruleset: int | None,
    spawns: ExecPlan,
    report: int,
    started: int,
) -> Callable[[], int]:
    """What the namespace's first process runs: the root of its own, the confinement (its own: the program
    inherits it), the program spawned; ``+`` on ``started`` once it runs, ``exec:ERRNO`` if no candidate
    could be executed, the cause on ``report`` for anything else."""

    def starts() -> int:
        stage = "confine"
        try:
            if layout is not None:
                private_root(layout)
            current.apply_to_current_thread(ruleset)
            stage = "exec"
            pid = start(spawns)
        except ExecFailed as exc:
            os.write(started, f"exec:{exc.errno}".encode())
            raise
        except BaseException as exc:
            os.write(report, f"{stage}:{exc}".encode(errors="replace")[:2000])
            raise
        os.write(started, b"+")
        os.close(started)
        return pid

    return starts


#: subprocess options that switch user in the child after the fork (before the child step of ``_spawn`` runs).
SWITCHES_USER = ("user", "group", "extra_groups")


def user_switch(options: dict[str, Any]) -> tuple[int | None, int | None, list[int] | None]:
    """Take ``user=``, ``group=``, ``extra_groups=`` out of ``options`` as numbers (names looked up here, in
    the parent, as subprocess does): the child step switches itself, after emptying its bounding set."""
    import grp
    import pwd

    user, group, extra = (
        options.pop("user", None),
        options.pop("group", None),
        options.pop("extra_groups", None),
    )
    uid = pwd.getpwnam(user).pw_uid if isinstance(user, str) else user
    gid = grp.getgrnam(group).gr_gid if isinstance(group, str) else group
    groups = None if extra is None else [grp.getgrnam(g).gr_gid if isinstance(g, str) else g for g in extra]
    return uid, gid, groups
