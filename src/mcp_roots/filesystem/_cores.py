"""The work of serve's 14 tools, with no SDK: each core takes the call's roots and its arguments and gives
the result the client reads (``_common.Result``), for the SDK path and the lean path alike.
"""

from __future__ import annotations

import base64
import datetime
import math
import os
import posixpath
import stat
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .. import PathOutsideRoots, RootsError, RootSet, path_to_uri
from ..paths._text import for_reader
from . import _globs, _text, _walk
from ._common import (
    INLINE_READ_BYTES,
    Lane,
    Result,
    Settings,
    ToolFailure,
    failure,
    failure_line,
    format_size,
    ok,
    read_capped,
    read_stream,
    run_blocking,
)

if TYPE_CHECKING:
    from ._budget import Ledger

__all__ = [
    "WALKS_AT_ONCE",
    "create_directory",
    "directory_tree",
    "edit_file",
    "get_file_info",
    "list_allowed_directories",
    "list_directory",
    "list_directory_with_sizes",
    "move_file",
    "read_media_file",
    "read_multiple_files",
    "read_text_file",
    "search_files",
    "write_file",
]

#: directory_tree and search_files calls that walk at the same time; more wait their turn.
WALKS_AT_ONCE = 1

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

# --- The answer budget (serve --http only: over stdio ``answers`` is None) -------------------------------


async def reserve(answers: Ledger | None, size: int) -> Result | None:
    """Room for ``size`` more bytes of this call's answer in the budget, or the failure to answer with."""
    if answers is None or size <= 0:
        return None
    from ._budget import BudgetExceeded

    try:
        await answers.reserve(size)
    except BudgetExceeded as exc:
        return failure(str(exc))
    return None


async def reserve_text(answers: Ledger | None, text: str, reserved: int) -> Result | None:
    """Top ``reserved`` up to what the answer carrying ``text`` holds (its escapes included)."""
    if answers is None:
        return None
    from ._budget import answer_bytes, escape_overhead

    size = len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
    return await reserve(answers, answer_bytes(size + escape_overhead(text)) - reserved)


def _whole_size(size: int) -> int:
    from ._budget import answer_bytes

    return answer_bytes(size)


# --- Reading ----------------------------------------------------------------------------------------------


async def read_text_file(
    roots: RootSet, settings: Settings, path: str, tail: float, head: float, answers: Ledger | None = None
) -> Result:
    """read_text_file: the whole file, or its first ``head`` / last ``tail`` lines, within the byte cap;
    over HTTP, room for the whole file's answer is reserved in ``answers`` before it is read."""
    # Numbers, as the official server declares them; a count of lines must be a whole one.
    for name, value in (("head", head), ("tail", tail)):
        if not (math.isfinite(value) and value == int(value)):
            return failure(f"{name} must be a whole number of lines, not {value:g}")
    lines_tail, lines_head = int(tail), int(head)
    if lines_head and lines_tail:
        return failure("Cannot specify both head and tail parameters simultaneously")
    if lines_head < 0 or lines_tail < 0:
        return failure("head and tail must be zero or a positive number of lines")
    cap = settings.max_read_bytes
    # Opening is one openat2 beneath the root; a small file is read in place, because handing it to a
    # worker thread would cost more than the read (the common call of a model reading code).
    opened = await run_blocking(lambda _: roots.open(path, "rb"), path, inline=True)
    if isinstance(opened, dict):
        return opened
    with opened as stream:
        size = os.fstat(stream.fileno()).st_size
        # head and tail: the lines kept are not known before the read; their answer is reserved after it.
        reserved = 0 if lines_head or lines_tail or answers is None else _whole_size(min(size, cap))
        refused = await reserve(answers, reserved)
        if refused is not None:
            return refused

        def work(stop: threading.Event) -> str:
            if lines_tail:
                return _text.tail_lines(stream, size, lines_tail, max_bytes=cap)
            if lines_head:
                return _text.head_lines(stream, lines_head, max_bytes=cap)
            return _text.decode_text(read_stream(stream, path, cap, size))

        text = await run_blocking(work, path, inline=size <= INLINE_READ_BYTES)
    if isinstance(text, dict):
        return text
    return await reserve_text(answers, text, reserved) or ok(text)


def media_result(path: str, data: bytes) -> Result:
    """read_media_file's answer: an image or audio block by extension, else an embedded resource."""
    encoded = base64.b64encode(data).decode("ascii")
    mime = _MIME_TYPES.get(posixpath.splitext(path)[1].lower(), "application/octet-stream")
    kind = mime.partition("/")[0]
    block: Result
    if kind in ("image", "audio"):
        block = {"type": kind, "data": encoded, "mimeType": mime}
    else:
        resource = {"uri": path_to_uri(path), "mimeType": mime, "blob": encoded}
        block = {"type": "resource", "resource": resource}
    return {"content": [block], "isError": False, "structuredContent": {"content": [block]}}


