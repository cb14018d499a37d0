"""The directory listings, and directory_tree and search_files as visitors of the roots' one walk
(``RootSet.walk``: descriptors only, never through a symlink, two descriptors at any depth), each visitor
capped in entries, bytes, depth, names looked at and seconds, and stopped when its call is cancelled.
"""

from __future__ import annotations

import contextlib
import errno
import os
import posixpath
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from json.encoder import encode_basestring

from .. import RootsError, RootSet, TreeEntry
from ._globs import Glob, State

__all__ = ["Limits", "SearchResult", "TreeResult", "listing", "search", "tree"]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
#: How many names a walk looks at between two readings of the clock.
_CLOCK_EVERY = 256


@dataclass(frozen=True)
class Limits:
    """What one walk may cost: entries returned, bytes of a tree's JSON, directory levels (descriptors
    held), names looked at, seconds; and the excludePatterns one call may send."""

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
        self._max_visited = limits.max_visited

    @property
    def truncated(self) -> str | None:
        return self.stopped or self.too_deep

    def look(self) -> bool:
        """One more name looked at: False once ``max_visited`` names were, or once the call is cancelled
        or its seconds are spent (the clock is read every few names)."""
        self.visited += 1
        if self.visited > self._max_visited:
            self.stopped = (
                f"stopped after looking at {self.limits.max_visited:,} entries; "
                "narrow the path or add excludePatterns"
            )
            return False
        self._next_look -= 1
        if self._next_look > 0:
            return True
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


class _Stop(Exception):
    """A visitor's budget is spent (the reason is in the budget): the walk ends here."""


def _skip(exc: OSError, item: TreeEntry) -> None:
    """A directory that vanished, became a symlink or a file, or cannot be read, is not descended into."""


def _walk(
    roots: RootSet,
    start: str,
    budget: _Budget,
    visit: Callable[[int, TreeEntry], bool],
    leave: Callable[[int, TreeEntry], None] | None = None,
    on_error: Callable[[OSError, TreeEntry], None] = _skip,
) -> None:
    """The roots' one walk below ``start`` (depth first, in name order, two descriptors whatever the
    depth), with ``visit`` spending ``budget``; a directory moved meanwhile ends it early, and says so."""
    try:
        roots.walk(start, visit, leave=leave, on_error=on_error)
    except _Stop:
        pass
    except OSError as exc:
        if exc.errno != errno.ESTALE:
            raise
        budget.stopped = (
            "a directory was moved while the walk was inside it; only what was seen before is shown"
        )


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
    # One per directory open now, the start first: (len(parts) when it was opened, its end, its end when
    # it stays empty, the exclude automaton's state at it).
    levels: list[tuple[int, str, str, State]] = [(0, "", "", exclude.start() if exclude else no_state)]
    pads: list[str] = []

    def visit(_fd: int, item: TreeEntry) -> bool:
        nonlocal size, pending
        if not budget.look():
            raise _Stop
        depth, name = item.depth, item.name
        mark, _, _, state = levels[depth]
        below = no_state
        if exclude is not None:
            below = exclude.step(state, name)
            if exclude.accepts(below):
                return False
        while len(pads) <= depth:
            pads.append("  " * (2 * len(pads) + 1))
        pad = pads[depth]
        inner = pad + "  "
        first = len(parts) == mark
        head = f'{"" if first else ","}\n{pad}{{\n{inner}"name": {encode_basestring(name)},\n{inner}"type": '
        if item.is_dir:
            entry = f'{head}"directory",\n{inner}"children": ['
            end = f"\n{inner}]\n{pad}}}"
        else:
            entry = f'{head}"file"\n{pad}}}'
            end = ""
        cost = _size(entry)
        if size + cost + len(end) + pending + (2 if depth == 0 and first else 0) > limits.max_tree_bytes:
            budget.stopped = (
                f"the tree is larger than {limits.max_tree_bytes:,} bytes; only its first part is "
                "shown; narrow the path or add excludePatterns"
            )
            raise _Stop
        if not budget.take():
            raise _Stop
        parts.append(entry)
        size += cost
        if not item.is_dir:
            return False
        empty = f"]\n{pad}}}"  # shorter than ``end``: for a directory that shows no children
        if budget.deeper(depth + 1):
            levels.append((len(parts), end, empty, below))
            pending += len(end)
            return True
        parts.append(empty)
        size += len(empty)
        return False

    def close(*_: object) -> None:  # a directory is done, or was not entered after all
        nonlocal size, pending
        mark, end, empty = levels.pop()[:3]
        pending -= len(end)
        end = empty if len(parts) == mark else end
        parts.append(end)
        size += len(end)

    _walk(roots, start, budget, visit, close, close)
    while len(levels) > 1:  # stopped early: close the directories still open
        close()
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
    # The automata's states at each directory open now (index: its depth; the start is 0): a
    # directory's entries are stepped from its own state, set when the walk went into it.
    states: list[State] = [pattern.start()]
    excluded: list[State] = [exclude.start() if exclude is not None else no_state]

    def visit(_fd: int, item: TreeEntry) -> bool:
        if not budget.look():
            raise _Stop
        depth, name = item.depth, item.name
        below_excluded = no_state
        if exclude is not None:
            below_excluded = exclude.step(excluded[depth], name)
            if exclude.accepts(below_excluded):
                return False
        below = pattern.step(states[depth], name)
        if not below:
            return False  # nothing at or below this name can match
        if pattern.accepts(below):
            full = base + sep + item.rel
            if not item.is_symlink or roots.contains(full):
                if not budget.take():
                    raise _Stop
                result.matches.append(full)
        if not item.is_dir or not budget.deeper(depth + 1):
            return False
        del states[depth + 1 :], excluded[depth + 1 :]
        states.append(below)
        excluded.append(below_excluded)
        return True

    _walk(roots, start, budget, visit)
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
