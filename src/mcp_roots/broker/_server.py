"""The server side of files/*: ``fs = await files(ctx)`` inside a tool.
Then read, write, list, watch... on the client's disk, through the client.
Legacy protocol era only: the requests ride the back-channel.
"""

# ``enable_brokering(server)`` installs the one middleware this needs: it records, per connection, whether
# the client's raw ``initialize`` offered ``roots.filesystemBrokering``, and routes
# ``notifications/files/changed`` to the watch that asked for it.

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server import MCPServer
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.mcpserver import Context
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from ..errors import BrokerError, BrokeringUnavailable
from . import _protocol as p
from . import _wire as w
from ._records import ConsentGrant, DirEntry, FileChange, FileInfo
from ._sdk import connection_of, send_files_request

__all__ = ["BrokeredFiles", "BrokeringState", "enable_brokering", "files"]

logger = logging.getLogger("mcp_roots")

STATE_KEY = "mcp_roots.broker"
"""The key of this module's per-connection state in ``Connection.state``."""

_M = TypeVar("_M", bound=w.Message)

WATCH_BUFFER = 1024
"""Change events buffered per watch; past that, events are dropped with a warning (the host batches, so
a consumer that stops reading for long is the only way to get there)."""


@dataclass
class BrokeringState:
    """One connection's brokering: whether its client offered it, and the open watches' streams."""

    offers: bool
    watches: dict[str, MemoryObjectSendStream[FileChange]] = field(default_factory=dict)


class _BrokeringMiddleware:
    """Server middleware: remembers the raw capability at ``initialize`` and routes change
    notifications (the typed SDK models drop both, see docs/brokering.md section 8)."""

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method == "initialize" and ctx.request_id is not None:
            capabilities = (ctx.params or {}).get("capabilities")
            connection_of(ctx).state[STATE_KEY] = BrokeringState(p.offers_brokering(capabilities))
        elif ctx.method == p.NOTIFICATION_CHANGED and ctx.request_id is None:
            _route_changes(ctx)
            return None
        return await call_next(ctx)


def _route_changes(ctx: ServerRequestContext[Any, Any]) -> None:
    state = connection_of(ctx).state.get(STATE_KEY)
    params = ctx.params or {}
    watch_id, changes = params.get("watchId"), params.get("changes")
    if not isinstance(state, BrokeringState) or not isinstance(watch_id, str):
        return
    stream = state.watches.get(watch_id)
    if stream is None or not isinstance(changes, list):
        logger.debug("dropped %s for unknown watch %r", p.NOTIFICATION_CHANGED, watch_id)
        return
    try:
        _deliver(stream, watch_id, changes)
    finally:
        if params.get("ended") is True:  # the host ended the watch: end the consumer's iteration
            state.watches.pop(watch_id, None)
            stream.close()


def _deliver(stream: MemoryObjectSendStream[FileChange], watch_id: str, changes: list[Any]) -> None:
    for raw in changes:
        try:  # one malformed change is dropped, not the whole batch
            change = w.ChangeEvent.model_validate(raw)
        except ValidationError:
            continue
        try:
            stream.send_nowait(FileChange(path=change.path, kind=change.kind, root=change.root))
        except anyio.WouldBlock:
            logger.warning("watch %s: the consumer is not keeping up; change events dropped", watch_id)
            return
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            return


def enable_brokering(server: MCPServer | Server[Any]) -> None:
    """Let the server's tools use :func:`files`. Call once when building the server (idempotent).

    Args:
        server: The official SDK's ``MCPServer`` or low-level ``Server``.
    """
    chain = server.middleware
    if not any(isinstance(m, _BrokeringMiddleware) for m in chain):
        chain.append(_BrokeringMiddleware())


DEFAULT_MAX_READ = 64 * 1024 * 1024
"""Bytes one :meth:`BrokeredFiles.read` call holds at most by default (64 MiB)."""

DEFAULT_MAX_ENTRIES = 100_000
"""Entries one :meth:`BrokeredFiles.list` call holds at most by default."""


