"""Portable fd-relative algorithms: open beneath a directory descriptor, the component walk, the name walk
(canonicalize), atomic write, iterative remove. Nothing opened here can leave the directory it starts from.

The strategy is chosen once at import: ``openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`` where Linux has
it, else the walk; ``MCP_ROOTS_RESOLVE=openat2|walk|walk-no-opath`` forces one (``walk-no-opath`` is what
macOS and the BSDs get). ``MCP_ROOTS_SELF_CHECK=1`` re-does every fast-path answer by the walk and compares.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import posixpath
import secrets
import stat
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ._pathtext import SYMLOOP_MAX, cut_to_bytes, file_kind
from ._sys import linux
from ._sys.posix import O_CLOEXEC as O_CLOEXEC  # re-exported: broker/_host.py lists directories with it
from ._sys.posix import O_CREAT, O_DIRECTORY, O_NONBLOCK, O_PATH_NATIVE, O_TMPFILE, SYMLINK_ERRNOS
from ._sys.posix import O_NOFOLLOW as O_NOFOLLOW  # re-exported, as O_CLOEXEC

__all__ = ["Entry"]

logger = logging.getLogger("mcp_roots")

#: A directory we read entries from (never O_PATH: getdents needs a readable descriptor).
LIST_FLAGS = os.O_RDONLY | O_DIRECTORY | O_CLOEXEC
#: openat2 answers EAGAIN when a rename or mount raced a '..' step; after this many in a row the walk
#: takes over for that call (it needs no retry: it never looks at a physical parent).
EAGAIN_RETRIES = 64

_FS_ENCODING, _FS_ERRORS = sys.getfilesystemencoding(), sys.getfilesystemencodeerrors()

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


def strategy() -> Strategy:
    """The resolution strategy in force (see the module docstring)."""
    return _active


def _fall_back(why: str) -> None:
    """openat2 was refused by the kernel (ENOSYS) or a seccomp filter (EPERM): walk from now on."""
    global _active
    if _active.openat2 is not None:
        _active = Strategy("walk", None, _active.o_path)
        logger.warning("openat2 is unavailable (%s); using the O_NOFOLLOW component walk instead", why)


@contextlib.contextmanager
def forced(name: str, *, self_check: bool = False) -> Iterator[Strategy]:
    """Test hook: resolve with the strategy ``name`` (and ``self_check``) inside the block, as
    ``MCP_ROOTS_RESOLVE`` / ``MCP_ROOTS_SELF_CHECK`` would for a whole process. Not thread-safe; for tests
    only (descriptors opened under one strategy are not re-opened: use a fresh RootSet inside)."""
    global _active, _self_check
    if name not in STRATEGY_NAMES:
        raise ValueError(f"unknown strategy {name!r}; expected one of {', '.join(STRATEGY_NAMES)}")
    saved = _active, _self_check
    _active, _self_check = _strategy_named(name), self_check
    try:
        yield _active
    finally:
        _active, _self_check = saved


def self_checking() -> bool:
    """Whether fast-path answers are re-done by the walk and compared (``MCP_ROOTS_SELF_CHECK``)."""
    return _self_check


# --- Outcomes the callers map to public errors ---------------------------------------------------------


class Escape(Exception):
    """Internal: resolving the path would leave the directory (``..`` past it, an absolute symlink, or a
    relative symlink that climbs out). The caller decides whether another root may take it."""


class NotRegularFile(Exception):
    """Internal: the path names a FIFO, device or socket, which a read or write must not touch."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.kind = kind


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
    if mode and not (flags & O_CREAT or (O_TMPFILE and flags & O_TMPFILE == O_TMPFILE)):
        mode = 0
    if "/" not in rel and rel not in ("", ".", "..") and not (O_PATH_NATIVE and flags & O_PATH_NATIVE):
        # One plain name: an openat with O_NOFOLLOW cannot leave dirfd, and costs less than openat2
        # through ctypes. A symlink there (ELOOP; ENOTDIR or EMLINK on some systems) takes the full path.
        try:
            return os.open(rel, flags | O_NOFOLLOW, mode, dir_fd=dirfd)
        except OSError as exc:
            if exc.errno not in SYMLINK_ERRNOS or flags & O_NOFOLLOW:
                raise
    current = _active
    if current.openat2 is not None:
        path = rel.encode(_FS_ENCODING, _FS_ERRORS) if rel else b"."
        fd = current.openat2.beneath(dirfd, path, flags, mode)
        retries = EAGAIN_RETRIES - 1
        while fd < 0:
            code = -fd
            if code in (errno.EAGAIN, errno.EINTR):
                if not retries:
                    break
                retries -= 1
                fd = current.openat2.beneath(dirfd, path, flags, mode)
                continue
            if code == errno.EXDEV:
                if _self_check:
                    _check_escape(dirfd, rel, flags)
                raise Escape(rel)
            if code == errno.ENOSYS or (code == errno.EPERM and current.openat2.refused(dirfd)):
                _fall_back(os.strerror(code))
                break
            if code == errno.ENOTDIR and rel in ("", ".", "/"):
                return reopen_self(dirfd, flags, mode)
            raise oserror(code)
        else:
            if _self_check and not (O_TMPFILE and flags & O_TMPFILE == O_TMPFILE):
                _check_same(dirfd, rel, flags, fd)
            return fd
    return walk_open(dirfd, rel, flags, mode)


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


