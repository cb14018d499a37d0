"""The writing tools on the SDK: write_file and edit_file (atomic replacement, edit_file's git-style diff
bounded in work), create_directory and move_file (no-replace rename); their work is ``_cores``'.
"""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Context
from pydantic import BaseModel, Field

from .. import RootSet
from . import _cores
from ._results import TextOutput, result, writes
from ._toolbox import Toolbox

__all__ = ["EditOperation", "register"]


class EditOperation(BaseModel):
    """One replacement of edit_file."""

    oldText: str = Field(description="Text to search for - must match exactly")
    newText: str = Field(description="Text to replace with")


def register(box: Toolbox) -> None:
    """Put the writing tools on ``box``'s server (a read-only server leaves them out)."""
    guard, settings = box.guard, box.settings

    async def writable(ctx: Context) -> RootSet:
        # serve --protect: the writing tools refuse the protected set (.git/config, .mcp.json, ...).
        roots = await guard.roots(ctx)
        return roots.protecting() if settings.protect else roots

    @box.tool(
        "write_file",
        "Write File",
        "Create a file or replace an existing one with new content (atomically: readers see the old "
        "file or the new one, never a mix). Use with caution: it overwrites without warning. Only works "
        "within allowed directories.",
        writes(destructive=True, idempotent=True),
        "path",
    )
    async def write_file(path: str, content: str, ctx: Context) -> TextOutput:
        roots = await writable(ctx)
        return result(await _cores.write_file(roots, path, content))

    @box.tool(
        "edit_file",
        "Edit File",
        "Make line-based edits to a text file: each edit replaces an exact text (or the same lines up to "
        "indentation) with new text. Returns a git-style diff of the change; with dryRun the file is "
        "left as it is. Only works within allowed directories.",
        writes(destructive=True, idempotent=False),
        "path",
    )
    async def edit_file(
        path: str,
        edits: list[EditOperation],
        ctx: Context,
        dryRun: Annotated[bool, Field(description="Preview changes using git-style diff format")] = False,
    ) -> TextOutput:
        roots = await writable(ctx)
        pairs = [(e.oldText, e.newText) for e in edits]
        return result(await _cores.edit_file(roots, settings, path, pairs, dryRun))

    @box.tool(
        "create_directory",
        "Create Directory",
        "Create a directory, with any missing parents; succeeds quietly if it already exists. Only works "
        "within allowed directories.",
        writes(destructive=False, idempotent=True),
        "path",
    )
    async def create_directory(path: str, ctx: Context) -> TextOutput:
        roots = await writable(ctx)
        return result(await _cores.create_directory(roots, path))

    @box.tool(
        "move_file",
        "Move File",
        "Move or rename a file or directory. Fails if the destination already exists. Both source and "
        "destination must be within allowed directories.",
        writes(destructive=True, idempotent=False),
        exempt="RootSet.rename checks both ends beneath the roots and moves a symlink itself",
    )
    async def move_file(source: str, destination: str, ctx: Context) -> TextOutput:
        roots = await writable(ctx)
        return result(await _cores.move_file(roots, source, destination))
