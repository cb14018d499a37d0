"""files/watch on the host: bounded snapshots of a watched path and their differences.
Woken by the kernel (inotify through ``watchfiles``) or by a poll timer.
"""

# Every snapshot is judged like a read (``look``): the watched path is opened beneath the root and its
# descriptor fenced against the grants and revocations, by name and identity; a watched folder that is no
# longer the folder the watch began on ends the watch. The tree is walked through descriptors (the path
# layer's one walk): depth first, never through a symlink, at most two descriptors however deep or wide the
# tree; an entry that lies in a revoked location (by identity or by name) is left out with everything
# beneath it, and a folder swapped for another between its look and its walk, or moved to another parent
# while the walk is inside it, starts the snapshot again (three walks at most). An event is only a wake-up:
# what is reported comes from the next fenced snapshot. Limits are visible: too many entries or folders too
# deep refuse the watch (QUOTA_EXCEEDED / IO_ERROR) or end it, never a silently partial view.

from __future__ import annotations

import errno
import logging
import os
import posixpath
import secrets
import stat
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

import anyio

from .._sys import linux
from ..paths._beneath import strategy
from ..paths._rootset import Root, RootSet
from ..paths._tree import LIST_FLAGS, TreeEntry, walk
from . import _protocol as p
from . import _wire as w
from ._grants import Grants, Revoked, Screen, Unconsented
from ._reasons import TooDeep, WatchTooLarge

__all__ = [
    "MAX_DEPTH",
    "Backend",
    "Look",
    "Replaced",
    "Snapshot",
    "Watch",
    "Watches",
    "diff",
    "look",
    "snapshot",
]

logger = logging.getLogger("mcp_roots")

MAX_DEPTH = 64
"""Folder levels a recursive watch walks below the watched path; deeper is refused, not skipped."""
_ATTEMPTS = 3
"""Walks one snapshot may take when a folder is moved to another parent while it is walked (ESTALE)."""

Backend = Literal["auto", "events", "poll"]
Snapshot = dict[str, tuple[int, int, int, int]]
"""``{relative name: (type bits, size, mtime_ns, inode)}``; a file watch has one entry ''."""

try:  # optional: pip install 'mcp-roots[watch]'
    import watchfiles as _watchfiles

    watchfiles: ModuleType | None = _watchfiles
except ImportError:  # pragma: no cover - the test environment installs it
    watchfiles = None


def _entry(st: os.stat_result) -> tuple[int, int, int, int]:
    return (stat.S_IFMT(st.st_mode), st.st_size, st.st_mtime_ns, st.st_ino)


def _identity(st: os.stat_result) -> tuple[int, int]:
    return (st.st_dev, st.st_ino)


class Replaced(Exception):
    """The watched folder is no longer the folder the watch began on: another folder, a file or a symlink
    is at its name now."""


@dataclass(frozen=True)
class Look:
    """One fenced snapshot: the identity of what the watched path named, whether it is a folder, and the
    entries."""

    identity: tuple[int, int]
    is_dir: bool
    entries: Snapshot


def _walk(top: int, limit: int, max_depth: int, screen: Screen | None, base: Path | None) -> Snapshot:
    out: Snapshot = {}
    entered = {"": _identity(os.fstat(top))}  # each folder descended into, as it was when looked at
    checked = [""]  # the folder whose identity the walk last confirmed

    def visit(dir_fd: int, entry: TreeEntry) -> bool:
        folder = entry.rel[: len(entry.rel) - len(entry.name)].rstrip("/")
        if folder != checked[0]:  # first entry inside a folder: is it still the one that was looked at?
            if _identity(os.fstat(dir_fd)) != entered.get(folder):
                raise OSError(errno.ESTALE, "a folder was swapped while its tree was being walked", folder)
            checked[0] = folder
        st = os.stat(entry.name, dir_fd=dir_fd, follow_symlinks=False)
        if screen is not None and screen(base / entry.rel if base is not None else None, st):
            return False  # a revoked location: neither it nor anything beneath it is reported
        out[entry.rel] = _entry(st)
        if len(out) > limit:
            raise WatchTooLarge(limit)
        descend = entry.is_dir and stat.S_ISDIR(st.st_mode)
        if descend:
            if entry.depth >= max_depth:
                raise TooDeep(f"folders deeper than {max_depth} levels")
            entered[entry.rel] = _identity(st)
        return descend

    walk(top, visit, sort=False)  # a folder that cannot be entered raises: never a partial view
    return out