def walk_open(dirfd: int, rel: str, flags: int, mode: int = 0) -> int:
    """The portable twin of :func:`open_beneath` (Go's ``rootOpenDir`` walk): one component at a time with
    ``O_NOFOLLOW``, middle components opened ``O_DIRECTORY`` (never blocking on a FIFO), a stack of
    directory descriptors so ``..`` pops it and never opens a physical parent, and every symlink read with
    ``readlinkat`` and followed under the same ``..`` rule. Same contract."""
    flags |= O_CLOEXEC
    o_path = _active.o_path
    middle_flags = (o_path or (os.O_RDONLY | O_NONBLOCK)) | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC
    follow_last = not flags & O_NOFOLLOW
    trailing_slash = rel.endswith("/")
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
            if not pending and not trailing_slash:
                failure: OSError | None = None
                try:
                    fd = os.open(name, flags | O_NOFOLLOW, mode, dir_fd=cur)
                except OSError as exc:
                    if exc.errno not in SYMLINK_ERRNOS:
                        raise
                    fd, failure = -1, exc
                if fd >= 0 and not (o_path and flags & o_path and stat.S_ISLNK(os.fstat(fd).st_mode)):
                    return fd
                if fd >= 0:
                    os.close(fd)
                try:
                    target = os.readlink(name, dir_fd=cur)
                except OSError:
                    raise (failure or oserror(errno.ENOTDIR)) from None
                if not follow_last:
                    raise oserror(errno.ELOOP)
                trailing_slash = target.endswith("/")
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
            if not pending:  # a link to '.'
                trailing_slash = True
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


# --- The name walk ---------------------------------------------------------------------------------------


def canonicalize(path: str) -> str:
    """Return the canonical form of an absolute POSIX ``path``.

    Existing components are resolved physically (symlinks followed, at most SYMLOOP_MAX of them);
    from the first missing component on, the rest is applied lexically ('..' cancels a missing name, or
    climbs physically once the missing names are used up). Raises Unresolvable on a loop, a non-directory
    used as a directory, a procfs magic link, or any other lookup error.
    """
    # Empty components (doubled or trailing '/') and '.' are kept as '.': they require a directory, as
    # in the kernel ('file.txt/' and 'file.txt/.' are ENOTDIR, not 'file.txt').
    pending = [c or "." for c in reversed(path.split("/"))]
    resolved = "/"
    resolved_is_dir = True
    missing: list[str] = []
    hops = 0
    while pending:
        name = pending.pop()
        if name == ".":
            if not resolved_is_dir and not missing:
                raise Unresolvable(f"{resolved!r} is not a directory")
            continue
        if missing:
            if name == "..":
                missing.pop()
            else:
                missing.append(name)
            continue
        if not resolved_is_dir:
            raise Unresolvable(f"{resolved!r} is not a directory")
        if name == "..":
            resolved = posixpath.dirname(resolved)
            continue
        candidate = resolved + name if resolved == "/" else resolved + "/" + name
        try:
            st = os.lstat(candidate)
        except FileNotFoundError:
            missing.append(name)
            continue
        except OSError as exc:
            raise Unresolvable(f"cannot look up {candidate!r}: {exc.strerror or exc}") from None
        if stat.S_ISLNK(st.st_mode):
            hops += 1
            if hops > SYMLOOP_MAX:
                raise Unresolvable(f"too many levels of symbolic links at {candidate!r}")
            try:
                target = os.readlink(candidate)
            except OSError as exc:  # pragma: no cover - raced away
                raise Unresolvable(f"cannot read link {candidate!r}: {exc.strerror or exc}") from None
            if linux.is_magic_link(st.st_dev, target):
                raise Unresolvable(f"{candidate!r} is a procfs magic link")
            pending.extend(c or "." for c in reversed(target.split("/")))
            if target.startswith("/"):
                resolved = "/"
            resolved_is_dir = True
            continue
        resolved = candidate
        resolved_is_dir = stat.S_ISDIR(st.st_mode)
    if missing:
        if not resolved_is_dir:
            raise Unresolvable(f"{resolved!r} is not a directory")
        tail = "/".join(missing)
        return "/" + tail if resolved == "/" else resolved + "/" + tail
    return resolved


