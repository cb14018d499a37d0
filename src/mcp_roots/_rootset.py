"""Root and RootSet: canonical roots, a component index, and the contains / resolve questions.

A RootSet is immutable. Every path is canonicalized by walking it one component at a time (symlinks
followed, loops and magic links refused), then looked up in a dict keyed by canonical root paths: the cost
is one dict probe per component of the path, whatever the number of roots.
"""

from __future__ import annotations

import errno
import io
import json
import logging
import os
import posixpath
import stat
import sys
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PosixPath, PurePosixPath, PureWindowsPath, WindowsPath
from types import TracebackType
from typing import IO, TYPE_CHECKING, Any, TypeVar

from . import _beneath
from ._beneath import (
    DIR_FLAGS,
    LIST_FLAGS,
    O_PATH,
    Descriptor,
    Entry,
    Escape,
    NotRegularFile,
    RootDescriptors,
    fd_path,
    list_entries,
    lookup_without_symlinks,
    mkdir_at,
    open_beneath,
    open_file,
    open_regular,
    read_fd,
    remove_at,
    write_atomic,
)
from ._errors import FileTooLarge, InvalidPath, InvalidRootURI, PathOutsideRoots, RootsError
from ._uri import path_to_uri, uri_to_path

if TYPE_CHECKING:
    import subprocess

__all__ = ["Root", "RootSet"]

_T = TypeVar("_T")

logger = logging.getLogger("mcp_roots")

# Linux's limits; other POSIX systems have the same or larger ones for the purpose of refusing input.
PATH_MAX = 4096
SYMLOOP_MAX = 40

_WINDOWS = os.name == "nt"


# --- Platform comparison rules ------------------------------------------------------------------------


def _fold_exact(path: str) -> str:
    return path


def _simple_casefold(text: str) -> str:
    # One character to one character only (Unicode "simple" folding): a full folding such as 'ß' -> 'ss'
    # could make two names the filesystem keeps apart compare equal, and widen a root.
    if text.isascii():
        return text.lower()
    out = []
    for ch in text:
        folded = ch.casefold()
        if len(folded) != 1:
            folded = ch.lower()
            if len(folded) != 1:
                folded = ch
        out.append(folded)
    return "".join(out)


def _simple_upper(text: str) -> str:
    if text.isascii():
        return text.upper()
    return "".join(up if len(up := ch.upper()) == 1 else ch for ch in text)


def _fold_darwin(path: str) -> str:
    # APFS and HFS+ (default formats) are case-insensitive and normalization-insensitive: compare in NFD
    # after simple case folding, then NFD again because folding can un-normalize.
    if path.isascii():
        return path.lower()
    return unicodedata.normalize("NFD", _simple_casefold(unicodedata.normalize("NFD", path)))


def _fold_windows(path: str) -> str:
    # NTFS compares names through its upcase table (one character to one, no Unicode normalization);
    # '/' and '\\' are the same separator.
    return _simple_upper(path.replace("/", "\\"))


def fold_for(platform: str) -> Callable[[str], str]:
    """The function that maps a canonical path to its comparison key on ``platform`` (a sys.platform)."""
    if platform == "darwin":
        return _fold_darwin
    if platform in ("win32", "cygwin"):
        return _fold_windows
    return _fold_exact


# --- Canonicalization -------------------------------------------------------------------------------


