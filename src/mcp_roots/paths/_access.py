"""Which writes a RootSet refuses: beneath a read-only root, or to the protected set (``protecting()``).
Checked before a write on the canonical location, and again on the descriptor it acts in.
"""

# A write to a path is allowed when the innermost root holding its canonical location is read-write (Root's
# access); a remove or a rename is refused too when a read-only root lies beneath the name it moves. The
# check runs twice: before the operation, on the canonical location (so the refusal names the path and the
# root), and in it, on the kernel's name for the directory it acts in (Router.write_check) or the file it
# opened, so a symlink swapped in between cannot carry a write into a read-only root. A RootSet with no
# read-only root and no protected set has no WriteRule: its operations pay one attribute test.

from __future__ import annotations

import posixpath
from collections.abc import Callable, Mapping

from .. import sandbox
from .._sys import linux
from ..errors import PathOutsideRoots, ReadOnlyPath
from ._root import Root
from ._router import Router
from ._text import checked_text, describe, ending, shorten, split

__all__ = ["WriteRule"]


class WriteRule:
    """The writes one RootSet refuses. :meth:`check` before a write; :meth:`check_fd` (the router's
    ``write_check``) on the directory a name operation acts in; :meth:`opened` on a file opened to write."""

    __slots__ = ("_by_path", "_protect", "_read_only", "_router")

    def __init__(self, router: Router, by_path: Mapping[str, Root], protect: tuple[str, ...] | None) -> None:
        self._router = router
        self._by_path = by_path
        self._protect = protect
        self._read_only = any(not root.writable for root in by_path.values())
        router.write_check = self.check_fd if self._read_only else None

    @classmethod
    def of(
        cls, router: Router, by_path: Mapping[str, Root], protect: tuple[str, ...] | None
    ) -> WriteRule | None:
        """The rule of a set with these roots and protected names; None when it refuses no write."""
        if protect is None and all(root.writable for root in by_path.values()):
            router.write_check = None
            return None
        return cls(router, by_path, protect)

    def _read_only_above(self, canonical: str) -> str | None:
        root_path = self._router.index.above(canonical)
        if root_path is None or self._by_path[root_path].writable:
            return None
        return root_path

    def _where(self, text: str, name: bool) -> tuple[str, str]:
        """Where a write to ``text`` acts, canonical: the folder (or file) it changes, and the name it
        changes there. ``name``: the operation acts on the final name itself (mkdir, remove, rename), not
        followed: it changes the name's parent. Else the file the path leads to is both."""
        if name and not ending(text):
            parts = split(text)
            if parts and parts[-1] != "..":
                parent = self._router.canonical("/" + "/".join(parts[:-1]))
                return parent, posixpath.join(parent, parts[-1])
        canonical = self._router.canonical(text)
        return canonical, canonical

    def check(self, path: object, *, name: bool = False, holder: bool = False) -> None:
        """Refuse a write to ``path`` beneath a read-only root (``holder``: also one that would move or
        remove a read-only root, the name itself or one beneath it) or to the protected set (``holder``: or
        to a folder holding some of it). A path outside every root passes: the operation refuses it."""
        text = self._router.absolute(path)
        if self._read_only:
            self._check_access(text, name, holder)
        if self._protect is not None:
            canonical = self._router.canonical(text)
            root_path = self._router.index.above(canonical)
            hit = root_path and sandbox.protected_hit(root_path, canonical, self._protect, holder=holder)
            if hit:
                raise PathOutsideRoots(f"Access denied: {canonical!r} is protected ({hit})")

    def _check_access(self, text: str, name: bool, holder: bool) -> None:
        index = self._router.index
        try:
            changed, moved = self._where(text, name)
        except PathOutsideRoots:  # unresolvable ('FILE/', a loop): refused by its text, else by the op
            root_path = index.innermost_prefix(text)
            changed = moved = ""
        else:
            root_path = index.above(changed)
        if root_path is not None and not self._by_path[root_path].writable:
            raise ReadOnlyPath(
                f"Access denied: {describe(text)} is under the read-only root {shorten(root_path)!r}; "
                "it cannot be written"
            )
        if holder and moved and root_path is not None:
            for inner in [index.exact(moved), *index.beneath(moved)]:
                if inner is not None and not self._by_path[inner].writable:
                    what = "is" if inner == index.exact(moved) else "holds"
                    raise ReadOnlyPath(
                        f"Access denied: {describe(text)} {what} the read-only root {shorten(inner)!r}; "
                        "it cannot be moved or removed"
                    )

    def check_fd(self, fd: int, text: str) -> None:
        """Refuse to write in the directory or file open at ``fd`` when the kernel names it beneath a
        read-only root (a symlink swapped in after :meth:`check`). Where the kernel cannot name it (no
        procfs, a deleted directory) the check made before the operation stands."""
        if not self._read_only:
            return
        where = linux.fd_path(fd)
        root_path = None if where is None else self._read_only_above(where)
        if root_path is not None:
            raise ReadOnlyPath(
                f"Access denied: {describe(text)} leads under the read-only root {shorten(root_path)!r}; "
                "it cannot be written"
            )

    def opened(self, fd: int, path: object, close: Callable[[], object]) -> None:
        """A file just opened to write: refused, closed and nothing written, if it lies under a read-only
        root. (Its creation or truncation, in a race with a symlink swap, has happened: the limit.)"""
        try:
            self.check_fd(fd, checked_text(path))
        except BaseException:
            close()
            raise
