"""``mcp-roots doctor --sandbox srt``: every promise of the srt backend attempted live on this machine.

Each attempt runs once unconfined (the control) and once under srt, as ``_proof`` does for the native one.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .._sys import attempts
from ..errors import SandboxUnavailable
from . import _srt
from ._proof import Proof, outcome, scratch_tree

__all__ = ["prove_srt", "srt_report"]

# (promise, mechanism on this platform, the test, write, attempt)
_ATTEMPTS: tuple[tuple[str, str, str, bool, tuple[str, ...]], ...] = (
    ("read a file outside the roots", "srt denyRead", "test_srt.py", False, ("read", "{outside}/secret")),
    ("write outside the roots (write=True)", "srt allowWrite", "test_srt.py", True, ("write", "{outside}/x")),
    (
        "write .git/config in a writable root",
        "srt denyWrite (the protected set)",
        "test_srt.py",
        True,
        ("write", "{root}/.git/config"),
    ),
    (
        "TCP connect to a service on this host's loopback",
        "srt network namespace (Linux); no host named",
        "test_srt.py",
        False,
        ("tcp", "{port}"),
    ),
    ("signal this process", "srt PID namespace (Linux)", "test_srt.py", False, ("kill", "{me}")),
)


def _tree_ends(root: Path, timeout: float) -> Proof:
    promise, mechanism = "a detached daemon ends with the child", "srt: bubblewrap's PID namespace (Linux)"
    if not os.path.isdir("/proc"):
        return Proof(promise, "none on this platform", "test_srt.py", None, "not tried: no /proc here")
    marker = f"86400.{os.getpid()}"
    script = f"setsid sh -c 'sleep {marker}' & exec sleep 3600"
    process = _srt.popen([str(root)], ["/bin/sh", "-c", script], write=False, network=False, popen_kwargs={})

    def marked() -> bool:
        for entry in os.listdir("/proc"):
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as handle:
                    if marker.encode() in handle.read():
                        return True
            except OSError:
                continue
        return False

    deadline = time.monotonic() + timeout
    while not marked() and time.monotonic() < deadline:
        time.sleep(0.05)
    started = marked()
    process.kill()
    process.wait()
    while marked() and time.monotonic() < deadline:
        time.sleep(0.05)
    if not started:
        return Proof(promise, mechanism, "test_srt.py", None, "not tried: the daemon did not start")
    left = marked()
    return Proof(
        promise, mechanism, "test_srt.py", not left, "GOT THROUGH: it outlived srt" if left else "ended"
    )


def prove_srt(timeout: float = 60.0) -> list[Proof]:
    """Attempt every promise of the srt backend here (raises ``SandboxUnavailable`` without srt)."""
    runtime = _srt.find_srt()
    if not isinstance(runtime, _srt.Runtime):
        raise SandboxUnavailable(runtime)
    script = attempts.__file__
    command = [sys.executable, "-I", "-S", script]
    proofs: list[Proof] = []
    with tempfile.TemporaryDirectory(prefix="mcp-roots-doctor-", dir=_srt.scratch_bases()[0]) as scratch:
        root, outside = scratch_tree(scratch)
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        port = str(listener.getsockname()[1])
        fill = {"me": str(os.getpid()), "root": str(root), "outside": str(outside), "port": port}
        for promise, mechanism, test, write, attempt in _ATTEMPTS:
            argv = [*command, *(part.format(**fill) for part in attempt)]
            control = outcome(
                subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
            )
            try:
                process = _srt.popen(
                    [str(root)],
                    argv,
                    write=write,
                    network=False,
                    extra_read=[script],
                    popen_kwargs={"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True},
                )
                out, err = process.communicate(timeout=timeout)
            except (SandboxUnavailable, OSError, subprocess.SubprocessError) as exc:
                proofs.append(Proof(promise, mechanism, test, None, f"not tried: {exc}"))
                continue
            confined = outcome(subprocess.CompletedProcess(argv, process.returncode, out, err))
            through = bool(confined.get("ok"))
            if attempt[0] == "tcp":  # refused by the kernel is 'ok' for the attempt; only a connection counts
                through = confined.get("value") == "connected"
            said = confined.get("error") or confined.get("value")
            detail = f"GOT THROUGH: {confined.get('value')}" if through else f"refused ({said})"
            if not through and not control.get("ok"):
                detail += f"; refused unconfined too here ({control.get('error')})"
            proofs.append(Proof(promise, mechanism, test, not through, detail))
        listener.close()
        proofs.append(_tree_ends(root, timeout))
    return proofs


def srt_report(as_json: bool) -> tuple[str, bool]:
    """The srt backend's part of ``doctor``: the runtime found (or why none), each promise attempted."""
    runtime = _srt.find_srt()
    if not isinstance(runtime, _srt.Runtime):
        text = json.dumps({"backend": "srt", "available": False, "reason": runtime}) if as_json else runtime
        return (text if as_json else f"srt: unavailable: {runtime}"), False
    proofs = prove_srt()
    complete = all(proof.held is not False for proof in proofs)
    if as_json:
        document = {
            "backend": "srt",
            "available": True,
            "version": runtime.version,
            "command": list(runtime.command),
            "srt_writable": list(_srt.SRT_WRITABLE),
            "proofs": [proof.__dict__ for proof in proofs],
        }
        return json.dumps(document, indent=2), complete
    lines = [f"srt {runtime.version}: {' '.join(runtime.command)} (tested with {_srt.SRT_TESTED})"]
    lines.append("proven here: each attempt made by a child under srt (and unconfined, the control):")
    for proof in proofs:
        mark = "held" if proof.held else ("NOT HELD" if proof.held is False else "not tried")
        lines.append(f"  [{mark}] {proof.promise}: {proof.detail}  ({proof.mechanism})")
    lines.append("writable under srt whatever the settings say: " + ", ".join(_srt.SRT_WRITABLE))
    lines.append(
        "not denied: reads srt does not deny (on macOS: outside the user's folders); see docs/sandbox.md"
    )
    return "\n".join(lines), complete
