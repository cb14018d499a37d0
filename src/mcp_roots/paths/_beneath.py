"""Open beneath a directory descriptor, and nothing else.
Nothing opened here can leave the directory it starts from.
"""

# Open beneath a directory descriptor, and nothing else: the resolution strategy (chosen once), openat2
# with its self-check, and the portable component walk. Nothing opened here can leave the directory it
# starts from; what leaves it raises :class:`Escape`.
#
# The strategy is chosen once at import: ``openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`` where Linux has
# it, else the walk; ``MCP_ROOTS_RESOLVE=openat2|walk|walk-no-opath`` forces one (``walk-no-opath`` is what
# macOS and the BSDs get). ``MCP_ROOTS_SELF_CHECK=1`` re-does every fast-path answer by the walk and compares.

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import stat
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from .._sys import linux
from .._sys.posix import (
    O_CLOEXEC,
    O_CREAT,
    O_DIRECTORY,
    O_NOFOLLOW,
    O_NONBLOCK,
    O_PATH_NATIVE,
    O_TMPFILE,
    SYMLINK_ERRNOS,
)
from ._text import SYMLOOP_MAX

__all__ = [
    "CREATING",
    "READ_FLAGS",
    "Escape",
    "Strategy",
    "Unresolvable",
    "forced",
    "lookup_without_symlinks",
    "open_beneath",
    "oserror",
    "quick_beneath",
    "quick_lookup",
    "quick_read",
    "regular",
    "self_checking",
    "strategy",
    "walk_open",
]

logger = logging.getLogger("mcp_roots")

#: openat2 answers EAGAIN when a rename or mount raced a '..' step; after this many in a row the walk
#: takes over for that call (it needs no retry: it never looks at a physical parent).
EAGAIN_RETRIES = 64

_FS_ENCODING, _FS_ERRORS = sys.getfilesystemencoding(), sys.getfilesystemencodeerrors()

#: The bits of the flags that make a mode count (O_TMPFILE includes O_DIRECTORY: it is tested exactly).
CREATING = O_CREAT | O_TMPFILE

ENV_RESOLVE = "MCP_ROOTS_RESOLVE"
ENV_SELF_CHECK = "MCP_ROOTS_SELF_CHECK"
STRATEGY_NAMES = ("openat2", "walk", "walk-no-opath")


# --- The strategy, chosen once ------------------------------------------------------------------------


@dataclass(frozen=True)
class Strategy:
    """How paths are resolved beneath a descriptor in this process.

    ``openat2`` is the system call (None: the walk only); ``o_path`` is O_PATH or 0 where the walk uses
    plain read-only descriptors (no O_PATH: macOS, the BSDs, ``walk-no-opath``)."""

    name: str
    openat2: linux.Openat2 | None
    o_path: int

    @property
    def dir_flags(self) -> int:
        """A directory used only as ``dir_fd``."""
        return (self.o_path or os.O_RDONLY) | O_DIRECTORY | O_CLOEXEC

    @property
    def probe_flags(self) -> int:
        """Anything opened only to be fstat'ed: O_PATH, or read-only and non-blocking (a FIFO)."""
        return self.o_path or (os.O_RDONLY | O_NONBLOCK)


def _strategy_named(name: str) -> Strategy:
    if name == "openat2" and linux.OPENAT2 is not None:
        return Strategy("openat2", linux.OPENAT2, O_PATH_NATIVE)
    if name == "walk-no-opath":
        return Strategy("walk-no-opath", None, 0)
    return Strategy("walk" if O_PATH_NATIVE else "walk-no-opath", None, O_PATH_NATIVE)


def _initial_strategy() -> Strategy:
    wanted = os.environ.get(ENV_RESOLVE, "")
    if wanted and wanted not in STRATEGY_NAMES:
        logger.warning(
            "%s=%r is not one of %s; choosing the resolution strategy as if it were unset",
            ENV_RESOLVE,
            wanted,
            ", ".join(STRATEGY_NAMES),
        )
        wanted = ""
    chosen = _strategy_named(wanted or "openat2")
    if wanted and chosen.name != wanted:
        logger.warning("%s=%s is not available here; using %s", ENV_RESOLVE, wanted, chosen.name)
    return chosen


_active: Strategy = _initial_strategy()
_self_check: bool = os.environ.get(ENV_SELF_CHECK, "") not in ("", "0")

#: ``linux.Openat2.no_symlinks`` while the strategy is openat2 and the self-check is off, else None: the
#: one read ``RootSet.contains``'s hot path makes to learn both (kept current by :func:`_use`).
quick_lookup: Callable[[str], int] | None = None
#: ``linux.Openat2.beneath`` under the same conditions: ``open_fd``'s one call for a path of more than one
#: name (its answer, a descriptor or -errno, is used only when it is a descriptor; see ``_open.fd_beneath``).
quick_beneath: Callable[[int, bytes, int, int], int] | None = None