def _entries(top: int, *, recursive: bool, limit: int, max_depth: int, screen: Screen | None) -> Snapshot:
    now = linux.fd_path(top) if screen is not None else None
    base = Path(now) if now is not None else None
    if not recursive:
        out: Snapshot = {}
        with os.scandir(top) as scan:
            for entry in scan:
                st = entry.stat(follow_symlinks=False)
                if screen is not None and screen(base / entry.name if base is not None else None, st):
                    continue
                out[entry.name] = _entry(st)
                if len(out) > limit:
                    raise WatchTooLarge(limit)
        return out
    for _ in range(_ATTEMPTS - 1):
        try:
            return _walk(top, limit, max_depth, screen, base)
        except OSError as exc:
            if exc.errno != errno.ESTALE:
                raise
    return _walk(top, limit, max_depth, screen, base)


def look(
    rootset: RootSet,
    full: str,
    *,
    recursive: bool,
    limit: int,
    max_depth: int = MAX_DEPTH,
    grants: Grants | None = None,
    expect: tuple[int, int] | None = None,
) -> Look:
    """The state of a watched path, judged like a read: opened beneath the root (symlinks followed while
    they stay inside), fenced on that descriptor (``grants.fence_read``: :class:`Revoked` or
    :class:`Unconsented`), then described from it; a folder is walked through descriptors without
    following symlinks, leaving out what lies in a revoked location. ``expect``: the identity the
    watched folder had; another one is :class:`Replaced`. Raises :class:`WatchTooLarge` past ``limit``
    entries, :class:`TooDeep` past ``max_depth`` levels, and the OSError of a folder it cannot open
    (never skips one)."""
    probe = rootset.open_fd(full, strategy().probe_flags)
    try:
        if grants is not None:
            grants.fence_read(probe)
        st = os.fstat(probe)
        if expect is not None and _identity(st) != expect:
            raise Replaced(full)
        if not stat.S_ISDIR(st.st_mode):
            return Look(_identity(st), False, {"": _entry(st)})
        top = os.open(".", LIST_FLAGS, dir_fd=probe)
    finally:
        os.close(probe)
    try:
        screen = grants.screen() if grants is not None else None
        entries = _entries(top, recursive=recursive, limit=limit, max_depth=max_depth, screen=screen)
    finally:
        os.close(top)
    return Look(_identity(st), True, entries)


def snapshot(
    rootset: RootSet, full: str, *, recursive: bool, limit: int, max_depth: int = MAX_DEPTH
) -> Snapshot:
    """The entries of :func:`look` without a fence (what a watch saw before the fence; kept for the
    descriptor-count tests and as the tests' naive control)."""
    return look(rootset, full, recursive=recursive, limit=limit, max_depth=max_depth).entries


def diff(
    watch: Watch, before: Mapping[str, tuple[int, ...]], after: Mapping[str, tuple[int, ...]]
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


@dataclass
class Watch:
    id: str
    root: Root
    path: str
    recursive: bool
    where: Path  # where the watched path led when the watch began (for the kernel's watcher only)
    expect: tuple[int, int] | None  # the watched folder's identity (None: a file, which a save replaces)
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)


Send = Callable[[dict[str, Any]], Awaitable[None]]


