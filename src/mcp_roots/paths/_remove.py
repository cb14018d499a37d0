"""Remove: ``RootSet.remove``, and the removal of one name in an open directory -- a file, a symlink itself
(never its target), an empty directory, or with ``recursive`` a whole tree through ``_tree``'s walk.
"""

from __future__ import annotations

import contextlib
import os
import stat

from .._sys.posix import O_NOFOLLOW
from ._router import Router
from ._text import check_name
from ._tree import LIST_FLAGS, TreeEntry
from ._tree import walk as walk_tree

__all__ = ["remove", "remove_at"]


def remove(router: Router, path: object, recursive: bool) -> None:
    """RootSet.remove: a file, a symlink (never its target), an empty directory, or with ``recursive``
    a whole tree walked through descriptors without following symlinks (a loop, not recursion)."""
    router.in_parent(path, lambda dirfd, name: remove_at(dirfd, name, recursive), "removed")


def remove_at(dirfd: int, name: str, recursive: bool) -> None:
    """Remove ``name`` (a file, a symlink itself, or a directory) from ``dirfd``. A recursive remove walks
    the tree with :func:`_tree.walk` (through descriptors, O_NOFOLLOW, two descriptors whatever the depth;
    a directory moved meanwhile stops it), so no symlink is ever followed."""
    check_name(name)
    st = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(name, dir_fd=dirfd)
        return
    if recursive:
        fd = os.open(name, LIST_FLAGS | O_NOFOLLOW, dir_fd=dirfd)
        try:
            walk_tree(fd, _unlink_or_enter, leave=_rmdir, sort=False)
        finally:
            os.close(fd)
    os.rmdir(name, dir_fd=dirfd)


def _unlink_or_enter(dir_fd: int, entry: TreeEntry) -> bool:
    if entry.is_dir:
        return True
    with contextlib.suppress(FileNotFoundError):
        os.unlink(entry.name, dir_fd=dir_fd)
    return False


def _rmdir(dir_fd: int, entry: TreeEntry) -> None:
    os.rmdir(entry.name, dir_fd=dir_fd)
