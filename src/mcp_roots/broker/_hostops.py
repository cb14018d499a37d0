"""The blocking file operations behind files/*, run in worker threads.
Each answer comes from a descriptor opened beneath the root and checked.
"""

# The blocking file operations behind files/*, run in worker threads. Every answer that describes or reveals
# a file (read, list, stat, a conflict's etag) comes from a descriptor opened beneath the root with RootSet's
# public, race-free operations and checked itself (``Grants.fence_read``); every change goes through the
# descriptor of its parent directory, opened beneath the root and checked itself (consent, revocations by
# identity). They raise plain exceptions; ``_reasons`` maps them to protocol errors.

from __future__ import annotations

import contextlib
import errno
import os
import posixpath
import secrets
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from .._sys import linux
from ..errors import FileTooLarge, NotRegularFile
from ..paths._beneath import strategy
from ..paths._dirs import mkdir_at
from ..paths._remove import remove_at
from ..paths._rename import rename_noreplace
from ..paths._rootset import Root, RootSet
from ..paths._text import cut_to_bytes, file_kind, kind_of
from ..paths._tree import LIST_FLAGS, descend, list_entries
from ..paths._write import TEMP_NAME_BYTES
from . import _protocol as p
from ._grants import Grants, Revoked, Screen

__all__ = [
    "LIST_FLAGS",
    "LIST_PAGE",
    "check_target",
    "checked_parent",
    "create",
    "delete",
    "describe_stat",
    "etag_now",
    "join",
    "kind_of",
    "list_page",
    "look",
    "pread",
    "rename",
]

LIST_PAGE = 1000
"""Entries per ``files/list`` page."""


def join(root: Root, rel: str) -> str:
    """The absolute path of ``rel`` beneath ``root`` (handed to RootSet, which opens it beneath the root)."""
    return f"{root.path}/{rel}" if rel else str(root.path)


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
            raise NotRegularFile(file_kind(st.st_mode))
        if max_file is not None and st.st_size > max_file:
            raise FileTooLarge(f"{st.st_size} > {max_file}")
        if offset >= st.st_size:
            return b"", st
        return os.pread(fd, min(length, st.st_size - offset), offset), st
    finally:
        os.close(fd)


def look(rootset: RootSet, full: str, fence: Fence = _no_fence) -> os.stat_result:
    """What ``files/stat`` and a conflict's etag describe: the file opened beneath the root only to be
    fstat'ed (the resolution strategy's probe flags; symlinks followed while they stay inside), checked by
    ``fence`` on that descriptor, then fstat'ed: never a second look by name."""
    fd = rootset.open_fd(full, strategy().probe_flags)
    try:
        fence(fd)
        return os.fstat(fd)
    finally:
        os.close(fd)


def etag_now(rootset: RootSet, full: str, fence: Fence = _no_fence) -> str | None:
    """The etag of what ``full`` names now (fenced like a read), or None when nothing is there."""
    try:
        return p.etag_of(look(rootset, full, fence))
    except FileNotFoundError:
        return None


def check_target(
    rootset: RootSet, full: str, rel: str, if_match: str | None, create_only: bool, fence: Fence = _no_fence
) -> None:
    """CONCURRENCY_CONFLICT unless the target is as the request expects (absent, or at ``if_match``). The
    etag it compares (and names in the conflict) is a fenced look: a target in a revoked location is
    refused, never described."""
    current = etag_now(rootset, full, fence)
    if create_only and current is not None:
        raise p.broker_error("CONCURRENCY_CONFLICT", f"{rel!r} already exists (createOnly)", path=rel)
    if if_match is not None and current != if_match:
        raise p.broker_error(
            "CONCURRENCY_CONFLICT",
            f"{rel!r} changed since it was read (ifMatch {if_match!r}, now {current!r})",
            path=rel,
            etag=current,
        )


@contextlib.contextmanager
def checked_parent(rootset: RootSet, root: Root, rel: str, checks: Grants) -> Iterator[tuple[int, str]]:
    """``(descriptor of the parent directory, final name)`` of ``rel``: the parent opened beneath the
    root and checked (consent and revocations, on the descriptor itself); every change goes through this
    descriptor, so what was checked is where it happens, whatever is renamed meanwhile."""
    parent, name = posixpath.split(rel)
    fd = rootset.open_fd(join(root, parent), strategy().dir_flags)
    try:
        checks.fence_at(fd, name, "write")
        yield fd, name
    finally:
        os.close(fd)


def _make(dirfd: int, name: str, kind: str) -> os.stat_result:
    if kind == "directory":
        mkdir_at(dirfd, name)
    else:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        os.close(os.open(name, flags, 0o666, dir_fd=dirfd))
    return os.stat(name, dir_fd=dirfd, follow_symlinks=False)


