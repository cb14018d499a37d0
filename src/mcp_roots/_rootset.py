"""Root and RootSet: canonical roots, a component index, and the contains / resolve questions.

A RootSet is immutable. Every path is canonicalized by walking it one component at a time (symlinks
followed, loops and magic links refused), then looked up in a dict keyed by canonical root paths: the cost
is one dict probe per component of the path, whatever the number of roots.
"""

from __future__ import annotations

import json
import logging
import os
import posixpath
import stat
import sys
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._errors import InvalidPath, InvalidRootURI, PathOutsideRoots
from ._uri import path_to_uri, uri_to_path

__all__ = ["Root", "RootSet"]

logger = logging.getLogger("mcp_roots")

# Linux's limits; other POSIX systems have the same or larger ones for the purpose of refusing input.
PATH_MAX = 4096
SYMLOOP_MAX = 40


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


def _checked_text(path: object) -> str:
    """Turn a user-supplied path into text, or raise InvalidPath naming the input and the rule."""
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
        if not os.path.isabs(text):
            if not self._roots:
                raise PathOutsideRoots(f"Access denied: {text!r} is relative and there are no allowed roots")
            text = os.path.join(str(self._roots[0].path), text)
        if os.name == "nt":  # pragma: no cover - best effort, see docs/design.md
            return os.path.realpath(text)
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
            return self._lookup(self._canonical(path))
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
