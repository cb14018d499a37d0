"""The reading tools on the SDK: read_text_file (and its deprecated alias read_file) with head and tail,
read_media_file and read_multiple_files; their work is ``_cores``'.
"""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Context
from pydantic import Field

from . import _cores
from ._budget import Ledger, ledger_of
from ._common import failure
from ._results import READ, MediaOutput, TextOutput, result
from ._toolbox import Toolbox

__all__ = ["register"]

_READ_TEXT = (
    "Read a file as text and return its contents. Use 'head' to get only the first N lines or 'tail' "
    "to get only the last N lines (not both). Works on any text file whatever its extension; binary "
    "files are refused (use read_media_file). Only works within allowed directories."
)


def answers_of(ctx: Context) -> Ledger | None:
    """The answer budget's ledger of the HTTP request this call came in (None over stdio)."""
    return ledger_of(ctx.request_context.request)


_TAIL = "If provided, returns only the last N lines of the file"
_HEAD = "If provided, returns only the first N lines of the file"


def register(box: Toolbox) -> None:
    """Put the reading tools on ``box``'s server."""
    guard, settings = box.guard, box.settings

    @box.tool(
        "read_file",
        "Read File (Deprecated)",
        "Read a file as text. DEPRECATED: use read_text_file.",
        READ,
        "path",
    )  # the deprecated alias: the same function under the old name
    @box.tool("read_text_file", "Read Text File", _READ_TEXT, READ, "path")
    async def read_text_file(
        path: str,
        ctx: Context,
        tail: Annotated[float, Field(description=_TAIL)] = 0,
        head: Annotated[float, Field(description=_HEAD)] = 0,
    ) -> TextOutput:
        roots = await guard.roots(ctx)
        return result(await _cores.read_text_file(roots, settings, path, tail, head, answers_of(ctx)))

    @box.tool(
        "read_media_file",
        "Read Media File",
        "Read a file and return it base64-encoded with its MIME type: images and audio as image/audio "
        "content, anything else as an embedded resource. Only works within allowed directories.",
        READ,
        "path",
    )
    async def read_media_file(path: str, ctx: Context) -> MediaOutput:
        roots = await guard.roots(ctx)
        return result(await _cores.read_media_file(roots, settings, path, answers_of(ctx)))

    @box.tool(
        "read_multiple_files",
        "Read Multiple Files",
        "Read several files at once; each file's contents follow its path, and a file that cannot be "
        "read gets an error line instead of stopping the others. Only works within allowed directories.",
        READ,
        exempt="each path is opened through the RootSet operations in the tool, one error line per file",
    )
    async def read_multiple_files(
        paths: Annotated[
            list[str],
            Field(
                min_length=1,
                description="Array of file paths to read. Each path must be a string pointing to a valid "
                "file within allowed directories.",
            ),
        ],
        ctx: Context,
    ) -> TextOutput:
        if len(paths) > settings.max_paths:  # before the roots: no round trip for a call refused anyway
            return result(failure(f"at most {settings.max_paths} paths per call; got {len(paths)}"))
        roots = await guard.roots(ctx)
        return result(await _cores.read_multiple_files(roots, settings, paths, answers_of(ctx)))
