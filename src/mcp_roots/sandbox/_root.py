"""Only the grant exists for the child: a root of its own (a read-only tmpfs) holding each granted path's
mount tree at its own path (read-only unless granted write) and a /proc of its PID namespace. Made in the
child after the protected set's binds (the copies carry them), before Landlock and the filter."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterable

from .._sys import privileges

__all__ = ["private_root"]

#: Where the new root is built (a tmpfs over it, in the child's mount namespace only): the first that is a
#: folder here. The granted paths are copied from the old root first, so one beneath it is no matter.
_BASES = ("/tmp", "/mnt", "/run", "/var/tmp")


def private_root(
    grants: Iterable[tuple[str, bool]], named: Iterable[str] = (), exact: Iterable[str] = ()
) -> None:
    """Make this mount namespace's root an empty read-only tmpfs holding only ``grants`` at their own paths
    (a symlink granted is made again, pointing where it did, its target granted in its stead), then go back
    to the working folder where it is granted (else ``/``). Needs CAP_SYS_ADMIN in the namespace's user
    namespace: call it in the child, before the confinement. ``named`` folders (its command line's) exist
    too, empty and read-only, where no grant holds them. An ``exact`` path (a canonical root) that no longer
    resolves to itself (a symlink swapped in) raises ``OSError`` (ELOOP): the spawn fails."""
    exact = set(exact)
    try:
        cwd: str | None = os.getcwd()
    except OSError:
        cwd = None
    trees: dict[str, tuple[bool, bool]] = {}  # canonical path -> (read-only, folder)
    links: list[tuple[str, str]] = []
    for path, read_only in grants:
        path = os.path.abspath(path)
        try:
            if stat.S_ISLNK(os.lstat(path).st_mode):
                links.append((path, os.readlink(path)))
            real = os.path.realpath(path)
            folder = stat.S_ISDIR(os.stat(real).st_mode)
        except OSError:
            continue  # not here: nothing to grant
        if path in exact and real != path:
            raise OSError(errno.ELOOP, f"{path!r} no longer resolves to itself (a symlink was swapped in)")
        before = trees.get(real)
        trees[real] = ((before[0] if before else True) and read_only, folder)
    # A path beneath another granted at least as widely is there already (its tree was copied with it).
    kept: list[tuple[str, bool, bool]] = []
    for real, (read_only, folder) in sorted(trees.items(), key=lambda item: (item[0].count(os.sep), item[0])):
        if any(
            _beneath(real, other) and (not read_only_other or read_only) for other, read_only_other, _ in kept
        ):
            continue
        kept.append((real, read_only, folder))
    clones = [(real, privileges.clone_tree(real), read_only, folder) for real, read_only, folder in kept]
    base = next(b for b in _BASES if os.path.isdir(b) and not os.path.islink(b))
    privileges.mount_tmpfs(base)
    for real, fd, read_only, folder in clones:
        target = base + real
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if folder:
            os.makedirs(target, exist_ok=True)
        elif not os.path.lexists(target):
            os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600))
        privileges.attach_tree(fd, target, read_only=read_only)
        os.close(fd)
    for path in named:
        target = base + path
        if not os.path.lexists(target) and not any(_beneath(path, real) for real, _, _ in kept):
            with contextlib.suppress(OSError):
                os.makedirs(target)
    for path, text in links:
        target = base + path
        if not os.path.lexists(target):
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with contextlib.suppress(OSError):
                os.symlink(text, target)
    # Its own processes only (a PID namespace of its own): Landlock's rules check their paths through it.
    os.makedirs(base + "/proc", exist_ok=True)
    with contextlib.suppress(OSError):  # refused where the host's /proc is partly masked (a container)
        privileges.mount_proc(base + "/proc")
    privileges.enter_root(base)
    if cwd is not None:
        with contextlib.suppress(OSError):
            os.chdir(cwd)


def _beneath(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)
