"""Going down directories by descriptor, the one way the path layer does it: list one directory, descend a
path of names that must all be real directories (creating them on request), and walk a whole tree depth
first. Never through a symlink, never by recursion, at most two descriptors open whatever the depth.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from .._sys.posix import O_CLOEXEC, O_DIRECTORY, O_NOFOLLOW

__all__ = ["LIST_FLAGS", "Entry", "TreeEntry", "descend", "list_entries", "walk"]

#: A directory we read entries from (never O_PATH: getdents needs a readable descriptor).
LIST_FLAGS = os.O_RDONLY | O_DIRECTORY | O_CLOEXEC
#: A directory entered during a walk: never a symlink (ELOOP / ENOTDIR), never blocking (O_DIRECTORY).
_CHILD_FLAGS = LIST_FLAGS | O_NOFOLLOW


@dataclass(frozen=True)
class Entry:
    """One directory entry, as :meth:`RootSet.scandir` lists it.

    Args:
        name: The entry's name.
        path: Its canonical location: its directory's canonical path plus ``name`` (a symlink is not
            followed for it).
        is_dir: A directory; a symlink is followed only when its target lies inside the roots.
        is_file: A regular file; a symlink is followed only when its target lies inside the roots.
        is_symlink: The entry itself is a symlink.
        size: The size in bytes of what ``is_dir``/``is_file`` describe (the link itself when its target is
            outside or missing).
    """

    name: str
    path: Path
    is_dir: bool
    is_file: bool
    is_symlink: bool
    size: int


def list_entries(dirfd: int) -> list[tuple[str, os.stat_result]]:
    """Names and lstat results of a directory opened for listing (``dirfd`` stays open)."""
    out: list[tuple[str, os.stat_result]] = []
    with os.scandir(dirfd) as entries:
        for e in entries:
            try:
                out.append((e.name, e.stat(follow_symlinks=False)))
            except FileNotFoundError:  # removed while listing
                continue
    return out


def descend(dirfd: int, names: Iterable[str], flags: int, *, create: bool = False) -> int:
    """A new descriptor of the directory ``names[0]/names[1]/...`` beneath ``dirfd`` (``dirfd`` itself
    when ``names`` is empty), opened one level at a time with ``flags | O_DIRECTORY | O_NOFOLLOW``: a
    symlink or a non-directory at any level raises OSError (ELOOP or ENOTDIR) instead of being followed.
    With ``create``, each missing level is made first (mkdirat; one made meanwhile is simply entered).
    ``dirfd`` stays open; the caller closes the result."""
    level_flags = flags | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC
    fd = -1
    try:
        for name in names:
            current = dirfd if fd < 0 else fd
            if create:
                with contextlib.suppress(FileExistsError):  # the open checks what it is
                    os.mkdir(name, 0o777, dir_fd=current)
            inner = os.open(name, level_flags, dir_fd=current)
            if fd >= 0:
                os.close(fd)
            fd = inner
        return fd if fd >= 0 else os.open(".", flags | O_DIRECTORY | O_CLOEXEC, dir_fd=dirfd)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        raise


@dataclass(frozen=True)
class TreeEntry:
    """One entry met by :meth:`RootSet.walk`: what it is, not following a symlink.

    Args:
        name: The entry's name.
        rel: Its path relative to the walk's start ('/' separated).
        depth: 0 for an entry of the start directory, 1 beneath one, and so on.
        is_dir: A directory (False for a symlink to a directory).
        is_symlink: The entry is a symlink.
    """

    name: str
    rel: str
    depth: int
    is_dir: bool
    is_symlink: bool


Visit = Callable[[int, TreeEntry], bool]
"""``visit(dir_fd, entry)``: ``dir_fd`` holds the entry (open while the call runs); True descends into
a directory entry."""
Leave = Callable[[int, TreeEntry], None]
"""``leave(dir_fd, entry)``: the directory ``entry`` was walked; ``dir_fd`` holds it (e.g. to rmdir it)."""
OnError = Callable[[OSError, TreeEntry], None]
"""A directory entry could not be entered or listed (gone, replaced by a symlink or a file, unreadable):
raise to stop the walk, return to skip it."""


@dataclass
class _Level:
    children: list[tuple[str, bool, bool]]
    prefix: str
    identity: tuple[int, int]
    entry: TreeEntry | None
    next: int = 0


def _children(fd: int, sort: bool) -> list[tuple[str, bool, bool]]:
    with os.scandir(fd) as it:
        found = [(e.name, e.is_dir(follow_symlinks=False), e.is_symlink()) for e in it]
    if sort:
        found.sort()
    return found


def walk(
    top: int,
    visit: Visit,
    *,
    leave: Leave | None = None,
    on_error: OnError | None = None,
    sort: bool = True,
) -> None:
    """Walk the directory ``top`` (a descriptor; it stays open) depth first, pre-order: ``visit`` is called
    for each entry, in name order with ``sort``, and a directory it answers True for is walked before
    the next sibling; ``leave`` is called when that directory is done.

    Each directory is entered with ``O_NOFOLLOW | O_DIRECTORY`` relative to its parent's descriptor and
    listed once. Going back up opens '..' and checks it is the very directory the walk came down from
    (device and inode): a directory moved meanwhile stops the walk (ESTALE) rather than letting it go on
    somewhere else. So the walk holds two descriptors at most whatever the depth, and no recursion; what
    it keeps per level is the level's remaining names (the caller's visit bounds how many it looks at)."""
    fd = os.open(".", LIST_FLAGS, dir_fd=top)
    try:
        st = os.fstat(fd)
        level = _Level(_children(fd, sort), "", (st.st_dev, st.st_ino), None)
        above: list[_Level] = []
        while True:
            if level.next < len(level.children):
                name, is_dir, is_link = level.children[level.next]
                level.next += 1
                entry = TreeEntry(name, level.prefix + name, len(above), is_dir, is_link)
                if not visit(fd, entry) or not is_dir:
                    continue
                try:
                    child = os.open(name, _CHILD_FLAGS, dir_fd=fd)
                    try:
                        st = os.fstat(child)
                        children = _children(child, sort)
                    except BaseException:
                        os.close(child)
                        raise
                except OSError as exc:
                    if on_error is None:
                        raise
                    on_error(exc, entry)
                    continue
                os.close(fd)
                fd = child
                above.append(level)
                level = _Level(children, entry.rel + "/", (st.st_dev, st.st_ino), entry)
                continue
            done = level.entry
            if done is None:
                return
            parent = os.open("..", LIST_FLAGS | O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = parent
            level = above.pop()
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) != level.identity:
                raise OSError(errno.ESTALE, "a directory was moved while its tree was being walked", done.rel)
            if leave is not None:
                leave(fd, done)
    finally:
        os.close(fd)
