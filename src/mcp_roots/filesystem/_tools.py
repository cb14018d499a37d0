"""The filesystem server's tools: the official server's names, arguments and result shapes, each one
written on mcp-roots' public API (``@guard.paths``, ``guard.roots(ctx)`` and the race-free RootSet
operations), with bounded reads and walks.
"""

import base64
import datetime
import errno
import math
import os
import posixpath
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import IO, Annotated, Any, Literal, TypedDict, TypeVar

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver import Context, RequestStateSecurity
from mcp_types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    TextContent,
    ToolAnnotations,
)
from pydantic import BaseModel, Field

from .. import FileTooLarge, RootsError, RootSet, RootsGuard, path_to_uri
from . import _globs, _text, _walk

__all__ = ["READ_ONLY_TOOLS", "WRITE_TOOLS", "Settings", "build_server"]

_T = TypeVar("_T")

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
    """What the server allows: ``read_only`` drops the writing tools; the caps bound what a call costs."""

    read_only: bool = False
    #: the largest file read_text_file (whole), read_media_file and edit_file will load
    max_read_bytes: int = 16 * MIB
    #: the most bytes read_multiple_files returns in one call, all files together
    max_total_read_bytes: int = 64 * MIB
    #: the most paths read_multiple_files accepts
    max_paths: int = 1_000
    #: entries in a directory_tree, matches of a search_files, names a walk may look at, levels deep
    walk: _walk.Limits = _DEFAULT_LIMITS


class TextResult(TypedDict):
    """Every text tool's structured result, as the official server declares it."""

    content: str


class MediaResult(TypedDict):
    """read_media_file's structured result: the content block(s) it returned."""

    content: list[dict[str, Any]]


TextOutput = Annotated[CallToolResult, TextResult]
MediaOutput = Annotated[CallToolResult, MediaResult]


class EditOperation(BaseModel):
    """One replacement of edit_file."""

    oldText: str = Field(description="Text to search for - must match exactly")
    newText: str = Field(description="Text to replace with")


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

_READ = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)


def _writes(*, destructive: bool, idempotent: bool) -> ToolAnnotations:
    return ToolAnnotations(
        read_only_hint=False, destructive_hint=destructive, idempotent_hint=idempotent, open_world_hint=False
    )


class ToolFailure(Exception):
    """A tool cannot do what was asked; the message is the one line the client reads."""


def _ok(text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content={"content": text})


def _failure(message: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True)


_ERRNO_TEXT = {
    errno.ENOENT: "No such file or directory",
    errno.EEXIST: "Already exists",
    errno.ENOTDIR: "Not a directory",
    errno.EISDIR: "Is a directory",
    errno.EACCES: "Permission denied",
    errno.EPERM: "Operation not permitted",
    errno.ENOTEMPTY: "Directory not empty",
    errno.EXDEV: "Cannot move across filesystems",
}


def _os_message(exc: OSError, fallback: str) -> str:
    what = _ERRNO_TEXT.get(exc.errno or 0) or exc.strerror or type(exc).__name__
    where = exc.filename if exc.filename is not None else fallback
    return f"{what}: {where}"


async def _run(fn: Callable[[], _T], where: str, *, inline: bool = False) -> _T | CallToolResult:
    """Run blocking file work in a worker thread (or ``inline``, for work cheaper than the thread hop);
    expected failures become one-line error results (RootsError passes through: the guard turns it into
    its refusal)."""
    try:
        return fn() if inline else await anyio.to_thread.run_sync(fn)
    except ToolFailure as exc:
        return _failure(str(exc))
    except (_text.BinaryFile, _text.EditNotFound) as exc:
        return _failure(f"{where}: {exc}" if isinstance(exc, _text.BinaryFile) else str(exc))
    except RootsError:  # PathOutsideRoots is also a PermissionError: the guard words every refusal
        raise
    except OSError as exc:
        return _failure(_os_message(exc, where))
    except UnicodeError as exc:
        return _failure(f"{where}: not valid text ({exc})")


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


def _iso(timestamp: float) -> str:
    return datetime.datetime.fromtimestamp(timestamp, datetime.timezone.utc).isoformat(
        timespec="milliseconds"
    )


def _read_capped(roots: RootSet, path: str, cap: int) -> bytes:
    try:
        return roots.read_bytes(path, max_bytes=cap)
    except FileTooLarge:
        raise ToolFailure(
            f"{path} is larger than {format_size(cap)}; read part of it with the head or tail argument"
        ) from None


