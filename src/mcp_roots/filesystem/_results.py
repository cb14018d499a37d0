"""What every filesystem tool shares: the result shapes and annotations the official server declares, the
one-line failure a client reads, and the runner that does a tool's blocking file work off the event loop.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from typing import IO, Annotated, Literal, TypedDict, TypeVar

import anyio
import anyio.to_thread
import typing_extensions as te
from mcp_types import CallToolResult, TextContent, ToolAnnotations

from .. import FileTooLarge, RootsError, RootSet
from ..errors import os_error_line
from . import _text

__all__ = [
    "INLINE_READ_BYTES",
    "MIB",
    "READ",
    "Lane",
    "MediaOutput",
    "TextOutput",
    "ToolFailure",
    "failure",
    "failure_line",
    "format_size",
    "ok",
    "read_capped",
    "read_stream",
    "run_blocking",
    "shown",
    "too_large",
    "writes",
]

_T = TypeVar("_T")

MIB = 1024 * 1024
#: Files up to this size are read on the event loop: a local read of it costs less than a thread hop.
INLINE_READ_BYTES = 64 * 1024


class TextResult(TypedDict):
    """Every text tool's structured result, as the official server declares it."""

    content: str


class MediaBlock(te.TypedDict):  # pydantic reads nested ones on Python 3.11
    """An image or audio block, as the official server declares it."""

    type: Literal["image", "audio"]
    data: str
    mimeType: str


class BlobResource(te.TypedDict):  # pydantic reads nested ones on Python 3.11
    uri: str
    mimeType: te.NotRequired[str]
    blob: str


class ResourceBlock(te.TypedDict):  # pydantic reads nested ones on Python 3.11
    """An embedded resource block (any other file), as the official server declares it."""

    type: Literal["resource"]
    resource: BlobResource


class MediaResult(te.TypedDict):  # pydantic reads nested ones on Python 3.11
    """read_media_file's structured result: the content block(s) it returned, declared as the official
    server declares them (the image/audio/resource union)."""

    content: list[MediaBlock | ResourceBlock]


TextOutput = Annotated[CallToolResult, TextResult]
MediaOutput = Annotated[CallToolResult, MediaResult]

READ = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)


def writes(*, destructive: bool, idempotent: bool) -> ToolAnnotations:
    """The annotations of a tool that writes."""
    return ToolAnnotations(
        read_only_hint=False, destructive_hint=destructive, idempotent_hint=idempotent, open_world_hint=False
    )


class ToolFailure(Exception):
    """A tool cannot do what was asked; the message is the one line the client reads."""


#: C0 and C1 control characters (and DEL), each shown as ``\xNN``: a path a client sent may carry terminal
#: escapes, and a text that names it must not replay them on whoever reads it.
_CONTROLS = {code: f"\\x{code:02x}" for code in (*range(0x20), *range(0x7F, 0xA0))}


def shown(path: str) -> str:
    """``path`` for a message: its control characters escaped (``\x1b``), everything else as it is."""
    return path.translate(_CONTROLS)


def ok(text: str) -> CallToolResult:
    """A text tool's answer, as content and as structured content."""
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content={"content": text})


def failure(message: str) -> CallToolResult:
    """A tool error the client reads as one line."""
    return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True)


def failure_line(exc: Exception, where: str) -> str | None:
    """The one line of an expected failure of file work on ``where``, or None for one that is not expected
    (a RootsError is the guard's to word; anything else is a bug)."""
    if isinstance(exc, ToolFailure):
        return str(exc)
    if isinstance(exc, _text.BinaryFile | _text.TooManyBytes):
        return f"{where}: {exc}"
    if isinstance(exc, _text.EditNotFound | _text.OverBudget):
        return str(exc)
    if isinstance(exc, RootsError):
        return None
    if isinstance(exc, OSError):
        return os_error_line(exc, where)
    if isinstance(exc, UnicodeError):
        return f"{where}: not valid text ({exc})"
    return None


class Lane:
    """A capacity limiter for one kind of long work, made on first use (inside the serving event loop).

    The walks hold the GIL while they match names: run side by side, they would take turns with the event
    loop for it, and every other request would wait its turn behind each of them."""

    def __init__(self, total: int) -> None:
        self._total = total
        self._limiter: anyio.CapacityLimiter | None = None

    def limiter(self) -> anyio.CapacityLimiter:
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(self._total)
        return self._limiter


async def run_blocking(
    fn: Callable[[threading.Event], _T], where: str, *, inline: bool = False, lane: Lane | None = None
) -> _T | CallToolResult:
    """Run blocking file work in a worker thread (or ``inline``, for work cheaper than the thread hop).

    ``fn`` gets an event that is set when the call is cancelled (the client gave up or went away): long
    work checks it and stops, so a cancelled call does not keep a worker busy. Expected failures become
    one-line error results; a RootsError passes through (the guard turns it into its refusal).
    """
    if inline:  # on the loop: nothing can cancel it midway, so no event to make
        try:
            return fn(_NEVER)
        except Exception as exc:
            return _failure_of(exc, where)
    stop = threading.Event()
    try:
        limiter = None if lane is None else lane.limiter()
        return await anyio.to_thread.run_sync(fn, stop, abandon_on_cancel=True, limiter=limiter)
    except Exception as exc:
        return _failure_of(exc, where)
    finally:
        stop.set()


_NEVER = threading.Event()  # the stop event of work done in place: never set


def _failure_of(exc: Exception, where: str) -> CallToolResult:
    line = failure_line(exc, where)
    if line is None:
        raise exc
    return failure(line)


def format_size(size: int) -> str:
    """Bytes as the official server prints them: ``0 B``, ``512 B``, ``1.50 KB``..."""
    units = ["B", "KB", "MB", "GB", "TB"]
    if size <= 0:
        return "0 B"
    index = math.floor(math.log(size) / math.log(1024))
    if index <= 0:
        return f"{size} B"
    index = min(index, len(units) - 1)
    return f"{size / 1024**index:.2f} {units[index]}"


def too_large(path: str, cap: int) -> ToolFailure:
    """The failure of a read past ``cap`` bytes."""
    return ToolFailure(
        f"{path} is larger than {format_size(cap)}; read part of it with the head or tail argument"
    )


def read_capped(roots: RootSet, path: str, cap: int) -> bytes:
    """The whole file, refused past ``cap`` bytes."""
    try:
        return roots.read_bytes(path, max_bytes=cap)
    except FileTooLarge:
        raise too_large(path, cap) from None


def read_stream(stream: IO[bytes], path: str, cap: int, size: int) -> bytes:
    """The rest of an open file of ``size`` bytes (its fstat), refused past ``cap`` bytes (never holding
    more than ``cap`` + 1). The first read asks for the size, not the cap: a buffered read allocates what
    it is asked for, and a 16 MiB buffer per small file costs more than the read."""
    data = stream.read(min(cap, size) + 1)
    if len(data) > size:  # it grew since: read on, up to the cap
        data += stream.read(cap + 1 - len(data))
    if len(data) > cap:
        raise too_large(path, cap)
    return data
