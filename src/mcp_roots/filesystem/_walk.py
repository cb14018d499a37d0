"""Recursive walks for directory_tree and search_files, through directory descriptors only.

The start directory is opened beneath a root with the public ``RootSet.open_fd``; every directory below is
opened relative to its parent's descriptor with ``O_NOFOLLOW``, so a symlink (or a directory swapped for
one during the walk) is never descended into and the walk cannot leave the root. Entries, depth and
visited names are capped; a walk that hits a cap says so instead of growing without bound.
"""

from __future__ import annotations

import contextlib
import json
import os
import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .. import RootsError, RootSet

__all__ = ["Limits", "SearchResult", "TreeResult", "listing", "search", "tree", "tree_json"]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_CHILD_FLAGS = _DIR_FLAGS | os.O_NOFOLLOW


@dataclass(frozen=True)
class Limits:
    """What one walk may cost: entries returned, directory levels (descriptors held) and names looked at."""

    max_results: int = 100_000
    max_depth: int = 128
    max_visited: int = 2_000_000


@dataclass
class TreeResult:
    entries: list[dict[str, Any]]
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
    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.results = 0
        self.visited = 0
        self.stopped: str | None = None  # why the walk stopped early
        self.too_deep: str | None = None  # the walk went on, without the deepest directories

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


def tree(roots: RootSet, start: str, exclude: re.Pattern[str] | None, limits: Limits) -> TreeResult:
    """The official server's ``directory_tree`` structure below ``start``: ``{name, type, children}``."""
    budget = _Budget(limits)

    def build(dirfd: int, prefix: str, depth: int) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        children = _children(dirfd)
        if not budget.visit(len(children)):
            return out
        for name, is_dir, _ in children:
            if budget.stopped is not None:
                break
            rel = prefix + name
            if exclude is not None and exclude.fullmatch(rel):
                continue
            if not budget.take():
                break
            entry: dict[str, Any] = {"name": name, "type": "directory" if is_dir else "file"}
            if is_dir:
                entry["children"] = []
                if budget.deeper(depth + 1):
                    child = _open_child(dirfd, name)
                    if child is not None:
                        try:
                            entry["children"] = build(child, rel + "/", depth + 1)
                        finally:
                            os.close(child)
            out.append(entry)
        return out

    result = TreeResult([])

    def run(fd: int) -> None:
        result.entries = build(fd, "", 0)

    _walk_from(roots, start, run)
    result.truncated = budget.truncated
    return result


def search(
    roots: RootSet,
    start: str,
    pattern: re.Pattern[str],
    exclude: re.Pattern[str] | None,
    limits: Limits,
) -> SearchResult:
    """Full paths below ``start`` whose path relative to it matches ``pattern``, depth first, in name
    order; excluded paths are neither listed nor descended into; a symlink leading outside the roots is
    not listed."""
    budget = _Budget(limits)
    result = SearchResult()
    base = start.rstrip("/") or "/"
    sep = "" if base.endswith("/") else "/"

    def visit(dirfd: int, prefix: str, depth: int) -> bool:
        children = _children(dirfd)
        if not budget.visit(len(children)):
            return False
        for name, is_dir, is_link in children:
            rel = prefix + name
            if exclude is not None and exclude.fullmatch(rel):
                continue
            if pattern.fullmatch(rel):
                full = base + sep + rel
                if not is_link or roots.contains(full):
                    if not budget.take():
                        return False
                    result.matches.append(full)
            if is_dir and budget.deeper(depth + 1):
                child = _open_child(dirfd, name)
                if child is not None:
                    try:
                        if not visit(child, rel + "/", depth + 1):
                            return False
                    finally:
                        os.close(child)
        return True

    def run(fd: int) -> None:
        visit(fd, "", 0)

    _walk_from(roots, start, run)
    result.truncated = budget.truncated
    return result


def tree_json(entries: list[dict[str, Any]]) -> str:
    """The tree as the official server prints it (``JSON.stringify(tree, null, 2)``)."""
    return json.dumps(entries, indent=2, ensure_ascii=False)


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
