"""FileBroker: the host side of files/*. A Python MCP client installs it to run a server's file operations
beneath the client's roots, under the user's consent, limits and an audit log.

Every path goes through the race-free RootSet operations of one root at a time (openat2 RESOLVE_BENEATH on
Linux), so neither '..' nor a symlink can lead out of the root a request names.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import inspect
import logging
import os
import posixpath
import secrets
import stat
import time
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, TypeAlias

import anyio
import anyio.abc
import mcp_types
from mcp import Client
from mcp.client.session import ClientSession

from .._beneath import LIST_FLAGS, O_CLOEXEC, O_NOFOLLOW, list_entries
from .._errors import (
    BrokerError,
    FileTooLarge,
    InvalidPath,
    InvalidRootURI,
    PathOutsideRoots,
    RootsError,
)
from .._provider import RootsProvider
from .._rootset import Root, RootSet
from . import _protocol as p
from ._sdk import advertise_and_route, hook_client, send_files_notification

__all__ = ["ConsentItem", "FileBroker", "FileConsentRequest"]

logger = logging.getLogger("mcp_roots")
audit = logging.getLogger("mcp_roots.audit")

Access: TypeAlias = Literal["read", "write"]


@dataclass(frozen=True)
class ConsentItem:
    """One thing a server asks to reach: ``path`` (relative, '' for the whole root) beneath ``root``."""

    root: Root
    path: str

    @property
    def location(self) -> Path:
        """The local path this item names (for display; operations never open it by name)."""
        return self.root.path / self.path if self.path else self.root.path


@dataclass(frozen=True)
class FileConsentRequest:
    """What a FileBroker consent callback is asked: may ``server`` have ``access`` to ``items``?

    ``message`` is the server's own words for an explicit ``files/consent``; for an operation that arrives
    without consent (``explicit`` False) the broker writes it. Answer True (all), False (none), or the
    subset of ``items`` the user approved.
    """

    server: mcp_types.Implementation | None
    message: str
    items: tuple[ConsentItem, ...]
    access: Access
    explicit: bool

    @property
    def server_name(self) -> str:
        if self.server is None:
            return "an unidentified server"
        return f"{self.server.name} {self.server.version}".strip()


FileGrant: TypeAlias = "bool | Collection[ConsentItem]"
FileConsentCallback: TypeAlias = Callable[[FileConsentRequest], "FileGrant | Awaitable[FileGrant]"]


@dataclass
class _Grant:
    root: Path
    prefix: str  # relative, '' = the whole root
    access: Access


@dataclass
class _Upload:
    id: str
    root: Root
    path: str
    tmp: str  # relative to the root
    fd: int
    written: int = 0
    if_match: str | None = None
    create_only: bool = False
    last_active: float = field(default_factory=time.monotonic)
    lock: anyio.Lock = field(default_factory=anyio.Lock)


@dataclass
class _Watch:
    id: str
    root: Root
    path: str
    recursive: bool
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)


_ACCESS_OF: Mapping[str, Access] = {
    p.READ: "read",
    p.LIST: "read",
    p.STAT: "read",
    p.WATCH: "read",
    p.WRITE: "write",
    p.CREATE: "write",
    p.DELETE: "write",
    p.RENAME: "write",
}

LIST_PAGE = 1000
"""Entries per ``files/list`` page."""

MAX_UPLOADS = 16
"""Chunked uploads open at once per broker; more is QUOTA_EXCEEDED (kind "uploads")."""


class _TokenBucket:
    """``capacity`` operations at once, refilled at ``capacity / window`` per second."""

    def __init__(self, capacity: int, window: float) -> None:
        if capacity <= 0 or window <= 0:
            raise ValueError(f"rate must be (operations > 0, seconds > 0), not ({capacity}, {window})")
        self.capacity = capacity
        self.per_second = capacity / window
        self.tokens = float(capacity)
        self.stamp = time.monotonic()

    def take(self) -> float:
        """0 when an operation may run now, else the seconds until one may."""
        now = time.monotonic()
        self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.per_second)
        self.stamp = now
        if self.tokens >= 1:
            self.tokens -= 1
            return 0.0
        return (1 - self.tokens) / self.per_second


class FileBroker:
    """Answers a server's ``files/*`` requests beneath the client's roots (see docs/brokering.md).

    ``roots`` is the boundary: a :class:`RootsProvider` (its exposed roots, less any the user refused
    this server) or a fixed :class:`RootSet`. Each request is rate limited, checked, then run through the
    race-free RootSet operations of the one root it names, in a worker thread. Install the broker on a
    client before entering it, and enter the broker while the client runs (it owns the watchers)::

        broker = FileBroker(provider, consent=ask_user)
        client = Client(params, mode="legacy", list_roots_callback=provider)
        broker.install(client)
        async with client, broker:
            ...

    ``consent`` (sync or async) is asked before an operation on a path no grant covers, and by an explicit
    ``files/consent``; it may approve all, none or a subset. Without it, choosing the roots is taken as
    consent (as RootsProvider does). :meth:`revoke` withdraws grants at any time: later operations under
    them fail with ``PERMISSION_DENIED`` (``data.consent == "revoked"``) until a new ``files/consent`` is
    approved, and watches under them end.

    Limits: ``max_chunk`` bytes per read answer / write chunk, ``max_file`` bytes per file read or
    written (None: no limit), ``rate`` = (operations, seconds) token bucket, ``timeout`` seconds per
    request. Each refusal is ``QUOTA_EXCEEDED`` with ``data.kind`` ``"chunk"``, ``"file"``, ``"rate"``
    (plus ``retryAfterMs``) or ``"uploads"``. ``read_only`` refuses every write with ``PERMISSION_DENIED``.

    One broker serves one client connection. Every operation is logged to ``mcp_roots.audit`` (method,
    root, path, outcome, bytes; never contents).
    """

    def __init__(
        self,
        roots: RootsProvider | RootSet,
        *,
        consent: FileConsentCallback | None = None,
        read_only: bool = False,
        max_chunk: int = p.MAX_CHUNK_SIZE,
        max_file: int | None = None,
        rate: tuple[int, float] | None = (100, 1.0),
        timeout: float = p.DEFAULT_TIMEOUT,
        watch_interval: float = 0.5,
        max_watch_entries: int = 10_000,
    ) -> None:
        if max_chunk <= 0 or (max_file is not None and max_file < 0):
            raise ValueError(f"max_chunk ({max_chunk}) must be positive and max_file ({max_file}) >= 0")
        if timeout <= 0 or watch_interval <= 0:
            raise ValueError(f"timeout ({timeout}) and watch_interval ({watch_interval}) must be positive")
        self._roots = roots
        self._consent = consent
        self.read_only = read_only
        self.max_chunk = max_chunk
        self.max_file = max_file
        self._bucket = _TokenBucket(*rate) if rate is not None else None
        self.timeout = timeout
        self.watch_interval = watch_interval
        self.max_watch_entries = max_watch_entries
        self._session: ClientSession | None = None
        self._grants: list[_Grant] = []
        self._refused: set[tuple[Path, str, Access]] = set()
        self._revoked: list[tuple[Path, str]] = []  # (root, prefix); ("/", "") style entries by path
        self._revoked_all = False
        self._consent_lock = anyio.Lock()
        self._rootsets: dict[Path, RootSet] = {}
        self._uploads: dict[str, _Upload] = {}
        self._watches: dict[str, _Watch] = {}
        self._task_group: anyio.abc.TaskGroup | None = None

    # -- installation -------------------------------------------------------------------------------

    def install(self, client: Client | ClientSession) -> None:
        """Make a not-yet-entered ``Client`` or ``ClientSession`` answer ``files/*`` with this broker and
        declare ``roots.filesystemBrokering``. The client must have a roots callback."""
        if self._session is not None:
            raise RuntimeError("this FileBroker is already installed; use one broker per connection")

        def hook(session: ClientSession) -> None:
            self._session = session
            advertise_and_route(session, p.METHODS, self.handle)

        if isinstance(client, Client):
            hook_client(client, hook)
        else:
            hook(client)

    async def __aenter__(self) -> FileBroker:
        if self._task_group is not None:
            raise RuntimeError("this FileBroker is already running")
        task_group = anyio.create_task_group()
        await task_group.__aenter__()
        self._task_group = task_group
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        task_group, self._task_group = self._task_group, None
        assert task_group is not None
        task_group.cancel_scope.cancel()
        self._watches.clear()
        self._discard_uploads(lambda _u: True)
        return await task_group.__aexit__(exc_type, exc, tb)

    # -- consent ------------------------------------------------------------------------------------

    def revoke(self, paths: Collection[str | os.PathLike[str]] | None = None) -> None:
        """Withdraw consent: for everything (``paths`` None) or for grants at, under or above the given
        local paths. Open watches and uploads under them end at once. Safe to call from the event loop at
        any time."""
        if paths is None:
            self._grants.clear()
            self._revoked_all = True
            hit: Callable[[Path, str], bool] = lambda _root, _rel: True  # noqa: E731
        else:
            targets = [Path(os.path.realpath(os.fspath(x))) for x in paths]

            def hit(root: Path, rel: str) -> bool:
                where = root / rel if rel else root
                return any(_under(where, t) or _under(t, where) for t in targets)

            self._grants = [g for g in self._grants if not hit(g.root, g.prefix)]
            for t in targets:
                for root in self._current_roots():
                    if _under(t, root.path):
                        rel = t.relative_to(root.path).as_posix()
                        self._revoked.append((root.path, "" if rel == "." else rel))
                    elif _under(root.path, t):
                        self._revoked.append((root.path, ""))
        for watch in list(self._watches.values()):
            if hit(watch.root.path, watch.path):
                self._end_watch(watch, "revoked")
        self._discard_uploads(lambda u: hit(u.root.path, u.path))
        logger.info(
            "files/* consent revoked (%s)", "everything" if paths is None else ", ".join(map(str, paths))
        )
        audit.info("revoke paths=%s", "*" if paths is None else [os.fspath(x) for x in paths])

    @property
    def watching(self) -> tuple[tuple[str, str], ...]:
        """``(root URI, path)`` of every watch a server holds open now."""
        return tuple((w.root.uri, w.path) for w in self._watches.values())

    def _end_watch(self, watch: _Watch, reason: str) -> None:
        """Stop a watch and tell the server (a last notification with ``ended: true``), so its iterator
        ends instead of waiting for events that will never come."""
        watch.scope.cancel()
        if self._watches.pop(watch.id, None) is None:
            return
        session = self._session
        if self._task_group is not None and session is not None:
            params = {"watchId": watch.id, "changes": [], "ended": True, "reason": reason}
            self._task_group.start_soon(_notify_quietly, session, params)

    def _is_revoked(self, root: Path, rel: str) -> bool:
        if self._revoked_all:
            return True
        return any(r == root and _covers(prefix, rel) for r, prefix in self._revoked)

    def _covered(self, root: Path, rel: str, access: Access) -> bool:
        return any(
            g.root == root and _covers(g.prefix, rel) and (access == "read" or g.access == "write")
            for g in self._grants
        )

    async def _ask(self, request: FileConsentRequest) -> set[ConsentItem]:
        assert self._consent is not None
        try:
            answer = self._consent(request)
            if inspect.isawaitable(answer):
                answer = await answer
        except Exception:
            logger.exception("the files/* consent callback raised; treating it as a refusal")
            return set()
        if answer is True:
            return set(request.items)
        if answer is False or answer is None:
            return set()
        if not isinstance(answer, Collection) or isinstance(answer, (str, bytes)):
            logger.error("the files/* consent callback returned %r; refusing", answer)
            return set()
        return {item for item in request.items if item in answer}

    async def _require(self, root: Root, rel: str, access: Access) -> None:
        """Raise PERMISSION_DENIED unless ``access`` to ``rel`` beneath ``root`` is (or now gets) granted."""
        if access == "write" and self.read_only:
            raise p.broker_error(
                "PERMISSION_DENIED", f"{rel or '.'!r}: this client is read-only", path=rel, readOnly=True
            )
        if self._is_revoked(root.path, rel) and not self._covered(root.path, rel, access):
            raise p.broker_error(
                "PERMISSION_DENIED",
                f"{rel or '.'!r}: the user revoked consent; ask again with files/consent",
                path=rel,
                consent="revoked",
            )
        if self._consent is None or self._covered(root.path, rel, access):
            return
        key = (root.path, rel, access)
        async with self._consent_lock:
            if self._covered(root.path, rel, access):
                return
            if key not in self._refused:
                item = ConsentItem(root, rel)
                verb = "read" if access == "read" else "change"
                request = FileConsentRequest(
                    server=self._server_info(),
                    message=f"The server wants to {verb} {rel or 'the folder'!r} in {root.name or root.path}",
                    items=(item,),
                    access=access,
                    explicit=False,
                )
                if item in await self._ask(request):
                    self._grants.append(_Grant(root.path, rel, access))
                    return
                self._refused.add(key)
        raise p.broker_error(
            "PERMISSION_DENIED", f"{rel or '.'!r}: the user did not consent", path=rel, consent="denied"
        )

    async def _authorize(self, root: Root, rootset: RootSet, rel: str, access: Access) -> None:
        """:meth:`_require` for the path as named and, where consent is per path, for where it leads.

        Grants name paths lexically; a symlink inside the root (``public/x -> ../private/y``) must not
        carry a grant for ``public`` over to ``private``. So when grants or revocations are narrower than
        whole roots, the canonical location is checked too (and asked about, if it needs consent). The
        file operation itself stays confined to the root race-free; a symlink swapped between this check
        and the operation can only lead elsewhere inside the same root (see docs/design.md).
        """
        await self._require(root, rel, access)
        if not self._revoked and (self._consent is None or all(not g.prefix for g in self._grants)):
            return
        canonical = await self._run(rel, _canonical_rel, rootset, root, rel)
        if canonical != rel:
            try:
                await self._require(root, canonical, access)
            except BrokerError as exc:  # name the path the server asked for, not where the link leads
                consent = exc.data.get("consent", "denied")
                raise p.broker_error(
                    "PERMISSION_DENIED",
                    f"{rel!r} leads through a symlink to a path without consent",
                    path=rel,
                    consent=consent,
                ) from None

    def _server_info(self) -> mcp_types.Implementation | None:
        result = getattr(self._session, "initialize_result", None)
        info = getattr(result, "server_info", None)
        return info if isinstance(info, mcp_types.Implementation) else None

    # -- roots --------------------------------------------------------------------------------------

    def _current_roots(self) -> tuple[Root, ...]:
        if isinstance(self._roots, RootSet):
            return self._roots.roots
        roots = self._roots.roots
        state = self._roots._sessions.get(self._session) if self._session is not None else None
        if state is not None:  # roots the user refused this server on roots/list stay refused here
            roots = tuple(r for r in roots if r.path not in state.denied)
        return roots

    def _root(self, uri: object) -> Root:
        roots = self._current_roots()
        if uri is None:
            if not roots:
                raise p.broker_error("PERMISSION_DENIED", "the client exposes no roots")
            return roots[0]
        if not isinstance(uri, str):
            raise p.broker_error("INVALID_PARAMS", f"root must be a URI string, not {uri!r}")
        for root in roots:
            if root.uri == uri:
                return root
        raise p.broker_error(
            "PERMISSION_DENIED", f"root {uri!r} is not one of the client's current roots", root=uri
        )

    def _rootset(self, root: Root) -> RootSet:
        found = self._rootsets.get(root.path)
        if found is None:
            for stale in set(self._rootsets) - {r.path for r in self._current_roots()}:
                self._rootsets.pop(stale).close()
            found = self._rootsets[root.path] = RootSet.from_paths([(root.path, root.name)], source="client")
        return found

    # -- dispatch -----------------------------------------------------------------------------------

    async def handle(self, method: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
        """Answer one ``files/*`` request (the handler :meth:`install` routes to); raises BrokerError."""
        params = params or {}
        started = time.monotonic()
        where: dict[str, object] = {}
        self._expire_uploads()
        try:
            if self._bucket is not None and method != p.UNWATCH:
                wait = self._bucket.take()
                if wait:
                    raise p.broker_error(
                        "QUOTA_EXCEEDED",
                        f"rate limit: at most {self._bucket.capacity} files/* operations per "
                        f"{self._bucket.capacity / self._bucket.per_second:g}s",
                        kind="rate",
                        limit=self._bucket.capacity,
                        retryAfterMs=int(wait * 1000) + 1,
                    )
            try:
                with anyio.fail_after(self.timeout):
                    result = await self._dispatch(method, params, where)
            except BrokerError:
                raise
            except TimeoutError:
                raise p.broker_error(
                    "TIMEOUT", f"{method} did not finish within {self.timeout:g}s", timeout=self.timeout
                ) from None
            except (RootsError, OSError) as exc:  # outside _run: a root gone, a staging file lost...
                rel = str(where.get("path", ""))
                raise _reason_of(exc, rel) or p.broker_error("IO_ERROR", f"{rel!r}: {exc}") from None
        except BrokerError as exc:
            self._audit(method, where, params, exc.reason, started)
            raise
        except Exception:
            self._audit(method, where, params, "error", started)
            raise
        self._audit(method, where, params, "ok", started, result)
        return result

    def _audit(
        self,
        method: str,
        where: Mapping[str, object],
        params: Mapping[str, Any],
        outcome: str,
        started: float,
        result: Mapping[str, Any] | None = None,
    ) -> None:
        size = 0
        if result is not None:
            size = int(result.get("bytesRead") or 0) if method == p.READ else 0
        if method == p.WRITE and outcome == "ok":
            size = int(where.get("chunk", 0))  # type: ignore[call-overload]
        server = self._server_info()
        audit.info(
            "%s server=%s root=%s path=%s outcome=%s bytes=%d ms=%.1f",
            method,
            server.name if server else "?",
            where.get("root", params.get("root")),
            where.get("path", params.get("path")),
            outcome,
            size,
            (time.monotonic() - started) * 1000,
            extra={
                "files_method": method,
                "files_root": where.get("root"),
                "files_path": where.get("path"),
                "files_outcome": outcome,
                "files_bytes": size,
            },
        )

    async def _dispatch(
        self, method: str, params: Mapping[str, Any], where: dict[str, object]
    ) -> dict[str, Any]:
        if method == p.CONSENT:
            return await self._consent_request(params)
        if method == p.UNWATCH:
            watch_id = params.get("watchId")
            watch = self._watches.pop(watch_id, None) if isinstance(watch_id, str) else None
            if watch is None:
                raise p.broker_error("INVALID_PARAMS", f"no watch {watch_id!r}")
            watch.scope.cancel()
            return {}
        if method == p.WRITE and "uploadId" in params:
            return await self._write_next(params, where)
        root = self._root(params.get("root"))
        where["root"] = root.uri
        rel = p.check_relative_path(params.get("path"))
        where["path"] = rel
        access = _ACCESS_OF.get(method)
        if access is None:  # pragma: no cover - METHODS and _ACCESS_OF list the same methods
            raise p.broker_error("INVALID_PARAMS", f"unknown method {method!r}")
        rootset = self._rootset(root)
        await self._authorize(root, rootset, rel, access)
        full = _join(root, rel)
        if method == p.READ:
            return await self._read(rootset, full, rel, params)
        if method == p.WRITE:
            return await self._write_first(root, rootset, rel, params, where)
        if method == p.LIST:
            page: dict[str, Any] = await self._run(rel, _list_page, rootset, full, params.get("cursor"))
            return page
        if method == p.STAT:
            st = await self._run(rel, rootset.stat, full)
            return _describe_stat(st)
        if method == p.CREATE:
            return await self._create(rootset, full, rel, params)
        if method == p.DELETE:
            return await self._delete(rootset, full, rel, params)
        if method == p.RENAME:
            return await self._rename(root, rel, params, where)
        return await self._watch(root, rootset, rel, params)

    async def _run(self, rel: str, func: Callable[..., Any], *args: Any, mutating: bool = False) -> Any:
        """Run a blocking file operation in a worker thread, mapping its exceptions to reasons.

        A read is abandoned when the request times out. A mutating call that has started is shielded
        and runs to completion, and its outcome is the answer: a TIMEOUT answer never hides a change that
        happened anyway (the timeout bounds consent prompts, queueing and reads).
        """
        try:
            if mutating:
                with anyio.CancelScope(shield=True):
                    return await anyio.to_thread.run_sync(func, *args)
            return await anyio.to_thread.run_sync(func, *args, abandon_on_cancel=True)
        except BrokerError:
            raise
        except BaseException as exc:
            error = _reason_of(exc, rel)
            if error is None:
                raise
            raise error from None

    # -- operations ---------------------------------------------------------------------------------

    async def _read(self, rootset: RootSet, full: str, rel: str, params: Mapping[str, Any]) -> dict[str, Any]:
        offset = _int(params, "offset", 0)
        length = _int(params, "length", p.DEFAULT_CHUNK_SIZE)
        encoding = params.get("encoding", "base64")
        if encoding not in ("base64", "utf-8"):
            raise p.broker_error("INVALID_PARAMS", f"unknown encoding {encoding!r}; use 'base64' or 'utf-8'")
        length = min(length, self.max_chunk)  # a host may answer fewer bytes than asked
        data, st = await self._run(rel, _pread, rootset, full, offset, length, self.max_file)
        try:
            content = p.encode_content(data, encoding)
        except UnicodeDecodeError:
            raise p.broker_error(
                "IO_ERROR",
                f"{rel!r}: bytes {offset}..{offset + len(data)} are not UTF-8; read base64",
                path=rel,
            ) from None
        return {
            "content": content,
            "encoding": encoding,
            "offset": offset,
            "bytesRead": len(data),
            "size": st.st_size,
            "eof": offset + len(data) >= st.st_size,
            "etag": p.etag_of(st),
            "mtime": st.st_mtime,
        }

    async def _write_first(
        self, root: Root, rootset: RootSet, rel: str, params: Mapping[str, Any], where: dict[str, object]
    ) -> dict[str, Any]:
        if not rel:
            raise p.broker_error("INVALID_PATH", "cannot write to the root itself; name a file in it")
        data = p.decode_content(
            params.get("content"), params.get("encoding", "base64"), max_bytes=self.max_chunk
        )
        where["chunk"] = len(data)
        if_match = params.get("ifMatch")
        if if_match is not None and not isinstance(if_match, str):
            raise p.broker_error("INVALID_PARAMS", "ifMatch must be an etag string")
        create_only = params.get("createOnly", False) is True
        if len(self._uploads) >= MAX_UPLOADS:
            raise p.broker_error(
                "QUOTA_EXCEEDED",
                f"at most {MAX_UPLOADS} uploads may be open at once",
                kind="uploads",
                limit=MAX_UPLOADS,
            )
        self._check_file_size(len(data), rel)
        full = _join(root, rel)
        await self._run(rel, _check_target, rootset, full, rel, if_match, create_only)
        parent, name = posixpath.split(rel)
        tmp = posixpath.join(parent, f".{name[:200]}.{secrets.token_hex(8)}.upload")
        fd = await self._run(rel, _create_staging, rootset, _join(root, tmp), mutating=True)
        upload = _Upload(secrets.token_urlsafe(16), root, rel, tmp, fd, 0, if_match, create_only)
        self._uploads[upload.id] = upload
        try:
            await self._run(rel, _pwrite_all, fd, data, 0, mutating=True)
            upload.written = len(data)
            if params.get("more", False) is True:
                return {"bytesWritten": upload.written, "uploadId": upload.id}
            return await self._commit(upload, rootset)
        except BaseException:
            self._discard_uploads(lambda u: u is upload)
            raise

    async def _write_next(self, params: Mapping[str, Any], where: dict[str, object]) -> dict[str, Any]:
        upload = self._uploads.get(params["uploadId"]) if isinstance(params.get("uploadId"), str) else None
        if upload is None:
            raise p.broker_error(
                "INVALID_PARAMS", f"no open upload {params.get('uploadId')!r} (finished, expired or revoked)"
            )
        where.update(root=upload.root.uri, path=upload.path)
        async with upload.lock:
            if self._uploads.get(upload.id) is not upload:
                raise p.broker_error("INVALID_PARAMS", f"upload {upload.id!r} was discarded")
            try:
                await self._require(upload.root, upload.path, "write")
                if _int(params, "offset", -1) != upload.written:
                    raise p.broker_error(
                        "INVALID_PARAMS",
                        f"upload {upload.id!r}: chunk offset {params.get('offset')!r} is not the "
                        f"{upload.written} bytes written so far",
                    )
                data = p.decode_content(
                    params.get("content"), params.get("encoding", "base64"), max_bytes=self.max_chunk
                )
                where["chunk"] = len(data)
                self._check_file_size(upload.written + len(data), upload.path)
                await self._run(upload.path, _pwrite_all, upload.fd, data, upload.written, mutating=True)
                upload.written += len(data)
                upload.last_active = time.monotonic()
                if params.get("more", False) is True:
                    return {"bytesWritten": upload.written, "uploadId": upload.id}
                return await self._commit(upload, self._rootset(upload.root))
            except BaseException:
                self._discard_uploads(lambda u: u is upload)
                raise

    async def _commit(self, upload: _Upload, rootset: RootSet) -> dict[str, Any]:
        st = await self._run(
            upload.path,
            _commit_staging,
            rootset,
            _join(upload.root, upload.tmp),
            _join(upload.root, upload.path),
            upload.path,
            upload.fd,
            upload.if_match,
            upload.create_only,
            mutating=True,
        )
        self._uploads.pop(upload.id, None)
        os.close(upload.fd)
        return {
            "bytesWritten": upload.written,
            "etag": p.etag_of(st),
            "mtime": st.st_mtime,
            "size": st.st_size,
        }

    def _check_file_size(self, size: int, rel: str) -> None:
        if self.max_file is not None and size > self.max_file:
            raise p.broker_error(
                "QUOTA_EXCEEDED",
                f"{rel!r}: larger than the {self.max_file}-byte file limit",
                kind="file",
                limit=self.max_file,
            )

    def _expire_uploads(self) -> None:
        deadline = time.monotonic() - self.timeout
        self._discard_uploads(lambda u: u.last_active < deadline and not u.lock.locked())

    def _discard_uploads(self, which: Callable[[_Upload], bool]) -> None:
        for upload in [u for u in self._uploads.values() if which(u)]:
            del self._uploads[upload.id]
            with contextlib.suppress(OSError):
                os.close(upload.fd)
            with contextlib.suppress(OSError, RootsError):
                self._rootset(upload.root).remove(_join(upload.root, upload.tmp))
            logger.info("discarded the upload to %r", upload.path)

    async def _create(
        self, rootset: RootSet, full: str, rel: str, params: Mapping[str, Any]
    ) -> dict[str, Any]:
        kind = params.get("type")
        if kind not in ("file", "directory"):
            raise p.broker_error("INVALID_PARAMS", f"type must be 'file' or 'directory', not {kind!r}")
        if not rel:
            raise p.broker_error("CONCURRENCY_CONFLICT", "the root itself already exists", path=rel)
        st = await self._run(
            rel, _create, rootset, full, kind, params.get("parents", False) is True, mutating=True
        )
        return {"etag": p.etag_of(st), "mtime": st.st_mtime}

    async def _delete(
        self, rootset: RootSet, full: str, rel: str, params: Mapping[str, Any]
    ) -> dict[str, Any]:
        if not rel:
            raise p.broker_error("PERMISSION_DENIED", "a root itself cannot be deleted", path=rel)
        if_match = params.get("ifMatch")
        await self._run(
            rel, _delete, rootset, full, rel, params.get("recursive", False) is True, if_match, mutating=True
        )
        return {}

    async def _rename(
        self, root: Root, rel: str, params: Mapping[str, Any], where: dict[str, object]
    ) -> dict[str, Any]:
        new_root = self._root(params["newRoot"]) if params.get("newRoot") is not None else root
        new_rel = p.check_relative_path(params.get("newPath"))
        where["newPath"] = new_rel
        if not rel or not new_rel:
            raise p.broker_error("PERMISSION_DENIED", "a root itself cannot be renamed or replaced", path=rel)
        await self._authorize(new_root, self._rootset(new_root), new_rel, "write")
        if new_root.path == root.path:
            rootset = self._rootset(root)
        else:
            rootset = RootSet.from_paths(
                [(root.path, root.name), (new_root.path, new_root.name)], source="client"
            )
        overwrite = params.get("overwrite", False) is True
        await self._run(
            rel, _rename, rootset, _join(root, rel), _join(new_root, new_rel), overwrite, mutating=True
        )
        return {}

    async def _watch(
        self, root: Root, rootset: RootSet, rel: str, params: Mapping[str, Any]
    ) -> dict[str, Any]:
        if self._task_group is None or self._session is None:
            raise p.broker_error(
                "IO_ERROR", "this client does not run watches (the FileBroker is not entered)"
            )
        recursive = params.get("recursive", False) is True
        first = await self._run(rel, _snapshot, rootset, _join(root, rel), recursive, self.max_watch_entries)
        watch = _Watch(secrets.token_urlsafe(12), root, rel, recursive)
        self._watches[watch.id] = watch
        self._task_group.start_soon(self._poll, watch, rootset, first)
        return {"watchId": watch.id}

    async def _poll(self, watch: _Watch, rootset: RootSet, before: dict[str, tuple[int, ...]]) -> None:
        """Poll one watch through the RootSet operations and send the differences (see docs/design.md)."""
        session = self._session
        assert session is not None
        full = _join(watch.root, watch.path)
        with watch.scope:
            while True:
                await anyio.sleep(self.watch_interval)
                try:
                    after = await anyio.to_thread.run_sync(
                        _snapshot,
                        rootset,
                        full,
                        watch.recursive,
                        self.max_watch_entries,
                        abandon_on_cancel=True,
                    )
                except (OSError, RootsError):
                    after = None  # gone, unreadable or now leading outside: a last 'deleted' and the end
                changes: list[dict[str, Any]] = _diff(watch, before, after or {})
                params: dict[str, Any] = {"watchId": watch.id, "changes": changes}
                if after is None:
                    changes[:] = [{"root": watch.root.uri, "path": watch.path, "kind": "deleted"}]
                    params.update(ended=True, reason="deleted")
                    self._watches.pop(watch.id, None)
                if changes:
                    await send_files_notification(session, p.NOTIFICATION_CHANGED, params)
                    audit.info("%s watch=%s changes=%d", p.NOTIFICATION_CHANGED, watch.id, len(changes))
                if after is None:
                    return
                before = after

    async def _consent_request(self, params: Mapping[str, Any]) -> dict[str, Any]:
        message = params.get("message")
        if not isinstance(message, str) or not message.strip():
            raise p.broker_error("INVALID_PARAMS", "files/consent needs a non-empty 'message'")
        access = params.get("access", "read")
        if access not in ("read", "write"):
            raise p.broker_error("INVALID_PARAMS", f"access must be 'read' or 'write', not {access!r}")
        raw = params.get("paths")
        refs: list[Mapping[str, Any]]
        if raw is None:
            refs = [{"root": r.uri, "path": ""} for r in self._current_roots()]
        elif isinstance(raw, list) and all(isinstance(x, Mapping) for x in raw):
            refs = raw
        else:
            raise p.broker_error("INVALID_PARAMS", "paths must be a list of {root?, path} objects")
        items: list[ConsentItem] = []
        denied: list[dict[str, str]] = []
        for ref in refs:
            try:
                root = self._root(ref.get("root"))
                items.append(ConsentItem(root, p.check_relative_path(ref.get("path"))))
            except BrokerError:
                denied.append({k: v for k, v in ref.items() if k in ("root", "path")})
        granted: set[ConsentItem] = set()
        if items and not (access == "write" and self.read_only):
            if self._consent is not None:
                async with self._consent_lock:
                    granted = await self._ask(
                        FileConsentRequest(self._server_info(), message, tuple(items), access, explicit=True)
                    )
            elif not self._revoked_all and not any(self._is_revoked(i.root.path, i.path) for i in items):
                granted = set(items)
        for item in items:
            if item in granted:
                self._grants.append(_Grant(item.root.path, item.path, access))
                self._refused = {
                    k for k in self._refused if not (k[0] == item.root.path and _covers(item.path, k[1]))
                }
            else:
                denied.append({"root": item.root.uri, "path": item.path})
        logger.info("files/consent (%s): %d granted, %d denied", access, len(granted), len(denied))
        return {
            "granted": [{"root": i.root.uri, "path": i.path} for i in items if i in granted],
            "denied": denied,
            "access": access,
        }


# --- blocking helpers (worker threads) ----------------------------------------------------------------


async def _notify_quietly(session: ClientSession, params: Mapping[str, Any]) -> None:
    with anyio.move_on_after(5):
        try:
            await send_files_notification(session, p.NOTIFICATION_CHANGED, params)
        except Exception:  # the connection may be closing; the watch is gone either way
            logger.debug(
                "could not tell the server that watch %s ended", params.get("watchId"), exc_info=True
            )


def _canonical_rel(rootset: RootSet, root: Root, rel: str) -> str:
    """Where ``rel`` leads beneath ``root`` once symlinks are followed, as a relative path."""
    real = rootset.resolve(_join(root, rel))  # PathOutsideRoots when it leads out of the root
    return "" if real == root.path else real.relative_to(root.path).as_posix()


def _join(root: Root, rel: str) -> str:
    return f"{root.path}/{rel}" if rel else str(root.path)


def _under(path: Path, base: Path) -> bool:
    return path == base or base in path.parents


def _covers(prefix: str, rel: str) -> bool:
    return not prefix or rel == prefix or rel.startswith(prefix + "/")


def _int(params: Mapping[str, Any], key: str, default: int) -> int:
    value = params.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        if value == default:
            return default
        raise p.broker_error("INVALID_PARAMS", f"{key} must be a non-negative integer, not {value!r}")
    return value


def _kind(mode: int) -> Literal["file", "directory", "symlink", "other"]:
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "directory"
    if stat.S_ISLNK(mode):
        return "symlink"
    return "other"


def _describe_stat(st: os.stat_result) -> dict[str, Any]:
    return {"type": _kind(st.st_mode), "size": st.st_size, "mtime": st.st_mtime, "etag": p.etag_of(st)}


def _reason_of(exc: BaseException, rel: str) -> BrokerError | None:
    """The protocol error for an exception from a RootSet operation; messages name the relative path only
    (host paths and other roots are not the server's business)."""
    shown = repr(rel or ".")
    if isinstance(exc, PathOutsideRoots):
        return p.broker_error("PERMISSION_DENIED", f"Access denied: {shown} leads outside its root", path=rel)
    if isinstance(exc, FileTooLarge):
        return p.broker_error(
            "QUOTA_EXCEEDED", f"{shown} is larger than the file limit", path=rel, kind="file"
        )
    if isinstance(exc, (InvalidPath, InvalidRootURI)):
        text = str(exc)
        why = "is not a regular file" if "not a regular file" in text else "cannot be used here"
        return p.broker_error("INVALID_PATH", f"{shown} {why}", path=rel)
    if isinstance(exc, OSError):
        strerror = exc.strerror or type(exc).__name__
        if isinstance(exc, FileNotFoundError):
            return p.broker_error("FILE_NOT_FOUND", f"{shown} does not exist", path=rel)
        if isinstance(exc, FileExistsError):
            return p.broker_error("CONCURRENCY_CONFLICT", f"{shown}: the target already exists", path=rel)
        if isinstance(exc, PermissionError):
            return p.broker_error("PERMISSION_DENIED", f"{shown}: {strerror}", path=rel)
        if isinstance(exc, (IsADirectoryError, NotADirectoryError)) or exc.errno == errno.ELOOP:
            return p.broker_error("INVALID_PATH", f"{shown}: {strerror}", path=rel)
        return p.broker_error("IO_ERROR", f"{shown}: {strerror}", path=rel)
    return None


def _pread(
    rootset: RootSet, full: str, offset: int, length: int, max_file: int | None
) -> tuple[bytes, os.stat_result]:
    fd = rootset.open_fd(full, os.O_RDONLY | os.O_NONBLOCK)
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, "is a directory; list it with files/list")
        if not stat.S_ISREG(st.st_mode):
            raise InvalidPath("not a regular file")
        if max_file is not None and st.st_size > max_file:
            raise FileTooLarge(f"{st.st_size} > {max_file}")
        return os.pread(fd, length, offset), st
    finally:
        os.close(fd)


def _etag_now(rootset: RootSet, full: str) -> str | None:
    try:
        return p.etag_of(rootset.stat(full))
    except FileNotFoundError:
        return None


def _check_target(rootset: RootSet, full: str, rel: str, if_match: str | None, create_only: bool) -> None:
    current = _etag_now(rootset, full)
    if create_only and current is not None:
        raise p.broker_error("CONCURRENCY_CONFLICT", f"{rel!r} already exists (createOnly)", path=rel)
    if if_match is not None and current != if_match:
        raise p.broker_error(
            "CONCURRENCY_CONFLICT",
            f"{rel!r} changed since it was read (ifMatch {if_match!r}, now {current!r})",
            path=rel,
            etag=current,
        )


def _create_staging(rootset: RootSet, full_tmp: str) -> int:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | O_NOFOLLOW | O_CLOEXEC
    return rootset.open_fd(full_tmp, flags, 0o666)


def _pwrite_all(fd: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        view = view[written:]
        offset += written


def _commit_staging(
    rootset: RootSet,
    full_tmp: str,
    full: str,
    rel: str,
    fd: int,
    if_match: str | None,
    create_only: bool,
) -> os.stat_result:
    """Make the staged upload the file: keep the old file's mode, re-check ``ifMatch``, rename."""
    try:
        old = rootset.stat(full)
    except FileNotFoundError:
        old = None
    if old is not None and stat.S_ISREG(old.st_mode):
        os.fchmod(fd, stat.S_IMODE(old.st_mode))
    os.fsync(fd)
    _check_target(rootset, full, rel, if_match, create_only)
    mine, there = os.fstat(fd), rootset.stat(full_tmp)
    if (mine.st_dev, mine.st_ino) != (there.st_dev, there.st_ino):
        raise p.broker_error("IO_ERROR", f"the staging file of {rel!r} was replaced; upload again", path=rel)
    _rename(rootset, full_tmp, full, overwrite=not create_only)
    return os.fstat(fd)


def _create(rootset: RootSet, full: str, kind: str, parents: bool) -> os.stat_result:
    if parents:
        rootset.mkdir(posixpath.dirname(full), parents=True, exist_ok=True)
    if kind == "directory":
        rootset.mkdir(full)
    else:
        os.close(rootset.open_fd(full, os.O_WRONLY | os.O_CREAT | os.O_EXCL | O_NOFOLLOW, 0o666))
    return rootset.stat(full)


def _delete(rootset: RootSet, full: str, rel: str, recursive: bool, if_match: object) -> None:
    if if_match is not None:
        current = _etag_now(rootset, full)
        if current != if_match:
            raise p.broker_error("CONCURRENCY_CONFLICT", f"{rel!r} changed (ifMatch)", path=rel, etag=current)
    rootset.remove(full, recursive=recursive)


def _rename(rootset: RootSet, src: str, dst: str, overwrite: bool) -> None:
    if overwrite:
        rootset.rename(src, dst)
        return

    def from_parent(src_dir: int, src_name: str) -> None:
        def to_parent(dst_dir: int, dst_name: str) -> None:
            _rename_noreplace(src_dir, src_name, dst_dir, dst_name)

        rootset._in_parent(dst, to_parent, "replaced")

    rootset._in_parent(src, from_parent, "renamed")


_RENAME_NOREPLACE = 1


def _load_renameat2() -> Any:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        func = libc.renameat2
    except (OSError, AttributeError):  # pragma: no cover - not glibc >= 2.28
        return None
    func.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    func.restype = ctypes.c_int
    return func


_renameat2 = _load_renameat2()


def _rename_noreplace(src_dir: int, src: str, dst_dir: int, dst: str) -> None:
    """rename that fails with EEXIST instead of replacing: renameat2(RENAME_NOREPLACE), else link+unlink
    for a file (both atomic no-replace), else a checked rename (documented as racy)."""
    if _renameat2 is not None:
        if _renameat2(src_dir, os.fsencode(src), dst_dir, os.fsencode(dst), _RENAME_NOREPLACE) == 0:
            return
        code = ctypes.get_errno()
        if code not in (errno.EINVAL, errno.ENOSYS):  # EINVAL: the file system lacks NOREPLACE
            raise OSError(code, os.strerror(code))
    st = os.stat(src, dir_fd=src_dir, follow_symlinks=False)  # pragma: no cover - old kernels only
    if not stat.S_ISDIR(st.st_mode):  # pragma: no cover
        os.link(src, dst, src_dir_fd=src_dir, dst_dir_fd=dst_dir, follow_symlinks=False)
        os.unlink(src, dir_fd=src_dir)
        return
    try:  # pragma: no cover
        os.stat(dst, dir_fd=dst_dir, follow_symlinks=False)
    except FileNotFoundError:  # pragma: no cover
        os.rename(src, dst, src_dir_fd=src_dir, dst_dir_fd=dst_dir)
        return
    raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST))  # pragma: no cover


def _list_page(rootset: RootSet, full: str, cursor: object) -> dict[str, Any]:
    start = 0
    if cursor is not None:
        if not isinstance(cursor, str) or not cursor.isdigit():
            raise p.broker_error("INVALID_PARAMS", f"cursor {cursor!r} was not given by files/list")
        start = int(cursor)
    fd = rootset.open_fd(full, LIST_FLAGS)
    try:
        raw = sorted(list_entries(fd))
    finally:
        os.close(fd)
    page = raw[start : start + LIST_PAGE]
    result: dict[str, Any] = {
        "entries": [
            {"name": name, "type": _kind(st.st_mode), "size": st.st_size, "mtime": st.st_mtime}
            for name, st in page
        ]
    }
    if start + LIST_PAGE < len(raw):
        result["nextCursor"] = str(start + LIST_PAGE)
    return result


def _snapshot(rootset: RootSet, full: str, recursive: bool, limit: int) -> dict[str, tuple[int, ...]]:
    """``{relative name: (type bits, size, mtime_ns, inode)}`` of a watched path, walked through
    descriptors with O_NOFOLLOW (symlinks are entries, never followed). A file watch has one entry ''."""
    st = rootset.stat(full)
    if not stat.S_ISDIR(st.st_mode):
        return {"": (stat.S_IFMT(st.st_mode), st.st_size, st.st_mtime_ns, st.st_ino)}
    out: dict[str, tuple[int, ...]] = {}
    top = rootset.open_fd(full, LIST_FLAGS)
    stack: list[tuple[int, str]] = [(top, "")]
    try:
        while stack:
            fd, prefix = stack.pop()
            try:
                for name, est in list_entries(fd):
                    rel = f"{prefix}{name}"
                    out[rel] = (stat.S_IFMT(est.st_mode), est.st_size, est.st_mtime_ns, est.st_ino)
                    if len(out) >= limit:
                        logger.warning("watch of %s stops at %d entries", full, limit)
                        return out
                    if recursive and stat.S_ISDIR(est.st_mode):
                        with contextlib.suppress(OSError):
                            stack.append((os.open(name, LIST_FLAGS | O_NOFOLLOW, dir_fd=fd), rel + "/"))
            finally:
                os.close(fd)
    finally:
        for fd, _ in stack:
            os.close(fd)
    return out


def _diff(
    watch: _Watch, before: Mapping[str, tuple[int, ...]], after: Mapping[str, tuple[int, ...]]
) -> list[dict[str, str]]:
    changes: list[dict[str, str]] = []
    for name in sorted(before.keys() | after.keys()):
        old, new = before.get(name), after.get(name)
        if old == new:
            continue
        kind = "created" if old is None else "deleted" if new is None else "modified"
        if old is not None and new is not None and stat.S_ISDIR(old[0]) and old[0] == new[0]:
            continue  # a directory's own mtime moves with every change inside; the entries report those
        path = posixpath.join(watch.path, name) if name else watch.path
        changes.append({"root": watch.root.uri, "path": path, "kind": kind})
    return changes
