"""The scratch tree's file operations, through directory descriptors only.
What a probed server plants in the tree is never followed.
"""

# The scratch tree's file operations, through directory descriptors only, so that a probed server that plants
# symlinks, FIFOs or directories in the tree while the probe works can never make the probe follow them: every
# name is opened relative to a directory descriptor with ``O_NOFOLLOW``, files are created ``O_CREAT|O_EXCL``
# (never truncated through a link), entries are read ``O_NONBLOCK`` (a FIFO cannot hang the probe), removal
# never follows a link and never chmods through one.

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import shutil
import stat
from collections.abc import Callable, Iterator

__all__ = [
    "Fingerprint",
    "HostileTree",
    "clear",
    "fingerprint",
    "make_dir",
    "make_fifo",
    "make_link",
    "put_file",
    "release_tree",
]

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_PATH_FLAG = getattr(os, "O_PATH", 0)
MAX_READ = 4097  # bytes of a file hashed for its fingerprint
MAX_ENTRIES = 100_000  # entries one fingerprint or removal visits; a server that makes more is hostile
MAX_DEPTH = 64
_TRIES = 64  # a name taken again between its removal and its creation: tries before giving up

Fingerprint = dict[str, tuple[object, ...]]


class HostileTree(OSError):
    """The tree keeps changing under the probe (a name recreated faster than the probe can plant it, more
    entries than any honest server makes): the run stops rather than follow anything."""


def clear(dir_fd: int, name: str) -> None:
    """Remove ``name`` beneath ``dir_fd`` whatever it is (a link is removed, never followed)."""
    try:
        os.unlink(name, dir_fd=dir_fd)
        return
    except FileNotFoundError:
        return
    except OSError as exc:
        if exc.errno not in (errno.EISDIR, errno.EPERM):
            raise
    for _ in range(_TRIES):  # a server that keeps adding entries meanwhile: again, a few times
        release_tree(dir_fd, name)
        try:
            shutil.rmtree(name, dir_fd=dir_fd)  # descriptor-based: never follows a link
            return
        except FileNotFoundError:
            return
        except OSError as exc:
            if exc.errno != errno.ENOTEMPTY:
                raise
    raise HostileTree(errno.ENOTEMPTY, f"{name!r} keeps filling up while the probe removes it")


def _again(dir_fd: int, name: str, make: Callable[[], object]) -> None:
    for _ in range(_TRIES):
        try:
            make()
            return
        except FileExistsError:
            clear(dir_fd, name)
    raise HostileTree(errno.EEXIST, f"{name!r} keeps reappearing in the scratch tree")


def put_file(dir_fd: int, name: str, data: bytes) -> None:
    """Create the file ``name`` (O_CREAT|O_EXCL|O_NOFOLLOW: whatever is there is removed first, nothing is
    opened through a link) holding ``data``."""

    def make() -> None:
        fd = os.open(
            name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=dir_fd
        )
        try:
            os.write(fd, data)
        finally:
            os.close(fd)

    _again(dir_fd, name, make)


def make_dir(dir_fd: int, name: str) -> int:
    """Create the directory ``name`` afresh (what was there removed) and return a descriptor for it."""
    _again(dir_fd, name, lambda: os.mkdir(name, 0o755, dir_fd=dir_fd))
    return os.open(name, _DIR, dir_fd=dir_fd)


def make_link(dir_fd: int, name: str, target: str) -> None:
    _again(dir_fd, name, lambda: os.symlink(target, name, dir_fd=dir_fd))


def make_fifo(dir_fd: int, name: str) -> None:
    _again(dir_fd, name, lambda: os.mkfifo(name, 0o644, dir_fd=dir_fd))


def _entry(dir_fd: int, name: str) -> tuple[object, ...] | None:
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    detail: object = None
    if stat.S_ISLNK(st.st_mode):
        with contextlib.suppress(OSError):
            detail = os.readlink(name, dir_fd=dir_fd)
    elif stat.S_ISREG(st.st_mode):
        with contextlib.suppress(OSError):  # swapped for a link (ELOOP) or gone: the stat above shows it
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
            try:
                now = os.fstat(fd)
                if stat.S_ISREG(now.st_mode) and now.st_ino == st.st_ino:  # not a FIFO swapped in meanwhile
                    detail = hashlib.sha256(os.read(fd, MAX_READ)).hexdigest()
                else:
                    detail = "swapped"
            finally:
                os.close(fd)
    # Not the link count: replacing the root's hard link atomically changes it, and that is no escape.
    return (stat.S_IFMT(st.st_mode), st.st_size, st.st_ino, stat.S_IMODE(st.st_mode), st.st_mtime_ns, detail)


def fingerprint(dir_fd: int, skip: str | None = None) -> Fingerprint:
    """Every entry beneath ``dir_fd`` (relative names), never following a link, never blocking on a FIFO:
    kind, size, inode, mode, mtime, link target or content hash. ``skip``: a top-level name left out."""
    found: Fingerprint = {}
    for rel, parent, name, _ in _walk(dir_fd, skip):
        entry = _entry(parent, name)
        if entry is not None:
            found[rel] = entry
    return found


def _walk(dir_fd: int, skip: str | None) -> Iterator[tuple[str, int, str, bool]]:
    """(relative name, parent descriptor, name, is a directory) of every entry, each directory before what it
    holds (and before it is opened: a consumer may give it back its permissions first)."""
    count = 0
    stack: list[tuple[str, int, int]] = [("", os.dup(dir_fd), 0)]
    try:
        while stack:
            prefix, fd, depth = stack.pop()
            try:
                with os.scandir(fd) as entries:
                    names = [(e.name, e.is_dir(follow_symlinks=False)) for e in entries]
                for name, is_dir in names:
                    if not prefix and name == skip:
                        continue
                    count += 1
                    if count > MAX_ENTRIES:
                        raise HostileTree(
                            errno.EFBIG, "more entries in the scratch tree than any server makes"
                        )
                    rel = prefix + name
                    yield rel, fd, name, is_dir
                    if is_dir and depth < MAX_DEPTH:
                        with contextlib.suppress(OSError):  # swapped for a link meanwhile: not entered
                            stack.append((rel + "/", os.open(name, _DIR, dir_fd=fd), depth + 1))
            finally:
                os.close(fd)
    finally:
        for _, fd, _ in stack:
            os.close(fd)


def release_tree(dir_fd: int, name: str) -> None:
    """Give every directory beneath (and at) ``name`` its owner's rwx back, so that a directory a server made
    read-only cannot keep the tree from being removed; through O_PATH descriptors, never through a link."""
    try:
        top = os.open(name, _PATH_FLAG | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError:
        return
    try:
        _chmod_dir(top)
        with contextlib.suppress(OSError):
            opened = os.open(f"/proc/self/fd/{top}", _DIR)
            try:
                for _rel, parent, child, is_dir in _walk(opened, None):
                    if not is_dir:
                        continue
                    with contextlib.suppress(OSError):
                        fd = os.open(
                            child, _PATH_FLAG | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent
                        )
                        try:
                            _chmod_dir(fd)
                        finally:
                            os.close(fd)
            finally:
                os.close(opened)
    finally:
        os.close(top)


def _chmod_dir(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.chmod(f"/proc/self/fd/{fd}", 0o700)  # the inode the descriptor holds, whatever its name is now