async def files(
    ctx: Context,
    *,
    timeout: float = p.DEFAULT_TIMEOUT,  # noqa: ASYNC109 - each request's wait, not a deadline for this call
    chunk_size: int = p.DEFAULT_CHUNK_SIZE,
    max_read: int = DEFAULT_MAX_READ,
    max_entries: int = DEFAULT_MAX_ENTRIES,
) -> BrokeredFiles:
    """The client's files, brokered by the client, valid during the tool call ``ctx`` belongs to.

    Args:
        ctx: The tool's ``Context``.
        timeout: Seconds to wait for each answer; then the request is cancelled and ``TIMEOUT`` raised.
        chunk_size: Bytes per ``files/read`` or ``files/write`` request.
        max_read: The most bytes one ``read()`` holds, whatever the host claims (beyond: ``QUOTA_EXCEEDED``).
        max_entries: The most entries one ``list()`` holds, whatever the host claims (``QUOTA_EXCEEDED``).

    Raises:
        BrokeringUnavailable: On a 2026-07-28 connection (no back-channel for server requests), when the
            client did not offer ``capabilities.roots.filesystemBrokering``, or when
            :func:`enable_brokering` was not called on the server.
    """
    version = ctx.protocol_version
    if version in MODERN_PROTOCOL_VERSIONS:
        raise BrokeringUnavailable(
            f"client-brokered file access needs the legacy protocol era (2025-11-25 or older): this "
            f"connection speaks {version}, where a server cannot send requests to the client"
        )
    connection = connection_of(ctx)
    state = connection.state.get(STATE_KEY)
    if not isinstance(state, BrokeringState) and connection.client_params is None:
        raise BrokeringUnavailable(
            "this connection had no initialize handshake (stateless HTTP?): client-brokered file access "
            "needs a stateful legacy-era connection (stdio or stateful streamable HTTP)"
        )
    if not isinstance(state, BrokeringState):
        raise BrokeringUnavailable(
            "the server did not record the client's capabilities: call "
            "mcp_roots.broker.enable_brokering(server) when building the server"
        )
    if not state.offers:
        raise BrokeringUnavailable(
            "the client does not offer client-brokered file access (its initialize declared no "
            "capabilities.roots.filesystemBrokering: true); the server cannot reach the client's files"
        )
    if timeout <= 0 or not 0 < chunk_size <= p.MAX_CHUNK_SIZE or max_read < 0 or max_entries < 0:
        raise ValueError(
            f"timeout ({timeout}) must be positive, chunk_size ({chunk_size}) in 1..{p.MAX_CHUNK_SIZE}, "
            f"max_read ({max_read}) and max_entries ({max_entries}) not negative"
        )
    return BrokeredFiles(
        ctx, state, timeout=timeout, chunk_size=chunk_size, max_read=max_read, max_entries=max_entries
    )


def _contradiction(method: str, what: str, **data: object) -> BrokerError:
    return p.broker_error("IO_ERROR", f"the client's {method} answer contradicts itself: {what}", **data)


