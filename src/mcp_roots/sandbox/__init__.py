"""Subprocesses confined by the kernel (tier 1: it needs only ``_sys`` and ``errors``).

``_sandbox``: what a child may touch, spawning it confined (Landlock plus a seccomp filter) and confining this
process. This face is the sandbox's internal API for the applications (``mcp-roots run`` and ``doctor``) and
for ``RootSet.run``: the names below, nothing else.
"""

from __future__ import annotations

from .._sys.landlock import thread_count
from ._sandbox import (
    SYSTEM_DEVICE_PATHS,
    SYSTEM_READ_PATHS,
    Support,
    clean_env,
    confine_process,
    no_new_privs,
    popen,
    run,
    support,
)

__all__ = [
    "SYSTEM_DEVICE_PATHS",
    "SYSTEM_READ_PATHS",
    "Support",
    "clean_env",
    "confine_process",
    "no_new_privs",
    "popen",
    "run",
    "support",
    "thread_count",
]