class _Unresolvable(Exception):
    """Internal: the path cannot be resolved (loop, file used as directory, magic link, I/O error)."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


_PROC_DEV: int | None
try:
    _PROC_DEV = os.stat("/proc").st_dev if sys.platform.startswith("linux") else None
except OSError:  # pragma: no cover - no procfs mounted
    _PROC_DEV = None


def _is_magic_link(st: os.stat_result, target: str) -> bool:
    """procfs 'magic' links (/proc/<pid>/fd/N, cwd, root, exe, ns/...) jump anywhere; ordinary procfs
    links such as /proc/self -> '1234' or /proc/mounts -> 'self/mounts' are relative and plain."""
    if _PROC_DEV is None or st.st_dev != _PROC_DEV:
        return False
    # 'pipe:[12]', 'socket:[3]', 'anon_inode:inotify', 'net:[4026]': any 'type:' form is a magic link.
    return target.startswith("/") or ":" in target


def canonicalize(path: str) -> str:
    """Return the canonical form of an absolute POSIX ``path``.

    Existing components are resolved physically (symlinks followed, at most SYMLOOP_MAX of them);
    from the first missing component on, the rest is applied lexically ('..' cancels a missing name, or
    climbs physically once the missing names are used up). Raises _Unresolvable on a loop, a non-directory
    used as a directory, a procfs magic link, or any other lookup error.
    """
    # Empty components (doubled or trailing '/') and '.' are kept as '.': they require a directory, as
    # in the kernel ('file.txt/' and 'file.txt/.' are ENOTDIR, not 'file.txt').
    pending = [c or "." for c in reversed(path.split("/"))]
    resolved = "/"
    resolved_is_dir = True
    missing: list[str] = []
    hops = 0
    while pending:
        name = pending.pop()
        if name == ".":
            if not resolved_is_dir and not missing:
                raise _Unresolvable(f"{resolved!r} is not a directory")
            continue
        if missing:
            if name == "..":
                missing.pop()
            else:
                missing.append(name)
            continue
        if not resolved_is_dir:
            raise _Unresolvable(f"{resolved!r} is not a directory")
        if name == "..":
            resolved = posixpath.dirname(resolved)
            continue
        candidate = resolved + name if resolved == "/" else resolved + "/" + name
        try:
            st = os.lstat(candidate)
        except FileNotFoundError:
            missing.append(name)
            continue
        except OSError as exc:
            raise _Unresolvable(f"cannot look up {candidate!r}: {exc.strerror or exc}") from None
        if stat.S_ISLNK(st.st_mode):
            hops += 1
            if hops > SYMLOOP_MAX:
                raise _Unresolvable(f"too many levels of symbolic links at {candidate!r}")
            try:
                target = os.readlink(candidate)
            except OSError as exc:  # pragma: no cover - raced away
                raise _Unresolvable(f"cannot read link {candidate!r}: {exc.strerror or exc}") from None
            if _is_magic_link(st, target):
                raise _Unresolvable(f"{candidate!r} is a procfs magic link")
            pending.extend(c or "." for c in reversed(target.split("/")))
            if target.startswith("/"):
                resolved = "/"
            resolved_is_dir = True
            continue
        resolved = candidate
        resolved_is_dir = stat.S_ISDIR(st.st_mode)
    if missing:
        if not resolved_is_dir:
            raise _Unresolvable(f"{resolved!r} is not a directory")
        tail = "/".join(missing)
        return "/" + tail if resolved == "/" else resolved + "/" + tail
    return resolved


# --- Root ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Root:
    """One allowed root: its canonical ``path``, its ``uri`` and an optional display ``name``."""

    path: Path
    uri: str
    name: str | None = None

    def as_dict(self) -> dict[str, str | None]:
        """The ``{uri, name, path}`` form used by ``as_env()`` and the reference server."""
        return {"uri": self.uri, "name": self.name, "path": str(self.path)}


def _describe(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 200 else text[:120] + f"...<{len(text)} chars>"


# The exact pathlib classes: str() of one is its __fspath__() and always an exact str.
_PATH_TYPES = frozenset({PurePosixPath, PosixPath, PureWindowsPath, WindowsPath})


def _checked_text(path: object) -> str:
    """Turn a user-supplied path into text, or raise InvalidPath naming the input and the rule."""
    if type(path) in _PATH_TYPES:
        path = str(path)  # what their __fspath__ returns
    if type(path) is str and path.isascii() and 0 < len(path) < PATH_MAX and "\x00" not in path:
        # The common case, checked in O(1) but for the NUL scan: ASCII text encodes one byte per character
        # in every filesystem encoding and cannot hold a lone surrogate.
        return path
    if isinstance(path, str):
        raw: object = path
    elif isinstance(path, os.PathLike):
        try:
            raw = os.fspath(path)
        except Exception as exc:  # a hostile __fspath__ must not escape contains()
            raise InvalidPath(f"path {_describe(path)} cannot be turned into text: {exc!r}") from exc
        if not isinstance(raw, str):
            raise InvalidPath(f"path {_describe(path)} is not text (bytes paths are not accepted)")
    else:
        raise InvalidPath(f"path {_describe(path)} is a {type(path).__name__}, not a str or os.PathLike")
    # A str subclass may override split(), startswith()...: judge an exact copy of its characters.
    text = str.__str__(raw) if type(raw) is not str else raw
    if not text:
        raise InvalidPath("path '' is empty")
    if "\x00" in text:
        raise InvalidPath(f"path {_describe(text)} contains a NUL byte")
    try:
        size = len(os.fsencode(text))
    except UnicodeError:
        raise InvalidPath(
            f"path {_describe(text)} cannot be encoded for the filesystem (a lone surrogate?)"
        ) from None
    if size >= PATH_MAX:
        raise InvalidPath(f"path {_describe(text)} is longer than PATH_MAX ({PATH_MAX} bytes)")
    return text


# --- RootSet -------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class RootSet:
    """An immutable set of canonical roots that answers "is this path inside?" and guards operations.

    Build one with :meth:`from_paths` or :meth:`from_uris`. ``source`` says where the roots came from
    (``"client"``, ``"flag"``, ``"environment"``, a config file path, ``"project root"``...).
    """

    _roots: tuple[Root, ...] = ()
    source: str = "explicit"
    _fold: Callable[[str], str] = field(default=fold_for(sys.platform), repr=False)
    _index: Mapping[str, Root] = field(default_factory=dict, repr=False)
    # Lazily opened root descriptors for the race-free operations. Not an init field: a RootSet built from
    # another (with_source, replace) gets its own, and they close when this RootSet is garbage collected.
    _descriptors: RootDescriptors = field(
        default_factory=RootDescriptors, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        # The distinct root-path lengths, longest first, for _innermost_root_path: only where names compare
        # exactly (a folded key need not be a prefix of the text) and while there are few of them.
        lengths = sorted({len(key) for key in self._index}, reverse=True)
        self._descriptors.lengths = tuple(lengths) if self._fold is _fold_exact and len(lengths) <= 16 else ()

    # -- construction --

    @classmethod
    def _build(cls, roots: Iterable[Root], source: str, platform: str = sys.platform) -> RootSet:
        fold = fold_for(platform)
        index: dict[str, Root] = {}
        kept: list[Root] = []
        for root in roots:
            key = fold(str(root.path))
            if key in index:
                continue
            index[key] = root
            kept.append(root)
        return cls(tuple(kept), source, fold, index)

    @classmethod
    def empty(cls, *, source: str = "explicit") -> RootSet:
        """A RootSet with no roots: every path is outside (fail closed)."""
        return cls._build((), source)

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
                roots.append(_make_root(entry, name, base))
            except InvalidPath as exc:
                if strict:
                    raise
                logger.warning("skipping root from %s: %s", source, exc)
        return cls._build(roots, source)

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
                uri, name = _uri_and_name(item)
                roots.append(_make_root(uri_to_path(uri), name, None))
            except (InvalidRootURI, InvalidPath) as exc:
                if strict:
                    raise
                logger.warning("skipping root from %s: %s", source, exc)
        return cls._build(roots, source)

    def with_source(self, source: str) -> RootSet:
        """The same roots, labelled with another source."""
        return type(self)(self._roots, source, self._fold, self._index)

    # -- the set --

    @property
    def roots(self) -> tuple[Root, ...]:
        """The roots, in the order given (duplicates removed)."""
        return self._roots

    @property
    def paths(self) -> tuple[Path, ...]:
        """The canonical root paths."""
        return tuple(r.path for r in self._roots)

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
        return f"RootSet({[str(p) for p in self.paths]!r}, source={self.source!r})"

    def describe(self) -> str:
        """The roots as a short human list, for messages: ``/a, /b`` or ``no roots``."""
        if not self._roots:
            return "no roots"
        return ", ".join(str(p) for p in self.paths)

    # -- questions --

    def _canonical(self, path: object) -> str:
        """Canonical text of ``path``: InvalidPath for bad input, PathOutsideRoots if unresolvable."""
        text = _checked_text(path)
        if not (os.path.isabs(text) if _WINDOWS else text.startswith("/")):
            if not self._roots:
                raise PathOutsideRoots(f"Access denied: {text!r} is relative and there are no allowed roots")
            text = os.path.join(str(self._roots[0].path), text)
        if _WINDOWS:  # pragma: no cover - best effort, see docs/design.md
            return os.path.realpath(text)
        fast = self._canonical_by_descriptor(text)
        if fast is not None:
            return fast
        try:
            return canonicalize(text)
        except _Unresolvable as exc:
            raise PathOutsideRoots(
                f"Access denied: {text!r} cannot be resolved safely ({exc.why}); allowed roots: "
                f"{self.describe()}"
            ) from None

    def _lookup(self, canonical: str) -> Root | None:
        """The innermost root that is ``canonical`` or an ancestor of it: one dict probe per component."""
        index = self._index
        if not index:
            return None
        key = self._fold(canonical)
        sep = "\\" if self._fold is _fold_windows else "/"
        while True:
            root = index.get(key)
            if root is not None:
                return root
            cut = key.rfind(sep)
            if cut < 0:
                return None
            if cut == 0 or (sep == "\\" and cut == 2 and key[1] == ":"):
                parent = key[: cut + 1]
                if parent == key:
                    return None
                key = parent
            else:
                key = key[:cut]

    def root_of(self, path: object) -> Root | None:
        """The innermost root that contains ``path``, or None (never raises)."""
        try:
            return self._innermost_root(self._canonical(path))
        except (InvalidPath, PathOutsideRoots):
            return None

    def contains(self, path: object) -> bool:
        """True when ``path``'s canonical location is a root or lies beneath one. Never raises."""
        return self.root_of(path) is not None

    def __contains__(self, path: object) -> bool:
        return self.contains(path)

    def resolve(self, path: object) -> Path:
        """The canonical path of ``path`` if it is inside the roots.

        Raises :class:`InvalidPath` for input that is not a usable path and :class:`PathOutsideRoots`
        (naming the path and the roots) when it lies outside them.
        """
        canonical = self._canonical(path)
        if self._lookup(canonical) is None:
            raise PathOutsideRoots(
                f"Access denied: {_describe(_checked_text(path))} is outside the allowed roots "
                f"({self.describe()})"
            )
        return Path(canonical)

    # -- subprocess environment --

    def as_env(self) -> dict[str, str]:
        """``MCP_ROOTS_JSON`` (array of ``{uri, name, path}``), ``MCP_ROOTS_PATHS`` (one per line) and
        ``MCP_ROOTS_COUNT``, for tools that start subprocesses."""
        return {
            "MCP_ROOTS_JSON": json.dumps([r.as_dict() for r in self._roots]),
            "MCP_ROOTS_PATHS": "\n".join(str(p) for p in self.paths),
            "MCP_ROOTS_COUNT": str(len(self._roots)),
        }

    # -- race-free operations (resolution relative to root descriptors; see _beneath) --------------------
    #
    # Every operation picks the innermost root whose path is a whole-component prefix of the (absolute)
    # path and resolves the rest beneath that root's descriptor. When that resolution would leave the root
    # through a symlink (into another root, say), the canonical path picks the root again and the rest is
    # resolved beneath *that* root's descriptor: still race-free, since that open is itself confined. A
    # path that climbs out of its root with '..' is refused, even where it would come back in (Go's
    # os.Root does the same). See docs/design.md, "Race-free operations".

    def _canonical_by_descriptor(self, text: str) -> str | None:
        """The canonical path of an existing absolute ``text`` from the kernel, or None whenever that
        cannot answer (the caller then walks name by name).

        A path with no '.', '..' or empty component that the kernel looks up from '/' without meeting a
        single symlink (openat2 RESOLVE_NO_SYMLINKS) is its own canonical form: that is the answer, in one
        system call. Otherwise one openat2(O_PATH) beneath its root and the kernel's name for the
        descriptor. See docs/design.md, "Hot paths"."""
        if not _beneath.use_openat2 or not self._index:
            return None
        if _is_plain(text):
            code = lookup_without_symlinks(text)
            if code == 0:
                return text
            if code != errno.ELOOP:  # missing (a tail to apply lexically), or an error to report
                return None
        root = self._innermost_root(text)
        if root is None:
            return None
        root_path = str(root.path)
        rest = text[len(root_path) :].lstrip("/")
        try:
            descriptor = self._descriptors.get(root_path)
            fd = open_beneath(descriptor.fd, rest, O_PATH)
        except (OSError, Escape, RootsError):
            return None
        try:
            real = fd_path(fd)
        finally:
            os.close(fd)
        # Only an answer that still lies under the root we opened beneath is trusted: a root that was moved
        # or replaced since its descriptor was opened goes back to the name-by-name walk.
        if real is not None and (real == root_path or real.startswith(root_path.rstrip("/") + "/")):
            return real
        return None

    def _innermost_root_path(self, text: str) -> str | None:
        """The path (as a string) of the innermost root that is a whole-component prefix of the absolute
        ``text``, or None. Where names compare exactly, one dict probe per distinct root-path length
        (usually one or a few) instead of one per component as :meth:`_lookup` does."""
        lengths = self._descriptors.lengths
        if not lengths:  # names fold, too many lengths, or no roots
            root = self._lookup(text)
            return None if root is None else str(root.path)
        index, size = self._index, len(text)
        for length in lengths:
            if length < size:
                if text[length] == "/" or length == 1:
                    key = text[:length]
                    if key in index:
                        return key  # the key is the root path, exactly
            elif length == size and text in index:
                return text
        return None

    def _innermost_root(self, text: str) -> Root | None:
        """:meth:`_lookup` for an absolute path, by root-path length where names compare exactly."""
        if not self._descriptors.lengths:
            return self._lookup(text)
        root_path = self._innermost_root_path(text)
        return None if root_path is None else self._index[root_path]

    def _outside(self, text: str, why: str = "is outside the allowed roots") -> PathOutsideRoots:
        return PathOutsideRoots(f"Access denied: {_describe(text)} {why} ({self.describe()})")

    def _absolute(self, path: object) -> str:
        """The checked text of ``path``, relative paths joined to the first root."""
        if _WINDOWS:  # pragma: no cover - see docs/design.md
            raise NotImplementedError("the race-free RootSet operations are not available on Windows yet")
        text = _checked_text(path)
        if not text.startswith("/"):
            if not self._roots:
                raise PathOutsideRoots(f"Access denied: {text!r} is relative and there are no allowed roots")
            text = os.path.join(str(self._roots[0].path), text)
        return text

    def _lexical_roots(self, parts: list[str]) -> Iterator[tuple[Root, list[str]]]:
        """Roots that are a whole-component prefix of ``parts``, innermost first, with the rest of it."""
        index, fold = self._index, self._fold
        for i in range(len(parts), -1, -1):
            root = index.get(fold("/" + "/".join(parts[:i])))
            if root is not None:
                yield root, parts[i:]

    def _at(self, text: str, op: Callable[[Descriptor, str], _T], parts: list[str] | None = None) -> _T:
        """Run ``op(root_descriptor, relative_path)`` for the path ``text`` (or its components ``parts``
        when given), naming ``text`` in errors. The op holds the root's Descriptor while it runs."""
        try:
            if parts is None and "//" not in text and ("/." not in text or _no_dot_components(text)):
                # The common case, kept cheap: no '.', '..' or empty component, so the innermost root that
                # prefixes the text is the one. (Its descriptor is keyed by the root path, spelled in text
                # exactly as on a platform that does not fold names.)
                root_path = self._innermost_root_path(text)
                if root_path is not None:
                    descriptor = self._descriptors.get(root_path)
                    try:
                        return op(descriptor, text[len(root_path) :].lstrip("/"))
                    except Escape:  # a symlink led out of it: the canonical path picks the root
                        pass
                return self._at_canonical(text, text, op)
            return self._at_unnamed(text, parts, op)
        except RootsError:
            raise
        except NotRegularFile as exc:
            raise InvalidPath(f"{_describe(text)} is {exc.kind}, not a regular file") from None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise self._outside(
                    text, "cannot be resolved safely (a symlink loop or a procfs magic link)"
                ) from None
            if exc.errno is not None and (exc.filename is None or not str(exc.filename).startswith("/")):
                raise OSError(exc.errno, exc.strerror, text) from None
            raise

    def _at_unnamed(self, text: str, parts: list[str] | None, op: Callable[[Descriptor, str], _T]) -> _T:
        parts = _split(text) if parts is None else parts
        dotdot = ".." in parts
        # A trailing '/' or '/.' requires a directory, as it does for the kernel; keep it on the way down.
        slash = "/" if text.endswith(("/", "/.")) else ""
        for root, rest in self._lexical_roots(parts):
            if _climbs(rest):
                continue
            descriptor = self._descriptors.get(str(root.path))
            try:
                return op(descriptor, "/".join(rest) + slash if rest else "")
            except Escape:
                if dotdot:
                    raise self._outside(text, "leaves its root (through '..' or a symlink)") from None
                break
        else:
            if dotdot:
                raise self._outside(text, "climbs out of its root with '..' (refused even if it comes back)")
        return self._at_canonical(text, "/" + "/".join(parts), op)

    def _at_canonical(self, text: str, path: str, op: Callable[[Descriptor, str], _T]) -> _T:
        """No root is a lexical prefix of ``path`` (the components of ``text``), or a symlink led out of
        it: let the canonical path pick the root, and open beneath that one (a second escape is refused)."""
        canonical = self._canonical(path)
        landed = self._lookup(canonical)
        if landed is None:
            raise self._outside(text)
        root_path = str(landed.path)
        descriptor = self._descriptors.get(root_path)
        try:
            return op(descriptor, canonical[len(root_path) :].lstrip("/"))
        except Escape:
            raise self._outside(text, "changed while it was being opened and now leads outside") from None

    def _in_parent(self, path: object, op: Callable[[int, str], _T], verb: str) -> _T:
        """Run ``op(parent_directory_descriptor, final_name)``: the parent is opened beneath a root, the
        final name is acted on as it is (a symlink there is never followed)."""
        text = self._absolute(path)
        parts = _split(text)
        if not parts or parts[-1] == "..":
            raise InvalidPath(f"path {_describe(text)} does not end in a name that can be {verb}")
        name = parts[-1]
        if (
            ".." not in parts
            and not any(not _climbs(rest) for _, rest in self._lexical_roots(parts[:-1]))
            and self._index.get(self._fold("/" + "/".join(parts))) is not None
        ):
            raise InvalidPath(f"{_describe(text)} is one of the allowed roots itself; it cannot be {verb}")

        def in_parent(root: Descriptor, rel: str) -> _T:
            parent = open_beneath(root.fd, rel, DIR_FLAGS)
            try:
                return op(parent, name)
            finally:
                os.close(parent)

        return self._at(text, in_parent, parts[:-1])

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
        text = self._absolute(path)
        binary = _READ_MODES.get(mode) if type(mode) is str else None
        if (
            binary is not None
            and type(buffering) is int
            and buffering == -1
            and (not binary or (encoding is None and errors is None and newline is None))
        ):
            # The common read, built as the builtin builds it minus two system calls it cannot avoid: the
            # opener path re-sets O_CLOEXEC (ioctl FIOCLEX) and asks isatty (ioctl TCGETS), and a regular
            # file -- the only kind we return -- is never a terminal.
            fd, st = self._at(text, _open_for_reading)
            return _reader(fd, st, text, mode, binary, encoding, errors, newline)

        def opener(_name: str, flags: int) -> int:
            return self._at(text, lambda root, rel: open_file(root.fd, rel, flags))

        return open(text, mode, buffering, encoding, errors, newline, opener=opener)

    def open_fd(self, path: str | os.PathLike[str], flags: int, mode: int = 0o777) -> int:
        """The descriptor-level open: ``os.open(path, flags, mode)`` confined to the roots. ``O_CLOEXEC``
        is always added; no file-type check is made (pass ``O_NONBLOCK`` yourself if that matters)."""
        text = self._absolute(path)
        return self._at(text, lambda root, rel: open_beneath(root.fd, rel, flags, mode))

    def read_bytes(self, path: str | os.PathLike[str], *, max_bytes: int | None = None) -> bytes:
        """The contents of a regular file inside the roots; :class:`FileTooLarge` past ``max_bytes``."""
        if max_bytes is not None and max_bytes < 0:
            raise ValueError(f"max_bytes must be None or >= 0, not {max_bytes!r}")
        text = self._absolute(path)
        fd, st = self._at(text, _open_for_reading)
        try:
            return read_fd(fd, max_bytes, st.st_size)
        except OverflowError:
            raise FileTooLarge(f"{_describe(text)} is larger than max_bytes={max_bytes}") from None
        finally:
            os.close(fd)

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
        data = bytes(data)
        target: object = path
        for _ in range(SYMLOOP_MAX + 1):
            text = self._absolute(target)
            parts = _split(text)
            root = self._index.get(self._fold("/" + "/".join(parts))) if ".." not in parts else None
            if root is not None and not self._descriptors.get(str(root.path)).is_dir:
                with self.open(text, "wb") as f:
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())
                return

            def write_or_follow(dirfd: int, name: str) -> str | None:
                try:
                    st = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
                except FileNotFoundError:
                    st = None
                if st is not None and stat.S_ISLNK(st.st_mode):
                    link = os.readlink(name, dir_fd=dirfd)
                    where = fd_path(dirfd)
                    if where is None:  # pragma: no cover - no procfs
                        raise InvalidPath(f"{_describe(name)} is a symlink; cannot follow it here")
                    return posixpath.join(where, link)
                write_atomic(dirfd, name, data)
                return None

            target = self._in_parent(text, write_or_follow, "written")
            if target is None:
                return
        raise self._outside(str(path), "cannot be resolved safely (too many levels of symbolic links)")

    def write_text(self, path: str | os.PathLike[str], text: str, encoding: str = "utf-8") -> None:
        """:meth:`write_bytes` of ``text`` encoded with ``encoding`` (atomic)."""
        self.write_bytes(path, text.encode(encoding))

    def _open_dir(self, path: str | os.PathLike[str]) -> tuple[str, int]:
        text = self._absolute(path)
        return text, self._at(text, lambda root, rel: open_beneath(root.fd, rel, LIST_FLAGS))

    def listdir(self, path: str | os.PathLike[str]) -> list[str]:
        """The names in a directory inside the roots, like :func:`os.listdir`."""
        _, fd = self._open_dir(path)
        try:
            return os.listdir(fd)
        finally:
            os.close(fd)

    def scandir(self, path: str | os.PathLike[str]) -> list[Entry]:
        """The entries of a directory inside the roots, with types and sizes (see :class:`Entry`)."""
        text, fd = self._open_dir(path)
        try:
            base = fd_path(fd) or str(self.resolve(text))
            raw = list_entries(fd)
        finally:
            os.close(fd)
        entries = []
        for name, st in raw:
            full = posixpath.join(base, name)
            shown: os.stat_result | None = st
            if stat.S_ISLNK(st.st_mode):
                try:
                    shown = self.stat(full)
                except (OSError, RootsError):
                    shown = None  # dangling, a loop, or outside the roots: only the link itself is shown
            entries.append(
                Entry(
                    name=name,
                    path=Path(full),
                    is_dir=shown is not None and stat.S_ISDIR(shown.st_mode),
                    is_file=shown is not None and stat.S_ISREG(shown.st_mode),
                    is_symlink=stat.S_ISLNK(st.st_mode),
                    size=(shown or st).st_size,
                )
            )
        return entries

    def stat(self, path: str | os.PathLike[str]) -> os.stat_result:
        """:func:`os.stat` of a path inside the roots (symlinks followed while they stay inside)."""
        text = self._absolute(path)
        flags = O_PATH or (os.O_RDONLY | _beneath.O_NONBLOCK)
        fd = self._at(text, lambda root, rel: open_beneath(root.fd, rel, flags))
        try:
            return os.fstat(fd)
        finally:
            os.close(fd)

    def mkdir(self, path: str | os.PathLike[str], *, parents: bool = False, exist_ok: bool = False) -> None:
        """Create a directory inside the roots (``parents``, ``exist_ok`` as in pathlib.Path.mkdir)."""
        text = self._absolute(path)
        parts = _split(text)
        if parts and ".." not in parts and self._index.get(self._fold("/" + "/".join(parts))) is not None:
            if exist_ok:
                return
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), text)
        try:
            self._in_parent(text, lambda dirfd, name: mkdir_at(dirfd, name), "created")
        except FileNotFoundError:
            if not parents or len(parts) < 2:
                raise
            self.mkdir("/" + "/".join(parts[:-1]), parents=True, exist_ok=True)
            self.mkdir(text, parents=False, exist_ok=exist_ok)
        except FileExistsError:
            if not exist_ok or not stat.S_ISDIR(self.stat(text).st_mode):
                raise

    def remove(self, path: str | os.PathLike[str], *, recursive: bool = False) -> None:
        """Remove a file, a symlink (never its target) or an empty directory inside the roots; with
        ``recursive``, a whole directory tree, walked through descriptors without following symlinks."""
        self._in_parent(path, lambda dirfd, name: remove_at(dirfd, name, recursive), "removed")

    def rename(self, src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        """Rename ``src`` to ``dst``, both inside the roots (like :func:`os.rename`; the final names are
        not followed)."""
        src_text = self._absolute(src)
        dst_text = self._absolute(dst)

        def from_parent(src_dir: int, src_name: str) -> None:
            def to_parent(dst_dir: int, dst_name: str) -> None:
                try:
                    os.rename(src_name, dst_name, src_dir_fd=src_dir, dst_dir_fd=dst_dir)
                except OSError as exc:
                    raise OSError(exc.errno, exc.strerror, src_text, None, dst_text) from None

            self._in_parent(dst_text, to_parent, "replaced")

        self._in_parent(src_text, from_parent, "renamed")

    def close(self) -> None:
        """Close the root descriptors the operations opened. The RootSet stays usable: a later operation
        opens them again. (They are also closed when the RootSet is garbage collected.)"""
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

    # -- subprocesses confined by the kernel (the bodies live in _sandbox) --

    def run(
        self,
        argv: Any,
        *,
        write: bool = False,
        network: bool = True,
        allow_unconfined: bool = False,
        **kwargs: Any,
    ) -> subprocess.CompletedProcess[Any]:
        """``subprocess.run(argv, **kwargs)`` with the child confined by the kernel (Landlock) to these
        roots: read (``write=True``: read-write) beneath them, read-only what a program needs; with
        ``network=False`` no TCP bind/connect. ``SandboxUnavailable`` where the kernel cannot, unless
        ``allow_unconfined=True`` (then a warning). See ``mcp_roots._sandbox.run``."""
        from . import _sandbox

        return _sandbox.run(
            self, argv, write=write, network=network, allow_unconfined=allow_unconfined, **kwargs
        )

    def popen(
        self,
        argv: Any,
        *,
        write: bool = False,
        network: bool = True,
        allow_unconfined: bool = False,
        **kwargs: Any,
    ) -> subprocess.Popen[Any]:
        """``subprocess.Popen(argv, **kwargs)``, confined like ``run``."""
        from . import _sandbox

        return _sandbox.popen(
            self, argv, write=write, network=network, allow_unconfined=allow_unconfined, **kwargs
        )

    async def run_async(
        self,
        argv: Any,
        *,
        write: bool = False,
        network: bool = True,
        allow_unconfined: bool = False,
        **kwargs: Any,
    ) -> subprocess.CompletedProcess[bytes]:
        """``await anyio.run_process(argv, **kwargs)`` (output captured, ``check=True``), confined like
        ``run``."""
        from . import _sandbox

        return await _sandbox.run_async(
            self, argv, write=write, network=network, allow_unconfined=allow_unconfined, **kwargs
        )


#: The read modes RootSet.open builds itself (True: binary), as the builtin would with buffering=-1.
_READ_MODES = {"r": False, "rt": False, "rb": True}


def _open_for_reading(root: Descriptor, rel: str) -> tuple[int, os.stat_result]:
    # The descriptor is read from only: O_NONBLOCK may stay where it changes nothing (see open_regular).
    return open_regular(root.fd, rel, os.O_RDONLY, 0, plain_dev=root.plain_dev)


def _reader(
    fd: int,
    st: os.stat_result,
    name: str,
    mode: str,
    binary: bool,
    encoding: str | None,
    errors: str | None,
    newline: str | None,
) -> IO[Any]:
    """The file object ``open(name, mode)`` returns, around ``fd`` (a regular file opened read-only,
    ``st`` its fstat): FileIO, a BufferedReader of the file's block size, and for text a TextIOWrapper."""
    try:
        raw = io.FileIO(fd, "r")  # fstats once more, as the builtin does; on failure fd is still ours
    except BaseException:
        os.close(fd)
        raise
    try:
        raw.name = name  # what the builtin names it: the path as given (made absolute)
        buffered = io.BufferedReader(raw, st.st_blksize if st.st_blksize > 1 else io.DEFAULT_BUFFER_SIZE)
        if binary:
            return buffered
        wrapper = io.TextIOWrapper(buffered, encoding, errors, newline)
        wrapper.mode = mode  # type: ignore[misc]
        return wrapper
    except BaseException:
        raw.close()
        raise


def _no_dot_components(text: str) -> bool:
    """Whether the absolute ``text`` has no '.', '..' or empty component (a trailing '/' is allowed)."""
    return "//" not in text and "/./" not in text and "/../" not in text and not text.endswith(("/.", "/.."))


def _is_plain(text: str) -> bool:
    """Whether the absolute ``text`` is in canonical form as text: no '.', '..' or empty component and no
    trailing '/' (``/`` itself is not plain)."""
    return not text.endswith("/") and _no_dot_components(text)


def _split(text: str) -> list[str]:
    """The components of a path, without empty ones and '.' ('..' stays: its meaning is physical)."""
    return [c for c in text.split("/") if c and c != "."]


def _climbs(rest: list[str]) -> bool:
    """Whether the relative components ``rest`` go above their starting directory at any point."""
    depth = 0
    for name in rest:
        if name == "..":
            depth -= 1
            if depth < 0:
                return True
        else:
            depth += 1
    return False


def _uri_and_name(item: object) -> tuple[str, str | None]:
    if isinstance(item, str):
        return item, None
    if isinstance(item, Root):
        return item.uri, item.name
    if isinstance(item, Mapping):
        uri: Any = item.get("uri")
        name: Any = item.get("name")
    else:
        uri = getattr(item, "uri", None)
        name = getattr(item, "name", None)
    if uri is None:
        raise InvalidRootURI(f"invalid root {_describe(item)}: it has no 'uri'")
    if not isinstance(uri, str):
        uri = str(uri)  # pydantic FileUrl and friends
    if name is not None and not isinstance(name, str):
        raise InvalidRootURI(f"invalid root {_describe(item)}: 'name' must be a string")
    return uri, name


def _make_root(path: str | os.PathLike[str], name: str | None, base: str | os.PathLike[str] | None) -> Root:
    text = _checked_text(path)
    if not os.path.isabs(text):
        text = os.path.join(os.fspath(base) if base is not None else os.getcwd(), text)
    try:
        canonical = canonicalize(text) if os.name != "nt" else os.path.realpath(text, strict=True)
    except (_Unresolvable, OSError) as exc:
        why = exc.why if isinstance(exc, _Unresolvable) else str(exc)
        raise InvalidPath(f"root {text!r} cannot be resolved: {why}") from None
    try:
        st = os.stat(canonical)
    except FileNotFoundError:
        raise InvalidPath(f"root {text!r} does not exist") from None
    except OSError as exc:
        raise InvalidPath(f"root {text!r} cannot be examined: {exc.strerror or exc}") from None
    is_dir = stat.S_ISDIR(st.st_mode)
    if not is_dir and not stat.S_ISREG(st.st_mode):
        raise InvalidPath(f"root {text!r} is neither a directory nor a regular file")
    needed = os.R_OK | os.X_OK if is_dir else os.R_OK
    if not os.access(canonical, needed):
        raise InvalidPath(f"root {text!r} cannot be read (permission denied)")
    return Root(Path(canonical), path_to_uri(canonical), name)