async def read_media_file(
    roots: RootSet, settings: Settings, path: str, answers: Ledger | None = None
) -> Result:
    """read_media_file: the file base64-encoded, as an image, audio or embedded resource block."""
    data = await run_blocking(lambda _: read_capped(roots, path, settings.max_read_bytes), path)
    if isinstance(data, dict):
        return data
    # base64: 4 bytes for 3
    refused = await reserve(answers, 0 if answers is None else _whole_size(4 * ((len(data) + 2) // 3)))
    return refused or media_result(path, data)


def refusal_line(roots: RootSet, given: str) -> str:
    """A path of read_multiple_files outside the roots, worded from what the client sent and the roots only:
    nothing in it (the reason, an absolute form of a relative path) depends on what lies outside."""
    return f"Access denied: {given!r} is outside the allowed roots ({roots.describe(3)})"


def read_several(roots: RootSet, settings: Settings, paths: Sequence[str], stop: threading.Event) -> str:
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


async def read_multiple_files(
    roots: RootSet, settings: Settings, paths: Sequence[str], answers: Ledger | None = None
) -> Result:
    """read_multiple_files: each file after its path, one error line for a file that cannot be read."""
    if len(paths) > settings.max_paths:
        return failure(f"at most {settings.max_paths} paths per call; got {len(paths)}")
    text = await run_blocking(lambda stop: read_several(roots, settings, paths, stop), "read_multiple_files")
    if isinstance(text, dict):
        return text
    return await reserve_text(answers, text, 0) or ok(text)


# --- Listing ----------------------------------------------------------------------------------------------


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
    walked = _walk.tree(roots, path, exclude, limits, stop=stop)
    return _with_note(walked.text, walked.truncated)


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
    found = _walk.search(roots, path, matcher, exclude, limits, stop=stop)
    text = "\n".join(found.matches) if found.matches else "No matches found"
    return _with_note(text, found.truncated)


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


def _answer(text: str | Result) -> Result:
    return text if isinstance(text, dict) else ok(text)


async def list_directory(roots: RootSet, settings: Settings, path: str) -> Result:
    limit = settings.walk.max_results
    return _answer(await run_blocking(lambda _: listing_text(roots, path, limit), path))


async def list_directory_with_sizes(roots: RootSet, settings: Settings, path: str, sort_by: str) -> Result:
    limit = settings.walk.max_results
    return _answer(await run_blocking(lambda _: sizes_text(roots, path, limit, sort_by), path))


async def directory_tree(
    roots: RootSet, settings: Settings, path: str, patterns: Sequence[str], walks: Lane
) -> Result:
    limits = settings.walk
    work = await run_blocking(lambda stop: tree_text(roots, path, patterns, limits, stop), path, lane=walks)
    return _answer(work)


async def search_files(
    roots: RootSet, settings: Settings, path: str, pattern: str, patterns: Sequence[str], walks: Lane
) -> Result:
    limits = settings.walk
    work = await run_blocking(
        lambda stop: search_text(roots, path, pattern, patterns, limits, stop), path, lane=walks
    )
    return _answer(work)


async def get_file_info(roots: RootSet, path: str) -> Result:
    return _answer(await run_blocking(lambda _: info_text(roots.stat(path)), path))


def list_allowed_directories(roots: RootSet) -> Result:
    # A folder granted read only (serve --ask) says so; the others read as the official server's.
    lines = (f"{root.path}{'' if root.writable else ' (read-only)'}" for root in roots)
    return ok("Allowed directories:\n" + "\n".join(lines))


# --- Writing ----------------------------------------------------------------------------------------------


def edit(
    roots: RootSet,
    settings: Settings,
    path: str,
    edits: Sequence[tuple[str, str]],
    dry_run: bool,
    stop: threading.Event,
) -> str:
    """edit_file's work: apply the edits, diff, and (unless ``dry_run``) replace the file atomically."""
    original = _text.decode_text(read_capped(roots, path, settings.max_read_bytes)).replace("\r\n", "\n")
    changed = _text.apply_edits(original, list(edits))
    diff = _text.unified_diff(original, changed, path, max_work=settings.max_diff_work, stop=stop)
    fence = "```"
    while fence in diff:
        fence += "`"
    if stop.is_set():
        raise _text.OverBudget(f"edit_file {for_reader(path)}: cancelled")
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
        raise ToolFailure(f"Destination already exists: {for_reader(destination)}") from None


async def write_file(roots: RootSet, path: str, content: str) -> Result:
    work = await run_blocking(lambda _: roots.write_text(path, content), path)
    return work if isinstance(work, dict) else ok(f"Successfully wrote to {for_reader(path)}")


async def edit_file(
    roots: RootSet, settings: Settings, path: str, edits: Sequence[tuple[str, str]], dry_run: bool
) -> Result:
    return _answer(await run_blocking(lambda stop: edit(roots, settings, path, edits, dry_run, stop), path))


async def create_directory(roots: RootSet, path: str) -> Result:
    work = await run_blocking(lambda _: roots.mkdir(path, parents=True, exist_ok=True), path)
    return work if isinstance(work, dict) else ok(f"Successfully created directory {for_reader(path)}")


async def move_file(roots: RootSet, source: str, destination: str) -> Result:
    work = await run_blocking(lambda _: move(roots, source, destination), source)
    if isinstance(work, dict):
        return work
    return ok(f"Successfully moved {for_reader(source)} to {for_reader(destination)}")