# --- Operations on an open directory ---------------------------------------------------------------


def open_regular(
    dirfd: int, rel: str, flags: int, mode: int = 0o666, *, allow_dir: bool = False, plain_dev: int = -1
) -> tuple[int, os.stat_result]:
    """Open a regular file beneath ``dirfd`` and return it with its fstat. FIFOs, devices and sockets raise
    NotRegularFile without blocking (the open is O_NONBLOCK; the flag is cleared again for a regular
    file). A directory raises IsADirectoryError unless ``allow_dir`` and the access is read-only.

    ``plain_dev`` (a root descriptor's, for a descriptor that is only read from) lets O_NONBLOCK stay set
    on a regular file of that device: a plain filesystem ignores it, and clearing it costs a system call."""
    try:
        fd = open_beneath(dirfd, rel, flags | O_NONBLOCK, mode)
    except OSError as exc:
        if exc.errno != errno.ENXIO:  # a socket, or a FIFO opened for writing with no reader
            raise
        try:
            probe = open_beneath(dirfd, rel, _active.probe_flags)
        except OSError as again:
            if again.errno != errno.ENXIO:
                raise
            # Without O_PATH a socket cannot be opened at all, not even to be fstat'ed (ENXIO).
            raise NotRegularFile("a socket") from None
        try:
            raise NotRegularFile(file_kind(os.fstat(probe).st_mode)) from None
        finally:
            os.close(probe)
    try:
        st = os.fstat(fd)
        kind = st.st_mode
        if not stat.S_ISREG(kind):
            if stat.S_ISDIR(kind):
                if not allow_dir or flags & (os.O_WRONLY | os.O_RDWR):
                    raise oserror(errno.EISDIR)
                return fd, st
            raise NotRegularFile(file_kind(kind))
        if not flags & O_NONBLOCK and st.st_dev != plain_dev:
            fcntl.fcntl(fd, fcntl.F_SETFL, flags)  # one F_SETFL: creation and access bits are ignored by it
        return fd, st
    except BaseException:
        os.close(fd)
        raise


def read_fd(fd: int, max_bytes: int | None, size: int) -> bytes:
    """Read a whole file whose fstat says ``size`` bytes (it may have grown), at most ``max_bytes`` (None:
    no limit); raises OverflowError past the limit."""
    chunks: list[bytes] = []
    total = 0
    want = max(size + 1, 8192) if max_bytes is None else min(max(size + 1, 8192), max_bytes + 1)
    while True:
        chunk = os.read(fd, want)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        total += len(chunk)
        if max_bytes is not None and total > max_bytes:
            raise OverflowError(total)
        want = 65536 if max_bytes is None else min(65536, max_bytes + 1 - total)


def _check_name(name: str) -> None:
    if not name or name in (".", "..") or "/" in name:
        raise oserror(errno.EINVAL)


#: Bytes of the final name kept in a temporary name: '.' + 200 + '.' + 12 hex + '.tmp' = 218 <= NAME_MAX.
TEMP_NAME_BYTES = 200


