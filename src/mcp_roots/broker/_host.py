"""FileBroker: the host side of files/*.
A Python MCP client installs it to run a server's file operations.
They run beneath the client's roots, under consent, limits and an audit log.
"""

# This module holds the broker's life cycle, the user's actions (revoke, restore) and the request path
# (dispatch, rate limit, timeout, audit). The methods are in ``_methods``, locating a request's root, path
# and consent in ``_locator``, consent in ``_grants`` (what a prompt is asked in ``_consent``), uploads in
# ``_uploads``, watches in ``_watch``, the blocking file operations in ``_hostops``, and the exception to
# reason table in ``_reasons``.

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

import anyio
import anyio.abc
from mcp import Client
from mcp.client.session import ClientSession

from ..errors import BrokerError
from ..paths._rootset import Root, RootSet
from ..roots._owned import OwnedTaskGroup
from ..roots._provider import RootsProvider
from . import _protocol as p
from . import _uploads as up
from ._consent import ConsentItem, FileConsentCallback, FileConsentRequest, TokenBucket, under
from ._grants import Grants
from ._locator import Locator
from ._methods import Methods
from ._reasons import error_for
from ._sdk import advertise_and_route, hook_client, send_files_notification
from ._watch import Backend, Watches

__all__ = ["ConsentItem", "FileBroker", "FileConsentRequest"]

