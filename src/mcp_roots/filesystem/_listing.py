"""The tools that list and look: list_directory (with and without sizes), directory_tree, search_files,
get_file_info and list_allowed_directories. Walks run in a worker thread, capped and cancellable.
"""

from __future__ import annotations

import datetime
import os
import stat
import threading
from collections.abc import Sequence
from typing import Annotated, Literal

from mcp.server.mcpserver import Context
from mcp_types import CallToolResult
from pydantic import Field

from .. import RootSet
from . import _globs, _walk
from ._results import READ, Lane, TextOutput, ToolFailure, format_size, ok, run_blocking
from ._toolbox import Toolbox

__all__ = ["WALKS_AT_ONCE", "register"]

#: directory_tree and search_files calls that walk at the same time; more wait their turn.
WALKS_AT_ONCE = 1


def _with_note(text: str, truncated: str | None) -> str:
    return text + (f"\n[truncated: {truncated}]" if truncated else "")


def _pattern(pattern: str) -> _globs.Glob:
    try:
        return _globs.compile_glob(pattern)
    except ValueError as exc:
        raise ToolFailure(f"pattern: {exc}") from None


def _excluder(patterns: Sequence[str], *, anywhere: bool) -> _globs.Glob | None:
    try:
        return _globs.excluder(list(patterns), anywhere=anywhere)
    except ValueError as exc:
        raise ToolFailure(f"excludePatterns: {exc}") from None


def listing_text(roots: RootSet, path: str, limit: int) -> str:
    """list_directory's text: ``[DIR] name`` / ``[FILE] name`` lines in name order."""
    entries, truncated = _walk.listing(roots, path, limit)
    text = "\n".join(f"{'[DIR]' if is_dir else '[FILE]'} {name}" for name, is_dir, _ in entries)
    return _with_note(text, truncated)


def sizes_text(roots: RootSet, path: str, limit: int, sort_by: str) -> str:
    """list_directory_with_sizes' text: entries with sizes, sorted, then the totals."""
    entries, truncated = _walk.listing(roots, path, limit, sizes=True)
    if sort_by == "size":
        entries.sort(key=lambda e: -e[2])
    else:
        entries.sort(key=lambda e: (e[0].casefold(), e[0]))
    lines = [
        f"{'[DIR]' if is_dir else '[FILE]'} {name.ljust(30)} "
        + ("" if is_dir else format_size(size).rjust(10))
        for name, is_dir, size in entries
    ]
    files = [size for _, is_dir, size in entries if not is_dir]
    lines += [
        "",
        f"Total: {len(files)} files, {len(entries) - len(files)} directories",
        f"Combined size: {format_size(sum(files))}",
    ]
    if truncated:
        lines.append(f"[truncated: {truncated}]")
    return "\n".join(lines)


def tree_text(
    roots: RootSet, path: str, patterns: Sequence[str], limits: _walk.Limits, stop: threading.Event
) -> str:
    """directory_tree's text; the patterns are compiled here, in the worker thread, not on the loop."""
    exclude = _excluder(patterns, anywhere=True)
    result = _walk.tree(roots, path, exclude, limits, stop=stop)
    return _with_note(result.text, result.truncated)


def search_text(
    roots: RootSet,
    path: str,
    pattern: str,
    patterns: Sequence[str],
    limits: _walk.Limits,
    stop: threading.Event,
) -> str:
    """search_files' text: one full path a line, or "No matches found"."""
    matcher = _pattern(pattern)
    exclude = _excluder(patterns, anywhere=False)
    result = _walk.search(roots, path, matcher, exclude, limits, stop=stop)
    text = "\n".join(result.matches) if result.matches else "No matches found"
    return _with_note(text, result.truncated)


def _iso(timestamp: float) -> str:
    return datetime.datetime.fromtimestamp(timestamp, datetime.timezone.utc).isoformat(
        timespec="milliseconds"
    )


