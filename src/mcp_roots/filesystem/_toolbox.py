"""The settings of a filesystem server and the toolbox each family of tools registers itself with: the
guard that checks a tool's paths, the caps a call may cost, and the server the tools go on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from mcp.server import MCPServer
from mcp_types import ToolAnnotations

from .. import RootsGuard
from . import _walk
from ._results import MIB

__all__ = ["READ_ONLY_TOOLS", "WRITE_TOOLS", "Settings", "Toolbox"]

_F = TypeVar("_F", bound=Callable[..., Any])

READ_ONLY_TOOLS = (
    "read_file",
    "read_text_file",
    "read_media_file",
    "read_multiple_files",
    "list_directory",
    "list_directory_with_sizes",
    "directory_tree",
    "search_files",
    "get_file_info",
    "list_allowed_directories",
)
WRITE_TOOLS = ("write_file", "edit_file", "create_directory", "move_file")

_DEFAULT_LIMITS = _walk.Limits()


@dataclass(frozen=True)
class Settings:
    """What the server allows; the caps bound what a call costs.

    Args:
        read_only: Drop the writing tools.
        max_read_bytes: The largest file read_text_file (whole, or the head/tail lines asked for),
            read_media_file and edit_file will load.
        max_total_read_bytes: The most bytes read_multiple_files returns in one call, all files together.
        max_paths: The most paths read_multiple_files accepts.
        walk: Entries, bytes, levels, names looked at and seconds of a directory_tree or search_files; the
            excludePatterns a call may send.
        max_diff_work: The most line comparisons edit_file's diff may make before it shows the changed part
            whole.
        protect: The writing tools refuse the protected set (``RootSet.protecting()``: .git/config,
            .mcp.json, ...).
    """

    read_only: bool = False
    max_read_bytes: int = 16 * MIB
    max_total_read_bytes: int = 64 * MIB
    max_paths: int = 1_000
    walk: _walk.Limits = _DEFAULT_LIMITS
    max_diff_work: int = 4_000_000
    protect: bool = False


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