def write_atomic(dirfd: int, name: str, data: bytes) -> None:
    """Replace ``name`` in the directory ``dirfd`` atomically: a temporary file in the same directory,
    written, fsynced, then renamed over ``name``. The temporary file never survives a failure."""
    _check_name(name)
    try:
        old_mode: int | None = stat.S_IMODE(os.stat(name, dir_fd=dirfd, follow_symlinks=False).st_mode)
    except FileNotFoundError:
        old_mode = None
    tmp = f".{cut_to_bytes(name, TEMP_NAME_BYTES)}.{secrets.token_hex(6)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | O_CREAT | os.O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o666, dir_fd=dirfd)
    try:
        try:
            if old_mode is not None:
                os.fchmod(fd, old_mode)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(tmp, name, src_dir_fd=dirfd, dst_dir_fd=dirfd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dirfd)
        raise
    try:  # make the rename itself durable; a directory opened O_PATH cannot be fsynced
        dfd = os.open(".", os.O_RDONLY | O_DIRECTORY | O_CLOEXEC, dir_fd=dirfd)
    except OSError:  # pragma: no cover - no read permission on the directory
        return
    try:
        os.fsync(dfd)
    except OSError:  # pragma: no cover - some filesystems refuse directory fsync
        pass
    finally:
        os.close(dfd)


def remove_at(dirfd: int, name: str, recursive: bool) -> None:
    """Remove ``name`` (a file, a symlink itself, or a directory) from ``dirfd``. A recursive remove opens
    every directory with O_NOFOLLOW relative to its parent's descriptor, so no symlink is ever followed."""
    _check_name(name)
    st = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(name, dir_fd=dirfd)
        return
    if recursive:
        _empty_tree(dirfd, name)
    os.rmdir(name, dir_fd=dirfd)


def _empty_tree(dirfd: int, name: str) -> None:
    """Empty the directory ``name`` of ``dirfd`` depth first, without recursion and holding two
    descriptors at most whatever the depth: going back up opens '..' and checks it is the very directory
    we came down from (same device and inode), so a directory moved meanwhile stops the removal."""
    fd = os.open(name, LIST_FLAGS | O_NOFOLLOW, dir_fd=dirfd)
    st = os.fstat(fd)
    trail: list[tuple[str, tuple[int, int]]] = [(name, (st.st_dev, st.st_ino))]
    try:
        while True:
            child = _unlink_files_until_a_directory(fd)
            if child is not None:
                nfd = os.open(child, LIST_FLAGS | O_NOFOLLOW, dir_fd=fd)
                os.close(fd)
                fd = nfd
                st = os.fstat(fd)
                trail.append((child, (st.st_dev, st.st_ino)))
                continue
            if len(trail) == 1:
                return
            emptied, _ = trail.pop()
            parent = os.open("..", LIST_FLAGS | O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = parent
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) != trail[-1][1]:
                raise OSError(errno.ESTALE, "a directory was moved while its tree was being removed", emptied)
            os.rmdir(emptied, dir_fd=fd)
    finally:
        os.close(fd)


def _unlink_files_until_a_directory(fd: int) -> str | None:
    """Unlink the non-directories of the directory ``fd`` until one entry is a directory; return its name
    (None when only directories already removed, or nothing, remain)."""
    with os.scandir(fd) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                return entry.name
            with contextlib.suppress(FileNotFoundError):
                os.unlink(entry.name, dir_fd=fd)
    return None


def mkdir_at(dirfd: int, name: str, mode: int = 0o777) -> None:
    _check_name(name)
    os.mkdir(name, mode, dir_fd=dirfd)


@dataclass(frozen=True)
class Entry:
    """One directory entry, as :meth:`RootSet.scandir` lists it.

    ``path`` is the entry's canonical location (its directory's canonical path plus ``name``; a symlink is
    not followed for it). ``is_dir``/``is_file`` follow a symlink only when its target lies inside the
    roots; ``is_symlink`` says whether the entry itself is one. ``size`` is the size in bytes of what
    ``is_dir``/``is_file`` describe (the link itself when its target is outside or missing).
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
