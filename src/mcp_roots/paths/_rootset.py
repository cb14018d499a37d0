"""RootSet: canonical roots, their index, the contains / resolve questions.
And the operations, each resolved beneath a root's descriptor.
"""

# A RootSet is immutable. Its questions are answered by the Router (canonical path, innermost root); its
# file operations are the bodies in the verb modules (_open, _write, _dirs, _remove, _rename). This module is
# the public face, one delegating line per operation; the docstrings are most of it. Subprocesses (and their
# environment): _confined.

from __future__ import annotations

import functools
import io
import logging
import os
import sys
import weakref
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import TracebackType
from typing import IO, TYPE_CHECKING, Any, BinaryIO, Literal, TypeVar, overload

from ..errors import InvalidPath, PathOutsideRoots
from . import _dirs, _open, _remove, _rename, _write
from ._access import WriteRule
from ._confined import Confined
from ._descriptors import RootDescriptors
from ._fold import folding_for
from ._index import RootIndex
from ._root import Access, Root, roots_from_paths, roots_from_uris
from ._router import Router
from ._text import checked_text, shorten
from ._tree import Entry, Leave, OnError, Visit

if TYPE_CHECKING:
    from _typeshed import (
        OpenBinaryMode,
        OpenBinaryModeReading,
        OpenBinaryModeUpdating,
        OpenBinaryModeWriting,
        OpenTextMode,
        StrPath,
    )

__all__ = ["Access", "Root", "RootSet"]

_T = TypeVar("_T")

logger = logging.getLogger("mcp_roots")

_WINDOWS = os.name == "nt"

#: open flags that write (a RootSet with read-only roots, or protecting(), checks them)
_WRITING = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND

REFUSAL_ROOTS = 3  # how many roots a refusal names before it says how many more


# --- RootSet -------------------------------------------------------------------------------------------


