"""The directory listings, and the recursive walks of directory_tree and search_files through directory
descriptors only (``O_NOFOLLOW`` below the start, so a walk never leaves the root), each capped in entries,
bytes, depth, names looked at and seconds, and stopped when its call is cancelled.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from json.encoder import encode_basestring

from .. import RootsError, RootSet
from ._globs import Glob, State

__all__ = ["Limits", "SearchResult", "TreeResult", "listing", "search", "tree"]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_CHILD_FLAGS = _DIR_FLAGS | os.O_NOFOLLOW
#: How many names a walk looks at between two readings of the clock.
_CLOCK_EVERY = 256


@dataclass(frozen=True)
class Limits:
    """What one walk (a directory_tree or search_files call) may cost; and the excludePatterns it may send.

    Args:
        max_results: Entries returned.
        max_depth: Directory levels (descriptors held).
        max_visited: Names looked at.
        max_tree_bytes: Bytes of a tree's JSON.
        max_seconds: Seconds.
    """

    max_results: int = 100_000
    max_depth: int = 128
    max_visited: int = 2_000_000
    max_tree_bytes: int = 16 * 1024 * 1024
    max_seconds: float = 30.0


@dataclass
class TreeResult:
    """directory_tree's JSON text (``JSON.stringify(tree, null, 2)``), and why it was cut, if it was."""

    text: str
    truncated: str | None = None


@dataclass
class SearchResult:
    matches: list[str] = field(default_factory=list)
    truncated: str | None = None


def _children(dirfd: int) -> list[tuple[str, bool, bool]]:
    """``(name, is_directory, is_symlink)`` of a directory's entries, sorted by name; symlinks are never
    followed (d_type, or an lstat where the filesystem does not fill it)."""
    with os.scandir(dirfd) as it:
        found = [(e.name, e.is_dir(follow_symlinks=False), e.is_symlink()) for e in it]
    found.sort()
    return found


def _open_child(dirfd: int, name: str) -> int | None:
    try:
        return os.open(name, _CHILD_FLAGS, dir_fd=dirfd)
    except OSError:
        return None  # vanished, replaced by a symlink or a file, or unreadable: not descended into


class _Budget:
    def __init__(self, limits: Limits, stop: threading.Event | None, clock: Callable[[], float]) -> None:
        self.limits = limits
        self.results = 0
        self.visited = 0
        self.stopped: str | None = None  # why the walk stopped early
        self.too_deep: str | None = None  # the walk went on, without the deepest directories
        self._stop = stop
        self._clock = clock
        self._deadline = clock() + limits.max_seconds
        self._next_look = _CLOCK_EVERY

    @property
    def truncated(self) -> str | None:
        return self.stopped or self.too_deep

    def visit(self, count: int) -> bool:
        self.visited += count
        if self.visited > self.limits.max_visited:
            self.stopped = (
                f"stopped after looking at {self.limits.max_visited:,} entries; "
                "narrow the path or add excludePatterns"
            )
            return False
        return True

    def in_time(self) -> bool:
        """False once the call is cancelled or its seconds are spent (the clock is read every few names)."""
        self._next_look -= 1
        if self._next_look > 0:
            return self.stopped is None
        self._next_look = _CLOCK_EVERY
        if self._stop is not None and self._stop.is_set():
            self.stopped = "the call was cancelled"
        elif self._clock() > self._deadline:
            self.stopped = (
                f"stopped after {self.limits.max_seconds:g} seconds; narrow the path, the pattern or add "
                "excludePatterns"
            )
        return self.stopped is None

    def take(self) -> bool:
        if self.results >= self.limits.max_results:
            self.stopped = (
                f"more than {self.limits.max_results:,} results; only the first "
                f"{self.limits.max_results:,} are shown; narrow the path or add excludePatterns"
            )
            return False
        self.results += 1
        return True

    def deeper(self, depth: int) -> bool:
        if depth >= self.limits.max_depth:
            self.too_deep = f"directories deeper than {self.limits.max_depth} levels are not shown"
            return False
        return True


def _walk_from(roots: RootSet, start: str, body: Callable[[int], None]) -> None:
    fd = roots.open_fd(start, _DIR_FLAGS)
    try:
        body(fd)
    finally:
        os.close(fd)


