"""Consent for files/*: one connection's grants, refusals and revocations.
And the prompts that decide them.
"""

# A revocation is held by identity as well as by name: the broker keeps an O_PATH descriptor of each revoked
# location and asks the kernel where it is now, so renaming an ancestor does not carry a folder out of its
# revocation. Only a grant the user approved at or beneath a revoked location lifts it; a wider grant, or
# the roots being taken as consent, never does. A refusal covers what lies beneath it, and prompts are
# rate limited (beyond the limit the answer is "no" without asking).

from __future__ import annotations

import contextlib
import inspect
import logging
import os
import stat
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeAlias

import anyio
import mcp_types

from .._sys import linux
from . import _protocol as p
from ._consent import Access, ConsentItem, FileConsentCallback, FileConsentRequest, TokenBucket, under

__all__ = ["Grants", "Revoked", "Screen", "Unconsented"]

logger = logging.getLogger("mcp_roots")

Screen: TypeAlias = Callable[["Path | None", os.stat_result], bool]
"""``hidden(where, st)``: an entry of a listing or a watched tree (its path now, when known, and its lstat)
lies in a revoked location, by name or by identity, and is left out of the answer."""


@dataclass(frozen=True)
class _Grant:
    where: Path
    access: Access
    by_user: bool  # approved by the consent callback (not just "the roots are consent")

    def covers(self, where: Path, access: Access) -> bool:
        return under(where, self.where) and (access == "read" or self.access == "write")


_PATH_FLAGS = getattr(os, "O_PATH", os.O_RDONLY) | os.O_CLOEXEC
_DIR_FLAGS = _PATH_FLAGS | os.O_DIRECTORY
_FENCE_TRIES = 8


def _identity(st: os.stat_result) -> tuple[int, int]:
    return (st.st_dev, st.st_ino)


def _ancestor_hit(start: int, identities: Collection[tuple[int, int]]) -> tuple[int, int] | None:
    """The first of ``identities`` that the directory ``start`` or one of its ancestors is (walked by
    ``..`` descriptors, so by identity, whatever they are called now), or None. Closes ``start``."""
    current = start
    try:
        seen = os.fstat(current)
        while True:
            if _identity(seen) in identities:
                return _identity(seen)
            parent = os.open("..", _DIR_FLAGS, dir_fd=current)
            above = os.fstat(parent)
            os.close(current)
            current = parent
            if _identity(above) == _identity(seen):  # the file system's root is its own parent
                return None
            seen = above
    finally:
        os.close(current)


def _directory_of(fd: int, st: os.stat_result) -> int | None:
    """A descriptor of the directory that holds the opened ``fd`` now (checked by identity), or None."""
    if stat.S_ISDIR(st.st_mode):
        return os.open("..", _DIR_FLAGS, dir_fd=fd)
    for _ in range(_FENCE_TRIES):
        now = linux.fd_path(fd)
        if now is None:
            return None  # deleted, or no procfs: the caller fails closed
        try:
            parent = os.open(os.path.dirname(now), _DIR_FLAGS)
        except OSError:
            continue
        try:
            there = os.stat(os.path.basename(now), dir_fd=parent, follow_symlinks=False)
        except OSError:
            there = None
        if there is not None and _identity(there) == _identity(st):
            return parent
        os.close(parent)  # it moved between the two looks: look again
    return None


class Revoked(Exception):
    """An opened file or folder turned out to lie in a revoked location (see :meth:`Grants.fence`)."""


class Unconsented(Exception):
    """The folder a change was about to happen in is not one the user consented to (it was swapped in
    after the consent check; see :meth:`Grants.fence_at`)."""


class _Revocation:
    """A revoked location: its path when revoked, and (while it exists) a descriptor that follows it."""

    def __init__(self, where: Path) -> None:
        self.where = where
        self.fd: int | None = None
        self.identity: tuple[int, int] | None = None
        with contextlib.suppress(OSError):
            self.fd = os.open(where, _PATH_FLAGS | os.O_NOFOLLOW)
            st = os.fstat(self.fd)
            self.identity = (st.st_dev, st.st_ino)

    def places(self) -> tuple[Path, ...]:
        """Where the revoked location is: its old path, and where the kernel says it is now."""
        now = None if self.fd is None else linux.fd_path(self.fd)
        if now is None:
            return (self.where,)
        return (self.where, Path(now)) if Path(now) != self.where else (self.where,)

    def close(self) -> None:
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = None


