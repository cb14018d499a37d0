"""Directories: ``RootSet.listdir``, ``scandir``, ``walk`` (the directory opened beneath a root, then
``_tree``'s descriptor walk) and ``mkdir`` (with ``parents``: the missing levels made from the deepest
existing one by ``_tree.descend``), and the mkdir of one name in an open directory.
"""

from __future__ import annotations

import errno
import os
import posixpath
import stat
from pathlib import Path

from .._sys import linux
from ..errors import RootsError
from ._beneath import open_beneath, strategy
from ._descriptors import Descriptor
from ._open import stat_path
from ._router import Router
from ._text import check_name, ending, split
from ._tree import LIST_FLAGS, Entry, Leave, OnError, Visit, descend, list_entries
from ._tree import walk as walk_tree

__all__ = ["listdir", "mkdir", "mkdir_at", "scandir", "walk"]


def listdir(router: Router, path: object) -> list[str]:
    """RootSet.listdir."""
    text = router.absolute(path)
    fd = router.at(text, _open_listing)
    try:
        return os.listdir(fd)
    finally:
        os.close(fd)


def _open_listing(root: Descriptor, rel: str) -> int:
    return open_beneath(root.fd, rel, LIST_FLAGS)


def scandir(router: Router, path: object) -> list[Entry]:
    """RootSet.scandir: entries with kinds and sizes; a symlink's target counts only inside the roots."""
    text = router.absolute(path)
    fd = router.at(text, _open_listing)
    try:
        base = linux.fd_path(fd) or router.canonical(text)
        raw = list_entries(fd)
    finally:
        os.close(fd)
    entries = []
    for name, st in raw:
        full = posixpath.join(base, name)
        shown: os.stat_result | None = st
        if stat.S_ISLNK(st.st_mode):
            try:
                shown = stat_path(router, full)
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


def walk(
    router: Router, path: object, visit: Visit, leave: Leave | None, on_error: OnError | None, sort: bool
) -> None:
    """RootSet.walk: the directory is opened beneath a root, then walked by ``_tree.walk``."""
    text = router.absolute(path)
    fd = router.at(text, _open_listing)
    try:
        walk_tree(fd, visit, leave=leave, on_error=on_error, sort=sort)
    finally:
        os.close(fd)


def mkdir(router: Router, path: object, parents: bool, exist_ok: bool) -> None:
    """RootSet.mkdir. With ``parents``, the deepest existing ancestor is found by bisection and the
    missing levels are created from its descriptor by ``_tree.descend`` (mkdirat, then openat
    O_NOFOLLOW): a loop linear in the depth, not recursion, so a tree thousands of levels deep is fine."""
    text = router.absolute(path)
    if parents and ending(text) == "/.":
        text = text.rstrip("/")[:-1]  # as os.makedirs: 'new/.' is the directory 'new', made with its parents
    parts = split(text)
    try:
        _mkdir_one(router, text, parts, exist_ok)
        return
    except FileNotFoundError:
        if not parents or len(parts) < 2:
            raise
    root_path = router.index.innermost_prefix(text)
    if ".." in parts or root_path is None:
        # Rare shapes ('..' inside, a root reached through a symlink): up until a level can be made,
        # then down again, one level at a time.
        # A prefix ending in '..' is a step, not a directory to make.
        depth = len(parts) - 1
        while True:
            try:
                if parts[depth - 1] != "..":
                    _mkdir_one(router, "/" + "/".join(parts[:depth]), parts[:depth], True)
                    break
            except FileNotFoundError:
                pass
            if depth <= 1:
                raise
            depth -= 1
        for i in range(depth + 1, len(parts)):
            if parts[i - 1] != "..":
                _mkdir_one(router, "/" + "/".join(parts[:i]), parts[:i], True)
        _mkdir_one(router, text, parts, exist_ok)
        return
    lo, hi = len(split(root_path)), len(parts) - 1  # parts[:lo] exists (the root); parts[:hi + 1] does not
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if _is_directory(router, "/" + "/".join(parts[:mid])):
            lo = mid
        else:
            hi = mid - 1
    missing = parts[lo:-1]
    dir_flags = strategy().dir_flags

    check = router.write_check

    def create_levels(root: Descriptor, rel: str) -> None:
        fd = open_beneath(root.fd, rel, dir_flags)
        try:
            if check is not None:
                check(fd, text)
            os.close(descend(fd, missing, dir_flags, create=True))
        finally:
            os.close(fd)

    router.at("/" + "/".join(parts[:lo]), create_levels)
    _mkdir_one(router, text, parts, exist_ok)


def _is_directory(router: Router, text: str) -> bool:
    try:
        return stat.S_ISDIR(stat_path(router, text).st_mode)
    except FileNotFoundError:
        return False


def _mkdir_one(router: Router, text: str, parts: list[str], exist_ok: bool) -> None:
    if parts and ".." not in parts and router.index.exact("/" + "/".join(parts)) is not None:
        if exist_ok:
            return
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), text)
    try:
        router.in_parent(text, lambda dirfd, name: mkdir_at(dirfd, name), "created")
    except FileExistsError:
        if not exist_ok:
            raise
        try:
            is_dir = stat.S_ISDIR(stat_path(router, text).st_mode)
        except RootsError:
            raise  # a refusal is raised as it is
        except OSError:  # 'file/': what is there is no directory either
            is_dir = False
        if not is_dir:
            raise


def mkdir_at(dirfd: int, name: str, mode: int = 0o777) -> None:
    check_name(name)
    os.mkdir(name, mode, dir_fd=dirfd)
