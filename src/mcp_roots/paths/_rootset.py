"""RootSet: canonical roots, their index, the contains / resolve questions, and the operations.

A RootSet is immutable. Its questions are answered by the Router (canonical path, innermost root); its
file operations are the bodies in the verb modules (_open, _write, _dirs, _remove, _rename), each resolved
beneath a root's descriptor. This module is the public face: construction, the set itself, ``as_env``, and
one delegating line per operation. Above ~450 lines because it is the path layer's whole documented API
(the docstrings are most of it); splitting the class would scatter one public face over several files.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import sys
import weakref
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import TracebackType
from typing import IO, TYPE_CHECKING, Any, TypeVar

from ..errors import InvalidPath, InvalidRootURI, PathOutsideRoots
from . import _dirs, _open, _remove, _rename, _write
from ._descriptors import RootDescriptors
from ._fold import folding_for
from ._index import RootIndex
from ._root import Root
from ._router import Router
from ._text import checked_text, shorten
from ._tree import Entry, Leave, OnError, Visit
from ._uri import uri_and_name, uri_to_path

if TYPE_CHECKING:
    import subprocess

__all__ = ["Root", "RootSet"]

_T = TypeVar("_T")

logger = logging.getLogger("mcp_roots")

_WINDOWS = os.name == "nt"

#: open flags that write (a protecting() RootSet checks them)
_WRITING = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND

REFUSAL_ROOTS = 3  # how many roots a refusal names before it says how many more


# --- RootSet -------------------------------------------------------------------------------------------


class RootSet:
    """An immutable set of canonical roots that answers "is this path inside?" and guards operations.

    ``RootSet(roots, source=..., platform=...)`` takes :class:`Root` objects (from :meth:`Root.from_path`);
    :meth:`from_paths` and :meth:`from_uris` build them from paths or URIs. Duplicates (as ``platform``
    compares names) are dropped. ``source`` says where the roots came from (``"client"``, ``"flag"``,
    ``"environment"``, a config file path, ``"project root"``...).
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
            kept.setdefault(str(root.path), root)
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
        weakref.finalize(self, self._descriptors.close)

    # -- construction --

    @classmethod
    def empty(cls, *, source: str = "explicit") -> RootSet:
        """A RootSet with no roots: every path is outside (fail closed)."""
        return cls((), source=source)

    @classmethod
    def from_paths(
        cls,
        paths: Iterable[str | os.PathLike[str] | tuple[str | os.PathLike[str], str | None]],
        *,
        strict: bool = True,
        source: str = "explicit",
        base: str | os.PathLike[str] | None = None,
    ) -> RootSet:
        """Build a RootSet from local paths (or ``(path, name)`` pairs).

        Relative paths resolve against ``base`` (default: the working directory). Each root is
        canonicalized; duplicates are dropped. A root that does not exist or cannot be read raises
        :class:`InvalidPath` when ``strict``, else it is skipped with a warning.
        """
        if isinstance(paths, (str, os.PathLike)):
            paths = [paths]
        roots: list[Root] = []
        for entry in paths:
            name: str | None = None
            if isinstance(entry, tuple):
                entry, name = entry
            try:
                roots.append(Root.from_path(entry, name, base=base))
            except InvalidPath as exc:
                if strict:
                    raise
                logger.warning("skipping root from %s: %s", source, exc)
        return cls(roots, source=source)

    @classmethod
    def from_uris(
        cls, uris_or_roots: Iterable[object], *, strict: bool = True, source: str = "client"
    ) -> RootSet:
        """Build a RootSet from ``file:`` URIs, or objects with ``uri``/``name`` (the SDK's ``Root``, this
        module's :class:`Root`, or ``{"uri": ..., "name": ...}`` dicts).

        An invalid URI raises :class:`InvalidRootURI`, a missing or unreadable directory
        :class:`InvalidPath`, when ``strict``; otherwise the entry is skipped with a warning.
        """
        if isinstance(uris_or_roots, str):
            uris_or_roots = [uris_or_roots]
        roots: list[Root] = []
        for item in uris_or_roots:
            try:
                uri, name = uri_and_name(item)
                roots.append(Root.from_path(uri_to_path(uri), name))
            except (InvalidRootURI, InvalidPath) as exc:
                if strict:
                    raise
                logger.warning("skipping root from %s: %s", source, exc)
        return cls(roots, source=source)

    def with_source(self, source: str) -> RootSet:
        """The same roots, labelled with another source."""
        made = type(self)(self._roots, source=source, platform=self._platform)
        made._protect = self._protect
        return made

    def with_roots(self, roots: Iterable[Root]) -> RootSet:
        """Other roots, with this set's source, comparison rule and protected set."""
        made = type(self)(roots, source=self._source, platform=self._platform)
        made._protect = self._protect
        return made

    def protecting(self, protect: bool | Iterable[str] = True) -> RootSet:
        """These roots, whose writes (``open`` for writing, ``write_bytes``/``write_text``, ``mkdir``,
        ``remove``, ``rename``) refuse the protected set as a confined child's do (``.git/config``,
        ``.git/hooks``, ``.mcp.json``, ...: ``mcp_roots.sandbox.PROTECTED``, or the names given), with
        ``PathOutsideRoots``. Opt-in: a server may legitimately edit those files. ``False``: none."""
        from .. import sandbox

        made = self.with_source(self._source)
        made._protect = sandbox.protected_names(protect) or None
        return made

    def _refuse_protected(self, path: object, holder: bool = False) -> None:
        from .. import sandbox

        canonical = self._canonical(path)
        root = self.root_above(canonical)
        hit = root and sandbox.protected_hit(str(root.path), canonical, self._protect or (), holder=holder)
        if hit:
            raise PathOutsideRoots(f"Access denied: {canonical!r} is protected ({hit})")

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
        return f"RootSet({[str(p) for p in self.paths]!r}, source={self._source!r})"

    def describe(self, most: int | None = None) -> str:
        """The roots as a human list, for messages: ``/a, /b`` or ``no roots``; with ``most``, the first
        ``most`` (long ones shortened) and how many more, as a refusal names them to the model."""
        if not self._roots:
            return "no roots"
        shown = [str(p) if most is None else shorten(str(p)) for p in self.paths[:most]]
        more = len(self._roots) - len(shown)
        return ", ".join(shown) + (f" and {more} more" if more else "")

    def _root(self, root_path: str | None) -> Root | None:
        return None if root_path is None else self._by_path[root_path]

    # -- questions --

    def root_above(self, canonical: str | os.PathLike[str]) -> Root | None:
        """The innermost root that is the canonical path ``canonical`` or an ancestor of it, compared by
        whole components and by this set's name comparison; no I/O (the path is taken as canonical)."""
        return self._root(self._index.above(os.fspath(canonical)))

    def roots_beneath(self, path: str | os.PathLike[str]) -> tuple[Root, ...]:
        """The roots that lie strictly beneath the canonical ``path`` (whole components); no I/O."""
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

    def root_of(self, path: object) -> Root | None:
        """The innermost root that contains ``path``, or None (never raises)."""
        try:
            canonical = self._canonical(path)
        except (InvalidPath, PathOutsideRoots):
            return None
        return self._root(self._index.innermost_prefix(canonical))

    def contains(self, path: object) -> bool:
        """True when ``path``'s canonical location is a root or lies beneath one. Never raises."""
        fast = self._router.canonical_fast(path)
        if fast is not None:
            return fast is not False
        try:
            canonical = self._canonical(path)
        except (InvalidPath, PathOutsideRoots):
            return False
        return self._index.innermost_prefix(canonical) is not None

    def __contains__(self, path: object) -> bool:
        return self.contains(path)

    def resolve(self, path: object) -> Path:
        """The canonical path of ``path`` if it is inside the roots.

        Raises :class:`InvalidPath` for input that is not a usable path and :class:`PathOutsideRoots`
        (naming the path and the roots, and nothing about what lies outside) when it lies outside them.
        """
        return Path(self.resolve_text(path))

    def resolve_text(self, path: object) -> str:
        """:meth:`resolve` as text (no ``Path`` made): what the guard hands a body annotated ``str``."""
        fast = self._router.canonical_fast(path)  # one system call for the common path
        if type(fast) is str:
            return fast
        canonical = self._canonical(path)
        if self._index.above(canonical) is None:
            why = f"its canonical location {canonical!r} is under no root"
            raise self._router.outside(checked_text(path), why)
        return canonical

    # -- subprocess environment --

    def as_env(self) -> dict[str, str]:
        """``MCP_ROOTS_JSON`` (array of ``{uri, name, path}``), ``MCP_ROOTS_PATHS`` (one per line) and
        ``MCP_ROOTS_COUNT``, for tools that start subprocesses. (No root holds a newline: see Root.)"""
        return {
            "MCP_ROOTS_JSON": json.dumps([r.as_dict() for r in self._roots]),
            "MCP_ROOTS_PATHS": "\n".join(str(p) for p in self.paths),
            "MCP_ROOTS_COUNT": str(len(self._roots)),
        }

    # -- race-free operations (bodies by verb: _open, _write, _dirs, _remove, _rename; design/paths.md) --

    def open(
        self,
        path: str | os.PathLike[str],
        mode: str = "r",
        buffering: int = -1,
        encoding: str | None = None,
        errors: str | None = None,
        newline: str | None = None,
    ) -> IO[Any]:
        """Open a file inside the roots, like the builtin :func:`open` (same modes and arguments).

        The path is resolved and opened in one step beneath a root's descriptor, so no symlink swapped in
        meanwhile can lead outside. FIFOs, devices and sockets raise :class:`InvalidPath` instead of
        blocking; a file created by ``"w"``/``"a"``/``"x"`` is created beneath the root.
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
        if self._protect is not None and not set(mode).isdisjoint("wax+"):
            self._refuse_protected(path)
        return _open.open_file(self._router, path, mode, buffering, encoding, errors, newline)

    def open_fd(self, path: str | os.PathLike[str], flags: int, mode: int = 0o777) -> int:
        """The descriptor-level open: ``os.open(path, flags, mode)`` confined to the roots. ``O_CLOEXEC``
        is always added; no file-type check is made (pass ``O_NONBLOCK`` yourself if that matters)."""
        if self._protect is not None and flags & _WRITING:
            self._refuse_protected(path)
        fd = self._router.fast(path, _open.fd_beneath, flags, mode)  # the fast lane: one call
        return fd if fd is not None else _open.open_fd(self._router, path, flags, mode)

    def read_bytes(self, path: str | os.PathLike[str], *, max_bytes: int | None = None) -> bytes:
        """The contents of a regular file inside the roots; :class:`FileTooLarge` past ``max_bytes``."""
        return _open.read_bytes(self._router, path, max_bytes)

    def read_text(
        self,
        path: str | os.PathLike[str],
        encoding: str = "utf-8",
        errors: str = "strict",
        *,
        max_bytes: int | None = None,
    ) -> str:
        """The decoded contents of a regular file inside the roots (no newline translation)."""
        return self.read_bytes(path, max_bytes=max_bytes).decode(encoding, errors)

    def write_bytes(self, path: str | os.PathLike[str], data: bytes) -> None:
        """Replace (or create) a file inside the roots atomically: temporary file in the same directory,
        fsync, rename. A symlink as the final name is followed while its target stays inside the roots;
        a root that is a file is rewritten in place (there is no directory to stage a temporary file in)."""
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"data must be bytes-like, not {type(data).__name__}")
        if self._protect is not None:
            self._refuse_protected(path)
        _write.write_bytes(self._router, path, bytes(data))

    def write_text(self, path: str | os.PathLike[str], text: str, encoding: str = "utf-8") -> None:
        """:meth:`write_bytes` of ``text`` encoded with ``encoding`` (atomic)."""
        self.write_bytes(path, text.encode(encoding))

    def listdir(self, path: str | os.PathLike[str]) -> list[str]:
        """The names in a directory inside the roots, like :func:`os.listdir`."""
        return _dirs.listdir(self._router, path)

    def scandir(self, path: str | os.PathLike[str]) -> list[Entry]:
        """The entries of a directory inside the roots, with types and sizes (see :class:`Entry`)."""
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
        """Walk the directory tree at ``path`` (inside the roots) depth first: ``visit(dir_fd, entry)`` for
        each :class:`TreeEntry` (in name order with ``sort``; True walks a directory entry before its next
        sibling), ``leave(dir_fd, entry)`` when a directory is done; ``dir_fd`` holds the entry and is
        open only during the call. Symlinks are never followed, every directory is entered by descriptor
        relative to its parent, at most two descriptors are open whatever the depth, and a directory
        moved meanwhile stops the walk (ESTALE). ``on_error(exc, entry)`` for a directory that cannot be
        entered: raise to stop, return to skip it (default: raise)."""
        _dirs.walk(self._router, path, visit, leave, on_error, sort)

    def stat(self, path: str | os.PathLike[str]) -> os.stat_result:
        """:func:`os.stat` of a path inside the roots (symlinks followed while they stay inside)."""
        return _open.stat_path(self._router, path)

    def mkdir(self, path: str | os.PathLike[str], *, parents: bool = False, exist_ok: bool = False) -> None:
        """Create a directory inside the roots (``parents``, ``exist_ok`` as in pathlib.Path.mkdir)."""
        if self._protect is not None:
            self._refuse_protected(path)
        _dirs.mkdir(self._router, path, parents, exist_ok)

    def remove(self, path: str | os.PathLike[str], *, recursive: bool = False) -> None:
        """Remove a file, a symlink (never its target) or an empty directory inside the roots; with
        ``recursive``, a whole directory tree, walked through descriptors without following symlinks."""
        if self._protect is not None:
            self._refuse_protected(path, holder=True)
        _remove.remove(self._router, path, recursive)

    def rename(
        self, src: str | os.PathLike[str], dst: str | os.PathLike[str], *, replace: bool = True
    ) -> None:
        """Rename ``src`` to ``dst``, both inside the roots (like :func:`os.rename`; the final names are
        not followed). With ``replace=False`` an existing ``dst`` raises FileExistsError, atomically
        where the system has renameat2(RENAME_NOREPLACE)."""
        if self._protect is not None:
            self._refuse_protected(src, holder=True)
            self._refuse_protected(dst, holder=True)
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

    # -- subprocesses confined by the kernel (the bodies live in the sandbox package) --

    def run(
        self,
        argv: Any,
        *,
        write: bool = False,
        network: bool = True,
        allow_unconfined: bool = False,
        path_metadata: bool = False,
        protect: bool | Iterable[str] = True,
        **kwargs: Any,
    ) -> subprocess.CompletedProcess[Any]:
        """``subprocess.run(argv, **kwargs)`` with the child confined by the kernel (Landlock) to these
        roots: read (``write=True``: read-write) beneath them, read-only what a program needs; with
        ``network=False`` no socket() or connect(); a seccomp filter refuses chmod/chown/utime/xattr by path.
        ``path_metadata=True`` (only with ``write=True``, else ``ValueError``) allows those, for builds, and
        so OUTSIDE the roots too (Landlock has no right for them). ``SandboxUnavailable`` where the kernel
        cannot, unless ``allow_unconfined=True`` (then a warning). No capability; with ``write=True`` the
        protected set stays read-only (``protect=False`` opts out). See ``mcp_roots.sandbox.run``."""
        from .. import sandbox

        return sandbox.run(
            self.paths,
            argv,
            write=write,
            network=network,
            allow_unconfined=allow_unconfined,
            path_metadata=path_metadata,
            protect=protect,
            **kwargs,
        )

    def popen(
        self,
        argv: Any,
        *,
        write: bool = False,
        network: bool = True,
        allow_unconfined: bool = False,
        path_metadata: bool = False,
        protect: bool | Iterable[str] = True,
        **kwargs: Any,
    ) -> subprocess.Popen[Any]:
        """``subprocess.Popen(argv, **kwargs)``, confined like ``run``."""
        from .. import sandbox

        return sandbox.popen(
            self.paths,
            argv,
            write=write,
            network=network,
            allow_unconfined=allow_unconfined,
            path_metadata=path_metadata,
            protect=protect,
            **kwargs,
        )

    async def run_async(
        self,
        argv: Any,
        *,
        write: bool = False,
        network: bool = True,
        allow_unconfined: bool = False,
        path_metadata: bool = False,
        protect: bool | Iterable[str] = True,
        **kwargs: Any,
    ) -> subprocess.CompletedProcess[bytes]:
        """``await anyio.run_process(argv, **kwargs)`` (output captured, ``check=True``), confined like
        ``run``."""
        from .. import sandbox

        return await sandbox.run_async(
            self.paths,
            argv,
            write=write,
            network=network,
            allow_unconfined=allow_unconfined,
            path_metadata=path_metadata,
            protect=protect,
            **kwargs,
        )
