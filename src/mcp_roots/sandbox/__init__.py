"""Subprocesses confined by the kernel (tier 1: it needs only ``_sys`` and ``errors``).
This face is the sandbox's internal API for applications and ``RootSet.run``.
"""

# ``_protect``: the protected set, one table, and where its names are in a set of roots; ``_plan``: what a
# child may touch and do, and what this kernel can enforce; ``_spawn``: starting children confined (a session
# of their own, no capability, a mount namespace for the protected set, Landlock, seccomp); ``_self``:
# confining this process; ``_proof``: every promise attempted live; ``_doctor``: ``doctor``'s report. This
# face is the sandbox's internal API for the applications (``mcp-roots run``, ``doctor``, ``wrap``) and for
# ``RootSet.run``: the names below, nothing else. The proofs and the doctor's report are imported on first
# use (PEP 562): a spawn needs neither. ``_srt``, ``_srtproof``: the second backend (Anthropic's srt).
#
# To spawn a program confined: ``popen(paths, argv, write=..., network=..., extra_read=[...],
# protect=True, **subprocess_options)`` (``run``/``run_async`` likewise); ``protected_names(add=, remove=)``
# builds a changed set for ``protect=``. ``end(process)`` ends a child and every process it started (a PID
# namespace of its own where the kernel allows it); ``popen_tree``/``tree_command`` give an unconfined program
# the same end.

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_names
from .._sys.landlock import thread_count
from ._plan import (
    NETWORK_READ_PATHS,
    SYSTEM_DEVICE_PATHS,
    SYSTEM_READ_PATHS,
    Support,
    clean_env,
    no_new_privs,
    support,
    system_read_paths,
)
from ._protect import MAX_FOLDERS, PROTECTED, Protected, find_protected, protected_hit, protected_names
from ._self import confine_process
from ._spawn import mount_namespace, popen, popen_tree, run, run_async
from ._srt import BACKENDS, SRT_INSTALL, SRT_TESTED, Backend, Runtime, choose, find_srt
from ._tree import ConfinedProcess, end, tree_command

if TYPE_CHECKING:
    from ._doctor import doctor_report
    from ._proof import Proof, prove
    from ._srtproof import prove_srt, srt_report

__all__ = [
    "BACKENDS",
    "MAX_FOLDERS",
    "NETWORK_READ_PATHS",
    "PROTECTED",
    "SRT_INSTALL",
    "SRT_TESTED",
    "SYSTEM_DEVICE_PATHS",
    "SYSTEM_READ_PATHS",
    "Backend",
    "ConfinedProcess",
    "Proof",
    "Protected",
    "Runtime",
    "Support",
    "choose",
    "clean_env",
    "confine_process",
    "doctor_report",
    "end",
    "find_protected",
    "find_srt",
    "mount_namespace",
    "no_new_privs",
    "popen",
    "popen_tree",
    "protected_hit",
    "protected_names",
    "prove",
    "prove_srt",
    "run",
    "run_async",
    "srt_report",
    "support",
    "system_read_paths",
    "thread_count",
    "tree_command",
]


#: The proofs and the doctor's report, imported on first use.
_LAZY = {
    "doctor_report": "._doctor",
    "Proof": "._proof",
    "prove": "._proof",
    "prove_srt": "._srtproof",
    "srt_report": "._srtproof",
}

__getattr__, __dir__ = lazy_names(__name__, _LAZY)