def _read_stream(stream: IO[bytes], path: str, cap: int) -> bytes:
    data = stream.read(cap + 1)
    if len(data) > cap:
        raise ToolFailure(
            f"{path} is larger than {format_size(cap)}; read part of it with the head or tail argument"
        )
    return data


def _absolute(roots: RootSet, path: str) -> str:
    if os.path.isabs(path) or not roots.paths:
        return path
    return os.path.join(str(roots.paths[0]), path)


def build_server(
    guard: RootsGuard,
    settings: Settings | None = None,
    *,
    name: str = "mcp-roots-filesystem",
    request_state_security: RequestStateSecurity | None = None,
) -> MCPServer:
    """An ``MCPServer`` with the official filesystem server's tools, guarded by ``guard``
    (``settings.read_only`` leaves out write_file, edit_file, create_directory and move_file).

    ``request_state_security`` seals the 2026-07-28 multi-round-trip state; the SDK's default is a key of
    this process only, so replicas behind a load balancer must share one (``shared_request_state(file)``).
    """
    settings = settings or Settings()
    server = MCPServer(name, instructions=_INSTRUCTIONS, request_state_security=request_state_security)
    guard.install(server)
    walk_limits = settings.walk

    def tool(
        name: str,
        title: str,
        description: str,
        annotations: ToolAnnotations,
        *paths: str,
        exempt: str | None = None,
    ) -> Callable[[Any], Any]:
        def register(fn: Any) -> Any:
            if settings.read_only and name in WRITE_TOOLS:
                return fn
            guarded = guard.paths(*paths)(fn)  # with no names: the call's roots and readable refusals
            if exempt is not None:
                guarded = guard.exempt(exempt)(guarded)
            server.tool(name=name, title=title, description=description, annotations=annotations)(guarded)
            return fn

        return register

    # -- reading --

    async def read_text(path: str, ctx: Context, tail: int, head: int) -> CallToolResult:
        if head and tail:
            return _failure("Cannot specify both head and tail parameters simultaneously")
        if head < 0 or tail < 0:
            return _failure("head and tail must be zero or a positive number of lines")
        roots = await guard.roots(ctx)
        # Opening is one openat2 beneath the root; a small file is read in place, because handing it to
        # a worker thread would cost more than the read (the common call of a model reading code).
        opened = await _run(lambda: roots.open(path, "rb"), path, inline=True)
        if isinstance(opened, CallToolResult):
            return opened
        with opened as stream:
            size = os.fstat(stream.fileno()).st_size

            def work() -> str:
                if tail:
                    return _text.tail_lines(stream, size, tail)
                if head:
                    return _text.head_lines(stream, head)
                return _text.decode_text(_read_stream(stream, path, settings.max_read_bytes))

            result = await _run(work, path, inline=size <= INLINE_READ_BYTES)
        return result if isinstance(result, CallToolResult) else _ok(result)

    read_text_description = (
        "Read a file as text and return its contents. Use 'head' to get only the first N lines or 'tail' "
        "to get only the last N lines (not both). Works on any text file whatever its extension; binary "
        "files are refused (use read_media_file). Only works within allowed directories."
    )

    @tool(
        "read_file",
        "Read File (Deprecated)",
        "Read a file as text. DEPRECATED: use read_text_file.",
        _READ,
        "path",
    )  # the deprecated alias: the same function under the old name
    @tool("read_text_file", "Read Text File", read_text_description, _READ, "path")
    async def read_text_file(
        path: str,
        ctx: Context,
        tail: Annotated[int, Field(description="If provided, returns only the last N lines of the file")] = 0,
        head: Annotated[
            int, Field(description="If provided, returns only the first N lines of the file")
        ] = 0,
    ) -> TextOutput:
        return await read_text(path, ctx, tail, head)

    @tool(
        "read_media_file",
        "Read Media File",
        "Read a file and return it base64-encoded with its MIME type: images and audio as image/audio "
        "content, anything else as an embedded resource. Only works within allowed directories.",
        _READ,
        "path",
    )
    async def read_media_file(path: str, ctx: Context) -> MediaOutput:
        roots = await guard.roots(ctx)
        data = await _run(lambda: _read_capped(roots, path, settings.max_read_bytes), path)
        if isinstance(data, CallToolResult):
            return data
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

    @tool(
        "read_multiple_files",
        "Read Multiple Files",
        "Read several files at once; each file's contents follow its path, and a file that cannot be "
        "read gets an error line instead of stopping the others. Only works within allowed directories.",
        _READ,
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
            return _failure(f"at most {settings.max_paths} paths per call; got {len(paths)}")
        roots = await guard.roots(ctx)

        def work() -> str:
            parts = []
            budget = settings.max_total_read_bytes
            for given in paths:
                try:
                    data = _read_capped(roots, given, min(settings.max_read_bytes, budget))
                    budget -= len(data)
                    parts.append(f"{given}:\n{_text.decode_text(data)}\n")
                except ToolFailure as exc:
                    parts.append(f"{given}: Error - {exc}")
                except _text.BinaryFile as exc:
                    parts.append(f"{given}: Error - {exc}")
                except OSError as exc:  # PathOutsideRoots is a PermissionError: a refusal reads the same
                    parts.append(f"{given}: Error - {exc if not exc.errno else _os_message(exc, given)}")
                except ValueError as exc:  # InvalidPath
                    parts.append(f"{given}: Error - {exc}")
            return "\n---\n".join(parts)

        result = await _run(work, "read_multiple_files")
        return result if isinstance(result, CallToolResult) else _ok(result)

    # -- writing --

    @tool(
        "write_file",
        "Write File",
        "Create a file or replace an existing one with new content (atomically: readers see the old "
        "file or the new one, never a mix). Use with caution: it overwrites without warning. Only works "
        "within allowed directories.",
        _writes(destructive=True, idempotent=True),
        "path",
    )
    async def write_file(path: str, content: str, ctx: Context) -> TextOutput:
        roots = await guard.roots(ctx)
        result = await _run(lambda: roots.write_text(path, content), path)
        return result if isinstance(result, CallToolResult) else _ok(f"Successfully wrote to {path}")

    @tool(
        "edit_file",
        "Edit File",
        "Make line-based edits to a text file: each edit replaces an exact text (or the same lines up to "
        "indentation) with new text. Returns a git-style diff of the change; with dryRun the file is "
        "left as it is. Only works within allowed directories.",
        _writes(destructive=True, idempotent=False),
        "path",
    )
    async def edit_file(
        path: str,
        edits: list[EditOperation],
        ctx: Context,
        dryRun: Annotated[bool, Field(description="Preview changes using git-style diff format")] = False,
    ) -> TextOutput:
        roots = await guard.roots(ctx)

        def work() -> str:
            original = _text.decode_text(_read_capped(roots, path, settings.max_read_bytes)).replace(
                "\r\n", "\n"
            )
            changed = _text.apply_edits(original, [(e.oldText, e.newText) for e in edits])
            diff = _text.unified_diff(original, changed, path)
            fence = "```"
            while fence in diff:
                fence += "`"
            if not dryRun:
                roots.write_text(path, changed)
            return f"{fence}diff\n{diff}{fence}\n\n"

        result = await _run(work, path)
        return result if isinstance(result, CallToolResult) else _ok(result)

    @tool(
        "create_directory",
        "Create Directory",
        "Create a directory, with any missing parents; succeeds quietly if it already exists. Only works "
        "within allowed directories.",
        _writes(destructive=False, idempotent=True),
        "path",
    )
    async def create_directory(path: str, ctx: Context) -> TextOutput:
        roots = await guard.roots(ctx)
        result = await _run(lambda: roots.mkdir(path, parents=True, exist_ok=True), path)
        return result if isinstance(result, CallToolResult) else _ok(f"Successfully created directory {path}")

    @tool(
        "move_file",
        "Move File",
        "Move or rename a file or directory. Fails if the destination already exists. Both source and "
        "destination must be within allowed directories.",
        _writes(destructive=True, idempotent=False),
        exempt="RootSet.rename checks both ends beneath the roots and moves a symlink itself",
    )
    async def move_file(source: str, destination: str, ctx: Context) -> TextOutput:
        roots = await guard.roots(ctx)

        def work() -> None:
            # The final names are acted on as they are (a symlink is moved, not its target), so they are
            # not resolved first. The official tool refuses an existing destination: replace=False does,
            # atomically (renameat2 RENAME_NOREPLACE), with no look-then-rename window.
            try:
                roots.rename(source, destination, replace=False)
            except FileExistsError:
                raise ToolFailure(f"Destination already exists: {destination}") from None

        result = await _run(work, source)
        if isinstance(result, CallToolResult):
            return result
        return _ok(f"Successfully moved {source} to {destination}")

    # -- listing --

    @tool(
        "list_directory",
        "List Directory",
        "List the files and directories in a directory, each prefixed with [FILE] or [DIR]. Only works "
        "within allowed directories.",
        _READ,
        "path",
    )
    async def list_directory(path: str, ctx: Context) -> TextOutput:
        roots = await guard.roots(ctx)
        listed = await _run(lambda: _walk.listing(roots, path, walk_limits.max_results), path)
        if isinstance(listed, CallToolResult):
            return listed
        entries, truncated = listed
        text = "\n".join(f"{'[DIR]' if is_dir else '[FILE]'} {name}" for name, is_dir, _ in entries)
        return _ok(text + (f"\n[truncated: {truncated}]" if truncated else ""))

    @tool(
        "list_directory_with_sizes",
        "List Directory with Sizes",
        "List the files and directories in a directory with [FILE]/[DIR] prefixes and file sizes, sorted "
        "by name or by size, with totals. Only works within allowed directories.",
        _READ,
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
        listed = await _run(lambda: _walk.listing(roots, path, walk_limits.max_results, sizes=True), path)
        if isinstance(listed, CallToolResult):
            return listed
        entries, truncated = listed
        if sortBy == "size":
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
        return _ok("\n".join(lines))

    @tool(
        "directory_tree",
        "Directory Tree",
        "A recursive tree of files and directories as JSON (2-space indentation): each entry has 'name' "
        "and 'type' (file/directory); directories always have a 'children' array. excludePatterns are "
        "glob patterns; a pattern without '*' excludes that name at any depth. Large trees are cut at a "
        "limit, with a line saying so after the JSON. Only works within allowed directories.",
        _READ,
        "path",
    )
    async def directory_tree(path: str, ctx: Context, excludePatterns: Sequence[str] = ()) -> TextOutput:
        roots = await guard.roots(ctx)
        try:
            exclude = _globs.excluder(list(excludePatterns), anywhere=True)
        except ValueError as exc:
            return _failure(f"excludePatterns: {exc}")
        result = await _run(lambda: _walk.tree(roots, path, exclude, walk_limits), path)
        if isinstance(result, CallToolResult):
            return result
        text = _walk.tree_json(result.entries)
        if result.truncated:
            text += f"\n[truncated: {result.truncated}]"
        return _ok(text)

    @tool(
        "search_files",
        "Search Files",
        "Recursively find files and directories whose path, relative to 'path', matches a glob pattern: "
        "'*.ext' matches in that directory only, '**/*.ext' at any depth. Returns full paths. Results are "
        "cut at a limit, with a line saying so. Only searches within allowed directories.",
        _READ,
        "path",
    )
    async def search_files(
        path: str, pattern: str, ctx: Context, excludePatterns: Sequence[str] = ()
    ) -> TextOutput:
        roots = await guard.roots(ctx)
        try:
            matcher = _globs.compile_glob(pattern)
            exclude = _globs.excluder(list(excludePatterns), anywhere=False)
        except ValueError as exc:
            return _failure(f"pattern: {exc}")
        result = await _run(lambda: _walk.search(roots, path, matcher, exclude, walk_limits), path)
        if isinstance(result, CallToolResult):
            return result
        text = "\n".join(result.matches) if result.matches else "No matches found"
        if result.truncated:
            text += f"\n[truncated: {result.truncated}]"
        return _ok(text)

    @tool(
        "get_file_info",
        "Get File Info",
        "Metadata of a file or directory: size, creation, modification and access times, type and "
        "permissions, without reading it. Only works within allowed directories.",
        _READ,
        "path",
    )
    async def get_file_info(path: str, ctx: Context) -> TextOutput:
        roots = await guard.roots(ctx)
        st = await _run(lambda: roots.stat(path), path)
        if isinstance(st, CallToolResult):
            return st
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
        return _ok("\n".join(f"{key}: {value}" for key, value in info.items()))

    @tool(
        "list_allowed_directories",
        "List Allowed Directories",
        "The directories this server may access for this client (subdirectories included). Use it to "
        "see what is available before accessing files.",
        _READ,
    )
    async def list_allowed_directories(ctx: Context) -> TextOutput:
        roots = await guard.roots(ctx)
        return _ok("Allowed directories:\n" + "\n".join(str(p) for p in roots.paths))

    return server


_INSTRUCTIONS = (
    "Files in the allowed directories (see list_allowed_directories). Paths may be absolute or relative "
    "to the first allowed directory; anything outside, including through symlinks, is refused."
)
