"""The writing tools: write_file and edit_file (atomic replacement, edit_file's git-style diff bounded in
work), create_directory and move_file (no-replace rename).
"""

from __future__ import annotations

import threading
from typing import Annotated

from mcp.server.mcpserver import Context
from mcp_types import CallToolResult
from pydantic import BaseModel, Field

from .. import RootSet
from . import _text
from ._results import TextOutput, ToolFailure, ok, read_capped, run_blocking, shown, writes
from ._toolbox import Settings, Toolbox

__all__ = ["EditOperation", "register"]


class EditOperation(BaseModel):
    """One replacement of edit_file."""

    oldText: str = Field(description="Text to search for - must match exactly")
    newText: str = Field(description="Text to replace with")


def edit(
    roots: RootSet,
    settings: Settings,
    path: str,
    edits: list[EditOperation],
    dry_run: bool,
    stop: threading.Event,
) -> str:
    """edit_file's work: apply the edits, diff, and (unless ``dry_run``) replace the file atomically."""
    original = _text.decode_text(read_capped(roots, path, settings.max_read_bytes)).replace("\r\n", "\n")
    changed = _text.apply_edits(original, [(e.oldText, e.newText) for e in edits])
    diff = _text.unified_diff(original, changed, path, max_work=settings.max_diff_work, stop=stop)
    fence = "```"
    while fence in diff:
        fence += "`"
    if stop.is_set():
        raise _text.OverBudget(f"edit_file {path}: cancelled")
    if not dry_run:
        roots.write_text(path, changed)
    return f"{fence}diff\n{diff}{fence}\n\n"


def move(roots: RootSet, source: str, destination: str) -> None:
    """move_file's work: the final names are acted on as they are (a symlink is moved, not its target).
    The official tool refuses an existing destination: ``replace=False`` does, atomically (renameat2
    RENAME_NOREPLACE), with no look-then-rename window."""
    try:
        roots.rename(source, destination, replace=False)
    except FileExistsError:
        raise ToolFailure(f"Destination already exists: {shown(destination)}") from None


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
        result = await run_blocking(lambda _: roots.write_text(path, content), path)
        return result if isinstance(result, CallToolResult) else ok(f"Successfully wrote to {shown(path)}")

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
        result = await run_blocking(lambda stop: edit(roots, settings, path, edits, dryRun, stop), path)
        return result if isinstance(result, CallToolResult) else ok(result)

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
        result = await run_blocking(lambda _: roots.mkdir(path, parents=True, exist_ok=True), path)
        if isinstance(result, CallToolResult):
            return result
        return ok(f"Successfully created directory {shown(path)}")

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
        result = await run_blocking(lambda _: move(roots, source, destination), source)
        if isinstance(result, CallToolResult):
            return result
        return ok(f"Successfully moved {shown(source)} to {shown(destination)}")
