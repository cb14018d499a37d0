"""What every filesystem tool shares, with no SDK: the settings, the result as the SDK puts it on the wire,
the one-line failure a client reads, and the runner of a tool's blocking file work.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any, TypeVar

import anyio
import anyio.to_thread

from .. import FileTooLarge, RootsError, RootSet
from ..errors import os_error_line
from ..paths._text import for_reader
from . import _text, _walk

__all__ = [
    "INLINE_READ_BYTES",
    "MIB",
    "READ_ONLY_TOOLS",
    "WRITE_TOOLS",
    "Lane",
    "Result",
    "Settings",
    "ToolFailure",
    "UnknownMethods",
    "failure",
    "failure_line",
    "format_size",
    "ok",
    "read_capped",
    "read_stream",
    "run_blocking",
    "too_large",
]

_T = TypeVar("_T")

logger = logging.getLogger("mcp_roots")

#: A tool's result, as the SDK writes its ``CallToolResult`` on the wire (``content``, ``isError``, and
#: ``structuredContent`` when there is one): the lean path sends it as it is, the SDK path validates it.
Result = dict[str, Any]

MIB = 1024 * 1024
#: Files up to this size are read on the event loop: a local read of it costs less than a thread hop.
INLINE_READ_BYTES = 64 * 1024

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


class ToolFailure(Exception):
    """A tool cannot do what was asked; the message is the one line the client reads."""


def ok(text: str) -> Result:
    """A text tool's answer, as content and as structured content."""
    return {
        "content": [{"type": "text", "text": text}],
        "isError": False,
        "structuredContent": {"content": text},
    }


def failure(message: str) -> Result:
    """A tool error the client reads as one line."""
    return {"content": [{"type": "text", "text": message}], "isError": True}


def failure_line(exc: Exception, where: str) -> str | None:
    """The one line of an expected failure of file work on ``where``, or None for one that is not expected
    (a RootsError is the guard's to word; anything else is a bug). A path in it is :func:`for_reader`'s."""
    if isinstance(exc, ToolFailure):
        return str(exc)
    if isinstance(exc, _text.BinaryFile | _text.TooManyBytes):
        return f"{for_reader(where)}: {exc}"
    if isinstance(exc, _text.EditNotFound | _text.OverBudget):
        return str(exc)
    if isinstance(exc, RootsError):
        return None
    if isinstance(exc, OSError):
        return os_error_line(exc, where)
    if isinstance(exc, UnicodeError):
        return f"{for_reader(where)}: not valid text ({exc})"
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
) -> _T | Result:
    """Run blocking file work in a worker thread (or ``inline``, for work cheaper than the thread hop).

    ``fn`` gets an event that is set when the call is cancelled (the client gave up or went away): long
    work checks it and stops, so a cancelled call does not keep a worker busy. Expected failures become
    one-line error results (``failure``); a RootsError passes through (the guard turns it into its refusal).
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


def _failure_of(exc: Exception, where: str) -> Result:
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
        f"{for_reader(path)} is larger than {format_size(cap)}; read part of it with the head or tail "
        "argument"
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


class UnknownMethods:
    """One log line for the first request of each method serve does not have (prompts/get among them), for
    at most ``most`` names, then one line saying the rest go unlogged: a client cannot flood the log. The
    client gets -32601 "Method not found" for each (the SDK's answer, or the lean session's own for a list
    serve does not declare)."""

    def __init__(self, most: int = 32) -> None:
        self.most = most
        self.seen: set[str] = set()

    def note(self, method: str) -> None:
        """Log ``method`` (a client's text: escaped, cut to 100 characters) unless it was logged before."""
        name = method[:100]  # what is kept of a name a client chose: 32 of these at most
        if name in self.seen or len(self.seen) > self.most:
            return
        self.seen.add(name)
        if len(self.seen) > self.most:
            logger.warning(
                "a client asked for more than %d methods serve does not answer; no more are logged", self.most
            )
        else:
            logger.warning(
                "a client asked for %s, a method serve does not answer (-32601; logged once)", ascii(name)
            )
