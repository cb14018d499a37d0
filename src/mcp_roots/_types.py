"""The types of the public signatures that no SDK defines: any supported server, any supported context.
They are Protocols, so that naming them imports no SDK; the adapters still check the class at run time.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Protocol, TypeAlias

__all__ = ["Argv", "SupportedContext", "SupportedServer"]


class SupportedServer(Protocol):
    """Any server mcp-roots can guard: an ``mcp`` 2.x ``MCPServer`` or low-level ``Server``, a ``fastmcp``
    4.x ``FastMCP``, an ``mcp`` 1.x ``FastMCP`` or low-level ``Server``.

    Every one has a ``name`` and a ``run``; :meth:`RootsGuard.install` tells them apart by class (a
    ``TypeError`` naming the supported kinds for any other).
    """

    @property
    def name(self) -> str: ...

    @property
    def run(self) -> Callable[..., object]: ...


class SupportedContext(Protocol):
    """Any request context mcp-roots can read the roots of: the tool ``Context`` of ``mcp`` 2.x, ``fastmcp``
    4.x or ``mcp`` 1.x, ``mcp`` 2.x's ``ServerRequestContext`` or ``mcp`` 1.x's ``RequestContext``.

    Every one has the request's ``session`` and ``request_id``; :meth:`RootsGuard.roots` tells them apart by
    class (a ``TypeError`` naming the supported kinds for any other).
    """

    @property
    def session(self) -> object: ...

    @property
    def request_id(self) -> object: ...


Argv: TypeAlias = (
    str
    | bytes
    | os.PathLike[str]
    | os.PathLike[bytes]
    | Sequence[str | bytes | os.PathLike[str] | os.PathLike[bytes]]
)
"""A command as :mod:`subprocess` takes it: a program, or a program and its arguments."""
