"""Where a files/* request acts: the root it names (one the user approved for this server), that root's
RootSet, the checked relative path, and the consent for it, both as named and where it leads; plus the
worker-thread runner every blocking operation goes through.
"""

from __future__ import annotations

import contextlib
import posixpath
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import anyio
import mcp_types
from mcp.client.session import ClientSession

from ..paths._rootset import Root, RootSet
from ..roots._provider import RootsProvider
from . import _protocol as p
from . import _wire as w
from ._consent import Access, ConsentItem
from ._grants import Grants
from ._hostops import join

__all__ = ["Located", "Locator", "run"]

_T = TypeVar("_T")


@dataclass(frozen=True)
class Located:
    """A request's target: its ``root``, that root's ``rootset`` and the checked ``rel`` path ('' for the
    root itself). Consent for it was required when it was located."""

    root: Root
    rootset: RootSet
    rel: str

    @property
    def full(self) -> str:
        """The absolute path handed to RootSet (which opens it beneath the root)."""
        return join(self.root, self.rel)


class Locator:
    """Maps a request's ``root`` URI and ``path`` to a :class:`Located`, for one broker's connection."""

    def __init__(self, roots: RootsProvider | RootSet, grants: Grants) -> None:
        self.roots = roots
        self.grants = grants
        self.session: ClientSession | None = None
        self._rootsets: dict[Path, RootSet] = {}

    def known_roots(self) -> tuple[Root, ...]:
        return self.roots.roots

    async def current_roots(self) -> tuple[Root, ...]:
        """The roots this connection may broker: a RootSet's, or those the provider's consent approved
        for this server (asking it now if the server never listed roots)."""
        if isinstance(self.roots, RootSet):
            return self.roots.roots
        if self.session is None:
            return ()  # not installed on a connection: there is no server whose consent we could know
        return await self.roots.approved_roots(self.session)

    async def root(self, uri: str | None) -> Root:
        roots = await self.current_roots()
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

    def rootset(self, root: Root) -> RootSet:
        found = self._rootsets.get(root.path)
        if found is None:
            for stale in set(self._rootsets) - {r.path for r in self.known_roots()}:
                self._rootsets.pop(stale).close()
            found = self._rootsets[root.path] = RootSet.from_paths([(root.path, root.name)], source="client")
        return found

    def server_info(self) -> mcp_types.Implementation | None:
        result = getattr(self.session, "initialize_result", None)
        info = getattr(result, "server_info", None)
        return info if isinstance(info, mcp_types.Implementation) else None

    async def locate(
        self,
        ref: w.PathRef,
        access: Access,
        where: dict[str, object],
        *,
        reaching: bool = False,
        follow: bool = True,
    ) -> Located:
        """Map a PathRef to its root and checked relative path, and require consent for it, both for the
        path as named and for where it leads.

        ``reaching``: the operation also acts on everything beneath the path (a recursive delete, a
        rename of a folder), so it is refused when a revoked location lies there. ``follow`` False: the
        operation acts on the final name itself (delete, rename, create), so only its parent is
        followed. This is the check before the act; the act itself checks the descriptor it goes
        through (``_hostops.checked_parent``, ``Grants.fence``)."""
        root = await self.root(ref.root)
        where["root"] = root.uri
        rel = p.check_relative_path(ref.path)
        where["path"] = rel
        rootset = self.rootset(root)
        wheres = {root.path / rel if rel else root.path}
        # Where the path leads once symlinks are followed (a path still to be created leads nowhere yet).
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            if follow or not rel:
                wheres.add(await run(rootset.resolve, join(root, rel)))
            else:
                parent, name = posixpath.split(rel)
                wheres.add(await run(rootset.resolve, join(root, parent)) / name)
        await self.grants.require(ConsentItem(root, rel), wheres, access, self.server_info())
        if reaching and any(self.grants.reaches_revoked(x) for x in wheres):
            raise p.broker_error(
                "PERMISSION_DENIED",
                f"{rel or '.'!r} holds a folder whose consent the user revoked",
                path=rel,
                consent="revoked",
            )
        return Located(root, rootset, rel)


async def run(func: Callable[..., _T], *args: Any, mutating: bool = False) -> _T:
    """Run a blocking file operation in a worker thread.

    A read is abandoned when the request times out. A mutating call that has started is shielded and runs
    to completion, and its outcome is the answer: a TIMEOUT never hides a change that happened anyway (the
    timeout bounds consent prompts, queueing and reads)."""
    if mutating:
        with anyio.CancelScope(shield=True):
            return await anyio.to_thread.run_sync(func, *args)
    return await anyio.to_thread.run_sync(func, *args, abandon_on_cancel=True)