def info_text(st: os.stat_result) -> str:
    """get_file_info's text from a stat result."""
    born = getattr(st, "st_birthtime", None)
    info = {
        "size": st.st_size,
        "created": _iso(born if born is not None else st.st_ctime),
        "modified": _iso(st.st_mtime),
        "accessed": _iso(st.st_atime),
        "isDirectory": str(stat.S_ISDIR(st.st_mode)).lower(),
        "isFile": str(stat.S_ISREG(st.st_mode)).lower(),
        "permissions": format(st.st_mode & 0o777, "03o"),
    }
    return "\n".join(f"{key}: {value}" for key, value in info.items())


def _answer(result: str | CallToolResult) -> CallToolResult:
    return result if isinstance(result, CallToolResult) else ok(result)


def register(box: Toolbox) -> None:
    """Put the listing tools on ``box``'s server."""
    guard, limits = box.guard, box.settings.walk
    walks = Lane(WALKS_AT_ONCE)  # whole-tree walks of this server, across its clients

    @box.tool(
        "list_directory",
        "List Directory",
        "List the files and directories in a directory, each prefixed with [FILE] or [DIR]. Only works "
        "within allowed directories.",
        READ,
        "path",
    )
    async def list_directory(path: str, ctx: Context) -> TextOutput:
        roots = await guard.roots(ctx)
        return _answer(await run_blocking(lambda _: listing_text(roots, path, limits.max_results), path))

    @box.tool(
        "list_directory_with_sizes",
        "List Directory with Sizes",
        "List the files and directories in a directory with [FILE]/[DIR] prefixes and file sizes, sorted "
        "by name or by size, with totals. Only works within allowed directories.",
        READ,
        "path",
    )
    async def list_directory_with_sizes(
        path: str,
        ctx: Context,
        sortBy: Annotated[
            Literal["name", "size"], Field(description="Sort entries by name or size")
        ] = "name",
    ) -> TextOutput:
        roots = await guard.roots(ctx)
        return _answer(
            await run_blocking(lambda _: sizes_text(roots, path, limits.max_results, sortBy), path)
        )

    @box.tool(
        "directory_tree",
        "Directory Tree",
        "A recursive tree of files and directories as JSON (2-space indentation): each entry has 'name' "
        "and 'type' (file/directory); directories always have a 'children' array. excludePatterns are "
        "glob patterns; a pattern without '*' excludes that name at any depth. Large trees are cut at a "
        "limit, with a line saying so after the JSON. Only works within allowed directories.",
        READ,
        "path",
    )
    async def directory_tree(path: str, ctx: Context, excludePatterns: Sequence[str] = ()) -> TextOutput:
        roots = await guard.roots(ctx)
        return _answer(
            await run_blocking(
                lambda stop: tree_text(roots, path, excludePatterns, limits, stop), path, lane=walks
            )
        )

    @box.tool(
        "search_files",
        "Search Files",
        "Recursively find files and directories whose path, relative to 'path', matches a glob pattern: "
        "'*.ext' matches in that directory only, '**/*.ext' at any depth. Returns full paths. Results are "
        "cut at a limit, with a line saying so. Only searches within allowed directories.",
        READ,
        "path",
    )
    async def search_files(
        path: str, pattern: str, ctx: Context, excludePatterns: Sequence[str] = ()
    ) -> TextOutput:
        roots = await guard.roots(ctx)
        return _answer(
            await run_blocking(
                lambda stop: search_text(roots, path, pattern, excludePatterns, limits, stop),
                path,
                lane=walks,
            )
        )

    @box.tool(
        "get_file_info",
        "Get File Info",
        "Metadata of a file or directory: size, creation, modification and access times, type and "
        "permissions, without reading it. Only works within allowed directories.",
        READ,
        "path",
    )
    async def get_file_info(path: str, ctx: Context) -> TextOutput:
        roots = await guard.roots(ctx)
        return _answer(await run_blocking(lambda _: info_text(roots.stat(path)), path))

    @box.tool(
        "list_allowed_directories",
        "List Allowed Directories",
        "The directories this server may access for this client (subdirectories included). Use it to "
        "see what is available before accessing files.",
        READ,
    )
    async def list_allowed_directories(ctx: Context) -> TextOutput:
        roots = await guard.roots(ctx)
        # A folder granted read only (serve --ask) says so; the others read as the official server's.
        lines = (f"{root.path}{'' if root.writable else ' (read-only)'}" for root in roots)
        return ok("Allowed directories:\n" + "\n".join(lines))
