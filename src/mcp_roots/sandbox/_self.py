"""Confining this process (``RootsGuard(confine=True)``, ``serve --confine``).
Landlock on the program's one thread at its start: the roots plus what Python needs.
"""

# What it keeps of a confined child's promises: the files (Landlock) only. No seccomp filter, no capability
# dropped, no session of its own, no protected set: a server needs its transport, and may legitimately edit
# what the protected set guards (docs/sandbox.md).

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence

from .._sys import landlock
from ..errors import SandboxUnavailable
from ._plan import Confinement, RootPaths, plan, support

__all__ = ["confine_process"]

logger = logging.getLogger("mcp_roots.sandbox")


def _too_wide(path: str) -> bool:
    # The rule of the fallback roots: never /, the home directory or one of its ancestors. A server run
    # from $HOME (python -m server) has $HOME on sys.path; granting it would grant ~/.ssh.
    real = os.path.realpath(path)
    home = os.path.realpath(os.path.expanduser("~"))
    return real == "/" or real == home or home.startswith(real.rstrip("/") + "/")


def _python_needs() -> list[str]:
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    paths.update(p for p in sys.path if p and os.path.isabs(p))
    paths.add(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # where mcp_roots is
    main_file = getattr(sys.modules.get("__main__"), "__file__", None)
    if isinstance(main_file, str):
        paths.add(os.path.dirname(os.path.abspath(main_file)))
    needed = []
    for path in sorted(paths):
        if _too_wide(path):
            logger.warning(
                "confine=True: not granting %s (it is /, the home directory or one of its ancestors); "
                "modules not yet imported from there will fail to import",
                path,
            )
        else:
            needed.append(path)
    return needed


def confine_process(
    roots: RootPaths,
    *,
    write: bool = True,
    extra_read: Sequence[str | os.PathLike[str]] = (),
) -> Confinement:
    """Confine this whole process to ``roots`` plus what Python and programs need. Irreversible.

    Landlock confines the calling thread and the threads and processes it starts afterwards, never the
    threads that already exist; so this refuses (``SandboxUnavailable``) unless the process has exactly
    one thread. Network and signals are left alone: a server needs its transport.
    """
    kernel = support()
    if not kernel.available:
        raise SandboxUnavailable(f"cannot confine the server process: {kernel.reason}")
    threads = landlock.thread_count()
    if threads != 1:
        raise SandboxUnavailable(
            f"cannot confine the server process: it already has {threads} threads, and Landlock confines "
            "only the calling thread and what it starts afterwards, so the others would stay unconfined; "
            "create RootsGuard(confine=True) before anything starts a thread (at the top of the program)"
        )
    paths = [os.fspath(root) for root in roots]
    confinement = plan(
        paths,
        write=write,
        extra_read=[*_python_needs(), *extra_read],
        scope_signals=False,
        syscall_filter=False,
        protect=False,
        drop_capabilities=False,
    )
    assert confinement is not None
    try:
        confinement.apply_to_current_thread()
    except OSError as exc:
        raise SandboxUnavailable(f"the kernel refused to confine the server process: {exc}") from exc
    logger.info("server process confined by Landlock ABI %d to %s", confinement.abi, paths)
    return confinement
