"""The name walk: the canonical form of an absolute path, resolved name by name from '/' (lstat, readlink),
with the one '..' rule of the path layer: a '..' is applied only where the walk stands strictly beneath a
root (or at '/'); anywhere else the path is outside, whatever lies there.
"""

from __future__ import annotations

import os
import posixpath
import stat
from collections.abc import Callable

from .._sys import linux
from ._beneath import Unresolvable
from ._text import SYMLOOP_MAX

__all__ = ["LeavesRoots", "canonicalize"]


class LeavesRoots(Unresolvable):
    """Internal: a '..' was applied where the walk did not stand strictly beneath a root (it would step
    out of a root, or it stood outside every root). Decided before the name after it is looked at, so the
    answer is the same whether what lies there is missing, a directory, a file, a symlink or a FIFO."""


def canonicalize(path: str, may_climb: Callable[[str], bool] | None = None) -> str:
    """Return the canonical form of an absolute POSIX ``path``.

    Existing components are resolved physically (symlinks followed, at most SYMLOOP_MAX of them);
    from the first missing component on, the rest is applied lexically ('..' cancels a missing name, or
    climbs physically once the missing names are used up). Raises Unresolvable on a loop, a non-directory
    used as a directory, a procfs magic link, or any other lookup error.

    ``may_climb(position)`` (a RootSet's: "is ``position`` strictly beneath a root?") is asked before
    every '..' other than one at '/' -- from the path or from a symlink's target -- with the walk's
    position so far (canonical, plus the missing names); False raises :class:`LeavesRoots`.
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
        if name == ".." and may_climb is not None and (missing or resolved != "/"):
            position = _joined(resolved, missing)
            if not may_climb(position):
                raise LeavesRoots(f"'..' at {position!r}, which is not strictly beneath a root")
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
    if missing and not resolved_is_dir:
        raise Unresolvable(f"{resolved!r} is not a directory")
    return _joined(resolved, missing)


def _joined(resolved: str, missing: list[str]) -> str:
    if not missing:
        return resolved
    tail = "/".join(missing)
    return "/" + tail if resolved == "/" else resolved + "/" + tail