class BrokeredFiles:
    """The ``files/*`` operations, as a tool calls them (:func:`files` makes one).

    Paths are relative to a root of the client. Errors are :class:`BrokerError` with ``reason``. Every
    answer is validated against the wire models; one that contradicts itself (a chunk longer than its
    ``bytesRead``, a cursor that repeats) is ``IO_ERROR``. What one call holds is bounded (else
    ``QUOTA_EXCEEDED``).

    Args:
        ctx: The tool call's context.
        state: The connection's brokering state.
        timeout: Seconds each request may wait for the host's answer.
        chunk_size: Bytes one read or write request carries.
        max_read: Bytes one :meth:`read` holds at most.
        max_entries: Entries one :meth:`list` holds at most.
    """

    def __init__(
        self,
        ctx: Context,
        state: BrokeringState,
        *,
        timeout: float,
        chunk_size: int,
        max_read: int = DEFAULT_MAX_READ,
        max_entries: int = DEFAULT_MAX_ENTRIES,
    ) -> None:
        self._ctx = ctx
        self._state = state
        self.timeout = timeout
        self.chunk_size = chunk_size
        self.max_read = max_read
        self.max_entries = max_entries

    async def _call(self, method: str, params: Mapping[str, Any], model: type[_M]) -> _M:
        raw = await send_files_request(self._ctx, method, params, timeout=self.timeout)
        try:
            return model.model_validate(raw)
        except ValidationError as exc:
            first = exc.errors(include_url=False, include_input=False)[0]
            location = ".".join(str(x) for x in first["loc"]) or "result"
            raise _contradiction(method, f"{location}: {first['msg']}") from None

    @staticmethod
    def _ref(path: str, root: str | None) -> dict[str, Any]:
        ref: dict[str, Any] = {"path": path}
        if root is not None:
            ref["root"] = root
        return ref

    async def consent(
        self,
        message: str,
        paths: Sequence[str] | None = None,
        *,
        access: Literal["read", "write"] = "read",
        root: str | None = None,
    ) -> ConsentGrant:
        """Ask the user for access to paths; a refusal is an answer, not an error.

        Args:
            message: What the user is asked, in the server's words.
            paths: The paths (default: every root).
            access: ``"read"`` or ``"write"``.
            root: The root's URI (default: the first root).

        Returns:
            The user's answer (true only when everything was granted).
        """
        params: dict[str, Any] = {"message": message, "access": access}
        if paths is not None:
            params["paths"] = [self._ref(x, root) for x in paths]
        result = await self._call(p.CONSENT, params, w.ConsentResult)
        return ConsentGrant(
            granted=[x.path for x in result.granted],
            denied=[x.path for x in result.denied],
            access=result.access,
        )

    async def read_chunk(
        self, path: str, offset: int = 0, length: int | None = None, *, root: str | None = None
    ) -> w.ReadResult:
        """One ``files/read`` answer, checked: ``bytesRead`` matching the content, ``eof`` matching ``size``.

        Args:
            path: The file.
            offset: Where to start.
            length: At most this many bytes (default: ``chunk_size``).
            root: The root's URI (default: the first root).
        """
        asked = self.chunk_size if length is None else length
        params = self._ref(path, root)
        params.update(offset=offset, length=asked)
        answer = await self._call(p.READ, params, w.ReadResult)
        claimed = answer.bytes_read
        if answer.offset != offset:
            raise _contradiction(p.READ, f"asked for offset {offset}, got {answer.offset}", path=path)
        if claimed > asked or len(answer.content) > 4 * ((asked + 2) // 3) + 4:
            raise _contradiction(p.READ, f"asked for at most {asked} bytes, got {claimed}", path=path)
        if answer.eof != (offset + claimed >= answer.size):
            raise _contradiction(
                p.READ, f"eof={answer.eof} at {offset + claimed} of {answer.size}", path=path
            )
        return answer

    def _decode(self, answer: w.ReadResult, path: str) -> bytes:
        data = p.decode_content(answer.content, answer.encoding, max_bytes=p.MAX_CHUNK_SIZE)
        if len(data) != answer.bytes_read:
            raise _contradiction(
                p.READ, f"bytesRead {answer.bytes_read} but {len(data)} bytes sent", path=path
            )
        return data

    async def open_read(self, path: str, *, offset: int = 0, root: str | None = None) -> AsyncIterator[bytes]:
        """Stream a file in chunks of ``chunk_size`` bytes, one request at a time.

        A changed etag raises ``CONCURRENCY_CONFLICT``: the chunks are never spliced from two versions. The
        caller holds one chunk at a time; no total bound applies.

        Args:
            path: The file.
            offset: Where to start.
            root: The root's URI (default: the first root).
        """
        etag: str | None = None
        while True:
            answer = await self.read_chunk(path, offset, root=root)
            if etag is None:
                etag = answer.etag
            elif answer.etag != etag:
                raise p.broker_error(
                    "CONCURRENCY_CONFLICT", f"{path!r} changed while it was being read", path=path
                )
            data = self._decode(answer, path)
            if data:
                yield data
            offset += len(data)
            if answer.eof or not data:
                return

    async def read(
        self,
        path: str,
        *,
        offset: int = 0,
        length: int | None = None,
        root: str | None = None,
        in_flight: int = 2,
    ) -> bytes:
        """Read a file in chunks, each carrying the first chunk's etag (else ``CONCURRENCY_CONFLICT``).

        More than ``max_read`` bytes is ``QUOTA_EXCEEDED`` before the second request: the size the host
        reports is checked, never used to schedule work unbounded.

        Args:
            path: The file.
            offset: Where to start.
            length: How many bytes (default: to the end).
            root: The root's URI (default: the first root).
            in_flight: Requests at once, so the host's work and this process's overlap.
        """
        if in_flight < 1:
            raise ValueError(f"in_flight must be at least 1, not {in_flight}")
        first = await self.read_chunk(
            path, offset, length if length is not None and length < self.chunk_size else None, root=root
        )
        etag = first.etag
        head = self._decode(first, path)
        end = first.size if length is None else min(first.size, offset + length)
        if end - offset > self.max_read:
            raise p.broker_error(
                "QUOTA_EXCEEDED",
                f"{path!r}: {end - offset} bytes is more than this reader holds ({self.max_read}); "
                "use open_read() to stream it",
                path=path,
                kind="read",
                limit=self.max_read,
            )
        pieces: dict[int, bytes] = {offset: head}
        start = offset + len(head)
        if not head or first.eof or start >= end:
            return head[: max(0, end - offset)]
        spans = iter(range(start, end, self.chunk_size))

        async def worker() -> None:
            for span_start in spans:  # shared: each worker takes the next span
                at, span_end = span_start, min(end, span_start + self.chunk_size)
                while at < span_end:
                    answer = await self.read_chunk(path, at, span_end - at, root=root)
                    if answer.etag != etag:
                        raise p.broker_error(
                            "CONCURRENCY_CONFLICT", f"{path!r} changed while it was being read", path=path
                        )
                    data = self._decode(answer, path)
                    if not data:  # shorter than its size said: it changed (the etag would say so too)
                        raise p.broker_error(
                            "CONCURRENCY_CONFLICT", f"{path!r} changed while it was being read", path=path
                        )
                    pieces[at] = data
                    at += len(data)

        try:
            async with anyio.create_task_group() as task_group:
                for _ in range(min(in_flight, len(range(start, end, self.chunk_size)))):
                    task_group.start_soon(worker)
        except BaseException as exc:  # a task group wraps the first failure in an exception group
            error = _first_broker_error(exc)
            if error is None:
                raise
            raise error from None
        data = b"".join(pieces[k] for k in sorted(pieces))
        return data[: end - offset]

    async def read_text(self, path: str, *, encoding: str = "utf-8", root: str | None = None) -> str:
        """The whole file decoded as text (bounded by ``max_read`` like :meth:`read`).

        Args:
            path: The file.
            encoding: Its encoding.
            root: The root's URI (default: the first root).
        """
        return (await self.read(path, root=root)).decode(encoding)

    async def write(
        self,
        path: str,
        data: bytes | str,
        *,
        if_match: str | None = None,
        create_only: bool = False,
        root: str | None = None,
    ) -> FileInfo:
        """Replace (or create) a file: sent in chunks, made visible atomically by the host after the last.

        Args:
            path: The file.
            data: The new contents (text is sent as UTF-8).
            if_match: An etag: a concurrent change is ``CONCURRENCY_CONFLICT``.
            create_only: An existing file is ``CONCURRENCY_CONFLICT``.
            root: The root's URI (default: the first root).
        """
        raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        chunks = list(p.chunk_spans(len(raw), self.chunk_size))
        view = memoryview(raw)
        upload_id: str | None = None
        result = w.WriteResult(bytes_written=0)
        for index, (offset, length) in enumerate(chunks):
            params: dict[str, Any] = {"content": p.encode_content(bytes(view[offset : offset + length]))}
            if upload_id is None:
                params.update(self._ref(path, root))
                if if_match is not None:
                    params["ifMatch"] = if_match
                if create_only:
                    params["createOnly"] = True
            else:
                params.update(uploadId=upload_id, offset=offset)
            last = index == len(chunks) - 1
            if not last:
                params["more"] = True
            result = await self._call(p.WRITE, params, w.WriteResult)
            if result.bytes_written != offset + length:
                raise _contradiction(p.WRITE, f"{result.bytes_written} bytes written after {offset + length}")
            if not last and result.upload_id is None:
                raise _contradiction(p.WRITE, "no uploadId while more chunks follow")
            upload_id = result.upload_id or upload_id
        return FileInfo(
            "file",
            result.size if result.size is not None else len(raw),
            result.mtime or 0.0,
            result.etag or "",
        )

    async def list(self, path: str = "", *, root: str | None = None) -> list[DirEntry]:
        """Every entry of a folder, following ``nextCursor`` page by page.

        At most ``max_entries`` (``QUOTA_EXCEEDED`` beyond); a cursor that repeats or a page that is empty
        but not the last is ``IO_ERROR``.

        Args:
            path: The folder (default: the root itself).
            root: The root's URI (default: the first root).
        """
        entries: list[DirEntry] = []
        cursor: str | None = None
        seen: set[str] = set()
        while True:
            params = self._ref(path, root)
            if cursor is not None:
                params["cursor"] = cursor
            result = await self._call(p.LIST, params, w.ListResult)
            if len(entries) + len(result.entries) > self.max_entries:
                raise p.broker_error(
                    "QUOTA_EXCEEDED",
                    f"{path!r} has more than {self.max_entries} entries",
                    path=path,
                    kind="entries",
                    limit=self.max_entries,
                )
            entries.extend(DirEntry(e.name, e.type, e.size, e.mtime) for e in result.entries)
            cursor = result.next_cursor
            if not cursor:
                return entries
            if cursor in seen or not result.entries or len(cursor) > 1000:
                raise _contradiction(
                    p.LIST, f"cursor {cursor[:40]!r} repeats or follows an empty page", path=path
                )
            seen.add(cursor)

    async def stat(self, path: str, *, root: str | None = None) -> FileInfo:
        """Type, size, mtime and etag of a path (the etag is what ``if_match`` takes).

        Args:
            path: The path.
            root: The root's URI (default: the first root).
        """
        r = await self._call(p.STAT, self._ref(path, root), w.StatResult)
        return FileInfo(r.type, r.size, r.mtime, r.etag)

    async def create(
        self,
        path: str,
        type: Literal["file", "directory"] = "file",
        *,
        parents: bool = False,
        root: str | None = None,
    ) -> FileInfo:
        """Create an empty file or a directory; an existing path is ``CONCURRENCY_CONFLICT``.

        Args:
            path: The new path.
            type: ``"file"`` or ``"directory"``.
            parents: Create missing parent folders.
            root: The root's URI (default: the first root).
        """
        params = self._ref(path, root)
        params.update(type=type, parents=parents)
        r = await self._call(p.CREATE, params, w.CreateResult)
        return FileInfo(type, 0, r.mtime, r.etag)

    async def delete(
        self, path: str, *, recursive: bool = False, if_match: str | None = None, root: str | None = None
    ) -> None:
        """Delete a file, a symlink or a folder.

        Args:
            path: What to delete.
            recursive: Delete a whole folder tree.
            if_match: An etag: a concurrent change is ``CONCURRENCY_CONFLICT``.
            root: The root's URI (default: the first root).
        """
        params = self._ref(path, root)
        params["recursive"] = recursive
        if if_match is not None:
            params["ifMatch"] = if_match
        await self._call(p.DELETE, params, _Empty)

    async def rename(
        self,
        path: str,
        new_path: str,
        *,
        overwrite: bool = False,
        root: str | None = None,
        new_root: str | None = None,
    ) -> None:
        """Rename ``path`` to ``new_path``.

        Args:
            path: What to rename.
            new_path: Its new path.
            overwrite: Replace an existing target (else ``CONCURRENCY_CONFLICT``).
            root: The root's URI (default: the first root).
            new_root: The new path's root URI (default: the same root).
        """
        params = self._ref(path, root)
        params.update(newPath=new_path, overwrite=overwrite)
        if new_root is not None:
            params["newRoot"] = new_root
        await self._call(p.RENAME, params, _Empty)

    @asynccontextmanager
    async def watch(
        self, path: str = "", *, recursive: bool = False, root: str | None = None
    ) -> AsyncIterator[MemoryObjectReceiveStream[FileChange]]:
        """Watch a file or directory; iterate the yielded stream for :class:`FileChange` events.

        The watch ends (``files/unwatch``) when the block exits, and the stream ends when the host ends it.

        Args:
            path: What to watch (default: the root itself).
            recursive: Watch a folder's whole tree.
            root: The root's URI (default: the first root).
        """
        params = self._ref(path, root)
        params["recursive"] = recursive
        watch_id = (await self._call(p.WATCH, params, w.WatchResult)).watch_id
        send, receive = anyio.create_memory_object_stream[FileChange](WATCH_BUFFER)
        self._state.watches[watch_id] = send
        try:
            with send, receive:
                yield receive
        finally:
            self._state.watches.pop(watch_id, None)
            with anyio.move_on_after(5, shield=True):
                try:
                    await self._call(p.UNWATCH, {"watchId": watch_id}, _Empty)
                except Exception:  # the watch may already be gone (revoked, root deleted)
                    logger.debug("files/unwatch %s failed", watch_id, exc_info=True)


class _Empty(w.Message):
    """An answer with nothing in it (delete, rename, unwatch)."""


def _first_broker_error(exc: BaseException) -> BrokerError | None:
    if isinstance(exc, BrokerError):
        return exc
    for inner in getattr(exc, "exceptions", ()):
        found = _first_broker_error(inner)
        if found is not None:
            return found
    return None
