"""The toolbox each family of tools registers itself with: the
guard that checks a tool's paths, the caps a call may cost, and the server the tools go on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from mcp.server import MCPServer
from mcp_types import ToolAnnotations

from .. import RootsGuard
from ._common import READ_ONLY_TOOLS, WRITE_TOOLS, Settings

__all__ = ["READ_ONLY_TOOLS", "WRITE_TOOLS", "Settings", "Toolbox"]

_F = TypeVar("_F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Toolbox:
    """What a family of tools registers with: ``tool(...)`` puts a function on the server, guarded."""

    guard: RootsGuard
    settings: Settings
    server: MCPServer

    def tool(
        self,
        name: str,
        title: str,
        description: str,
        annotations: ToolAnnotations,
        *paths: str,
        exempt: str | None = None,
    ) -> Callable[[_F], _F]:
        """Register the decorated function as tool ``name`` (unless the server is read-only and it
        writes), its ``paths`` parameters checked by the guard (none named: the call's roots only)."""

        def register(fn: _F) -> _F:
            if self.settings.read_only and name in WRITE_TOOLS:
                return fn
            guarded = self.guard.paths(*paths)(fn)
            if exempt is not None:
                guarded = self.guard.exempt(exempt)(guarded)
            self.server.tool(name=name, title=title, description=description, annotations=annotations)(
                guarded
            )
            return fn

        return register
