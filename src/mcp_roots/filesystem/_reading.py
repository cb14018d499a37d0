"""The reading tools: read_text_file (and its deprecated alias read_file) with head and tail,
read_media_file and read_multiple_files, each read capped in bytes.
"""

from __future__ import annotations

import base64
import math
import os
import posixpath
import threading
from typing import Annotated

from mcp.server.mcpserver import Context
from mcp_types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
)
from pydantic import Field

from .. import PathOutsideRoots, RootsError, RootSet, path_to_uri
from . import _text
from ._budget import BudgetExceeded, Ledger, answer_bytes, escape_overhead, ledger_of
from ._results import (
    INLINE_READ_BYTES,
    READ,
    MediaOutput,
    TextOutput,
    failure,
    failure_line,
    ok,
    read_capped,
    read_stream,
    run_blocking,
)
from ._toolbox import Settings, Toolbox

__all__ = ["register"]

_MIME_TYPES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
    ".bmp": "image/bmp",
    ".svg": "image/svg+xml",
    ".mp3": "audio/mpeg",
    ".wav": "audio/wav",
    ".ogg": "audio/ogg",
    ".flac": "audio/flac",
}

_READ_TEXT = (
    "Read a file as text and return its contents. Use 'head' to get only the first N lines or 'tail' "
    "to get only the last N lines (not both). Works on any text file whatever its extension; binary "
    "files are refused (use read_media_file). Only works within allowed directories."
)


def answers_of(ctx: Context) -> Ledger | None:
    """The answer budget's ledger of the HTTP request this call came in (None over stdio)."""
    return ledger_of(ctx.request_context.request)


async def reserve(answers: Ledger | None, size: int) -> CallToolResult | None:
    """Room for ``size`` more bytes of this call's answer in the budget, or the failure to answer with."""
    if answers is None or size <= 0:
        return None
    try:
        await answers.reserve(size)
    except BudgetExceeded as exc:
        return failure(str(exc))
    return None


async def reserve_text(answers: Ledger | None, text: str, reserved: int) -> CallToolResult | None:
    """Top ``reserved`` up to what the answer carrying ``text`` holds (its escapes included)."""
    if answers is None:
        return None
    size = len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
    return await reserve(answers, answer_bytes(size + escape_overhead(text)) - reserved)


async def read_text(
    roots: RootSet,
    settings: Settings,
    path: str,
    tail: int,
    head: int,
    answers: Ledger | None = None,
) -> CallToolResult:
    """read_text_file: the whole file, or its first ``head`` / last ``tail`` lines, within the byte cap;
    over HTTP, room for the whole file's answer is reserved in ``answers`` before it is read."""
    if head and tail:
        return failure("Cannot specify both head and tail parameters simultaneously")
    if head < 0 or tail < 0:
        return failure("head and tail must be zero or a positive number of lines")
    cap = settings.max_read_bytes
    # Opening is one openat2 beneath the root; a small file is read in place, because handing it to a
    # worker thread would cost more than the read (the common call of a model reading code).
    opened = await run_blocking(lambda _: roots.open(path, "rb"), path, inline=True)
    if isinstance(opened, CallToolResult):
        return opened
    with opened as stream:
        size = os.fstat(stream.fileno()).st_size
        # head and tail: the lines kept are not known before the read; their answer is reserved after it.
        reserved = 0 if head or tail else answer_bytes(min(size, cap))
        refused = await reserve(answers, reserved)
        if refused is not None:
            return refused

        def work(stop: threading.Event) -> str:
            if tail:
                return _text.tail_lines(stream, size, tail, max_bytes=cap)
            if head:
                return _text.head_lines(stream, head, max_bytes=cap)
            return _text.decode_text(read_stream(stream, path, cap, size))

        result = await run_blocking(work, path, inline=size <= INLINE_READ_BYTES)
    if isinstance(result, CallToolResult):
        return result
    return await reserve_text(answers, result, reserved) or ok(result)


def media_result(path: str, data: bytes) -> CallToolResult:
    """read_media_file's answer: an image or audio block by extension, else an embedded resource."""
    encoded = base64.b64encode(data).decode("ascii")
    mime = _MIME_TYPES.get(posixpath.splitext(path)[1].lower(), "application/octet-stream")
    block: ImageContent | AudioContent | EmbeddedResource
    if mime.startswith("image/"):
        block = ImageContent(type="image", data=encoded, mime_type=mime)
    elif mime.startswith("audio/"):
        block = AudioContent(type="audio", data=encoded, mime_type=mime)
    else:
        resource = BlobResourceContents(uri=path_to_uri(path), mime_type=mime, blob=encoded)
        block = EmbeddedResource(type="resource", resource=resource)
    return CallToolResult(
        content=[block],
        structured_content={"content": [block.model_dump(mode="json", by_alias=True, exclude_none=True)]},
    )


def read_several(roots: RootSet, settings: Settings, paths: list[str], stop: threading.Event) -> str:
    """read_multiple_files' text: each file after its path, or one error line for it."""
    parts = []
    budget = settings.max_total_read_bytes
    for given in paths:
        if stop.is_set():
            break
        try:
            data = read_capped(roots, given, min(settings.max_read_bytes, budget))
            budget -= len(data)
            parts.append(f"{given}:\n{_text.decode_text(data)}\n")
        except _text.BinaryFile as exc:
            parts.append(f"{given}: Error - {exc}")
        except PathOutsideRoots:  # one wording, whatever lies out there and however the path got there
            parts.append(f"{given}: Error - {refusal_line(roots, given)}")
        except RootsError as exc:  # not a usable path: the message is about the text given
            parts.append(f"{given}: Error - {exc}")
        except Exception as exc:
            line = failure_line(exc, given)
            if line is None:
                raise
            parts.append(f"{given}: Error - {line}")
    return "\n---\n".join(parts)


def refusal_line(roots: RootSet, given: str) -> str:
    """A path of read_multiple_files outside the roots, worded from what the client sent and the roots only:
    nothing in it (the reason, an absolute form of a relative path) depends on what lies outside."""
    return f"Access denied: {given!r} is outside the allowed roots ({roots.describe(3)})"


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
        # Numbers, as the official server declares them; a count of lines must be a whole one.
        for name, value in (("head", head), ("tail", tail)):
            if not (math.isfinite(value) and value == int(value)):
                return failure(f"{name} must be a whole number of lines, not {value:g}")
        return await read_text(await guard.roots(ctx), settings, path, int(tail), int(head), answers_of(ctx))

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
        data = await run_blocking(lambda _: read_capped(roots, path, settings.max_read_bytes), path)
        if isinstance(data, CallToolResult):
            return data
        # base64: 4 bytes for 3
        refused = await reserve(answers_of(ctx), answer_bytes(4 * ((len(data) + 2) // 3)))
        return refused or media_result(path, data)

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
        if len(paths) > settings.max_paths:
            return failure(f"at most {settings.max_paths} paths per call; got {len(paths)}")
        roots = await guard.roots(ctx)
        result = await run_blocking(
            lambda stop: read_several(roots, settings, paths, stop), "read_multiple_files"
        )
        if isinstance(result, CallToolResult):
            return result
        return await reserve_text(answers_of(ctx), result, 0) or ok(result)
