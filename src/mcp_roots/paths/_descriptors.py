"""Root descriptors: each root opened once and shared by the operations.
Reference-counted under a lock.
"""

# As Go's ``os.Root``: an operation holds a reference while it runs, so closing (or evicting) a root never
# closes a descriptor another thread is still resolving beneath; the last holder closes it. No ``__del__``.

from __future__ import annotations

import os
import stat
import threading

from .._sys import linux
from .._sys.posix import O_CLOEXEC, O_DIRECTORY, O_NOFOLLOW, O_NONBLOCK, SYMLINK_ERRNOS
from ..errors import PathOutsideRoots
from ._beneath import strategy
from ._text import file_kind
from ._tree import descend

__all__ = ["MAX_OPEN_ROOTS", "Descriptor", "RootDescriptors", "open_root"]

#: At most this many root descriptors stay open per RootSet (the least recently opened is dropped first):
#: a set of 10,000 roots must not exhaust RLIMIT_NOFILE.
MAX_OPEN_ROOTS = 64


class Descriptor:
    """An open root: ``fd``, whether it ``is_dir``, and ``plain_dev``, the root's st_dev when its filesystem
    is one of ``linux.PLAIN_FILESYSTEMS`` (else -1). While the descriptor is open it pins that filesystem,
    so its device number cannot be handed to another mount: a file with the same st_dev is on the same
    (plain) filesystem. ``holders``, ``retired`` and ``closed`` belong to the RootDescriptors that made it."""

    __slots__ = ("closed", "fd", "holders", "is_dir", "plain_dev", "retired")

    def __init__(self, fd: int, is_dir: bool, plain_dev: int = -1) -> None:
        self.fd = fd
        self.is_dir = is_dir
        self.plain_dev = plain_dev
        # One entry per operation holding the descriptor. list.append and list.pop are atomic, so the
        # common acquire and release take no lock; retiring and closing do (see RootDescriptors).
        self.holders: list[None] = []
        self.retired = False
        self.closed = False


def open_root(path: str) -> Descriptor:
    """Open the canonical root ``path`` one component at a time from ``/`` with ``O_NOFOLLOW`` (the path
    layer's one descent, :func:`_tree.descend`; the last component may be a file; nothing can block): a
    root whose path now contains a symlink was replaced since it was canonicalized, and is refused."""
    base = strategy().o_path or (os.O_RDONLY | O_NONBLOCK)
    names = [c for c in path.split("/") if c]
    top = os.open("/", base | O_DIRECTORY | O_CLOEXEC)
    try:
        parent = descend(top, names[:-1], base) if names else top
    except OSError as exc:
        os.close(top)
        if exc.errno in SYMLINK_ERRNOS and _has_symlink(names):
            raise _replaced(path) from None
        raise
    if parent != top:
        os.close(top)
    try:
        if names:
            try:
                fd = os.open(names[-1], base | O_NOFOLLOW | O_CLOEXEC, dir_fd=parent)
            except OSError as exc:
                if exc.errno in SYMLINK_ERRNOS and _has_symlink(names):
                    raise _replaced(path) from None
                raise
        else:
            fd = os.dup(parent)
    finally:
        os.close(parent)
    try:
        st = os.fstat(fd)
        mode = st.st_mode
        if stat.S_ISLNK(mode):  # O_PATH | O_NOFOLLOW opens the link itself
            raise _replaced(path)
        if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
            raise PathOutsideRoots(f"Access denied: the root {path!r} is now {file_kind(mode)}")
        plain_dev = st.st_dev if linux.filesystem_type(fd) in linux.PLAIN_FILESYSTEMS else -1
        return Descriptor(fd, stat.S_ISDIR(mode), plain_dev)
    except BaseException:
        os.close(fd)
        raise


def _has_symlink(names: list[str]) -> bool:
    """Whether a component of ``/names...`` is now a symlink (only to word the refusal)."""
    path = ""
    for name in names:
        path += "/" + name
        try:
            if stat.S_ISLNK(os.lstat(path).st_mode):
                return True
        except OSError:
            return False
    return False


def _replaced(path: str) -> PathOutsideRoots:
    return PathOutsideRoots(f"Access denied: the root {path!r} was replaced (a component is now a symlink)")


class RootDescriptors:
    """The lazily opened descriptors of one RootSet's roots, keyed by canonical root path: the one place
    that counts who holds a root descriptor.

    ``acquire(path)`` returns the root's Descriptor with one more holder (``hold(path)`` only if it is open
    already); ``release(descriptor)`` gives it back. ``close()`` retires them all: each is closed now, or
    by the last operation still holding it.

    The common path takes no lock: acquire appends a holder, then checks the descriptor was not retired
    meanwhile (if it was, it lets go and takes the locked path); retiring marks first, then closes only
    with no holder. Either the retirer sees the new holder, or the acquirer sees the mark. The router's
    fast lanes call hold (or acquire) and release too: this class is the one place that counts."""

    __slots__ = ("_lock", "_opened")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._opened: dict[str, Descriptor] = {}  # insertion order = the eviction order

    def hold(self, path: str) -> Descriptor | None:
        """The descriptor of ``path`` with one more holder if it is open now, else None: no lock, no I/O
        (so any ``path`` may be asked, a root or not). Give it back with :meth:`release`."""
        found = self._opened.get(path)
        if found is not None:
            found.holders.append(None)
            if not found.retired:
                return found
            self.release(found)
        return None

    def acquire(self, path: str) -> Descriptor:
        """The descriptor of the root ``path`` with one more holder, opened now if it is not open (I/O:
        ``path`` must be a root). Give it back with :meth:`release`."""
        found = self.hold(path)  # the lock-free protocol, written once
        if found is not None:
            return found
        fresh = open_root(path)  # I/O outside the lock
        with self._lock:
            found = self._opened.get(path)
            if found is not None:  # another thread opened it meanwhile: use theirs
                found.holders.append(None)
                os.close(fresh.fd)
                return found
            while len(self._opened) >= MAX_OPEN_ROOTS:
                self._retire(self._opened.pop(next(iter(self._opened))))
            fresh.holders.append(None)
            self._opened[path] = fresh
            return fresh

    def release(self, descriptor: Descriptor) -> None:
        descriptor.holders.pop()
        if descriptor.retired and not descriptor.holders:  # the last holder of a retired one closes it
            with self._lock:
                self._close(descriptor)

    def _retire(self, descriptor: Descriptor) -> None:
        descriptor.retired = True
        if not descriptor.holders:
            self._close(descriptor)

    @staticmethod
    def _close(descriptor: Descriptor) -> None:
        # Under the lock: two last holders may both get here; only one closes.
        if not descriptor.closed and not descriptor.holders:
            descriptor.closed = True
            os.close(descriptor.fd)

    def __len__(self) -> int:
        return len(self._opened)

    def close(self) -> None:
        with self._lock:
            retiring = list(self._opened.values())
            self._opened.clear()
            for descriptor in retiring:
                self._retire(descriptor)