class RootSet(Confined):
    """An immutable set of canonical roots that answers "is this path inside?" and guards operations.

    Args:
        roots: :class:`Root` objects (from :meth:`Root.from_path`). Duplicates (as ``platform`` compares
            names) are dropped; where one is read-only the root kept is (fail closed).
        source: Where the roots came from (``"client"``, ``"flag"``, ``"environment"``, a config file path,
            ``"project root"``...).
        platform: The ``sys.platform`` whose name comparison the set uses.
    """

    __slots__ = (
        "__weakref__",
        "_by_path",
        "_descriptors",
        "_index",
        "_paths",
        "_platform",
        "_protect",
        "_roots",
        "_router",
        "_rule",
        "_source",
    )

    def __init__(self, roots: Iterable[Root] = (), *, source: str = "explicit", platform: str = sys.platform):
        given = tuple(roots)
        for root in given:
            if not isinstance(root, Root):
                raise TypeError(f"RootSet takes Root objects, not {type(root).__name__} (see Root.from_path)")
        index = RootIndex((str(r.path) for r in given), folding_for(platform))
        kept: dict[str, Root] = {}
        for root in given:
            first = kept.setdefault(str(root.path), root)
            if first.writable and not root.writable:
                kept[str(root.path)] = first.with_access("read")
        self._roots = tuple(kept[path] for path in index.paths)
        self._paths = tuple(r.path for r in self._roots)  # made once: the guard's ceiling precheck reads it
        self._by_path = {str(root.path): root for root in self._roots}
        self._source = source
        self._platform = platform
        self._protect: tuple[str, ...] | None = None  # protecting(): the names its writes refuse
        self._index = index
        # Root descriptors open lazily, one per root in use; they close with close(), or when this set is
        # collected (a finalizer, not __del__: it runs once, and never while an operation holds one).
        self._descriptors = RootDescriptors()
        self._router = Router(index, self._descriptors, functools.partial(self.describe, REFUSAL_ROOTS))
        # The writes it refuses (_access): beneath a read-only root, or protecting()'s; None: no cost.
        self._rule = WriteRule.of(self._router, self._by_path, None)
        weakref.finalize(self, self._descriptors.close)

    # -- construction --

    @classmethod
    def empty(cls, *, source: str = "explicit") -> RootSet:
        """A RootSet with no roots: every path is outside (fail closed).

        Args:
            source: Where the (missing) roots came from, for messages.
        """
        return cls((), source=source)

    @classmethod
    def from_paths(
        cls,
        paths: Iterable[str | os.PathLike[str] | tuple[str | os.PathLike[str], str | None]],
        *,
        strict: bool = True,
        source: str = "explicit",
        base: str | os.PathLike[str] | None = None,
        access: Access = "read-write",
    ) -> RootSet:
        """Build a RootSet from local paths (or ``(path, name)`` pairs).

        Each root is canonicalized; duplicates are dropped.

        Args:
            paths: The roots' paths, or ``(path, display name)`` pairs.
            strict: Raise :class:`InvalidPath` for a root that does not exist or cannot be read (else skip
                it with a warning).
            source: Where the roots came from, for messages (``"flag"``, ``"client"``...).
            base: What relative paths resolve against (default: the working directory).
            access: Every root's access: ``"read-write"`` or ``"read"`` (writes beneath it refused).
        """
        return cls(roots_from_paths(paths, strict, source, base, access), source=source)

    @classmethod
    def from_uris(
        cls,
        uris_or_roots: Iterable[object],
        *,
        strict: bool = True,
        source: str = "client",
        access: Access = "read-write",
    ) -> RootSet:
        """Build a RootSet from ``file:`` URIs, or objects with ``uri`` and ``name``.

        Args:
            uris_or_roots: URIs, or the SDK's ``Root``, :class:`Root`, or ``{"uri": ..., "name": ...}`` dicts.
            strict: Raise :class:`InvalidRootURI` for an invalid URI and :class:`InvalidPath` for a missing or
                unreadable directory (else skip the entry with a warning).
            source: Where the roots came from, for messages.
            access: Every root's access: ``"read-write"`` or ``"read"``.
        """
        return cls(roots_from_uris(uris_or_roots, strict, source, access), source=source)

    def with_source(self, source: str) -> RootSet:
        """The same roots, labelled with another source.

        Args:
            source: The new label (``"client"``, ``"flag"``...).
        """
        return self._made(self._roots, source, self._protect)

    def with_roots(self, roots: Iterable[Root]) -> RootSet:
        """Other roots (each with its own access), with this set's source, comparison rule, protected set.

        Args:
            roots: The new set's :class:`Root` objects.
        """
        return self._made(roots, self._source, self._protect)

    def with_access(self, access: Access) -> RootSet:
        """These roots, every one with the access ``access`` (``"read"``: every write refused).

        Args:
            access: ``"read-write"`` or ``"read"``.
        """
        return self._made((r.with_access(access) for r in self._roots), self._source, self._protect)

    def _made(self, roots: Iterable[Root], source: str, protect: tuple[str, ...] | None) -> RootSet:
        made = type(self)(roots, source=source, platform=self._platform)
        made._protect = protect
        made._rule = WriteRule.of(made._router, made._by_path, protect)
        return made

    def protecting(self, protect: bool | Iterable[str] = True) -> RootSet:
        """These roots, whose writes refuse the protected set with :class:`PathOutsideRoots`.

        Those of ``open`` (writing), ``write_bytes``/``write_text``, ``mkdir``, ``remove``, ``rename``, as a
        confined child's do. Opt-in: a server may legitimately edit those files.

        Args:
            protect: ``True``: the default set (``.git/config``, ``.git/hooks``, ``.mcp.json``, ...:
                ``mcp_roots.sandbox.PROTECTED``); the names to protect; ``False``: none.
        """
        from .. import sandbox

        return self._made(self._roots, self._source, sandbox.protected_names(protect) or None)

    # -- the set --

    @property
    def roots(self) -> tuple[Root, ...]:
        """The roots, in the order given (duplicates removed)."""
        return self._roots

    @property
    def paths(self) -> tuple[Path, ...]:
        """The canonical root paths."""
        return self._paths

    @property
    def source(self) -> str:
        """Where the roots came from."""
        return self._source

    @property
    def platform(self) -> str:
        """The ``sys.platform`` whose name comparison this set uses."""
        return self._platform

    def __len__(self) -> int:
        return len(self._roots)

    def __iter__(self) -> Iterator[Root]:
        return iter(self._roots)

    def __bool__(self) -> bool:
        return bool(self._roots)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RootSet):
            return NotImplemented
        return self._roots == other._roots

    def __hash__(self) -> int:
        return hash(self._roots)

    def __repr__(self) -> str:
        read = [str(r.path) for r in self._roots if not r.writable]
        return f"RootSet({[str(p) for p in self.paths]!r}, source={self._source!r}" + (
            f", read_only={read!r})" if read else ")"
        )

    def describe(self, most: int | None = None) -> str:
        """The roots as a human list, for messages: ``/a, /b (read-only)`` or ``no roots``.

        Args:
            most: Name the first ``most`` (shortened) and how many more, as a refusal does (default: all).
        """
        if not self._roots:
            return "no roots"
        shown = [
            (str(r.path) if most is None else shorten(str(r.path))) + ("" if r.writable else " (read-only)")
            for r in self._roots[:most]
        ]
        more = len(self._roots) - len(shown)
        return ", ".join(shown) + (f" and {more} more" if more else "")

    def _root(self, root_path: str | None) -> Root | None:
        return None if root_path is None else self._by_path[root_path]

    # -- questions --

    def root_above(self, canonical: str | os.PathLike[str]) -> Root | None:
        """The innermost root that is ``canonical`` or an ancestor of it, or None; no I/O.

        Args:
            canonical: A canonical path, compared by whole components and this set's name comparison.
        """
        return self._root(self._index.above(os.fspath(canonical)))

    def roots_beneath(self, path: str | os.PathLike[str]) -> tuple[Root, ...]:
        """The roots that lie strictly beneath ``path`` (whole components); no I/O.

        Args:
            path: A canonical path (taken as such).
        """
        inner = set(self._index.beneath(os.fspath(path)))
        return tuple(r for r in self._roots if str(r.path) in inner)

    def _canonical(self, path: object) -> str:
        """Canonical text of ``path``: InvalidPath for bad input, PathOutsideRoots if unresolvable."""
        text = checked_text(path)
        if not (os.path.isabs(text) if _WINDOWS else text.startswith("/")):
            if not self._roots:
                raise PathOutsideRoots(f"Access denied: {text!r} is relative and there are no allowed roots")
            text = os.path.join(str(self._roots[0].path), text)
        if _WINDOWS:  # pragma: no cover - best effort, see docs/design.md
            return os.path.realpath(text)
        return self._router.canonical(text)

    def root_of(self, path: str | os.PathLike[str]) -> Root | None:
        """The innermost root that contains ``path``, or None (never raises).

        Args:
            path: Any path, absolute or relative to the first root.
        """
        try:
            canonical = self._canonical(path)
        except (InvalidPath, PathOutsideRoots):
            return None
        return self._root(self._index.innermost_prefix(canonical))

    def contains(self, path: str | os.PathLike[str]) -> bool:
        """True when ``path``'s canonical location is a root or lies beneath one. Never raises.

        Args:
            path: Any path, absolute or relative to the first root.
        """
        fast = self._router.canonical_fast(path)
        if fast is not None:
            return fast is not False
        try:
            canonical = self._canonical(path)
        except (InvalidPath, PathOutsideRoots):
            return False
        return self._index.innermost_prefix(canonical) is not None

    def writable(self, path: str | os.PathLike[str]) -> bool:
        """True when ``path`` is inside and a write to it passes the roots' access (the innermost root
        holding its canonical location is read-write). Never raises.

        Args:
            path: Any path, absolute or relative to the first root.
        """
        root = self.root_of(path)
        return root is not None and root.writable

    def __contains__(self, path: object) -> bool:
        return isinstance(path, (str, os.PathLike)) and self.contains(path)

    def resolve(self, path: str | os.PathLike[str]) -> Path:
        """The canonical path of ``path`` if it is inside the roots.

        Args:
            path: Any path, absolute or relative to the first root.

        Raises:
            InvalidPath: The input is not a usable path.
            PathOutsideRoots: It lies outside the roots (the message names the path and the roots, and
                nothing about what lies outside).
        """
        return Path(self.resolve_text(path))

    def resolve_text(self, path: str | os.PathLike[str]) -> str:
        """:meth:`resolve` as text (no ``Path`` made): what the guard hands a body annotated ``str``.

        Args:
            path: Any path, absolute or relative to the first root.
        """
        fast = self._router.canonical_fast(path)  # one system call for the common path
        if type(fast) is str:
            return fast
        canonical = self._canonical(path)
        if self._index.above(canonical) is None:
            why = f"its canonical location {canonical!r} is under no root"
            raise self._router.outside(checked_text(path), why)
        return canonical

    # -- race-free operations (bodies by verb: _open, _write, _dirs, _remove, _rename; design/paths.md) --

    # fmt: off
    @overload
    def open(self, path: StrPath, mode: OpenTextMode = "r", buffering: int = -1, encoding: str | None = None,
             errors: str | None = None, newline: str | None = None) -> io.TextIOWrapper: ...
    @overload
    def open(self, path: StrPath, mode: OpenBinaryMode, buffering: Literal[0], encoding: None = None,
             errors: None = None, newline: None = None) -> io.FileIO: ...
    @overload
    def open(self, path: StrPath, mode: OpenBinaryModeUpdating, buffering: Literal[-1, 1] = -1,
             encoding: None = None, errors: None = None, newline: None = None) -> io.BufferedRandom: ...
    @overload
    def open(self, path: StrPath, mode: OpenBinaryModeWriting, buffering: Literal[-1, 1] = -1,
             encoding: None = None, errors: None = None, newline: None = None) -> io.BufferedWriter: ...
    @overload
    def open(self, path: StrPath, mode: OpenBinaryModeReading, buffering: Literal[-1, 1] = -1,
             encoding: None = None, errors: None = None, newline: None = None) -> io.BufferedReader: ...
    @overload
    def open(self, path: StrPath, mode: OpenBinaryMode, buffering: int = -1, encoding: None = None,
             errors: None = None, newline: None = None) -> BinaryIO: ...
    @overload
    def open(self, path: StrPath, mode: str, buffering: int = -1, encoding: str | None = None,
             errors: str | None = None, newline: str | None = None) -> IO[Any]: ...
    def open(self, path: str | os.PathLike[str], mode: str = "r", buffering: int = -1,
             encoding: str | None = None, errors: str | None = None, newline: str | None = None) -> IO[Any]:
        """Open a file inside the roots, like the builtin :func:`open` (same modes, arguments and types).

        The path is resolved and opened in one step beneath a root's descriptor, so no symlink swapped in
        meanwhile can lead outside.

        Args:
            path: The file. FIFOs, devices and sockets raise :class:`InvalidPath` instead of blocking.
            mode: As the builtin's; a file created by ``"w"``/``"a"``/``"x"`` is created beneath the root.
            buffering: As the builtin's.
            encoding: As the builtin's (text modes).
            errors: As the builtin's (text modes).
            newline: As the builtin's (text modes).
        """
        if (  # the commonest call, one frame less
            mode == "rb"
            and buffering == -1
            and type(buffering) is int
            and encoding is None
            and errors is None
            and newline is None
        ):
            return _open.open_read(self._router, path)
        if self._rule is not None and not set(mode).isdisjoint("wax+"):
            self._rule.check(path)
            f = _open.open_file(self._router, path, mode, buffering, encoding, errors, newline)
            self._rule.opened(f.fileno(), path, f.close)
            return f
        return _open.open_file(self._router, path, mode, buffering, encoding, errors, newline)
    # fmt: on

    def open_fd(self, path: str | os.PathLike[str], flags: int, mode: int = 0o777) -> int:
        """The descriptor-level open: ``os.open(path, flags, mode)`` confined to the roots.

        Args:
            path: The file or directory; no file-type check is made.
            flags: ``os.O_*`` flags; ``O_CLOEXEC`` is always added (add ``O_NONBLOCK`` if a FIFO matters).
            mode: The permission bits of a file it creates.
        """
        if self._rule is not None and flags & _WRITING:  # checked before the open, and on what it opened
            self._rule.check(path)
            opened = _open.open_fd(self._router, path, flags, mode)
            self._rule.opened(opened, path, functools.partial(os.close, opened))
            return opened
        fd = self._router.fast(path, _open.fd_beneath, flags, mode)  # the fast lane: one call
        return fd if fd is not None else _open.open_fd(self._router, path, flags, mode)

    def read_bytes(self, path: str | os.PathLike[str], *, max_bytes: int | None = None) -> bytes:
        """The contents of a regular file inside the roots.

        Args:
            path: The file.
            max_bytes: Raise :class:`FileTooLarge` past this many bytes (default: no limit).
        """
        return _open.read_bytes(self._router, path, max_bytes)

    def read_text(
        self,
        path: str | os.PathLike[str],
        encoding: str = "utf-8",
        errors: str = "strict",
        *,
        max_bytes: int | None = None,
    ) -> str:
        """The decoded contents of a regular file inside the roots (no newline translation).

        Args:
            path: The file.
            encoding: Its encoding.
            errors: As :meth:`bytes.decode`'s.
            max_bytes: Raise :class:`FileTooLarge` past this many bytes (default: no limit).
        """
        return self.read_bytes(path, max_bytes=max_bytes).decode(encoding, errors)

    def write_bytes(self, path: str | os.PathLike[str], data: bytes) -> None:
        """Replace (or create) a file inside the roots atomically (temporary file, fsync, rename).

        Args:
            path: The file. A symlink as the final name is followed while its target stays inside the
                roots; a root that is a file is rewritten in place (no directory to stage a temporary in).
            data: The new contents, bytes-like.
        """
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"data must be bytes-like, not {type(data).__name__}")
        if self._rule is not None:
            self._rule.check(path)
        _write.write_bytes(self._router, path, bytes(data))

    def write_text(self, path: str | os.PathLike[str], text: str, encoding: str = "utf-8") -> None:
        """:meth:`write_bytes` of ``text`` encoded (atomic).

        Args:
            path: The file.
            text: The new contents.
            encoding: How to encode them.
        """
        self.write_bytes(path, text.encode(encoding))

    def listdir(self, path: str | os.PathLike[str]) -> list[str]:
        """The names in a directory inside the roots, like :func:`os.listdir`.

        Args:
            path: The directory.
        """
        return _dirs.listdir(self._router, path)

    def scandir(self, path: str | os.PathLike[str]) -> list[Entry]:
        """The entries of a directory inside the roots, with types and sizes (see :class:`Entry`).

        Args:
            path: The directory.
        """
        return _dirs.scandir(self._router, path)

    def walk(
        self,
        path: str | os.PathLike[str],
        visit: Visit,
        *,
        leave: Leave | None = None,
        on_error: OnError | None = None,
        sort: bool = True,
    ) -> None:
        """Walk the directory tree at ``path`` depth first.

        Symlinks are never followed, every directory is entered by descriptor relative to its parent, at
        most two descriptors are open whatever the depth, and a directory moved meanwhile stops the walk
        (ESTALE).

        Args:
            path: The directory, inside the roots.
            visit: ``visit(dir_fd, entry)`` for each :class:`TreeEntry`; ``dir_fd`` holds the entry and is
                open only during the call. Returning True walks a directory entry before its next sibling.
            leave: ``leave(dir_fd, entry)`` when a directory is done.
            on_error: ``on_error(exc, entry)`` for a directory that cannot be entered: raise to stop,
                return to skip it (default: raise).
            sort: Visit each directory's entries in name order.
        """
        _dirs.walk(self._router, path, visit, leave, on_error, sort)

    def stat(self, path: str | os.PathLike[str]) -> os.stat_result:
        """:func:`os.stat` of a path inside the roots.

        Args:
            path: The path; symlinks are followed while they stay inside.
        """
        return _open.stat_path(self._router, path)

    def mkdir(self, path: str | os.PathLike[str], *, parents: bool = False, exist_ok: bool = False) -> None:
        """Create a directory inside the roots.

        Args:
            path: The new directory.
            parents: Create missing parents, as :meth:`pathlib.Path.mkdir` does.
            exist_ok: Accept an existing directory, as :meth:`pathlib.Path.mkdir` does.
        """
        if self._rule is not None:
            self._rule.check(path, name=True)
        _dirs.mkdir(self._router, path, parents, exist_ok)

    def remove(self, path: str | os.PathLike[str], *, recursive: bool = False) -> None:
        """Remove a file, a symlink (never its target) or an empty directory inside the roots.

        Args:
            path: What to remove.
            recursive: Remove a whole directory tree, walked through descriptors without following symlinks.
        """
        if self._rule is not None:
            self._rule.check(path, name=True, holder=True)
        _remove.remove(self._router, path, recursive)

    def rename(
        self, src: str | os.PathLike[str], dst: str | os.PathLike[str], *, replace: bool = True
    ) -> None:
        """Rename ``src`` to ``dst``, both inside the roots, like :func:`os.rename`.

        Args:
            src: What to rename; its final name is not followed.
            dst: The new name; not followed either.
            replace: ``False``: an existing ``dst`` raises FileExistsError, atomically where the system
                has renameat2(RENAME_NOREPLACE).
        """
        if self._rule is not None:
            self._rule.check(src, name=True, holder=True)
            self._rule.check(dst, name=True, holder=True)
        _rename.rename(self._router, src, dst, replace)

    def close(self) -> None:
        """Close the root descriptors the operations opened (an operation still running keeps its own
        until it ends). The RootSet stays usable: a later operation opens them again."""
        self._descriptors.close()

    def __enter__(self) -> RootSet:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
