"""FileBroker: the host side of files/*. A Python MCP client installs it to run a server's file operations
beneath the client's roots, under the user's consent, limits and an audit log.

This module holds the broker's life cycle and the request path (rate limit, params, root, consent, run,
audit); the dispatch table names one handler per method. Consent lives in ``_grants``, uploads in
``_uploads``, watches in ``_watch``, the blocking file operations in ``_hostops``, and the exception to
reason table in ``_reasons``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import posixpath
import time
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, TypeAlias, TypeVar

import anyio
import anyio.abc
import mcp_types
from mcp import Client
from mcp.client.session import ClientSession

from .._errors import BrokerError
from .._provider import RootsProvider
from .._rootset import Root, RootSet
from . import _hostops as ops
from . import _protocol as p
from . import _uploads as up
from . import _wire as w
from ._grants import Access, ConsentItem, FileConsentCallback, FileConsentRequest, Grants, TokenBucket, under
from ._reasons import error_for
from ._sdk import advertise_and_route, hook_client, send_files_notification
from ._watch import Backend, Watches, snapshot

__all__ = ["ConsentItem", "FileBroker", "FileConsentRequest"]

logger = logging.getLogger("mcp_roots")
audit = logging.getLogger("mcp_roots.audit")

_T = TypeVar("_T")

Handler: TypeAlias = "Callable[[FileBroker, Mapping[str, Any], dict[str, object]], Awaitable[dict[str, Any]]]"


class FileBroker:
    """Answers a server's ``files/*`` requests beneath the client's roots (see docs/brokering.md).

    ``roots`` is the boundary: a :class:`RootsProvider` (the roots its consent approved for this
    connection: a server that never listed roots makes the provider ask first) or a fixed
    :class:`RootSet`. Each request is rate limited, checked, then run through the race-free RootSet
    operations of the one root it names, in a worker thread. Install the broker on a client before
    entering it, and enter the broker while the client runs (it owns the watchers)::

        broker = FileBroker(provider, consent=ask_user)
        client = Client(params, mode="legacy", list_roots_callback=provider)
        broker.install(client)
        async with client, broker:
            ...

    ``consent`` (sync or async) is asked before an operation on a path no grant covers, and by an explicit
    ``files/consent``; it may approve all, none or a subset. A refusal covers everything beneath it; at
    most ``prompts`` = (prompts, seconds) are shown (beyond: refused without asking). Without a callback,
    the roots are the consent. :meth:`revoke` withdraws consent at any time, by identity: a revoked folder
    stays revoked if an ancestor is renamed, a server may not delete or rename an ancestor of it, and only
    the user re-approving it (the callback, or :meth:`restore`) lifts it; watches and uploads under it end.

    Limits: ``max_chunk`` bytes per read answer / write chunk, ``max_file`` bytes per file read or
    written (None: no limit), ``rate`` = (operations, seconds), ``timeout`` seconds per request,
    ``max_watches`` open at once, ``max_watch_entries`` per watch. Each refusal is ``QUOTA_EXCEEDED`` with
    ``data.kind``. ``read_only`` refuses every write with ``PERMISSION_DENIED``.

    One broker serves one client connection. Every operation is logged to ``mcp_roots.audit`` with the
    method, root, path, outcome and bytes as structured fields (never contents).
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
        prompts: tuple[int, float] | None = (5, 60.0),
        timeout: float = p.DEFAULT_TIMEOUT,
        watch_interval: float = 0.5,
        max_watches: int = 8,
        max_watch_entries: int = 10_000,
        watch_backend: Backend = "auto",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_chunk <= 0 or (max_file is not None and max_file < 0):
            raise ValueError(f"max_chunk ({max_chunk}) must be positive and max_file ({max_file}) >= 0")
        if timeout <= 0:
            raise ValueError(f"timeout ({timeout}) must be positive")
        self._roots = roots
        self.max_chunk = max_chunk
        self.max_file = max_file
        self.timeout = timeout
        self._clock = clock
        self._bucket = TokenBucket(*rate, clock=clock) if rate is not None else None
        self._grants = Grants(consent, read_only=read_only, prompts=prompts, clock=clock)
        self._watches = Watches(
            max_watches=max_watches,
            max_entries=max_watch_entries,
            interval=watch_interval,
            backend=watch_backend,
        )
        self._rootsets: dict[Path, RootSet] = {}
        self._uploads = up.Uploads(self._rootset, clock)
        self._session: ClientSession | None = None
        self._task_group: anyio.abc.TaskGroup | None = None

    @property
    def read_only(self) -> bool:
        return self._grants.read_only

    @read_only.setter
    def read_only(self, value: bool) -> None:
        self._grants.read_only = value

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
        self._watches.open.clear()
        self._uploads.discard(lambda _u: True)
        self._grants.close()
        return await task_group.__aexit__(exc_type, exc, tb)

    # -- the user's actions ---------------------------------------------------------------------------

    def revoke(self, paths: Collection[str | os.PathLike[str]] | None = None) -> None:
        """Withdraw consent for everything (``paths`` None) or for the given local paths and everything
        beneath them, by identity (see the class docstring). Open watches and uploads at, under or above
        them end at once. Safe to call from the event loop at any time."""
        targets = None if paths is None else [Path(os.path.realpath(os.fspath(x))) for x in paths]
        self._grants.revoke(targets, [r.path for r in self._known_roots()])

        def hit(root: Root, rel: str) -> bool:
            where = root.path / rel if rel else root.path
            return targets is None or any(under(where, t) or under(t, where) for t in targets)

        for watch in list(self._watches.open.values()):
            if hit(watch.root, watch.path):
                self._end_watch(watch.id, "revoked")
        self._uploads.discard(lambda u: hit(u.root, u.path))
        logger.info("files/* consent revoked (%s)", "everything" if targets is None else len(targets))
        shown = ["*"] if targets is None else [str(t) for t in targets]
        audit.info("revoke paths=%s", _field(shown), extra={"files_method": "revoke", "files_paths": shown})

    def restore(self, paths: Collection[str | os.PathLike[str]] | None = None) -> None:
        """Lift revocations (all, or those at or beneath ``paths``): for a host without a consent
        callback, this is how the user gives back what :meth:`revoke` took."""
        targets = None if paths is None else [Path(os.path.realpath(os.fspath(x))) for x in paths]
        self._grants.restore(targets)
        shown = ["*"] if targets is None else [str(t) for t in targets]
        audit.info("restore paths=%s", _field(shown), extra={"files_method": "restore", "files_paths": shown})

    @property
    def watching(self) -> tuple[tuple[str, str], ...]:
        """``(root URI, path)`` of every watch a server holds open now."""
        return tuple((w.root.uri, w.path) for w in self._watches.open.values())

    def _end_watch(self, watch_id: str, reason: str) -> None:
        """Stop a watch and tell the server (a last notification with ``ended: true``)."""
        if self._watches.pop(watch_id) is None:
            return
        session = self._session
        if self._task_group is not None and session is not None:
            params = {"watchId": watch_id, "changes": [], "ended": True, "reason": reason}
            self._task_group.start_soon(_notify_quietly, session, params)

    # -- roots --------------------------------------------------------------------------------------

    def _known_roots(self) -> tuple[Root, ...]:
        return self._roots.roots

    async def _current_roots(self) -> tuple[Root, ...]:
        """The roots this connection may broker: a RootSet's, or those the provider's consent approved
        for this server (asking it now if the server never listed roots)."""
        if isinstance(self._roots, RootSet):
            return self._roots.roots
        if self._session is None:
            return ()  # not installed on a connection: there is no server whose consent we could know
        return await self._roots.approved_roots(self._session)

    async def _root(self, uri: str | None) -> Root:
        roots = await self._current_roots()
        if uri is None:
            if not roots:
                raise p.broker_error("PERMISSION_DENIED", "the client exposes no roots to this server")
            return roots[0]
        for root in roots:
            if root.uri == uri:
                return root
        raise p.broker_error(
            "PERMISSION_DENIED", f"root {uri!r} is not one of the client's current roots", root=uri
        )

    def _rootset(self, root: Root) -> RootSet:
        found = self._rootsets.get(root.path)
        if found is None:
            for stale in set(self._rootsets) - {r.path for r in self._known_roots()}:
                self._rootsets.pop(stale).close()
            found = self._rootsets[root.path] = RootSet.from_paths([(root.path, root.name)], source="client")
        return found

    def _server_info(self) -> mcp_types.Implementation | None:
        result = getattr(self._session, "initialize_result", None)
        info = getattr(result, "server_info", None)
        return info if isinstance(info, mcp_types.Implementation) else None

    # -- the request path ---------------------------------------------------------------------------

    async def handle(self, method: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
        """Answer one ``files/*`` request (the handler :meth:`install` routes to).

        Raises only :class:`BrokerError`: every other exception is mapped to a reason by type
        (``_reasons.REASONS``), so no traceback reaches the server."""
        started = self._clock()
        where: dict[str, object] = {}
        try:
            self._uploads.expire(self.timeout)
            handler = _HANDLERS.get(method)
            if handler is None:
                raise p.broker_error("INVALID_PARAMS", f"unknown method {method!r}")
            if not isinstance(params, Mapping) and params is not None:
                raise p.broker_error("INVALID_PARAMS", "params must be an object")
            self._take_token(method)
            try:
                with anyio.fail_after(self.timeout):
                    result = await handler(self, params or {}, where)
            except TimeoutError:
                raise p.broker_error(
                    "TIMEOUT", f"{method} did not finish within {self.timeout:g}s", timeout=self.timeout
                ) from None
        except BrokerError as exc:
            self._audit(method, where, exc.reason, started)
            raise
        except Exception as exc:
            error = error_for(exc, str(where.get("path", "")))
            if error.reason == "IO_ERROR" and type(exc) not in (OSError,):
                logger.debug("files/* %s failed", method, exc_info=True)
            self._audit(method, where, error.reason, started)
            raise error from None
        self._audit(method, where, "ok", started, result)
        return result

    def _take_token(self, method: str) -> None:
        if self._bucket is None or method == p.UNWATCH:
            return
        wait = self._bucket.take()
        if wait:
            raise p.broker_error(
                "QUOTA_EXCEEDED",
                f"rate limit: at most {self._bucket.capacity} files/* operations per "
                f"{self._bucket.window:g}s",
                kind="rate",
                limit=self._bucket.capacity,
                retryAfterMs=int(wait * 1000) + 1,
            )

    def _audit(
        self,
        method: str,
        where: Mapping[str, object],
        outcome: str,
        started: float,
        result: Mapping[str, Any] | None = None,
    ) -> None:
        """One record per operation; paths go in as JSON strings (a newline in a name cannot start a
        line of its own) and as structured ``files_*`` attributes."""
        size = 0
        if result is not None and method == p.READ:
            size = int(result.get("bytesRead") or 0)
        elif method == p.WRITE and outcome == "ok":
            size = int(where.get("chunk", 0))  # type: ignore[call-overload]
        server = self._server_info()
        root, path = where.get("root"), where.get("path")
        audit.info(
            "%s server=%s root=%s path=%s outcome=%s bytes=%d ms=%.1f",
            method,
            _field(server.name if server else None),
            _field(root),
            _field(path),
            outcome,
            size,
            (self._clock() - started) * 1000,
            extra={
                "files_method": method,
                "files_server": server.name if server else None,
                "files_root": root,
                "files_path": path,
                "files_outcome": outcome,
                "files_bytes": size,
            },
        )

    async def _locate(
        self,
        ref: w.PathRef,
        access: Access,
        where: dict[str, object],
        *,
        reaching: bool = False,
        follow: bool = True,
    ) -> tuple[Root, RootSet, str]:
        """Map a PathRef to its root and checked relative path, and require consent for it, both for the
        path as named and for where it leads.

        ``reaching``: the operation also acts on everything beneath the path (a recursive delete, a
        rename of a folder), so it is refused when a revoked location lies there. ``follow`` False: the
        operation acts on the final name itself (delete, rename, create), so only its parent is
        followed."""
        root = await self._root(ref.root)
        where["root"] = root.uri
        rel = p.check_relative_path(ref.path)
        where["path"] = rel
        rootset = self._rootset(root)
        wheres = {root.path / rel if rel else root.path}
        # Where the path leads once symlinks are followed (a path still to be created leads nowhere yet).
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            if follow or not rel:
                wheres.add(await self._run(rootset.resolve, ops.join(root, rel)))
            else:
                parent, name = posixpath.split(rel)
                wheres.add(await self._run(rootset.resolve, ops.join(root, parent)) / name)
        await self._grants.require(ConsentItem(root, rel), wheres, access, self._server_info())
        if reaching and any(self._grants.reaches_revoked(x) for x in wheres):
            raise p.broker_error(
                "PERMISSION_DENIED",
                f"{rel or '.'!r} holds a folder whose consent the user revoked",
                path=rel,
                consent="revoked",
            )
        return root, rootset, rel

    async def _run(self, func: Callable[..., _T], *args: Any, mutating: bool = False) -> _T:
        """Run a blocking file operation in a worker thread.

        A read is abandoned when the request times out. A mutating call that has started is shielded
        and runs to completion, and its outcome is the answer: a TIMEOUT never hides a change that
        happened anyway (the timeout bounds consent prompts, queueing and reads)."""
        if mutating:
            with anyio.CancelScope(shield=True):
                return await anyio.to_thread.run_sync(func, *args)
        return await anyio.to_thread.run_sync(func, *args, abandon_on_cancel=True)

    # -- the methods (one handler each; _HANDLERS below is the dispatch table) ------------------------

    async def _read(self, params: Mapping[str, Any], where: dict[str, object]) -> dict[str, Any]:
        req = w.parse(w.ReadParams, params)
        root, rootset, rel = await self._locate(req, "read", where)
        full = ops.join(root, rel)
        length = min(req.length, self.max_chunk)  # a host may answer fewer bytes than asked
        data, st = await self._run(
            ops.pread, rootset, full, req.offset, length, self.max_file, self._grants.fence
        )
        try:
            content = p.encode_content(data, req.encoding)
        except UnicodeDecodeError:
            raise p.broker_error(
                "IO_ERROR",
                f"{rel!r}: bytes {req.offset}..{req.offset + len(data)} are not UTF-8; read base64",
                path=rel,
            ) from None
        return w.dump(
            w.ReadResult(
                content=content,
                encoding=req.encoding,
                offset=req.offset,
                bytes_read=len(data),
                size=st.st_size,
                eof=req.offset + len(data) >= st.st_size,
                etag=p.etag_of(st),
                mtime=st.st_mtime,
            )
        )

    async def _write(self, params: Mapping[str, Any], where: dict[str, object]) -> dict[str, Any]:
        req = w.parse(w.WriteParams, params)
        if req.upload_id is not None:
            return await self._write_next(req, where)
        if req.path is None:
            raise p.broker_error("INVALID_PATH", "files/write needs 'path' (first chunk) or 'uploadId'")
        root, rootset, rel = await self._locate(w.PathRef(path=req.path, root=req.root), "write", where)
        if not rel:
            raise p.broker_error("INVALID_PATH", "cannot write to the root itself; name a file in it")
        data = p.decode_content(req.content, req.encoding, max_bytes=self.max_chunk)
        where["chunk"] = len(data)
        self._uploads.check_room()
        self._check_file_size(len(data), rel)
        full = ops.join(root, rel)
        await self._run(ops.check_target, rootset, full, rel, req.if_match, req.create_only)
        tmp = up.staging_name(rel)
        fd = await self._run(up.create_staging, rootset, ops.join(root, tmp), mutating=True)
        upload = self._uploads.open(root, rel, fd, tmp, req.if_match, req.create_only)
        try:
            await self._run(up.pwrite_all, fd, data, 0, mutating=True)
            upload.written = len(data)
            if req.more:
                return w.dump(w.WriteResult(bytes_written=upload.written, upload_id=upload.id))
            return await self._commit(upload, rootset)
        except BaseException:
            self._uploads.discard(lambda u: u is upload)
            raise

    async def _write_next(self, req: w.WriteParams, where: dict[str, object]) -> dict[str, Any]:
        upload = self._uploads.get(req.upload_id or "")
        if upload is None:
            raise p.broker_error(
                "INVALID_PARAMS", f"no open upload {req.upload_id!r} (finished, expired or revoked)"
            )
        where.update(root=upload.root.uri, path=upload.path)
        async with upload.lock:
            if self._uploads.get(upload.id) is not upload:
                raise p.broker_error("INVALID_PARAMS", f"upload {upload.id!r} was discarded")
            try:
                await self._locate(w.PathRef(path=upload.path, root=upload.root.uri), "write", where)
                if req.offset != upload.written:
                    raise p.broker_error(
                        "INVALID_PARAMS",
                        f"upload {upload.id!r}: chunk offset {req.offset!r} is not the "
                        f"{upload.written} bytes written so far",
                    )
                data = p.decode_content(req.content, req.encoding, max_bytes=self.max_chunk)
                where["chunk"] = len(data)
                self._check_file_size(upload.written + len(data), upload.path)
                await self._run(up.pwrite_all, upload.fd, data, upload.written, mutating=True)
                upload.written += len(data)
                self._uploads.touch(upload)
                if req.more:
                    return w.dump(w.WriteResult(bytes_written=upload.written, upload_id=upload.id))
                return await self._commit(upload, self._rootset(upload.root))
            except BaseException:
                self._uploads.discard(lambda u: u is upload)
                raise

    async def _commit(self, upload: up.Upload, rootset: RootSet) -> dict[str, Any]:
        st = await self._run(up.commit_staging, rootset, upload, mutating=True)
        self._uploads.finished(upload)
        return w.dump(
            w.WriteResult(
                bytes_written=upload.written, etag=p.etag_of(st), mtime=st.st_mtime, size=st.st_size
            )
        )

    def _check_file_size(self, size: int, rel: str) -> None:
        if self.max_file is not None and size > self.max_file:
            raise p.broker_error(
                "QUOTA_EXCEEDED",
                f"{rel!r}: larger than the {self.max_file}-byte file limit",
                kind="file",
                limit=self.max_file,
            )

    async def _list(self, params: Mapping[str, Any], where: dict[str, object]) -> dict[str, Any]:
        req = w.parse(w.ListParams, params)
        root, rootset, rel = await self._locate(req, "read", where)
        start = int(req.cursor) if req.cursor is not None else 0
        page = await self._run(ops.list_page, rootset, ops.join(root, rel), start, self._grants.fence)
        return w.dump(w.ListResult.model_validate(page))

    async def _stat(self, params: Mapping[str, Any], where: dict[str, object]) -> dict[str, Any]:
        req = w.parse(w.PathRef, params)
        root, rootset, rel = await self._locate(req, "read", where)
        st = await self._run(rootset.stat, ops.join(root, rel))
        return w.dump(w.StatResult.model_validate(ops.describe_stat(st)))

    async def _create(self, params: Mapping[str, Any], where: dict[str, object]) -> dict[str, Any]:
        req = w.parse(w.CreateParams, params)
        root, rootset, rel = await self._locate(req, "write", where, follow=False)
        if not rel:
            raise p.broker_error("CONCURRENCY_CONFLICT", "the root itself already exists", path=rel)
        st = await self._run(ops.create, rootset, root, rel, req.type, req.parents, mutating=True)
        return w.dump(w.CreateResult(etag=p.etag_of(st), mtime=st.st_mtime))

    async def _delete(self, params: Mapping[str, Any], where: dict[str, object]) -> dict[str, Any]:
        req = w.parse(w.DeleteParams, params)
        root, rootset, rel = await self._locate(req, "write", where, reaching=True, follow=False)
        if not rel:
            raise p.broker_error("PERMISSION_DENIED", "a root itself cannot be deleted", path=rel)
        full = ops.join(root, rel)
        await self._run(ops.delete, rootset, full, rel, req.recursive, req.if_match, mutating=True)
        return {}

    async def _rename(self, params: Mapping[str, Any], where: dict[str, object]) -> dict[str, Any]:
        req = w.parse(w.RenameParams, params)
        root, _rootset, rel = await self._locate(req, "write", where, reaching=True, follow=False)
        target: dict[str, object] = {}
        new_root, _new_rootset, new_rel = await self._locate(
            w.PathRef(path=req.new_path, root=req.new_root if req.new_root is not None else root.uri),
            "write",
            target,
            reaching=True,
            follow=False,
        )
        where["newPath"] = new_rel
        if not rel or not new_rel:
            raise p.broker_error("PERMISSION_DENIED", "a root itself cannot be renamed or replaced", path=rel)
        if new_root.path == root.path:
            rootset = self._rootset(root)
        else:
            rootset = RootSet.from_paths(
                [(root.path, root.name), (new_root.path, new_root.name)], source="client"
            )
        src, dst = ops.join(root, rel), ops.join(new_root, new_rel)
        await self._run(ops.rename, rootset, src, dst, req.overwrite, mutating=True)
        return {}

    async def _watch(self, params: Mapping[str, Any], where: dict[str, object]) -> dict[str, Any]:
        req = w.parse(w.WatchParams, params)
        if self._task_group is None or self._session is None:
            raise p.broker_error(
                "IO_ERROR", "this client does not run watches (the FileBroker is not entered)"
            )
        self._watches.check_room()
        root, rootset, rel = await self._locate(req, "read", where, reaching=req.recursive)
        full = ops.join(root, rel)
        first = await self._run(
            lambda: snapshot(rootset, full, recursive=req.recursive, limit=self._watches.max_entries)
        )
        self._watches.check_room()  # another watch may have started while this one walked
        watch = self._watches.add(root, rel, req.recursive, rootset.resolve(full))
        session = self._session

        async def send(changed: dict[str, Any]) -> None:
            await send_files_notification(session, p.NOTIFICATION_CHANGED, changed)
            audit.info(
                "%s watch=%s changes=%d",
                p.NOTIFICATION_CHANGED,
                watch.id,
                len(changed["changes"]),
                extra={"files_method": p.NOTIFICATION_CHANGED, "files_watch": watch.id},
            )

        self._task_group.start_soon(self._watches.run, watch, rootset, full, first, send)
        return w.dump(w.WatchResult(watch_id=watch.id))

    async def _unwatch(self, params: Mapping[str, Any], where: dict[str, object]) -> dict[str, Any]:
        req = w.parse(w.UnwatchParams, params)
        if self._watches.pop(req.watch_id) is None:
            raise p.broker_error("INVALID_PARAMS", f"no watch {req.watch_id!r}")
        return {}

    async def _consent_request(self, params: Mapping[str, Any], where: dict[str, object]) -> dict[str, Any]:
        req = w.parse(w.ConsentParams, params)
        refs: Sequence[Mapping[str, Any]] = (
            [{"root": r.uri, "path": ""} for r in await self._current_roots()]
            if req.paths is None
            else req.paths
        )
        items: list[ConsentItem] = []
        denied: list[w.PathRef] = []
        for ref in refs:
            root_uri, path = ref.get("root"), ref.get("path")
            try:
                root = await self._root(root_uri if isinstance(root_uri, str) else None)
                if root_uri is not None and not isinstance(root_uri, str):
                    raise p.broker_error("INVALID_PARAMS", "root must be a URI string")
                items.append(ConsentItem(root, p.check_relative_path(path)))
            except BrokerError:
                denied.append(
                    w.PathRef(
                        path=path[:200] if isinstance(path, str) else repr(path)[:200],
                        root=root_uri[:200] if isinstance(root_uri, str) else None,
                    )
                )
        grants = self._grants
        approved: set[ConsentItem] = set()
        asked = False
        if items and not (req.access == "write" and grants.read_only):
            if grants.callback is None:
                approved = set(items)
            else:
                async with grants.lock:
                    if grants.prompt_allowed():
                        request = FileConsentRequest(
                            self._server_info(), req.message, tuple(items), req.access, explicit=True
                        )
                        approved = await grants.ask(request)
                        asked = True
        granted: list[w.PathRef] = []
        for item in items:
            place = item.location
            if item in approved:
                grants.grant(place, req.access, by_user=grants.callback is not None)
            elif asked:  # only the user's own refusal is remembered, not the prompt limit's
                grants.refuse(place, req.access)
            # a grant the user did not make (no callback) never lifts a revocation: report it as denied
            if item in approved and not grants.revoked(place):
                granted.append(w.PathRef(path=item.path, root=item.root.uri))
            else:
                denied.append(w.PathRef(path=item.path, root=item.root.uri))
        logger.info("files/consent (%s): %d granted, %d denied", req.access, len(granted), len(denied))
        return w.dump(w.ConsentResult(granted=granted, denied=denied, access=req.access))


_HANDLERS: Mapping[str, Handler] = {
    p.READ: FileBroker._read,
    p.WRITE: FileBroker._write,
    p.LIST: FileBroker._list,
    p.STAT: FileBroker._stat,
    p.CREATE: FileBroker._create,
    p.DELETE: FileBroker._delete,
    p.RENAME: FileBroker._rename,
    p.WATCH: FileBroker._watch,
    p.UNWATCH: FileBroker._unwatch,
    p.CONSENT: FileBroker._consent_request,
}
"""The dispatch table: one handler per files/* method (``p.METHODS`` lists the same names)."""


def _field(value: object) -> str:
    """A value as it appears in an audit message: JSON, so quotes and newlines are escaped."""
    return json.dumps(value, ensure_ascii=True, default=str)


async def _notify_quietly(session: ClientSession, params: Mapping[str, Any]) -> None:
    with anyio.move_on_after(5):
        try:
            await send_files_notification(session, p.NOTIFICATION_CHANGED, params)
        except Exception:  # the connection may be closing; the watch is gone either way
            logger.debug(
                "could not tell the server that watch %s ended", params.get("watchId"), exc_info=True
            )
