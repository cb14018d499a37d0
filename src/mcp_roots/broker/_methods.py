"""The files/* methods of the host, one handler each, and the dispatch table that names them: each parses
its params against the ``_wire`` model, locates its target (root, path, consent), and runs the blocking
operation of ``_hostops`` / ``_uploads`` / ``_watch`` in a worker thread.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeAlias

import anyio.abc

from ..errors import BrokerError, FileTooLarge
from . import _hostops as ops
from . import _protocol as p
from . import _uploads as up
from . import _wire as w
from ._consent import ConsentItem, FileConsentRequest
from ._grants import Grants
from ._locator import Locator, run
from ._sdk import send_files_notification
from ._watch import Watches, look

__all__ = ["Handler", "Methods"]

logger = logging.getLogger("mcp_roots")
audit = logging.getLogger("mcp_roots.audit")

Handler: TypeAlias = Callable[[Mapping[str, Any], dict[str, object]], Awaitable[dict[str, Any]]]
"""One method: ``(params, where)`` -> result; ``where`` collects the root and path for the audit."""


class Methods:
    """The handlers of one broker (``table`` maps each files/* method to one). ``task_group`` is the
    broker's while it is entered (watches run in it)."""

    def __init__(
        self,
        locator: Locator,
        grants: Grants,
        uploads: up.Uploads,
        watches: Watches,
        *,
        max_chunk: int,
        max_file: int | None,
    ) -> None:
        self.locator = locator
        self.grants = grants
        self.uploads = uploads
        self.watches = watches
        self.max_chunk = max_chunk
        self.max_file = max_file
        self.task_group: anyio.abc.TaskGroup | None = None
        self.table: Mapping[str, Handler] = {
            p.READ: self.read,
            p.WRITE: self.write,
            p.LIST: self.list,
            p.STAT: self.stat,
            p.CREATE: self.create,
            p.DELETE: self.delete,
            p.RENAME: self.rename,
            p.WATCH: self.watch,
            p.UNWATCH: self.unwatch,
            p.CONSENT: self.consent,
        }
        """The dispatch table: one handler per files/* method (``p.METHODS`` lists the same names)."""

    async def read(self, params: Mapping[str, Any], where: dict[str, object]) -> dict[str, Any]:
        req = w.parse(w.ReadParams, params)
        at = await self.locator.locate(req, "read", where)
        length = min(req.length, self.max_chunk)  # a host may answer fewer bytes than asked
        try:
            data, st = await run(
                ops.pread, at.rootset, at.full, req.offset, length, self.max_file, self.grants.fence_read
            )
        except FileTooLarge:
            raise self._too_large(at.rel) from None
        try:
            content = p.encode_content(data, req.encoding)
        except UnicodeDecodeError:
            raise p.broker_error(
                "IO_ERROR",
                f"{at.rel!r}: bytes {req.offset}..{req.offset + len(data)} are not UTF-8; read base64",
                path=at.rel,
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

    async def write(self, params: Mapping[str, Any], where: dict[str, object]) -> dict[str, Any]:
        req = w.parse(w.WriteParams, params)
        if req.upload_id is not None:
            return await self._write_next(req, where)
        if req.path is None:
            raise p.broker_error("INVALID_PATH", "files/write needs 'path' (first chunk) or 'uploadId'")
        at = await self.locator.locate(w.PathRef(path=req.path, root=req.root), "write", where)
        if not at.rel:
            raise p.broker_error("INVALID_PATH", "cannot write to the root itself; name a file in it")
        data = p.decode_content(req.content, req.encoding, max_bytes=self.max_chunk)
        where["chunk"] = len(data)
        self._check_file_size(len(data), at.rel)
        with self.uploads.reserving():  # the slot is counted before the first await below
            await run(
                ops.check_target,
                at.rootset,
                at.full,
                at.rel,
                req.if_match,
                req.create_only,
                self.grants.fence_read,
            )
            staged = await run(up.create_staging, at.rootset, at.root, at.rel, self.grants, mutating=True)
            upload = self.uploads.open(at.root, at.rel, staged, req.if_match, req.create_only)
        try:
            await run(up.pwrite_all, upload.fd, data, 0, mutating=True)
            upload.written = len(data)
            if req.more:
                return w.dump(w.WriteResult(bytes_written=upload.written, upload_id=upload.id))
            return await self._commit(upload)
        except BaseException:
            self.uploads.discard(lambda u: u is upload)
            raise

    async def _write_next(self, req: w.WriteParams, where: dict[str, object]) -> dict[str, Any]:
        upload = self.uploads.get(req.upload_id or "")
        if upload is None:
            raise p.broker_error(
                "INVALID_PARAMS", f"no open upload {req.upload_id!r} (finished, expired or revoked)"
            )
        where.update(root=upload.root.uri, path=upload.path)
        async with upload.lock:
            if self.uploads.get(upload.id) is not upload:
                raise p.broker_error("INVALID_PARAMS", f"upload {upload.id!r} was discarded")
            try:
                await self.locator.locate(w.PathRef(path=upload.path, root=upload.root.uri), "write", where)
                if req.offset != upload.written:
                    raise p.broker_error(
                        "INVALID_PARAMS",
                        f"upload {upload.id!r}: chunk offset {req.offset!r} is not the "
                        f"{upload.written} bytes written so far",
                    )
                data = p.decode_content(req.content, req.encoding, max_bytes=self.max_chunk)
                where["chunk"] = len(data)
                self._check_file_size(upload.written + len(data), upload.path)
                await run(up.pwrite_all, upload.fd, data, upload.written, mutating=True)
                upload.written += len(data)
                self.uploads.touch(upload)
                if req.more:
                    return w.dump(w.WriteResult(bytes_written=upload.written, upload_id=upload.id))
                return await self._commit(upload)
            except BaseException:
                self.uploads.discard(lambda u: u is upload)
                raise

    async def _commit(self, upload: up.Upload) -> dict[str, Any]:
        rootset = self.locator.rootset(upload.root)
        st = await run(up.commit_staging, rootset, upload, self.grants, mutating=True)
        self.uploads.finished(upload)
        return w.dump(
            w.WriteResult(
                bytes_written=upload.written, etag=p.etag_of(st), mtime=st.st_mtime, size=st.st_size
            )
        )

    def _check_file_size(self, size: int, rel: str) -> None:
        if self.max_file is not None and size > self.max_file:
            raise self._too_large(rel)

    def _too_large(self, rel: str) -> BrokerError:
        return p.broker_error(
            "QUOTA_EXCEEDED",
            f"{rel!r}: larger than the {self.max_file}-byte file limit",
            kind="file",
            limit=self.max_file,
        )

    async def list(self, params: Mapping[str, Any], where: dict[str, object]) -> dict[str, Any]:
        req = w.parse(w.ListParams, params)
        at = await self.locator.locate(req, "read", where)
        start = int(req.cursor) if req.cursor is not None else 0
        fence, screen = self.grants.fence_read, self.grants.screen
        page = await run(lambda: ops.list_page(at.rootset, at.full, start, fence, screen()))
        return w.dump(w.ListResult.model_validate(page))

    async def stat(self, params: Mapping[str, Any], where: dict[str, object]) -> dict[str, Any]:
        req = w.parse(w.PathRef, params)
        at = await self.locator.locate(req, "read", where)
        st = await run(ops.look, at.rootset, at.full, self.grants.fence_read)
        return w.dump(w.StatResult.model_validate(ops.describe_stat(st)))

    async def create(self, params: Mapping[str, Any], where: dict[str, object]) -> dict[str, Any]:
        req = w.parse(w.CreateParams, params)
        at = await self.locator.locate(req, "write", where, follow=False)
        if not at.rel:
            raise p.broker_error("CONCURRENCY_CONFLICT", "the root itself already exists", path=at.rel)
        st = await run(
            ops.create, at.rootset, at.root, at.rel, req.type, req.parents, self.grants, mutating=True
        )
        return w.dump(w.CreateResult(etag=p.etag_of(st), mtime=st.st_mtime))

    async def delete(self, params: Mapping[str, Any], where: dict[str, object]) -> dict[str, Any]:
        req = w.parse(w.DeleteParams, params)
        at = await self.locator.locate(req, "write", where, reaching=True, follow=False)
        if not at.rel:
            raise p.broker_error("PERMISSION_DENIED", "a root itself cannot be deleted", path=at.rel)
        await run(
            ops.delete, at.rootset, at.root, at.rel, req.recursive, req.if_match, self.grants, mutating=True
        )
        return {}

    async def rename(self, params: Mapping[str, Any], where: dict[str, object]) -> dict[str, Any]:
        req = w.parse(w.RenameParams, params)
        src = await self.locator.locate(req, "write", where, reaching=True, follow=False)
        dst = await self.locator.locate(
            w.PathRef(path=req.new_path, root=req.new_root if req.new_root is not None else src.root.uri),
            "write",
            {},
            reaching=True,
            follow=False,
        )
        where["newPath"] = dst.rel
        if not src.rel or not dst.rel:
            raise p.broker_error(
                "PERMISSION_DENIED", "a root itself cannot be renamed or replaced", path=src.rel
            )
        await run(
            ops.rename,
            (src.rootset, src.root, src.rel),
            (dst.rootset, dst.root, dst.rel),
            req.overwrite,
            self.grants,
            mutating=True,
        )
        return {}

    async def watch(self, params: Mapping[str, Any], where: dict[str, object]) -> dict[str, Any]:
        req = w.parse(w.WatchParams, params)
        session = self.locator.session
        if self.task_group is None or session is None:
            raise p.broker_error(
                "IO_ERROR", "this client does not run watches (the FileBroker is not entered)"
            )
        self.watches.check_room()
        at = await self.locator.locate(req, "read", where, reaching=req.recursive)
        grants = self.grants
        first = await run(
            lambda: look(
                at.rootset, at.full, recursive=req.recursive, limit=self.watches.max_entries, grants=grants
            )
        )
        self.watches.check_room()  # another watch may have started while this one walked
        watch = self.watches.add(at.root, at.rel, req.recursive, at.rootset.resolve(at.full), first)

        async def send(changed: dict[str, Any]) -> None:
            await send_files_notification(session, p.NOTIFICATION_CHANGED, changed)
            audit.info(
                "%s watch=%s changes=%d",
                p.NOTIFICATION_CHANGED,
                watch.id,
                len(changed["changes"]),
                extra={"files_method": p.NOTIFICATION_CHANGED, "files_watch": watch.id},
            )

        self.task_group.start_soon(self.watches.run, watch, at.rootset, at.full, first.entries, grants, send)
        return w.dump(w.WatchResult(watch_id=watch.id))

    async def unwatch(self, params: Mapping[str, Any], where: dict[str, object]) -> dict[str, Any]:
        req = w.parse(w.UnwatchParams, params)
        if self.watches.pop(req.watch_id) is None:
            raise p.broker_error("INVALID_PARAMS", f"no watch {req.watch_id!r}")
        return {}

    async def consent(self, params: Mapping[str, Any], where: dict[str, object]) -> dict[str, Any]:
        req = w.parse(w.ConsentParams, params)
        refs: Sequence[Mapping[str, Any]] = (
            [{"root": r.uri, "path": ""} for r in await self.locator.current_roots()]
            if req.paths is None
            else req.paths
        )
        items: list[ConsentItem] = []
        denied: list[w.PathRef] = []
        for ref in refs:
            root_uri, path = ref.get("root"), ref.get("path")
            try:
                root = await self.locator.root(root_uri if isinstance(root_uri, str) else None)
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
        grants = self.grants
        approved: set[ConsentItem] = set()
        asked = False
        if items and not (req.access == "write" and grants.read_only):
            if grants.callback is None:
                approved = set(items)
            else:
                async with grants.lock:
                    if grants.prompt_allowed():
                        request = FileConsentRequest(
                            self.locator.server_info(), req.message, tuple(items), req.access, explicit=True
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