#: The flags of the read hot path (``Router.read_fast``): read-only, and non-blocking until fstat has said
#: a regular file (a FIFO's open would block without it; see :func:`regular`).
READ_FLAGS = os.O_RDONLY | O_NONBLOCK | O_CLOEXEC

_fstat, _fcntl, _F_SETFL, _S_IFMT, _S_IFREG = os.fstat, fcntl.fcntl, fcntl.F_SETFL, 0o170000, stat.S_IFREG


def regular(fd: int, plain_dev: int, flags: int = os.O_RDONLY) -> os.stat_result | None:
    """The regular-file rule, once for every open that wants one: ``fd`` was opened O_NONBLOCK, so that a
    FIFO's open could not block; it is kept only if fstat says a regular file, and its O_NONBLOCK is
    then cleared (F_SETFL to ``flags``) unless the file is on ``plain_dev``, the root's plain filesystem,
    which ignores the flag (a read-only descriptor only). Its fstat, or None: the caller closes ``fd`` and
    words the refusal."""
    st = _fstat(fd)
    if st.st_mode & _S_IFMT != _S_IFREG:
        return None
    if st.st_dev != plain_dev:
        _fcntl(fd, _F_SETFL, flags)
    return st


#: ``linux.Openat2.raw_beneath(READ_FLAGS, 0)`` under the same conditions: the read hot path's one call for
#: a path of more than one name, made with no Python frame around it (``call(number, dirfd, path, how,
#: size)``: a descriptor, or -1 and the general path then opens again and words the failure).
quick_read: tuple[Callable[..., int], int, object, int] | None = None


def _use(chosen: Strategy, self_check: bool) -> None:
    global _active, _self_check, quick_lookup, quick_beneath, quick_read
    _active, _self_check = chosen, self_check
    quick = chosen.openat2 if chosen.openat2 is not None and not self_check else None
    quick_lookup = quick.no_symlinks if quick is not None else None
    quick_beneath = quick.beneath if quick is not None else None
    quick_read = quick.raw_beneath(READ_FLAGS, 0) if quick is not None else None


_use(_active, _self_check)


def strategy() -> Strategy:
    """The resolution strategy in force (see the comment atop this module)."""
    return _active


def _fall_back(why: str) -> None:
    """openat2 was refused by the kernel (ENOSYS) or a seccomp filter (EPERM): walk from now on."""
    if _active.openat2 is not None:
        _use(Strategy("walk", None, _active.o_path), _self_check)
        logger.warning("openat2 is unavailable (%s); using the O_NOFOLLOW component walk instead", why)


@contextlib.contextmanager
def forced(name: str, *, self_check: bool = False) -> Iterator[Strategy]:
    """Test hook: resolve with the strategy ``name`` (and ``self_check``) inside the block, as
    ``MCP_ROOTS_RESOLVE`` / ``MCP_ROOTS_SELF_CHECK`` would for a whole process. Not thread-safe; for tests
    only (descriptors opened under one strategy are not re-opened: use a fresh RootSet inside)."""
    if name not in STRATEGY_NAMES:
        raise ValueError(f"unknown strategy {name!r}; expected one of {', '.join(STRATEGY_NAMES)}")
    saved = _active, _self_check
    _use(_strategy_named(name), self_check)
    try:
        yield _active
    finally:
        _use(*saved)


def self_checking() -> bool:
    """Whether fast-path answers are re-done by the walk and compared (``MCP_ROOTS_SELF_CHECK``)."""
    return _self_check


# --- Outcomes the callers map to public errors ---------------------------------------------------------


class Escape(Exception):
    """Internal: resolving the path would leave the directory (``..`` past it, an absolute symlink, or a
    relative symlink that climbs out). The caller decides whether another root may take it."""


