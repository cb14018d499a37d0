"""Every promise of the sandbox, attempted for real on this machine (``mcp-roots doctor``): each attempt
(``_sys/attempts.py``) runs once unconfined, the control, and once confined, in a scratch tree with a
root, a ``.git`` inside it and a folder outside, against this very process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .._sys import attempts
from ..errors import SandboxUnavailable
from ._spawn import run

__all__ = ["Proof", "prove"]


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
        "Landlock",
        "test_sandbox.py",
        False,
        True,
        ("read", "{outside}/secret"),
    ),
    (
        "write outside the roots (write=True)",
        "Landlock",
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
    ("signal this process", "Landlock ABI 6 signal scope", "test_sandbox.py", False, True, ("kill", "{me}")),
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


def _outcome(result: subprocess.CompletedProcess[str]) -> dict[str, object]:
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


def prove(timeout: float = 30.0) -> list[Proof]:
    """Attempt every promise here and say what held it (see the module docstring)."""
    script = attempts.__file__
    command = [sys.executable, "-I", "-S", script]
    proofs: list[Proof] = []
    with tempfile.TemporaryDirectory(prefix="mcp-roots-doctor-") as scratch:
        base = Path(scratch).resolve()
        root, outside = base / "root", base / "outside"
        (root / ".git" / "hooks").mkdir(parents=True)
        (root / ".git" / "config").write_text("[core]\n")
        outside.mkdir()
        (outside / "secret").write_text("secret\n")
        fill = {"me": str(os.getpid()), "root": str(root), "outside": str(outside)}
        for promise, mechanism, test, write, network, attempt in _ATTEMPTS:
            argv = [*command, *(part.format(**fill) for part in attempt)]
            control = _outcome(
                subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
            )
            try:
                confined = _outcome(
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