def _size(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def tree(
    roots: RootSet,
    start: str,
    exclude: Glob | None,
    limits: Limits,
    *,
    stop: threading.Event | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> TreeResult:
    """The official server's ``directory_tree`` below ``start`` (``{name, type, children}`` entries), as
    the JSON text ``JSON.stringify(tree, null, 2)`` prints, written in one pass and cut at
    ``limits.max_tree_bytes`` (the text stays valid JSON)."""
    budget = _Budget(limits, stop, clock)
    parts: list[str] = []  # one string per entry (and one per directory's end): few objects, one join
    size = 2  # "[" and "]"
    pending = 0  # bytes of the ends of the directories open now (so that a cut tree stays valid JSON)
    no_state: State = frozenset()

    def build(dirfd: int, state: State, depth: int) -> None:
        nonlocal size, pending
        children = _children(dirfd)
        if not budget.visit(len(children)):
            return
        pad = "  " * (2 * depth + 1)
        inner = pad + "  "
        first = True
        for name, is_dir, _ in children:
            if not budget.in_time():
                break
            below = no_state
            if exclude is not None:
                below = exclude.step(state, name)
                if exclude.accepts(below):
                    continue
            head = (
                f'{"" if first else ","}\n{pad}{{\n{inner}"name": {encode_basestring(name)},\n{inner}"type": '
            )
            if is_dir:
                entry = f'{head}"directory",\n{inner}"children": ['
                end = f"\n{inner}]\n{pad}}}"  # "]\n{pad}}" when it stays empty: shorter
            else:
                entry = f'{head}"file"\n{pad}}}'
                end = ""
            cost = _size(entry) + len(end)
            if size + cost + pending + (2 if depth == 0 and first else 0) > limits.max_tree_bytes:
                budget.stopped = (
                    f"the tree is larger than {limits.max_tree_bytes:,} bytes; only its first part is "
                    "shown; narrow the path or add excludePatterns"
                )
                break
            if not budget.take():
                break
            parts.append(entry)
            size += _size(entry)
            first = False
            if not is_dir:
                continue
            mark = len(parts)
            pending += len(end)
            if budget.deeper(depth + 1):
                child = _open_child(dirfd, name)
                if child is not None:
                    try:
                        build(child, below, depth + 1)
                    finally:
                        os.close(child)
            pending -= len(end)
            if len(parts) == mark:
                end = f"]\n{pad}}}"
            parts.append(end)
            size += len(end)

    def run(fd: int) -> None:
        build(fd, exclude.start() if exclude is not None else no_state, 0)

    _walk_from(roots, start, run)
    parts.append("\n]" if parts else "]")
    text = "[" + "".join(parts)
    parts.clear()
    return TreeResult(text, budget.truncated)


def search(
    roots: RootSet,
    start: str,
    pattern: Glob,
    exclude: Glob | None,
    limits: Limits,
    *,
    stop: threading.Event | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> SearchResult:
    """Full paths below ``start`` whose path relative to it matches ``pattern``, depth first, in name
    order; excluded paths are neither listed nor descended into, nor is a directory below which the
    pattern can no longer match; a symlink leading outside the roots is not listed."""
    budget = _Budget(limits, stop, clock)
    result = SearchResult()
    base = start.rstrip("/") or "/"
    sep = "" if base.endswith("/") else "/"
    no_state: State = frozenset()

    def visit(dirfd: int, prefix: str, state: State, excluded: State, depth: int) -> bool:
        children = _children(dirfd)
        if not budget.visit(len(children)):
            return False
        for name, is_dir, is_link in children:
            if not budget.in_time():
                return False
            below_excluded = no_state
            if exclude is not None:
                below_excluded = exclude.step(excluded, name)
                if exclude.accepts(below_excluded):
                    continue
            below = pattern.step(state, name)
            if not below:
                continue  # nothing at or below this name can match
            rel = prefix + name
            if pattern.accepts(below):
                full = base + sep + rel
                if not is_link or roots.contains(full):
                    if not budget.take():
                        return False
                    result.matches.append(full)
            if is_dir and budget.deeper(depth + 1):
                child = _open_child(dirfd, name)
                if child is not None:
                    try:
                        if not visit(child, rel + "/", below, below_excluded, depth + 1):
                            return False
                    finally:
                        os.close(child)
        return True

    def run(fd: int) -> None:
        visit(fd, "", pattern.start(), exclude.start() if exclude is not None else no_state, 0)

    _walk_from(roots, start, run)
    result.truncated = budget.truncated
    return result


def listing(
    roots: RootSet, path: str, limit: int, *, sizes: bool = False
) -> tuple[list[tuple[str, bool, int]], str | None]:
    """``(name, is_directory, size)`` of a directory's entries in name order, at most ``limit`` of them
    (then the second item says so). A symlink is listed as a file, as the official server does; with
    ``sizes``, its size is its target's while that stays inside the roots, else the link's own."""
    out: list[tuple[str, bool, int]] = []
    truncated: str | None = None
    base = path.rstrip("/") or "/"

    def run(fd: int) -> None:
        nonlocal truncated
        with os.scandir(fd) as it:
            for entry in it:
                if len(out) >= limit:
                    truncated = (
                        f"the directory has more than {limit:,} entries; only {limit:,} are shown "
                        "(use search_files to find names)"
                    )
                    break
                is_link = entry.is_symlink()
                size = 0
                if sizes:
                    try:
                        size = (
                            roots.stat(posixpath.join(base, entry.name)).st_size
                            if is_link
                            else entry.stat(follow_symlinks=False).st_size
                        )
                    except (OSError, RootsError):  # gone, or a link leading outside: its own size
                        with contextlib.suppress(OSError):
                            size = entry.stat(follow_symlinks=False).st_size
                out.append((entry.name, entry.is_dir(follow_symlinks=False), size))

    _walk_from(roots, path, run)
    out.sort()
    return out, truncated