class Grants:
    """The consent state of one connection (see the comment atop this module); owned by one FileBroker."""

    def __init__(
        self,
        callback: FileConsentCallback | None,
        *,
        read_only: bool,
        prompts: tuple[int, float] | None,
        clock: Callable[[], float],
    ) -> None:
        self.callback = callback
        self.read_only = read_only
        self._grants: list[_Grant] = []
        self._refusals: list[tuple[Path, Access]] = []
        self._revocations: list[_Revocation] = []
        self._everything_revoked = False
        self._prompts = TokenBucket(*prompts, clock=clock) if prompts is not None else None
        self.lock = anyio.Lock()

    # -- the user's actions --

    def revoke(self, targets: Iterable[Path] | None, roots: Iterable[Path]) -> None:
        """Revoke ``targets`` (canonical paths), or everything (None: every root, now and later)."""
        wheres = list(roots) if targets is None else list(targets)
        if targets is None:
            self._everything_revoked = True
        self._grants = [
            g for g in self._grants if not any(under(g.where, t) or under(t, g.where) for t in wheres)
        ]
        self._revocations.extend(_Revocation(t) for t in wheres)

    def restore(self, targets: Iterable[Path] | None) -> None:
        """Lift revocations (None: all) without granting anything: consent is as if never revoked."""
        keep: list[_Revocation] = []
        wanted = None if targets is None else list(targets)
        for revocation in self._revocations:
            if wanted is None or any(under(revocation.where, t) for t in wanted):
                revocation.close()
            else:
                keep.append(revocation)
        self._revocations = keep
        if wanted is None:
            self._everything_revoked = False

    def close(self) -> None:
        for revocation in self._revocations:
            revocation.close()

    # -- questions --

    def revoked(self, where: Path) -> bool:
        """``where`` lies in a revoked location that no grant the user approved since has lifted."""
        lifting = [g for g in self._grants if g.by_user and under(where, g.where)]
        if self._everything_revoked and not lifting:
            return True
        for revocation in self._revocations:
            for place in revocation.places():
                if under(where, place) and not any(under(g.where, place) for g in lifting):
                    return True
        return False

    def fence(self, fd: int) -> None:
        """Raise :class:`Revoked` if the opened ``fd`` lies in a revoked location: the check after the open,
        so a rename between the consent check and the open cannot carry a read into a revoked folder."""
        if not self._revocations:
            return
        now = linux.fd_path(fd) or ""  # "": deleted, or no procfs; the identity walk decides (fail closed)
        if now and self.revoked(Path(now)):
            raise Revoked(now)
        # By name is not enough: the revoked folder may move between the two looks. Walk up from the
        # opened file by identity; a revoked folder on the way is a refusal unless a grant the user
        # approved since lifts it for this path.
        by_identity = {r.identity: r for r in self._revocations if r.identity is not None}
        st = os.fstat(fd)
        hit: tuple[int, int] | None = _identity(st) if _identity(st) in by_identity else None
        if hit is None:
            directory = _directory_of(fd, st)
            if directory is None:
                raise Revoked(now)  # it kept moving: fail closed
            hit = _ancestor_hit(directory, by_identity)
        if hit is not None and not self._lifted(by_identity[hit], Path(now)):
            raise Revoked(now)

    def fence_read(self, fd: int) -> None:
        """The check after opening something to describe or read it (read, list, stat, every watch
        snapshot, a conflict's etag), made on that very descriptor: where it is now must be consented for
        reading (when a callback decides consent; else the roots are the consent) and must not lie in a
        revoked location, by name or by identity (:meth:`fence`). A rename, swap or symlink put there
        after the consent check cannot carry an answer into a folder the user did not approve or revoked:
        :class:`Unconsented` or :class:`Revoked` instead."""
        if self.callback is not None:
            now = linux.fd_path(fd)
            if now is None:  # deleted, or no procfs: fail closed
                raise Unconsented("")
            if not self.covered(Path(now), "read"):
                raise Unconsented(now)
        self.fence(fd)

    def screen(self) -> Screen | None:
        """For one listing or one watch snapshot: the test that leaves out entries lying in a revoked
        location (the location itself, a hard link to a revoked file, and everything beneath), by identity
        (the revoked locations in force now) and by name (where they were revoked and are now). None
        when nothing is revoked. Take it once per answer: it reads where each revocation is now."""
        if not self._revocations:
            return None
        in_force = self.in_force()
        places = {place for revocation in self._revocations for place in revocation.places()}

        def hidden(where: Path | None, st: os.stat_result) -> bool:
            if _identity(st) in in_force:
                return True
            if where is None or not any(under(where, place) for place in places):
                return False
            return self.revoked(where)

        return hidden

    def fence_at(self, dirfd: int, name: str, access: Access) -> None:
        """The check before a change to ``name`` in the opened directory ``dirfd``, made on that very
        descriptor, which the change then goes through: where the directory is now must be consented
        (``access``, when a callback decides consent) and must not lie in a revoked location, by name or
        by identity. A rename or swap between the consent check and the change cannot carry the change
        into a folder the user did not approve or revoked: it fails with :class:`Unconsented` or
        :class:`Revoked` instead."""
        if self.callback is not None:
            now = linux.fd_path(dirfd)
            if now is None:  # deleted, or no procfs: fail closed
                raise Unconsented(name)
            where = Path(now) / name if name else Path(now)
            if not self.covered(where, access):
                raise Unconsented(str(where))
        self.fence(dirfd)

    def in_force(self) -> frozenset[tuple[int, int]]:
        """The identities of the revoked locations that exist and that no grant the user approved since
        has lifted (judged where they are now: take this before a change moves anything)."""
        return frozenset(
            r.identity
            for r in self._revocations
            if r.identity is not None and any(self.revoked(place) for place in r.places())
        )

    def holds_revoked(self, st: os.stat_result, in_force: Collection[tuple[int, int]]) -> bool:
        """The file or folder ``st`` describes is one of the revoked locations ``in_force`` or holds one,
        by identity (a folder is found above a revoked location by walking up from it through ``..``
        descriptors, whatever either is called now)."""
        target = _identity(st)
        if target in in_force:
            return True
        if not stat.S_ISDIR(st.st_mode):
            return False
        for revocation in self._revocations:
            if revocation.fd is None or revocation.identity not in in_force:
                continue
            try:
                start = _directory_of(revocation.fd, os.fstat(revocation.fd))
            except OSError:
                continue
            if start is None or _ancestor_hit(start, {target}) is not None:
                return True  # (None: it kept moving; fail closed)
        return False

    def _lifted(self, revocation: _Revocation, where: Path) -> bool:
        """A grant the user approved at or beneath the revoked location covers ``where``."""
        places = revocation.places()
        return any(
            g.by_user and under(where, g.where) and any(under(g.where, place) for place in places)
            for g in self._grants
        )

    def reaches_revoked(self, where: Path) -> bool:
        """A revoked location lies at or beneath ``where`` (a recursive delete or a rename of ``where``
        would reach into it)."""
        if self._everything_revoked and not any(g.by_user and under(where, g.where) for g in self._grants):
            return True
        return any(
            under(place, where) and self.revoked(place) for r in self._revocations for place in r.places()
        )

    def covered(self, where: Path, access: Access) -> bool:
        return any(g.covers(where, access) for g in self._grants)

    def refused(self, where: Path, access: Access) -> bool:
        return any(under(where, r) and (a == "read" or a == access) for r, a in self._refusals)

    def prompt_allowed(self) -> bool:
        return self._prompts is None or self._prompts.take() == 0

    # -- decisions --

    def grant(self, where: Path, access: Access, *, by_user: bool) -> None:
        self._grants.append(_Grant(where, access, by_user))
        if by_user:
            self._refusals = [(r, a) for r, a in self._refusals if not under(r, where)]

    def refuse(self, where: Path, access: Access) -> None:
        self._refusals.append((where, access))

    async def ask(self, request: FileConsentRequest) -> set[ConsentItem]:
        """The items the callback approves; a raising or malformed callback is a refusal."""
        assert self.callback is not None
        try:
            answer = self.callback(request)
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
            logger.error("the files/* consent callback returned %r; refusing", type(answer).__name__)
            return set()
        return {item for item in request.items if item in answer}

    async def require(
        self,
        item: ConsentItem,
        wheres: Collection[Path],
        access: Access,
        server: mcp_types.Implementation | None,
    ) -> None:
        """Raise PERMISSION_DENIED unless ``access`` to every place in ``wheres`` (the path as named and
        where it leads) is granted, or now gets granted by the user."""
        rel = item.path
        if access == "write" and self.read_only:
            raise p.broker_error(
                "PERMISSION_DENIED", f"{rel or '.'!r}: this client is read-only", path=rel, readOnly=True
            )
        if any(self.revoked(w) for w in wheres):
            raise p.broker_error(
                "PERMISSION_DENIED",
                f"{rel or '.'!r}: the user revoked consent; ask again with files/consent",
                path=rel,
                consent="revoked",
            )
        if self.callback is None:
            return
        for where in wheres:
            await self._require_one(item, where, access, server)

    async def _require_one(
        self, item: ConsentItem, where: Path, access: Access, server: mcp_types.Implementation | None
    ) -> None:
        rel = item.path
        async with self.lock:
            if self.covered(where, access):
                return
            if self.refused(where, access):
                raise p.broker_error(
                    "PERMISSION_DENIED",
                    f"{rel or '.'!r}: the user did not consent",
                    path=rel,
                    consent="denied",
                )
            if not self.prompt_allowed():
                raise p.broker_error(
                    "PERMISSION_DENIED",
                    f"{rel or '.'!r}: too many consent prompts; ask with files/consent later",
                    path=rel,
                    consent="rate-limited",
                )
            rel_where = where.relative_to(item.root.path).as_posix() if under(where, item.root.path) else rel
            shown = ConsentItem(item.root, "" if rel_where == "." else rel_where)
            verb = "read" if access == "read" else "change"
            request = FileConsentRequest(
                server=server,
                message=f"The server wants to {verb} {shown.path or 'the folder'!r} in "
                f"{item.root.name or item.root.path}",
                items=(shown,),
                access=access,
                explicit=False,
            )
            if shown in await self.ask(request):
                self.grant(where, access, by_user=True)
                return
            self.refuse(where, access)
        raise p.broker_error(
            "PERMISSION_DENIED", f"{rel or '.'!r}: the user did not consent", path=rel, consent="denied"
        )