def create(
    rootset: RootSet, root: Root, rel: str, kind: str, parents: bool, checks: Grants
) -> os.stat_result:
    """Create an empty file or a directory (exclusive) in its checked parent. ``parents`` finds the
    deepest folder that exists (by bisection, each look a RootSet open beneath the root, so a symlink
    there is followed only while it stays inside), checks it (revocations, by identity) and then makes
    the missing folders from its descriptor with the path layer's ``descend`` (mkdirat, then openat
    O_NOFOLLOW, one level at a time, no recursion: a 2,000-level path costs 2,000 mkdir calls, not a
    RecursionError). A folder made by this call is checked as its parent was; the final parent is
    checked again before anything is made in it."""
    if not parents:
        with checked_parent(rootset, root, rel, checks) as (fd, name):
            return _make(fd, name, kind)
    folders = rel.split("/")
    name = folders.pop()
    dir_flags = strategy().dir_flags
    fd, found = _deepest_folder(rootset, root, folders, dir_flags)
    try:
        if found < len(folders):
            checks.fence(fd)  # the folder the first new one is made in
            inner = descend(fd, folders[found:], dir_flags, create=True)
            os.close(fd)
            fd = inner
        checks.fence_at(fd, name, "write")
        return _make(fd, name, kind)
    finally:
        os.close(fd)


def _deepest_folder(rootset: RootSet, root: Root, folders: list[str], flags: int) -> tuple[int, int]:
    """``(descriptor, n)``: the deepest of the folders ``folders[:n]`` beneath ``root`` that exists, opened
    with ``flags``. One open when they all exist; else a bisection (the root itself always exists). A file
    in the way raises NotADirectoryError."""

    def opened(n: int) -> int | None:
        try:
            return rootset.open_fd(join(root, "/".join(folders[:n])), flags)
        except FileNotFoundError:
            return None

    fd = opened(len(folders))
    if fd is not None:
        return fd, len(folders)
    lo, hi = 0, len(folders) - 1  # folders[:lo] exists; folders[:hi + 1] does not
    while lo < hi:
        mid = (lo + hi + 1) // 2
        probe = opened(mid)
        if probe is None:
            hi = mid - 1
        else:
            os.close(probe)
            lo = mid
    return rootset.open_fd(join(root, "/".join(folders[:lo])), flags), lo


def delete(
    rootset: RootSet, root: Root, rel: str, recursive: bool, if_match: str | None, checks: Grants
) -> None:
    """Remove ``rel`` (recursively: a tree walked by descriptors) from its checked parent. While some
    location is revoked, the victim is first renamed aside in that parent and checked by identity: if it is
    (or holds) a revoked location, it is put back and nothing is removed."""
    if if_match is not None:
        current = etag_now(rootset, join(root, rel), checks.fence_read)
        if current != if_match:
            raise p.broker_error("CONCURRENCY_CONFLICT", f"{rel!r} changed (ifMatch)", path=rel, etag=current)
    with checked_parent(rootset, root, rel, checks) as (fd, name):
        in_force = checks.in_force()
        if not in_force:
            remove_at(fd, name, recursive)
            return
        aside = f".{cut_to_bytes(name, TEMP_NAME_BYTES)}.{secrets.token_hex(8)}.delete"
        rename_noreplace(name, aside, src_dir_fd=fd, dst_dir_fd=fd)
        try:
            if checks.holds_revoked(os.stat(aside, dir_fd=fd, follow_symlinks=False), in_force):
                raise Revoked(rel)
            remove_at(fd, aside, recursive)
        except BaseException:
            with contextlib.suppress(OSError):  # put it back (whatever is left of it)
                rename_noreplace(aside, name, src_dir_fd=fd, dst_dir_fd=fd)
            raise


def rename(
    src: tuple[RootSet, Root, str], dst: tuple[RootSet, Root, str], overwrite: bool, checks: Grants
) -> None:
    """Rename between two checked parents (the path layer's no-replace rename unless ``overwrite``).
    While some location is revoked, what was moved is checked by identity at its new name and moved
    back if it is (or holds) a revoked location; a replaced target is checked before."""
    with (
        checked_parent(*src, checks) as (src_dir, old),
        checked_parent(*dst, checks) as (dst_dir, new),
    ):
        in_force = checks.in_force()
        if overwrite and in_force:
            with contextlib.suppress(FileNotFoundError):
                if checks.holds_revoked(os.stat(new, dir_fd=dst_dir, follow_symlinks=False), in_force):
                    raise Revoked(dst[2])
        if overwrite:
            os.rename(old, new, src_dir_fd=src_dir, dst_dir_fd=dst_dir)
        else:
            rename_noreplace(old, new, src_dir_fd=src_dir, dst_dir_fd=dst_dir)
        if in_force and checks.holds_revoked(os.stat(new, dir_fd=dst_dir, follow_symlinks=False), in_force):
            with contextlib.suppress(OSError):
                rename_noreplace(new, old, src_dir_fd=dst_dir, dst_dir_fd=src_dir)
            raise Revoked(src[2])


def list_page(
    rootset: RootSet, full: str, start: int, fence: Fence = _no_fence, screen: Screen | None = None
) -> dict[str, Any]:
    """One page of a directory, sorted by name; symlinks are listed, never followed. The directory is
    checked by ``fence`` on its descriptor; an entry ``screen`` hides (a revoked location, by name or
    identity) is left out."""
    fd = rootset.open_fd(full, LIST_FLAGS)
    try:
        fence(fd)
        raw = sorted(list_entries(fd))  # the path layer's listing: lstat each, skip one removed meanwhile
        if screen is not None:
            now = linux.fd_path(fd)
            base = Path(now) if now is not None else None
            raw = [(n, st) for n, st in raw if not screen(base / n if base is not None else None, st)]
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
