"""Subprocesses confined by the kernel (tier 1: it needs only ``_sys`` and ``errors``).

``_protect``: the protected set, one table, and where its names are in a set of roots; ``_plan``: what a
child may touch and do, and what this kernel can enforce; ``_spawn``: starting children confined (a session
of their own, no capability, a mount namespace for the protected set, Landlock, seccomp); ``_self``:
confining this process; ``_proof``: every promise attempted live; ``_doctor``: ``doctor``'s report. This
face is the sandbox's internal API for the applications (``mcp-roots run``, ``doctor``, ``wrap``) and for
``RootSet.run``: the names below, nothing else. The proofs and the doctor's report are imported on first
use (PEP 562): a spawn needs neither. ``_srt``: the second backend, Anthropic's sandbox runtime.

To spawn a program confined: ``popen(paths, argv, write=..., network=..., extra_read=[...],
protect=True, **subprocess_options)`` (``run``/``run_async`` likewise); ``protected_names(add=, remove=)``
builds a changed set for ``protect=``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_names
from .._sys.landlock import thread_count
from ._plan import SYSTEM_DEVICE_PATHS, SYSTEM_READ_PATHS, Support, clean_env, no_new_privs, support
from ._protect import MAX_FOLDERS, PROTECTED, Protected, find_protected, protected_hit, protected_names
from ._self import confine_process
from ._spawn import mount_namespace, popen, run, run_async
from ._srt import BACKENDS, SRT_INSTALL, SRT_TESTED, Backend, Runtime, choose, find_srt

if TYPE_CHECKING:
    from ._doctor import doctor_report
    from ._proof import Proof, prove
    from ._srtproof import prove_srt, srt_report

__all__ = [
    "BACKENDS",
    "MAX_FOLDERS",
    "PROTECTED",
    "SRT_INSTALL",
    "SRT_TESTED",
    "SYSTEM_DEVICE_PATHS",
    "SYSTEM_READ_PATHS",
    "Backend",
    "Proof",
    "Protected",
    "Runtime",
    "Support",
    "choose",
    "clean_env",
    "confine_process",
    "doctor_report",
    "find_protected",
    "find_srt",
    "mount_namespace",
    "no_new_privs",
    "popen",
    "protected_hit",
    "protected_names",
    "prove",
    "prove_srt",
    "run",
    "run_async",
    "srt_report",
    "support",
    "thread_count",
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
