"""``mcp-roots doctor``'s report: what this kernel offers (Landlock, the seccomp filter, no_new_privs, a mount
namespace), what a confined command is refused, every promise attempted live (``_proof``), the protected set
and the read-only system paths; as text or JSON.
"""

from __future__ import annotations

import json
import os
import sys

from .._sys.landlock import thread_count
from ._plan import SYSTEM_DEVICE_PATHS, SYSTEM_READ_PATHS, no_new_privs, support
from ._proof import prove
from ._protect import MAX_FOLDERS, PROTECTED
from ._spawn import mount_namespace

__all__ = ["doctor_report"]


def doctor_report(as_json: bool, prog: str = "mcp-roots") -> tuple[str, bool]:
    """``mcp-roots doctor``'s report (text, or JSON with ``as_json``), and whether every layer is here and
    every attempt was held."""
    kernel = support()
    nnp = no_new_privs() if sys.platform == "linux" else "not Linux"
    features = kernel.enforced()
    paths = [(p, os.path.exists(p)) for p in (*SYSTEM_READ_PATHS, *SYSTEM_DEVICE_PATHS)]
    # Every promise attempted live by a confined child (and unconfined, the control), where Landlock is.
    proofs = prove() if kernel.available else []
    namespace = mount_namespace() if kernel.available else kernel.reason
    broken = any(proof.held is False for proof in proofs)
    complete = kernel.complete and nnp is None and not broken
    if as_json:
        document = {
            "platform": sys.platform,
            "kernel": os.uname().release,
            "landlock_abi": kernel.abi,
            "available": kernel.available,
            "reason": kernel.reason,
            "seccomp": kernel.filter_reason is None,
            "seccomp_reason": kernel.filter_reason,
            "no_new_privs": nnp is None,
            "no_new_privs_reason": nnp,
            "mount_namespace": namespace is None,
            "mount_namespace_reason": namespace,
            "namespaces": namespace is None,
            "namespaces_reason": namespace,
            "enforced": [{"what": what, "enforced": on, "needs": needs} for what, on, needs in features],
            "proven": [
                {
                    "promise": p.promise,
                    "mechanism": p.mechanism,
                    "test": p.test,
                    "held": p.held,
                    "detail": p.detail,
                }
                for p in proofs
            ],
            "protected": [{"name": e.name, "kind": e.kind, "why": e.why} for e in PROTECTED],
            "read_only_paths": [p for p in SYSTEM_READ_PATHS if os.path.exists(p)],
            "read_write_devices": [p for p in SYSTEM_DEVICE_PATHS if os.path.exists(p)],
            "threads": thread_count() if sys.platform == "linux" else None,
        }
        return json.dumps(document, indent=2), complete
    lines = [f"kernel: {sys.platform} {os.uname().release}"]
    if kernel.available:
        lines.append(f"Landlock: ABI {kernel.abi}: '{prog} run' and RootSet.run() confine subprocesses")
    else:
        lines.append(f"Landlock: unavailable: {kernel.reason}")
        lines.append("  RootSet.run() raises SandboxUnavailable; allow_unconfined=True runs UNCONFINED")
    if kernel.filter_reason is None:
        lines.append("seccomp: the system-call filter is installed with every confined command")
    else:
        lines.append(f"seccomp: unavailable: {kernel.filter_reason}")
        lines.append(
            "  RootSet.run() raises SandboxUnavailable; allow_unconfined=True runs without the filter"
        )
    lines.append("no_new_privs: available" if nnp is None else f"no_new_privs: unavailable: {nnp}")
    if namespace is None:
        lines.append(
            "namespaces: available: a confined command's whole tree ends with it (a PID namespace of its "
            "own); only its grant exists for it (a root of its own: metadata calls need no opt-in, no unix "
            "socket of this machine's is there unless named); the protected set is bound read-only"
        )
    else:
        lines.append(f"namespaces: unavailable: {namespace}")
        lines.append(
            "  the fallback: Landlock and the filter alone; a detached daemon may outlive the command, "
            "chmod/chown/utime/xattr by path are refused (opt-in: --allow-path-metadata), unix socket files "
            "are reachable with the network on"
        )
        lines.append(
            f"  --write (write=True) refuses where a protected name exists; '{prog} run --no-protect' "
            "(protect=False) runs without the protected set"
        )
    lines.append("enforced for a confined command:")
    lines += [f"  [{'x' if on else ' '}] {what}  ({needs})" for what, on, needs in features]
    if proofs:
        lines.append("proven here: each attempt made by a confined child (and unconfined, the control):")
        for proof in proofs:
            mark = "held" if proof.held else ("NOT HELD" if proof.held is False else "not tried")
            lines.append(f"  [{mark}] {proof.promise}: {proof.detail}  ({proof.mechanism})")
    lines.append(
        "protected inside a writable root (--write), read-only unless --unprotect NAME / --no-protect:"
    )
    lines += [f"  {e.name}  ({e.kind}: {e.why})" for e in PROTECTED]
    lines.append(
        "  not enforced: a protected name that does not exist (it may be created), one that is a symlink, "
        f"one deeper than a folder below a root or past the first {MAX_FOLDERS} folders"
    )
    lines.append("read-only for every confined command (besides the roots and its own binary):")
    lines += [f"  {p}{'' if there else '  (absent here)'}" for p, there in paths]
    return "\n".join(lines), complete
