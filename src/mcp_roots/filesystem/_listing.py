"""The listing tools on the SDK: list_directory (with and without sizes), directory_tree, search_files,
get_file_info and list_allowed_directories; their work is ``_cores``'.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Literal

from mcp.server.mcpserver import Context
from pydantic import Field

from . import _cores
from ._common import Lane
from ._results import READ, TextOutput, result
from ._toolbox import Toolbox

__all__ = ["register"]


def register(box: Toolbox) -> None:
    """Put the listing tools on ``box``'s server."""
    guard, settings = box.guard, box.settings
    walks = Lane(_cores.WALKS_AT_ONCE)  # whole-tree walks of this server, across its clients

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
        return result(await _cores.list_directory(roots, settings, path))

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
        return result(await _cores.list_directory_with_sizes(roots, settings, path, sortBy))

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
        return result(await _cores.directory_tree(roots, settings, path, excludePatterns, walks))

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
        return result(await _cores.search_files(roots, settings, path, pattern, excludePatterns, walks))

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
        return result(await _cores.get_file_info(roots, path))

    @box.tool(
        "list_allowed_directories",
        "List Allowed Directories",
        "The directories this server may access for this client (subdirectories included). Use it to "
        "see what is available before accessing files.",
        READ,
    )
    async def list_allowed_directories(ctx: Context) -> TextOutput:
        roots = await guard.roots(ctx)
        return result(_cores.list_allowed_directories(roots))