class Watches:
    """The watches of one connection: at most ``max_watches`` at once, each at most ``max_entries``."""

    def __init__(
        self, *, max_watches: int, max_entries: int, interval: float, backend: Backend = "auto"
    ) -> None:
        if max_watches < 0 or max_entries <= 0 or interval <= 0:
            raise ValueError(
                f"max_watches ({max_watches}) must be >= 0, max_watch_entries ({max_entries}) and "
                f"watch_interval ({interval}) positive"
            )
        if backend == "events" and watchfiles is None:
            raise ValueError("watch_backend='events' needs the watchfiles package (mcp-roots[watch])")
        self.max_watches = max_watches
        self.max_entries = max_entries
        self.interval = interval
        self.events = backend == "events" or (backend == "auto" and watchfiles is not None)
        self.open: dict[str, Watch] = {}

    def check_room(self) -> None:
        if len(self.open) >= self.max_watches:
            raise p.broker_error(
                "QUOTA_EXCEEDED",
                f"at most {self.max_watches} watches may be open at once",
                kind="watches",
                limit=self.max_watches,
            )

    def add(self, root: Root, rel: str, recursive: bool, where: Path, first: Look) -> Watch:
        expect = first.identity if first.is_dir else None
        watch = Watch(secrets.token_urlsafe(12), root, rel, recursive, where, expect)
        self.open[watch.id] = watch
        return watch

    def pop(self, watch_id: str) -> Watch | None:
        watch = self.open.pop(watch_id, None)
        if watch is not None:
            watch.scope.cancel()
        return watch

    async def run(
        self, watch: Watch, rootset: RootSet, full: str, before: Snapshot, grants: Grants, send: Send
    ) -> None:
        """Send the differences of ``watch`` until it is cancelled, or what it watches leaves the user's
        consent (a revoked or unconsented location: it ends with ``reason: "revoked"`` and no name), goes
        away, is replaced by another folder, becomes unreadable, leads outside its root (a last
        ``deleted``) or outgrows the limits (``quota``)."""
        with watch.scope:
            async for _ in self._wakeups(watch):
                try:
                    after = await anyio.to_thread.run_sync(
                        lambda: (
                            look(
                                rootset,
                                full,
                                recursive=watch.recursive,
                                limit=self.max_entries,
                                grants=grants,
                                expect=watch.expect,
                            ).entries
                        ),
                        abandon_on_cancel=True,
                    )
                    ended: str | None = None
                except (WatchTooLarge, TooDeep):
                    after, ended = before, "quota"
                except (Revoked, Unconsented):  # judged like a read: nothing of it is reported
                    after, ended = before, "revoked"
                except Exception:  # gone, replaced, unreadable or now leading outside: a last 'deleted'
                    after, ended = {}, "deleted"
                changes = [] if ended == "revoked" else diff(watch, before, after)
                if ended == "deleted":
                    changes = [{"root": watch.root.uri, "path": watch.path, "kind": "deleted"}]
                if ended is not None:
                    self.open.pop(watch.id, None)
                if changes or ended is not None:
                    await send(
                        w.dump(
                            w.ChangedParams(
                                watch_id=watch.id,
                                changes=[w.ChangeEvent.model_validate(c) for c in changes],
                                ended=ended is not None,
                                reason=ended,
                            )
                        )
                    )
                if ended is not None:
                    return
                before = after

    async def _wakeups(self, watch: Watch) -> AsyncIterator[None]:
        if self.events and watchfiles is not None:
            try:
                async for _ in watchfiles.awatch(
                    watch.where,
                    recursive=watch.recursive,
                    debounce=max(1, int(self.interval * 1000)),
                    step=min(50, max(1, int(self.interval * 1000))),
                    rust_timeout=1000,
                    yield_on_timeout=True,  # a rescan every second too: a vanished path ends the watch
                    ignore_permission_denied=True,
                ):
                    yield
            except (OSError, RuntimeError):
                logger.info("watch %s: the kernel watcher failed; polling instead", watch.id, exc_info=True)
        while True:
            await anyio.sleep(self.interval)
            yield
