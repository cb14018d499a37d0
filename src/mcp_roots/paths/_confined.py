"""RootSet's subprocesses: run, popen and run_async, confined by the kernel to the roots, and as_env.
The bodies live in the sandbox package; RootSet inherits these methods. A read-only root stays read-only.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._types import Argv
from ..errors import SandboxUnavailable
from ._root import Root

if TYPE_CHECKING:
    import subprocess


class Confined:
    """RootSet's subprocess methods (a base class of RootSet, documented with it)."""

    __slots__ = ()

    if TYPE_CHECKING:

        @property
        def roots(self) -> tuple[Root, ...]:
            """The roots (RootSet's)."""

        @property
        def paths(self) -> tuple[Path, ...]:
            """The canonical root paths (RootSet's)."""

    def as_env(self) -> dict[str, str]:
        """``MCP_ROOTS_JSON`` (array of ``{uri, name, path, access}``), ``MCP_ROOTS_PATHS`` (one per line) and
        ``MCP_ROOTS_COUNT``, for tools that start subprocesses. (No root holds a newline: see Root.)"""
        return {
            "MCP_ROOTS_JSON": json.dumps([r.as_dict() for r in self.roots]),
            "MCP_ROOTS_PATHS": "\n".join(str(p) for p in self.paths),
            "MCP_ROOTS_COUNT": str(len(self.roots)),
        }

    def _granted(self, write: bool, kwargs: dict[str, Any]) -> list[Path]:
        """The roots a child gets: with ``write``, the read-write ones (the read-only ones join
        ``extra_read`` in ``kwargs``); a read-only root inside a read-write one cannot be kept read-only
        there (Landlock only adds rights), so that is refused."""
        if not write or all(root.writable for root in self.roots):
            return list(self.paths)
        writable = [root.path for root in self.roots if root.writable]
        read = [root.path for root in self.roots if not root.writable]
        for inner in read:
            for outer in writable:
                if inner.is_relative_to(outer):
                    raise SandboxUnavailable(
                        f"the read-only root {str(inner)!r} lies inside the read-write root {str(outer)!r}: "
                        "a child allowed to write cannot be kept from writing it; run it with write=False"
                    )
        kwargs["extra_read"] = [*kwargs.get("extra_read", ()), *read]
        return writable

    def run(
        self,
        argv: Argv,
        *,
        write: bool = False,
        network: bool = True,
        allow_unconfined: bool = False,
        path_metadata: bool = False,
        protect: bool | Iterable[str] = True,
        **kwargs: Any,
    ) -> subprocess.CompletedProcess[Any]:
        """``subprocess.run(argv, **kwargs)`` with the child confined by the kernel (Landlock) to these roots.

        It reads beneath them (writes too with ``write=True``), and read-only what a program needs. A seccomp
        filter refuses chmod/chown/utime/xattr by path. No capability. See ``mcp_roots.sandbox.run``.

        Args:
            argv: The command, as :func:`subprocess.run` takes it.
            write: Let the child write beneath the roots but the read-only ones; the protected set stays
                read-only.
            network: Let the child open sockets (``False``: no socket() or connect()).
            allow_unconfined: Where the kernel cannot confine (``SandboxUnavailable``), run unconfined with
                a warning instead.
            path_metadata: Allow chmod/chown/utime/xattr by path, for builds, and so OUTSIDE the roots too
                (Landlock has no right for them); only with ``write=True``, else ``ValueError``.
            protect: The protected set kept read-only under ``write=True``: ``True`` (the default set),
                ``False``, or the names to protect.
            **kwargs: :func:`subprocess.run`'s options.
        """
        from .. import sandbox

        return sandbox.run(
            self._granted(write, kwargs),
            argv,
            write=write,
            network=network,
            allow_unconfined=allow_unconfined,
            path_metadata=path_metadata,
            protect=protect,
            **kwargs,
        )

    def popen(
        self,
        argv: Argv,
        *,
        write: bool = False,
        network: bool = True,
        allow_unconfined: bool = False,
        path_metadata: bool = False,
        protect: bool | Iterable[str] = True,
        **kwargs: Any,
    ) -> subprocess.Popen[Any]:
        """``subprocess.Popen(argv, **kwargs)``, confined like :meth:`run`.

        Args:
            argv: The command, as :class:`subprocess.Popen` takes it.
            write: Let the child write beneath the roots but the read-only ones; the protected set stays
                read-only.
            network: Let the child open sockets.
            allow_unconfined: Run unconfined, with a warning, where the kernel cannot confine.
            path_metadata: Allow chmod/chown/utime/xattr by path (only with ``write=True``).
            protect: The protected set kept read-only under ``write=True``.
            **kwargs: :class:`subprocess.Popen`'s options.
        """
        from .. import sandbox

        return sandbox.popen(
            self._granted(write, kwargs),
            argv,
            write=write,
            network=network,
            allow_unconfined=allow_unconfined,
            path_metadata=path_metadata,
            protect=protect,
            **kwargs,
        )

    async def run_async(
        self,
        argv: str | Sequence[str],
        *,
        write: bool = False,
        network: bool = True,
        allow_unconfined: bool = False,
        path_metadata: bool = False,
        protect: bool | Iterable[str] = True,
        **kwargs: Any,
    ) -> subprocess.CompletedProcess[bytes]:
        """``await anyio.run_process(argv, **kwargs)``, confined like :meth:`run`.

        Args:
            argv: The command, as :func:`anyio.run_process` takes it.
            write: Let the child write beneath the roots but the read-only ones; the protected set stays
                read-only.
            network: Let the child open sockets.
            allow_unconfined: Run unconfined, with a warning, where the kernel cannot confine.
            path_metadata: Allow chmod/chown/utime/xattr by path (only with ``write=True``).
            protect: The protected set kept read-only under ``write=True``.
            **kwargs: :func:`anyio.run_process`'s options.

        Returns:
            The finished process, its output captured (``check=True``: a failure raises).
        """
        from .. import sandbox

        return await sandbox.run_async(
            self._granted(write, kwargs),
            argv,
            write=write,
            network=network,
            allow_unconfined=allow_unconfined,
            path_metadata=path_metadata,
            protect=protect,
            **kwargs,
        )
