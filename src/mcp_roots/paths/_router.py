"""Route a path to a root: the root's descriptor and the path relative to it.
The general route, and the fast lanes for the common path, side by side.
"""

# Route a path to a root: (root descriptor, path relative to it), the innermost root first (Go's doInRoot),
# by the general route and by the fast lanes that shortcut it for the common path, side by side.
#
# One place decides which root takes a path, what '..' may do (climb within a root, never out of it and back),
# what happens when a symlink leads into another root (the canonical path picks the root again, beneath whose
# descriptor the rest is opened), and how a refusal reads: the same sentence for everything outside the
# roots, the precise reason to the log only.
#
# The general route (:meth:`Router.at`, :meth:`Router.in_parent`, :meth:`Router.canonical`) takes every path.
# The fast lanes (:meth:`Router.fast`, :meth:`Router.read_fast`, :meth:`Router.canonical_fast`) take only the
# common path -- :func:`common_path`, the one test they all make, and :meth:`Router.at` with them -- and
# answer None for anything else, or wherever the general route must word the answer; they hold the root
# descriptor through :class:`RootDescriptors`, as the general route does. ``MCP_ROOTS_SELF_CHECK`` re-does
# their answers by the name walk (:meth:`Router.canonical`; ``_beneath`` for the opens). See
# docs/design/paths.md, "The hot path, once".

from __future__ import annotations

import errno
import logging
import os
import stat
from collections.abc import Callable
from typing import TypeVar

from .._sys import linux
from .._sys.posix import O_NOFOLLOW
from ..errors import InvalidPath, NotRegularFile, PathOutsideRoots, RootsError
from . import _beneath
from ._beneath import (
    Escape,
    Unresolvable,
    lookup_without_symlinks,
    open_beneath,
    oserror,
    regular,
    self_checking,
    strategy,
)
from ._canonical import canonicalize
from ._descriptors import Descriptor, RootDescriptors
from ._index import RootIndex
from ._text import (
    NOT_A_NAME,
    PATH_MAX,
    PATH_TYPES,
    checked_text,
    climbs,
    describe,
    ending,
    is_plain,
    no_dot_components,
    split,
)

__all__ = ["Router", "common_path"]

_T = TypeVar("_T")

logger = logging.getLogger("mcp_roots")

_WINDOWS = os.name == "nt"

#: Router.read_fast's flags: a read that cannot block on a FIFO, for one name and for openat2.
_READ_ONE_NAME = _beneath.READ_FLAGS | O_NOFOLLOW


def common_path(path: object) -> str | None:
    """The common path, the one test of every fast lane: the text of ``path`` when it is an exact ``str``
    (or a pathlib path, whose ``str`` is its ``__fspath__``) that is absolute, ASCII, below PATH_MAX and
    free of NUL, with no '.', '..' or empty component (a trailing '/' allowed); else None.

    The first four clauses are what :func:`_text.checked_text` would make sure of (ASCII is its own
    encoding, one byte per character, in every filesystem encoding); the last makes the text its own
    lexical form, so the innermost root that prefixes it is the root that holds it unless a symlink leads
    out (the op then raises Escape and the general route lets the canonical path pick the root). A lane
    adds only what its answer needs: :meth:`Router.canonical_fast` no trailing '/' (a canonical path has
    none); the routing lanes a root as a prefix."""
    if type(path) is not str:
        if type(path) not in PATH_TYPES:
            return None
        path = str(path)
    if (
        path[:1] != "/"
        or len(path) >= PATH_MAX
        or not path.isascii()
        or "\x00" in path
        or "//" in path
        or ("/." in path and not no_dot_components(path))
    ):
        return None
    return path


def must_be_directory(dirfd: int, name: str, verb: str) -> None:
    """The kernel's rule for a name spelled with a trailing '/' that an operation ``verb`` acts on:
    it must be a directory. A symlink is not one (it is never followed here); a write makes a regular
    file, so it refuses every such name (open with O_CREAT says EISDIR) but a symlink, which it follows
    by name (the '/' kept), so that a link out of the roots is refused as outside."""
    if verb == "created":
        return  # mkdirat says EEXIST for anything there, and makes a missing name a directory
    try:
        mode = os.stat(name, dir_fd=dirfd, follow_symlinks=False).st_mode
    except FileNotFoundError:
        if verb == "written":
            raise oserror(errno.EISDIR) from None
        return  # the operation says ENOENT (a rename's target: its source must be a directory)
    if verb == "written" and not stat.S_ISLNK(mode):
        raise oserror(errno.EISDIR)
    if verb != "written" and not stat.S_ISDIR(mode):
        raise oserror(errno.ENOTDIR)