class Unresolvable(Exception):
    """Internal: the path cannot be resolved by name (loop, file used as directory, magic link, I/O
    error); ``why`` says which, for the log."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


def oserror(code: int, filename: str | None = None) -> OSError:
    return OSError(code, os.strerror(code), filename)


# --- Open beneath ----------------------------------------------------------------------------------------


def open_beneath(dirfd: int, rel: str, flags: int, mode: int = 0) -> int:
    """Open ``rel`` relative to ``dirfd`` without ever leaving it, and return the new descriptor.

    ``rel`` is a relative path ('' or '.' is the directory itself). Symlinks inside are followed (relative
    ones only), procfs magic links are refused (ELOOP). Raises :class:`Escape` when the path would leave
    ``dirfd``, OSError otherwise. ``O_CLOEXEC`` is always added.
    """
    flags |= O_CLOEXEC
    if mode and (not flags & CREATING or not (flags & O_CREAT or flags & O_TMPFILE == O_TMPFILE)):
        mode = 0  # openat2 refuses a mode without O_CREAT or O_TMPFILE (the common check first)
    if "/" not in rel and rel not in ("", ".", "..") and not (O_PATH_NATIVE and flags & O_PATH_NATIVE):
        # One plain name: an openat with O_NOFOLLOW cannot leave dirfd, and costs less than openat2
        # through ctypes. A symlink there (ELOOP; ENOTDIR or EMLINK on some systems) takes the full path.
        try:
            return os.open(rel, flags | O_NOFOLLOW, mode, dir_fd=dirfd)
        except OSError as exc:
            if exc.errno not in SYMLINK_ERRNOS or flags & O_NOFOLLOW:
                raise
    openat2 = _active.openat2
    if openat2 is not None:
        path = (rel.encode() if rel.isascii() else rel.encode(_FS_ENCODING, _FS_ERRORS)) if rel else b"."
        fd = openat2.beneath(dirfd, path, flags, mode)
        if fd >= 0 and not _self_check:
            return fd  # the common answer, checked no further
        fd = _openat2_outcome(openat2, dirfd, rel, path, flags, mode, fd)
        if fd >= 0:
            return fd
    return walk_open(dirfd, rel, flags, mode)


def _openat2_outcome(
    openat2: linux.Openat2, dirfd: int, rel: str, path: bytes, flags: int, mode: int, fd: int
) -> int:
    """What :func:`open_beneath` makes of openat2's first answer ``fd`` (a descriptor or -errno) when it
    is a failure or the self-check is on: retries, the refusals, the fallback to the walk (-1)."""
    retries = EAGAIN_RETRIES - 1 if fd < 0 else 0
    while fd < 0:
        code = -fd
        if code in (errno.EAGAIN, errno.EINTR):
            if not retries:
                return -1
            retries -= 1
            fd = openat2.beneath(dirfd, path, flags, mode)
            continue
        if code == errno.EXDEV:
            if _self_check:
                _check_escape(dirfd, rel, flags)
            raise Escape(rel)
        if code == errno.ENOSYS or (code == errno.EPERM and openat2.refused(dirfd)):
            _fall_back(os.strerror(code))
            return -1
        if code == errno.ENOTDIR and rel in ("", ".", "/"):
            return reopen_self(dirfd, flags, mode)
        if _self_check and code in (errno.ENOENT, errno.ENOTDIR):
            _check_refused(dirfd, rel, flags, code)
        raise oserror(code)
    if _self_check and not (O_TMPFILE and flags & O_TMPFILE == O_TMPFILE):
        _check_same(dirfd, rel, flags, fd)
    return fd


def _check_same(dirfd: int, rel: str, flags: int, fd: int) -> None:
    """Self-check (cap-std's racy_asserts): the walk must reach the inode openat2 returned."""
    probe = _active.probe_flags | (flags & (O_NOFOLLOW | O_DIRECTORY))
    try:
        other = walk_open(dirfd, rel, probe)
    except (OSError, Escape) as exc:
        os.close(fd)
        raise AssertionError(f"self-check: openat2 opened {rel!r} but the walk says {exc!r}") from None
    try:
        fast, slow = os.fstat(fd), os.fstat(other)
    finally:
        os.close(other)
    if (fast.st_dev, fast.st_ino) != (slow.st_dev, slow.st_ino):
        os.close(fd)
        raise AssertionError(f"self-check: openat2 and the walk opened different files for {rel!r}")


def _check_refused(dirfd: int, rel: str, flags: int, code: int) -> None:
    """Self-check: openat2 found no such file (ENOENT) or a file where a directory must be (ENOTDIR,
    a trailing '/' or a link's target ending in '/.'); the walk must open nothing either."""
    try:
        other = walk_open(dirfd, rel, _active.probe_flags | (flags & (O_NOFOLLOW | O_DIRECTORY)))
    except (OSError, Escape):
        return
    os.close(other)
    raise AssertionError(
        f"self-check: openat2 said {errno.errorcode[code]} for {rel!r} but the walk opened it"
    )


def _check_escape(dirfd: int, rel: str, flags: int) -> None:
    """Self-check: openat2 refused ``rel`` as an escape; the walk must refuse it too."""
    try:
        other = walk_open(dirfd, rel, _active.probe_flags | (flags & (O_NOFOLLOW | O_DIRECTORY)))
    except Escape:
        return
    except OSError:
        return  # the walk stops earlier (a missing name before the escaping link): no file was reached
    os.close(other)
    raise AssertionError(f"self-check: openat2 refused {rel!r} as an escape but the walk opened it")


def reopen_self(fd: int, flags: int, mode: int) -> int:
    """Open what ``fd`` (a descriptor of a root) refers to, with real access flags."""
    if stat.S_ISDIR(os.fstat(fd).st_mode):
        return os.open(".", flags, mode, dir_fd=fd)
    # A file root: re-open the very inode the descriptor holds; no name is looked up again.
    return os.open(linux.reopen_path(fd), flags & ~O_CREAT, mode)


def _magic(dirfd: int, name: str, target: str) -> bool:
    try:
        st_dev: int | None = os.lstat(name, dir_fd=dirfd).st_dev
    except OSError:
        st_dev = None
    return linux.is_magic_link(st_dev, target)


def _ending(path: str) -> tuple[bool, bool]:
    """How the kernel reads the end of ``path`` (a relative path or a symlink's target): whether it can
    only name a directory (it ends in '/', or its last name is '.' or '..'), and whether that is because
    of a trailing '/' after a name (where O_CREAT makes the open fail with EISDIR)."""
    last = path.rstrip("/").rsplit("/", 1)[-1]
    dots = last in (".", "..")
    slash = path.endswith("/") and not dots
    return slash or dots, slash


def walk_open(dirfd: int, rel: str, flags: int, mode: int = 0) -> int:
    """The portable twin of :func:`open_beneath` (Go's ``rootOpenDir`` walk): one component at a time with
    ``O_NOFOLLOW``, middle components opened ``O_DIRECTORY`` (never blocking on a FIFO), a stack of
    directory descriptors so ``..`` pops it and never opens a physical parent, and every symlink read with
    ``readlinkat`` and followed under the same ``..`` rule. Same contract."""
    flags |= O_CLOEXEC
    o_path = _active.o_path
    middle_flags = (o_path or (os.O_RDONLY | O_NONBLOCK)) | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC
    follow_last = not flags & O_NOFOLLOW
    trailing_slash, slash_after_name = _ending(rel)
    pending = [c for c in reversed(rel.split("/")) if c and c != "."]
    stack: list[int] = []  # descriptors we own; the current directory is stack[-1], else dirfd
    hops = 0
    try:
        while pending:
            cur = stack[-1] if stack else dirfd
            name = pending.pop()
            if name == "..":
                if not stack:
                    raise Escape(rel)
                os.close(stack.pop())
                continue
            if not pending and slash_after_name and flags & O_CREAT:
                raise oserror(errno.EISDIR)  # as the kernel: a name and a '/' are no file to create
            if not pending and not trailing_slash:
                failure: OSError | None = None
                try:
                    fd = os.open(name, flags | O_NOFOLLOW, mode, dir_fd=cur)
                except OSError as exc:
                    if exc.errno not in SYMLINK_ERRNOS:
                        raise
                    fd, failure = -1, exc
                # Only O_PATH opens a symlink itself: with O_NOFOLLOW that is the answer (as openat2's),
                # else the link is followed below.
                if fd >= 0 and not (
                    follow_last and flags & O_PATH_NATIVE and stat.S_ISLNK(os.fstat(fd).st_mode)
                ):
                    return fd
                if fd >= 0:
                    os.close(fd)
                try:
                    target = os.readlink(name, dir_fd=cur)
                except OSError:
                    raise (failure or oserror(errno.ENOTDIR)) from None
                if not follow_last:
                    raise oserror(errno.ELOOP)
                # A target that ends in '/', '/.' or '/..' names a directory, as the kernel reads it.
                trailing_slash, slash_after_name = _ending(target)
            else:
                try:
                    stack.append(os.open(name, middle_flags, dir_fd=cur))
                    continue
                except OSError as exc:
                    if exc.errno not in SYMLINK_ERRNOS:
                        raise
                    try:
                        target = os.readlink(name, dir_fd=cur)
                    except OSError:
                        raise exc from None  # not a symlink: a file or FIFO used as a directory
            hops += 1
            if hops > SYMLOOP_MAX or _magic(cur, name, target):
                raise oserror(errno.ELOOP)
            if target.startswith("/"):
                raise Escape(rel)
            pending.extend(c for c in reversed(target.split("/")) if c and c != ".")
        cur = stack[-1] if stack else dirfd
        try:
            return os.open(".", flags, mode, dir_fd=cur)
        except NotADirectoryError:  # pragma: no cover - dirfd is a file root
            return reopen_self(cur, flags, mode)
    finally:
        for fd in stack:
            os.close(fd)


def lookup_without_symlinks(path: str) -> int:
    """Look the absolute ``path`` up by name from ``/`` refusing every symlink on the way and return 0 when
    it exists, else the errno (ELOOP: a component is a symlink; ENOSYS: openat2 is not in use).

    Success means: every component exists, every non-final one is a directory, and none is a symlink;
    so ``path`` (absolute, without '.', '..' or empty components) is its own canonical form right now.
    """
    current = _active
    if current.openat2 is None:
        return errno.ENOSYS
    return current.openat2.no_symlinks(path)
