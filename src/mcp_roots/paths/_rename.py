"""Rename: ``RootSet.rename`` (both ends inside the roots, the final names not followed), and a rename that
never replaces (renameat2 RENAME_NOREPLACE, or its fallbacks).
"""

from __future__ import annotations

import errno
import os
import stat

from .._sys import linux
from ._beneath import oserror
from ._router import Router
from ._text import ending

__all__ = ["rename", "rename_noreplace"]


def rename(router: Router, src: object, dst: object, replace: bool) -> None:
    """RootSet.rename: both ends inside the roots; the final names are not followed."""
    src_text = router.absolute(src)
    dst_text = router.absolute(dst)
    move = os.rename if replace else rename_noreplace
    # 'dst/' names a directory: only a directory may be moved there (the kernel's ENOTDIR).
    dst_is_dir = ending(dst_text) == "/"

    def from_parent(src_dir: int, src_name: str) -> None:
        def to_parent(dst_dir: int, dst_name: str) -> None:
            try:
                if dst_is_dir and not stat.S_ISDIR(
                    os.stat(src_name, dir_fd=src_dir, follow_symlinks=False).st_mode
                ):
                    raise oserror(errno.ENOTDIR)
                move(src_name, dst_name, src_dir_fd=src_dir, dst_dir_fd=dst_dir)
            except OSError as exc:
                raise OSError(exc.errno, exc.strerror, src_text, None, dst_text) from None

        router.in_parent(dst_text, to_parent, "replaced")

    router.in_parent(src_text, from_parent, "renamed")


def rename_noreplace(src: str, dst: str, *, src_dir_fd: int, dst_dir_fd: int) -> None:
    """A rename that fails with EEXIST instead of replacing: renameat2(RENAME_NOREPLACE); where the system
    or the filesystem lacks it, link + unlink for a file (atomic too), else a checked rename (racy)."""
    try:
        linux.renameat2(src_dir_fd, src, dst_dir_fd, dst, linux.RENAME_NOREPLACE)
        return
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOSYS):  # EINVAL: the filesystem lacks NOREPLACE
            raise
    st = os.stat(src, dir_fd=src_dir_fd, follow_symlinks=False)
    if not stat.S_ISDIR(st.st_mode):
        os.link(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd, follow_symlinks=False)
        os.unlink(src, dir_fd=src_dir_fd)
        return
    try:
        os.stat(dst, dir_fd=dst_dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        os.rename(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)
        return
    raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), dst)