logger = logging.getLogger("mcp_roots")
audit = logging.getLogger("mcp_roots.audit")


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
    the user re-approving it (the callback, or :meth:`restore`) lifts it; watches and uploads under it end,
    and a watch whose tree meets it later (a folder moved in, a symlink renamed over the watched path) ends
    or leaves it out. Every answer that describes a file (read, list, stat, each watch snapshot, a
    conflict's etag) is judged on the descriptor it comes from, like a read.

    The consent callback is shown the server's own text: ``FileConsentRequest.message``, each
    ``ConsentItem.path`` and the server's self-declared ``server`` name and version may hold newlines,
    bidi overrides or C1 controls; a host escapes them before showing them to the user.

    Limits: ``max_chunk`` bytes per read answer / write chunk, ``max_file`` bytes per file read or
    written (``DEFAULT_MAX_FILE``, 1 GiB, by default: raise it, or pass None for no limit), ``rate`` =
    (operations, seconds), ``timeout`` seconds per request, ``max_watches`` open at once,
    ``max_watch_entries`` per watch, 16 chunked uploads open at once. Each refusal is ``QUOTA_EXCEEDED`` with
    ``data.kind``. ``read_only`` refuses every write with ``PERMISSION_DENIED``.

    One broker serves one client connection. Every operation is logged to ``mcp_roots.audit`` with the
    method, root, path, outcome and bytes as structured fields (never contents).

    Args:
        roots: The boundary: a :class:`RootsProvider`, or a fixed :class:`RootSet`.
        consent: Asked before an operation no grant covers (sync or async); ``None``: the roots are the
            consent.
        read_only: Refuse every write with ``PERMISSION_DENIED``.
        max_chunk: Bytes per read answer (clamped) and per write chunk (``QUOTA_EXCEEDED``).
        max_file: Bytes per file read or written; ``None``: no limit.
        rate: (operations, seconds) per token bucket; ``None``: no rate limit.
        prompts: (consent prompts, seconds); beyond, refused without asking.
        timeout: Seconds per request; then ``TIMEOUT``.
        watch_interval: Seconds between polls of a watch (when not woken by the kernel).
        max_watches: Watches open at once.
        max_watch_entries: Entries one watch may hold.
        watch_backend: ``"events"`` (``watchfiles``, ``mcp-roots[watch]``), ``"poll"``, or ``"auto"``.
        clock: What every bucket reads (default ``time.monotonic``).
    """

    def __init__(
        self,
        roots: RootsProvider | RootSet,
        *,
        consent: FileConsentCallback | None = None,
        read_only: bool = False,
        max_chunk: int = p.MAX_CHUNK_SIZE,
        max_file: int | None = p.DEFAULT_MAX_FILE,
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
        self._uploads = up.Uploads(clock)
        self._locator = Locator(roots, self._grants)
        self._methods = Methods(
            self._locator, self._grants, self._uploads, self._watches, max_chunk=max_chunk, max_file=max_file
        )
        self._tasks = OwnedTaskGroup("this FileBroker")
        self._task_group: anyio.abc.TaskGroup | None = None

    @property
    def max_chunk(self) -> int:
        """Bytes per read answer (clamped) and per write chunk (more is QUOTA_EXCEEDED)."""
        return self._methods.max_chunk

    @property
    def max_file(self) -> int | None:
        """Bytes per file read or written (``DEFAULT_MAX_FILE`` unless the host chose; None: no limit)."""
        return self._methods.max_file

    @property
    def read_only(self) -> bool:
        return self._grants.read_only

    @read_only.setter
    def read_only(self, value: bool) -> None:
        self._grants.read_only = value

    # -- installation -------------------------------------------------------------------------------

    def install(self, client: Client | ClientSession) -> None:
        """Make a client answer ``files/*`` with this broker and declare ``roots.filesystemBrokering``.

        Args:
            client: A not-yet-entered ``Client`` or ``ClientSession``, with a roots callback.
        """
        if self._locator.session is not None:
            raise RuntimeError("this FileBroker is already installed; use one broker per connection")

        def hook(session: ClientSession) -> None:
            self._locator.session = session
            advertise_and_route(session, p.METHODS, self.handle)

        if isinstance(client, Client):
            hook_client(client, hook)
        else:
            hook(client)

    async def __aenter__(self) -> FileBroker:
        self._task_group = self._methods.task_group = await self._tasks.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        self._task_group = self._methods.task_group = None
        self._watches.open.clear()
        self._uploads.discard(lambda _u: True)
        self._grants.close()
        return await self._tasks.close(exc_type, exc, tb)

    # -- the user's actions ---------------------------------------------------------------------------

    def revoke(self, paths: Collection[str | os.PathLike[str]] | None = None) -> None:
        """Withdraw consent, by identity (see the class docstring); safe from the event loop at any time.

        Open watches and uploads at, under or above what is revoked end at once; a watch elsewhere whose
        path or tree later meets a revoked location ends or leaves it out at its next snapshot.

        Args:
            paths: Local paths, each revoked with everything beneath it (default: everything).
        """
        targets = None if paths is None else [Path(os.path.realpath(os.fspath(x))) for x in paths]
        self._grants.revoke(targets, [r.path for r in self._locator.known_roots()])

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
        """Lift revocations: without a consent callback, how the user gives back what :meth:`revoke` took.

        Args:
            paths: Lift those at or beneath these local paths (default: all).
        """
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
        session = self._locator.session
        if self._task_group is not None and session is not None:
            params = {"watchId": watch_id, "changes": [], "ended": True, "reason": reason}
            self._task_group.start_soon(_notify_quietly, session, params)

    # -- the request path ---------------------------------------------------------------------------

    async def handle(self, method: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
        """Answer one ``files/*`` request (the handler :meth:`install` routes to).

        Args:
            method: The request's method (``files/read``...).
            params: Its params.

        Raises:
            BrokerError: Only this: every other exception is mapped to a reason by type, so no traceback
                reaches the server.
        """
        started = self._clock()
        where: dict[str, object] = {}
        try:
            self._uploads.expire(self.timeout)
            handler = self._methods.table.get(method)
            if handler is None:
                raise p.broker_error("INVALID_PARAMS", f"unknown method {method!r}")
            if not isinstance(params, Mapping) and params is not None:
                raise p.broker_error("INVALID_PARAMS", "params must be an object")
            self._take_token(method)
            try:
                with anyio.fail_after(self.timeout):
                    result = await handler(params or {}, where)
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
        server = self._locator.server_info()
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
