"""Every promise of the sandbox, attempted for real on this machine (``mcp-roots doctor``): each attempt
(``_sys/attempts.py``) runs once unconfined, the control, and once confined, in a scratch tree with a
root, a ``.git`` inside it and a folder outside, against this very process.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from .._sys import attempts
from ..errors import SandboxUnavailable
from ._spawn import mount_namespace, run

__all__ = ["Proof", "outcome", "prove", "scratch_tree"]


@dataclass(frozen=True)
class Proof:
    """One promise: what it keeps out, the mechanism that holds it, the test that proves it, and what the
    attempt did here: ``held`` True (refused confined), False (it got through), None (not tried)."""

    promise: str
    mechanism: str
    test: str
    held: bool | None
    detail: str


_UNUSED_UID = "2147480000"

# (promise, mechanism, test, write, network, attempt): {me}, {outside}, {root} are filled in.
_ATTEMPTS: tuple[tuple[str, str, str, bool, bool, tuple[str, ...]], ...] = (
    (
        "read a file outside the roots",
        "{root_of_its_own}; Landlock",
        "test_sandbox.py",
        False,
        True,
        ("read", "{outside}/secret"),
    ),
    (
        "write outside the roots (write=True)",
        "{root_of_its_own}; Landlock",
        "test_sandbox.py",
        True,
        True,
        ("write", "{outside}/secret"),
    ),
    (
        "write .git/config in a writable root",
        "mount namespace: read-only bind",
        "test_sandbox_protect.py",
        True,
        True,
        ("write", "{root}/.git/config"),
    ),
    (
        "rename .git (to write .git2/config)",
        "mount namespace: .git bound onto itself (EBUSY)",
        "test_sandbox_protect.py",
        True,
        True,
        ("rename", "{root}/.git", "{root}/.git2"),
    ),
    (
        "chmod a file outside the roots (write=True)",
        "{root_of_its_own}",
        "test_sandbox_filter.py, test_sandbox_toolchains.py",
        True,
        True,
        ("chmod", "{outside}/secret"),
    ),
    (
        "connect to a unix socket file outside the roots, network on",
        "{root_of_its_own}",
        "test_sandbox_unix.py",
        False,
        True,
        ("unix", "{outside}/daemon.sock"),
    ),
    (
        "connect to an abstract unix socket of the host, network on",
        "Landlock ABI 6 abstract unix socket scope",
        "test_sandbox_unix.py",
        False,
        True,
        ("abstract", "{abstract}"),
    ),
    (
        "leave a daemon (setsid, fork) running after the child ends",
        "{pid_namespace}",
        "test_sandbox_tree.py",
        False,
        True,
        ("daemon", "{mark}"),
    ),
    (
        "signal this process",
        "{pid_namespace}; Landlock ABI 6 signal scope",
        "test_sandbox.py",
        False,
        True,
        ("kill", "{me}"),
    ),
    ("TCP connect with network=False", "seccomp; Landlock ABI 4", "test_sandbox.py", False, False, ("tcp",)),
    (
        "prlimit64 on this process",
        "seccomp: pid 0 only",
        "test_sandbox_reach.py",
        False,
        True,
        ("prlimit", "{me}"),
    ),
    (
        "setpriority on this process",
        "seccomp: who 0 only",
        "test_sandbox_reach.py",
        False,
        True,
        ("setpriority", "0", "{me}"),
    ),
    (
        "setpriority on every process of a user (PRIO_USER)",
        "seccomp: PRIO_USER refused",
        "test_sandbox_reach.py",
        False,
        True,
        # A uid without processes: unconfined the kernel answers ESRCH and changes nothing (the same call
        # naming one's own uid would renice every process of the user, other sessions' too).
        ("setpriority", "2", _UNUSED_UID, "0"),
    ),
    (
        "sched_setaffinity on this process",
        "seccomp: pid 0 only",
        "test_sandbox_reach.py",
        False,
        True,
        ("sched_setaffinity", "{me}"),
    ),
    (
        "ioprio_set on this process",
        "seccomp: who 0 only",
        "test_sandbox_reach.py",
        False,
        True,
        ("ioprio_set", "{me}"),
    ),
    ("System V shared memory", "seccomp", "test_sandbox_reach.py", False, True, ("sysv",)),
    ("the user's keyring", "seccomp", "test_sandbox_reach.py", False, True, ("keyring",)),
    (
        "an inotify watch outside the roots",
        "seccomp",
        "test_sandbox_reach.py",
        False,
        True,
        ("inotify", "{outside}"),
    ),
    (
        "a fanotify mark outside the roots",
        "seccomp",
        "test_sandbox_reach.py",
        False,
        True,
        ("fanotify", "{outside}"),
    ),
    ("perf_event_open", "seccomp", "test_sandbox_reach.py", False, True, ("perf_event_open",)),
    ("userfaultfd", "seccomp", "test_sandbox_reach.py", False, True, ("userfaultfd",)),
    (
        "hold a capability",
        "capset, PR_CAPBSET_DROP, ambient cleared",
        "test_sandbox_root.py",
        False,
        True,
        ("capabilities",),
    ),
    ("read the kernel log (CAP_SYSLOG)", "no capability", "test_sandbox_root.py", False, True, ("syslog",)),
    (
        "set the host name (CAP_SYS_ADMIN)",
        "no capability",
        "test_sandbox_root.py",
        False,
        True,
        ("sethostname",),
    ),
    (
        "load a kernel module (CAP_SYS_MODULE)",
        "no capability",
        "test_sandbox_root.py",
        False,
        True,
        ("finit_module",),
    ),
    (
        "setuid to another user (CAP_SETUID)",
        "no capability",
        "test_sandbox_root.py",
        False,
        True,
        ("setuid",),
    ),
)


def outcome(result: subprocess.CompletedProcess[str]) -> dict[str, object]:
    """What an attempt said (its last JSON line), or its refusal read off stderr."""
    try:
        said: dict[str, object] = json.loads(result.stdout.strip().splitlines()[-1])
        return said
    except (ValueError, IndexError):
        return {"ok": False, "error": (result.stderr.strip().splitlines() or ["no answer"])[-1][:200]}


def _got_through(name: str, said: dict[str, object]) -> bool:
    if name == "capabilities":
        value = said.get("value")
        return not (isinstance(value, dict) and all(v == "0x0" for v in value.values()))
    if name == "finit_module":  # EBADF: the capability check passed, only the descriptor was bad
        return bool(said.get("ok")) or said.get("error") == "EBADF"
    return bool(said.get("ok"))


def scratch_tree(scratch: str) -> tuple[Path, Path]:
    """The attempts' tree in the folder ``scratch`` (resolved): a root holding a repository's
    ``.git/hooks`` and ``.git/config``, and a folder outside with a secret."""
    base = Path(scratch).resolve()
    root, outside = base / "root", base / "outside"
    (root / ".git" / "hooks").mkdir(parents=True)
    (root / ".git" / "config").write_text("[core]\n")
    outside.mkdir()
    (outside / "secret").write_text("secret\n")
    return root, outside


def prove(timeout: float = 30.0) -> list[Proof]:
    """Attempt every promise here and say what held it (see the module docstring)."""
    script = attempts.__file__
    command = [sys.executable, "-I", "-S", script]
    proofs: list[Proof] = []
    with tempfile.TemporaryDirectory(prefix="mcp-roots-doctor-") as scratch:
        root, outside = scratch_tree(scratch)
        mark = f"mcp-roots-doctor-daemon-{os.getpid()}-{time.monotonic_ns()}"
        fill = {
            "me": str(os.getpid()),
            "root": str(root),
            "outside": str(outside),
            "abstract": mark,
            "mark": mark,
        }
        names = _mechanisms()
        with contextlib.ExitStack() as listening:
            for address in (str(outside / "daemon.sock"), "\0" + mark):
                listener = listening.enter_context(socket.socket(socket.AF_UNIX))
                listener.bind(address)
                listener.listen(8)
            proofs += _attempts(command, script, root, fill, names, timeout)
    return proofs


def _mechanisms() -> dict[str, str]:
    held = mount_namespace() is None
    return {
        "root_of_its_own": "a root of its own (mount namespace): not there"
        if held
        else "seccomp (no namespaces here: the fallback)",
        "pid_namespace": "a PID namespace of its own"
        if held
        else "none: no namespaces here (process group only)",
    }


def _daemons(mark: str) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        with contextlib.suppress(OSError):
            if name.isdigit() and mark.encode() in Path(f"/proc/{name}/cmdline").read_bytes():
                found.append(int(name))
    return found


def _attempts(
    command: list[str], script: str, root: Path, fill: dict[str, str], names: dict[str, str], timeout: float
) -> list[Proof]:
    proofs: list[Proof] = []
    for promise, mechanism, test, write, network, attempt in _ATTEMPTS:
        mechanism = mechanism.format(**names)
        argv = [*command, *(part.format(**fill) for part in attempt)]
        control = outcome(subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False))
        if attempt[0] == "daemon":
            control = _left(control, fill["mark"])
        try:
            confined = outcome(
                run(
                    [root],
                    argv,
                    write=write,
                    network=network,
                    extra_read=[script],
                    capture_output=True,
                    text=True,
                    timeout=timeout,
                )
            )
        except (SandboxUnavailable, OSError, subprocess.SubprocessError) as exc:
            proofs.append(Proof(promise, mechanism, test, None, f"not tried: {exc}"))
            continue
        if attempt[0] == "daemon":
            confined = _left(confined, fill["mark"])
        through = _got_through(attempt[0], confined)
        if through:
            detail = f"GOT THROUGH: {confined.get('value')}"
        elif attempt[0] == "capabilities":
            detail = f"all five sets empty (unconfined: {control.get('value')})"
        else:
            detail = f"refused ({confined.get('error')})"
            if control.get("error") == "ESRCH":
                detail += "; unconfined the kernel looked for the process (ESRCH: none, nothing changed)"
            elif not _got_through(attempt[0], control):
                detail += f"; refused unconfined too here ({control.get('error')})"
        proofs.append(Proof(promise, mechanism, test, not through, detail))
    return proofs


def _left(said: dict[str, object], mark: str) -> dict[str, object]:
    """A daemon attempt's outcome: through when its daemon is still running once the child has ended (then
    killed here)."""
    left = _daemons(mark)
    for pid in left:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    if left:
        return {"ok": True, "value": f"a daemon outlived it (pid {left[0]})"}
    return {"ok": False, "error": "its daemon ended with it" if said.get("ok") else said.get("error")}
