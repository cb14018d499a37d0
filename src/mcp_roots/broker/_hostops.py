"""The blocking file operations behind files/*, run in worker threads: each goes through RootSet's public,
race-free operations on one root (or, for a no-replace rename, through directory descriptors RootSet
opened beneath the root). They raise plain exceptions; ``_reasons`` maps them to protocol errors.
"""

from __future__ import annotations

import contextlib
import errno
import os
import posixpath
import stat
from collections.abc import Callable
from typing import Any, Literal

from .._errors import FileTooLarge
from .._rootset import Root, RootSet
from .._sys import linux
from . import _protocol as p
from ._reasons import NotRegularFile

__all__ = [
    "DIR_FLAGS",
    "LIST_FLAGS",
    "LIST_PAGE",
    "check_target",
    "create",
    "delete",
    "describe_stat",
    "etag_now",
    "join",
    "kind_of",
    "list_page",
    "pread",
    "rename",
]

LIST_PAGE = 1000
"""Entries per ``files/list`` page."""

LIST_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
"""A directory we read entries from."""

DIR_FLAGS = getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_CLOEXEC
"""A directory used only as ``dir_fd``."""


def join(root: Root, rel: str) -> str:
    """The absolute path of ``rel`` beneath ``root`` (handed to RootSet, which opens it beneath the root)."""
    return f"{root.path}/{rel}" if rel else str(root.path)


def kind_of(mode: int) -> Literal["file", "directory", "symlink", "other"]:
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "directory"
    if stat.S_ISLNK(mode):
        return "symlink"
    return "other"


def describe_stat(st: os.stat_result) -> dict[str, Any]:
    return {"type": kind_of(st.st_mode), "size": st.st_size, "mtime": st.st_mtime, "etag": p.etag_of(st)}


Fence = Callable[[int], None]
"""Checks an opened descriptor before it is used (the broker's revocations: raises if it lies in one)."""


def _no_fence(fd: int) -> None:
    return None


def pread(
    rootset: RootSet, full: str, offset: int, length: int, max_file: int | None, fence: Fence = _no_fence
) -> tuple[bytes, os.stat_result]:
    """``length`` bytes at ``offset`` of a regular file (a FIFO is opened non-blocking, then refused)."""
    fd = rootset.open_fd(full, os.O_RDONLY | os.O_NONBLOCK)
    try:
        fence(fd)
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, "is a directory; list it with files/list")
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFile(full)
        if max_file is not None and st.st_size > max_file:
            raise FileTooLarge(f"{st.st_size} > {max_file}")
        if offset >= st.st_size:
            return b"", st
        return os.pread(fd, min(length, st.st_size - offset), offset), st
    finally:
        os.close(fd)


def etag_now(rootset: RootSet, full: str) -> str | None:
    try:
        return p.etag_of(rootset.stat(full))
    except FileNotFoundError:
        return None


def check_target(rootset: RootSet, full: str, rel: str, if_match: str | None, create_only: bool) -> None:
    """CONCURRENCY_CONFLICT unless the target is as the request expects (absent, or at ``if_match``)."""
    current = etag_now(rootset, full)
    if create_only and current is not None:
        raise p.broker_error("CONCURRENCY_CONFLICT", f"{rel!r} already exists (createOnly)", path=rel)
    if if_match is not None and current != if_match:
        raise p.broker_error(
            "CONCURRENCY_CONFLICT",
            f"{rel!r} changed since it was read (ifMatch {if_match!r}, now {current!r})",
            path=rel,
            etag=current,
        )


def create(rootset: RootSet, root: Root, rel: str, kind: str, parents: bool) -> os.stat_result:
    """Create an empty file or a directory (exclusive). ``parents`` creates the missing folders one level
    at a time from a directory descriptor, without recursion and without re-resolving the path per level,
    so a 2,000-level path costs 2,000 mkdir calls, not a RecursionError."""
    if not parents:
        full = join(root, rel)
        if kind == "directory":
            rootset.mkdir(full)
        else:
            os.close(rootset.open_fd(full, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666))
        return rootset.stat(full)
    parts = rel.split("/")
    fd = rootset.open_fd(join(root, ""), DIR_FLAGS)
    try:
        for depth, name in enumerate(parts[:-1], start=1):
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, 0o777, dir_fd=fd)
            try:  # O_NOFOLLOW: a folder we just made, or found, is entered as itself
                inner = os.open(name, DIR_FLAGS | os.O_NOFOLLOW, dir_fd=fd)
            except NotADirectoryError:  # a symlink (or a file): let RootSet follow it beneath the root
                inner = rootset.open_fd(join(root, "/".join(parts[:depth])), DIR_FLAGS)
            os.close(fd)
            fd = inner
        last = parts[-1]
        if kind == "directory":
            os.mkdir(last, 0o777, dir_fd=fd)
        else:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            os.close(os.open(last, flags, 0o666, dir_fd=fd))
        return os.stat(last, dir_fd=fd, follow_symlinks=False)
    finally:
        os.close(fd)


def delete(rootset: RootSet, full: str, rel: str, recursive: bool, if_match: str | None) -> None:
    if if_match is not None:
        current = etag_now(rootset, full)
        if current != if_match:
            raise p.broker_error("CONCURRENCY_CONFLICT", f"{rel!r} changed (ifMatch)", path=rel, etag=current)
    rootset.remove(full, recursive=recursive)


def rename(rootset: RootSet, src: str, dst: str, overwrite: bool) -> None:
    """Rename within the roots; without ``overwrite`` an existing target is EEXIST, atomically."""
    if overwrite:
        rootset.rename(src, dst)
        return
    src_dir = rootset.open_fd(posixpath.dirname(src), DIR_FLAGS)
    try:
        dst_dir = rootset.open_fd(posixpath.dirname(dst), DIR_FLAGS)
        try:
            rename_noreplace(src_dir, posixpath.basename(src), dst_dir, posixpath.basename(dst))
        finally:
            os.close(dst_dir)
    finally:
        os.close(src_dir)


def rename_noreplace(src_dir: int, src: str, dst_dir: int, dst: str) -> None:
    """renameat2(RENAME_NOREPLACE): EEXIST instead of replacing, with no check-then-act window."""
    linux.renameat2(src_dir, src, dst_dir, dst, linux.RENAME_NOREPLACE)


def list_page(rootset: RootSet, full: str, start: int, fence: Fence = _no_fence) -> dict[str, Any]:
    """One page of a directory, sorted by name; symlinks are listed, never followed."""
    fd = rootset.open_fd(full, LIST_FLAGS)
    try:
        fence(fd)
        with os.scandir(fd) as scan:
            raw = sorted((entry.name, entry.stat(follow_symlinks=False)) for entry in scan)
    finally:
        os.close(fd)
    page = raw[start : start + LIST_PAGE]
    result: dict[str, Any] = {
        "entries": [
            {"name": name, "type": kind_of(st.st_mode), "size": st.st_size, "mtime": st.st_mtime}
            for name, st in page
        ]
    }
    if start + LIST_PAGE < len(raw):
        result["nextCursor"] = str(start + LIST_PAGE)
    return result