def _without_dotdot_at_top(parts: list[str]) -> list[str]:
    """'/..' is '/': drop the '..' components that would climb above the filesystem root."""
    if not parts or parts[0] != "..":
        return parts
    i = 0
    while i < len(parts) and parts[i] == "..":
        i += 1
    return parts[i:]


class Router:
    """Routes paths of one RootSet: ``at`` runs an operation beneath the right root's descriptor,
    ``in_parent`` beneath the final name's parent, ``canonical`` answers where a path really is; ``fast``,
    ``read_fast`` and ``canonical_fast`` are their lanes for the common path."""

    __slots__ = ("_cut", "_descriptors", "_first", "_keys", "_roots_text", "index", "write_check")

    def __init__(self, index: RootIndex, descriptors: RootDescriptors, roots_text: Callable[[], str]) -> None:
        self.index = index
        # For the lanes: the root paths, and their one length where every root path has the same (0: ask
        # innermost_prefix; -1: no lane, Windows).
        self._keys = frozenset(index.paths)
        lengths = index.lengths
        self._cut = -1 if _WINDOWS else lengths[0] if len(lengths) == 1 else 0
        self._descriptors = descriptors
        self._first = index.paths[0] if index.paths else None
        self._roots_text = roots_text
        #: ``check(fd, text)`` on the directory a name operation (all of which write) acts in, before it
        #: acts: a RootSet with read-only roots sets it (``_access.WriteRule.check_fd``).
        self.write_check: Callable[[int, str], None] | None = None

    # -- refusals --

    def outside(self, text: str, why: str = "its canonical location is under no root") -> PathOutsideRoots:
        """The refusal of a path that leads outside: one sentence whatever the reason (which could tell a
        client what exists outside, an outside symlink's target or a pid); the reason goes to the log."""
        logger.debug("refused %s: %s", describe(text), why)
        return PathOutsideRoots(
            f"Access denied: {describe(text)} is outside the allowed roots ({self._roots_text()})"
        )

    def absolute(self, path: object) -> str:
        """The checked text of ``path``, a relative path joined to the first root."""
        if _WINDOWS:  # pragma: no cover - see docs/design/paths.md
            raise NotImplementedError("the race-free RootSet operations are not available on Windows yet")
        text = checked_text(path)
        if not text.startswith("/"):
            if self._first is None:
                raise PathOutsideRoots(
                    f"Access denied: {describe(text)} is relative and there are no allowed roots"
                )
            text = os.path.join(self._first, text)
        return text

    def failure(self, text: str, exc: BaseException) -> BaseException:
        """What an operation on ``text`` raises for ``exc``: a file of the wrong kind is InvalidPath, a loop
        or a magic link the one outside sentence, an OSError names ``text``; the rest as it is."""
        if isinstance(exc, RootsError):
            return exc
        if isinstance(exc, NotRegularFile):
            return InvalidPath(f"{describe(text)} is {exc.kind}, not a regular file")
        if isinstance(exc, OSError):
            if exc.errno == errno.ELOOP:
                return self.outside(text, "a symlink loop or a procfs magic link")
            if exc.errno is not None and (exc.filename is None or not str(exc.filename).startswith("/")):
                return OSError(exc.errno, exc.strerror, text)
        return exc

    # -- the general route: every path --

    def at(self, text: str, op: Callable[[Descriptor, str], _T], parts: list[str] | None = None) -> _T:
        """Run ``op(root_descriptor, relative_path)`` for the absolute path ``text`` (or its components
        ``parts`` when given), naming ``text`` in errors. The op holds the root's Descriptor while it runs."""
        try:
            if parts is None and common_path(text) is not None:
                # The common path, kept cheap: the innermost root that prefixes the text is the one. (Its
                # descriptor is keyed by the root path, spelled in text exactly as on a platform that does
                # not fold names.)
                root_path = self.index.innermost_prefix(text)
                if root_path is not None:
                    rel = text[len(root_path) :].lstrip("/")
                    try:
                        return self._run(root_path, op, rel, len(text) > len(root_path))
                    except Escape:  # a symlink led out of it: the canonical path picks the root
                        pass
                return self._at_canonical(text, text, op)
            return self._at_parts(text, parts, op)
        except (RootsError, NotRegularFile, OSError) as exc:
            raise self.failure(text, exc) from None

    def _run(self, root_path: str, op: Callable[[Descriptor, str], _T], rel: str, slash: bool = False) -> _T:
        """``op(descriptor, rel)`` holding the root's descriptor; ``slash``: the path named the root with a
        trailing '/', which needs a directory ('FILE_ROOT/' is ENOTDIR)."""
        descriptor = self._descriptors.acquire(root_path)
        try:
            if slash and not rel and not descriptor.is_dir:
                raise oserror(errno.ENOTDIR)
            return op(descriptor, rel)
        finally:
            self._descriptors.release(descriptor)

    def _at_parts(self, text: str, parts: list[str] | None, op: Callable[[Descriptor, str], _T]) -> _T:
        parts = _without_dotdot_at_top(split(text) if parts is None else parts)
        # A trailing '/' or '/.' requires a directory, as it does for the kernel; keep it on the way down.
        slash = ending(text)
        for root_path, rest in self.index.lexical(parts):
            if climbs(rest):
                continue  # its '..' steps out of this root: an outer one may hold it, else the name walk
            try:
                return self._run(root_path, op, "/".join(rest) + slash if rest else "")
            except Escape:
                break
        return self._at_canonical(text, "/" + "/".join(parts), op)

    def _at_canonical(self, text: str, path: str, op: Callable[[Descriptor, str], _T]) -> _T:
        """No root is a lexical prefix of ``path`` (the components of ``text``), or a symlink led out of
        it: let the canonical path pick the root, and open beneath that one (a second escape is refused)."""
        try:
            canonical = canonicalize(path, self.index.strictly_beneath)
        except Unresolvable as exc:
            raise self.outside(text, f"it cannot be resolved safely ({exc.why})") from None
        landed = self.index.above(canonical)
        if landed is None:
            raise self.outside(text, f"its canonical location {canonical!r} is under no root")
        try:
            return self._run(landed, op, canonical[len(landed) :].lstrip("/"))
        except Escape:
            raise self.outside(text, "it changed while it was being opened and now leads outside") from None

    def in_parent(self, path: object, op: Callable[[int, str], _T], verb: str) -> _T:
        """Run ``op(parent_directory_descriptor, final_name)``: the parent is opened beneath a root, the
        final name is acted on as it is (a symlink there is never followed). A path that ends in '/'
        names a directory and one that ends in '/.' the directory itself, not a name in it; both are
        judged here as the kernel judges them (:data:`_text.NOT_A_NAME`), before ``op`` runs."""
        text = self.absolute(path)
        parts = _without_dotdot_at_top(split(text))
        if not parts or parts[-1] == "..":
            raise InvalidPath(f"path {describe(text)} does not end in a name that can be {verb}")
        name = parts[-1]
        if (
            ".." not in parts
            and not any(not climbs(rest) for _, rest in self.index.lexical(parts[:-1]))
            and self.index.exact("/" + "/".join(parts)) is not None
        ):
            raise InvalidPath(f"{describe(text)} is one of the allowed roots itself; it cannot be {verb}")
        dir_flags = strategy().dir_flags
        end = ending(text)
        if end == "/.":  # the directory itself: opened (it must exist, and be one), then refused
            refusal = NOT_A_NAME[verb]

            def in_itself(root: Descriptor, rel: str) -> _T:
                os.close(open_beneath(root.fd, rel, dir_flags))
                raise oserror(refusal)

            return self.at(text, in_itself, parts)

        check = self.write_check

        def in_parent(root: Descriptor, rel: str) -> _T:
            parent = open_beneath(root.fd, rel, dir_flags)
            try:
                if check is not None:
                    check(parent, text)
                if end:
                    must_be_directory(parent, name, verb)
                return op(parent, name)
            finally:
                os.close(parent)

        return self.at(text, in_parent, parts[:-1])

    # -- the fast lanes: the common path in one call --

    def fast(
        self, path: object, op: Callable[[Descriptor, str, int, int], _T], flags: int, mode: int
    ) -> _T | None:
        """Run ``op(root_descriptor, relative_path, flags, mode)`` for the common path (:func:`common_path`)
        in one call: a root (``relative_path`` '') or a path beneath one ('ROOT/' is left to the general
        route); the root's Descriptor is held while ``op`` runs. Failures raise as :meth:`at` words them.
        None for anything else, and when ``op`` raised :class:`Escape` (a symlink out of the root): the
        general route (:meth:`absolute`, :meth:`at`) then decides."""
        text = common_path(path)
        if text is None:
            return None
        cut = self._cut
        if cut > 1:  # the usual index: every root path of one length (innermost_prefix, inlined)
            size = len(text)
            if size > cut + 1:
                if text[cut] != "/":
                    return None
                rel = text[cut + 1 :]
            elif size == cut:
                rel = ""  # the root itself
            else:
                return None  # shorter, or 'ROOT/' (a file root's ENOTDIR is the general route's)
            root_path = text[:cut]
        elif cut < 0:
            return None  # Windows
        else:
            found = self.index.innermost_prefix(text)
            if found is None:
                return None
            root_path = found
            if len(text) == len(found):
                rel = ""
            else:
                rel = text[len(found) + 1 :] if len(found) > 1 else text[1:]
                if not rel:
                    return None  # 'ROOT/'
        descriptors = self._descriptors
        descriptor = descriptors.hold(root_path)
        if descriptor is None:
            if root_path not in self._keys:  # (a slice of the text above: not always a root)
                return None
            try:
                descriptor = descriptors.acquire(root_path)
            except (OSError, RootsError):
                return None  # the general route raises it, worded
        try:
            return op(descriptor, rel, flags, mode)
        except Escape:
            return None  # nothing was opened: the general route lets the canonical path pick the root
        except Exception as exc:
            raise self.failure(text, exc) from None
        finally:
            descriptors.release(descriptor)

    def read_fast(self, path: object) -> tuple[int, os.stat_result, str] | None:
        """The commonest call of all, a read-only open of a regular file, in one frame: the root by one
        slice (every root path of one length) or :meth:`RootIndex.innermost_prefix`, held if its
        descriptor is open (no I/O here: the general route opens it); a plain name is one
        ``openat(O_NOFOLLOW)``, more names one ``openat2``; then the regular-file rule
        (:func:`_beneath.regular`). Returns the descriptor with its fstat and the text of ``path``. None
        for anything else -- another shape, the root itself, a failure, a FIFO, a directory, a symlink in
        the final name --, having opened nothing that stays open: the general route then does it again
        and words the answer (a read-only open has no effect to repeat)."""
        text = common_path(path)
        if text is None:
            return None
        cut = self._cut
        if cut > 1:  # the usual index: every root path of one length
            if len(text) <= cut + 1 or text[cut] != "/":
                return None
            root_path, rel = text[:cut], text[cut + 1 :]
        else:
            found = self.index.innermost_prefix(text) if cut == 0 else None
            if found is None or len(text) <= len(found) + 1:
                return None  # Windows, no root, the root itself or 'ROOT/'
            root_path, rel = found, text[len(found) + 1 :] if len(found) > 1 else text[1:]
        quick = None
        if "/" in rel:  # more than one name: openat2's one call (None: not openat2, or the self-check is on)
            quick = _beneath.quick_read
            if quick is None:
                return None
        descriptors = self._descriptors
        descriptor = descriptors.hold(root_path)
        if descriptor is None:
            return None
        try:
            if quick is None:  # one name: openat O_NOFOLLOW
                try:
                    fd = os.open(rel, _READ_ONE_NAME, dir_fd=descriptor.fd)
                except OSError:
                    return None
            else:
                call, number, how, size = quick  # the system call itself: no frame of ours around it
                fd = call(number, descriptor.fd, rel.encode(), how, size)
                if fd < 0:
                    return None
            try:
                st = regular(fd, descriptor.plain_dev)
                if st is not None:
                    return fd, st, text
            except OSError:
                pass  # closed below; the general route words it
            except BaseException:
                os.close(fd)
                raise
            os.close(fd)
            return None
        finally:
            descriptors.release(descriptor)

    def canonical_fast(self, path: object) -> str | bool | None:
        """The canonical path of the common path in one system call, for contains() and resolve(): a
        :func:`common_path` with no trailing '/' that the kernel looks up from '/' meeting no symlink
        (openat2 RESOLVE_NO_SYMLINKS) is its own canonical path. That text when a root holds it, False when
        none does, None whenever the one call does not settle it (the general route then decides)."""
        text = common_path(path)
        if text is None or text[-1] == "/":
            return None
        lookup = _beneath.quick_lookup  # None: not openat2 (never on Windows), or the self-check is on
        if lookup is None or lookup(text) != 0:
            return None
        lengths = self.index.lengths
        if not lengths:
            return text if self.index.innermost_prefix(text) is not None else False
        keys, size = self._keys, len(text)
        for length in lengths:  # innermost_prefix, inlined: one probe per distinct root-path length
            if length < size:
                if (text[length] == "/" or length == 1) and text[:length] in keys:
                    return text
            elif length == size and text in keys:
                return text
        return False

    # -- where a path is --

    def canonical(self, text: str) -> str:
        """Canonical form of the absolute ``text``; PathOutsideRoots when it cannot be resolved."""
        fast = self._canonical_by_descriptor(text)
        if fast is not None:
            if self_checking():
                slow = self._canonical_by_name(text)
                if slow != fast:
                    raise AssertionError(f"self-check: {text!r} is {fast!r} by descriptor, {slow!r} by name")
            return fast
        return self._canonical_by_name(text)

    def _canonical_by_name(self, text: str) -> str:
        try:
            return canonicalize(text, self.index.strictly_beneath)
        except Unresolvable as exc:
            raise self.outside(text, f"it cannot be resolved safely ({exc.why})") from None

    def _canonical_by_descriptor(self, text: str) -> str | None:
        """The canonical path of an existing absolute ``text`` from the kernel, or None whenever that
        cannot answer (the caller then walks name by name).

        A path with no '.', '..' or empty component that the kernel looks up from '/' without meeting a
        single symlink (openat2 RESOLVE_NO_SYMLINKS) is its own canonical form: that is the answer, in one
        system call. Otherwise one openat2(O_PATH) beneath its root and the kernel's name for the
        descriptor. See docs/design/paths.md, "The hot path, once"."""
        current = strategy()
        if current.openat2 is None or not self.index:
            return None
        if is_plain(text):
            code = lookup_without_symlinks(text)
            if code == 0:
                return text
            if code != errno.ELOOP:  # missing (a tail to apply lexically), or an error to report
                return None
        root_path = self.index.innermost_prefix(text)
        if root_path is None:
            return None
        rest = text[len(root_path) :].lstrip("/")
        try:
            descriptor = self._descriptors.acquire(root_path)
        except (OSError, RootsError):
            return None
        try:
            if not rest and len(text) > len(root_path) and not descriptor.is_dir:
                return None  # 'FILE_ROOT/': a trailing '/' needs a directory (the name walk says so)
            fd = open_beneath(descriptor.fd, rest, current.o_path)
        except (OSError, Escape):
            return None
        finally:
            self._descriptors.release(descriptor)
        try:
            real = linux.fd_path(fd)
        finally:
            os.close(fd)
        # Only an answer that still lies under the root we opened beneath is trusted: a root that was moved
        # or replaced since its descriptor was opened goes back to the name-by-name walk.
        if real is not None and (real == root_path or real.startswith(root_path.rstrip("/") + "/")):
            return real
        return None

    def root_descriptor(self, root_path: str) -> Descriptor:
        """Acquire the descriptor of a root (give it back with :meth:`release`)."""
        return self._descriptors.acquire(root_path)

    def release(self, descriptor: Descriptor) -> None:
        self._descriptors.release(descriptor)
