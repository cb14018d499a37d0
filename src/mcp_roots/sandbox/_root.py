"""Only the grant exists for the child: a root of its own (a read-only tmpfs) holding each granted path's
mount tree at its own path (read-only unless granted write) and a /proc of its PID namespace. Planned in
the parent (``root_layout``), made in the child after the protected set's binds (``private_root``)."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .._sys import privileges

__all__ = ["RootLayout", "named_folders", "private_root", "root_layout"]

#: Where the new root is built (a tmpfs over it, in the child's mount namespace only): the first that is a
#: folder here. The granted paths are copied from the old root first, so one beneath it is no matter.
_BASES = ("/tmp", "/mnt", "/run", "/var/tmp")


@dataclass(frozen=True)
class RootLayout:
    """What ``private_root`` makes, resolved before the fork (the child only mounts and makes folders)."""

    base: str
    #: (canonical path, read-only, folder) of each mount tree copied, outer first.
    trees: tuple[tuple[str, bool, bool], ...]
    #: Folders made on the tmpfs before the trees are attached (parents first), and files to mount on.
    folders: tuple[str, ...]
    files: tuple[str, ...]
    #: (path, target) of the symlinks made again; paths that must still resolve to themselves.
    links: tuple[tuple[str, str], ...]
    exact: tuple[str, ...]


def root_layout(
    grants: Iterable[tuple[str, bool]], named: Iterable[str] = (), exact: Iterable[str] = ()
) -> RootLayout:
    """The root for ``grants`` (path, read-only) at their own paths (a symlink granted is made again,
    pointing where it did, its target granted in its stead). ``named`` folders (its command line's) exist
    too, empty and read-only, where no grant holds them. ``exact`` paths (canonical roots) are checked
    again in the child (``private_root``)."""
    exact = set(exact)
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
    kept_mode: dict[str, bool] = {}  # kept tree -> read-only
    for real, (read_only, folder) in sorted(trees.items(), key=lambda item: (item[0].count(os.sep), item[0])):
        if any(not kept_mode[other] or read_only for other in _holders(real, kept_mode)):
            continue
        kept.append((real, read_only, folder))
        kept_mode[real] = read_only
    # What the tmpfs holds: a folder for every top tree (and its parents), the named folders and the
    # symlinks' parents, outside every tree. A tree inside another is attached where that tree holds it.
    folders: dict[str, None] = {}
    files: list[str] = []

    def make(path: str) -> None:
        parent = os.path.dirname(path)
        if parent != path and parent not in folders and parent != os.sep:
            make(parent)
        folders.setdefault(path)

    outside = [(real, folder) for real, _, folder in kept if not _holders(real, kept_mode, itself=False)]
    for real, folder in outside:
        if folder:
            make(real)
        else:
            make(os.path.dirname(real))
            files.append(real)
    for path in named:
        if path not in folders and path not in files and not _holders(path, kept_mode):
            make(path)
    made_links: list[tuple[str, str]] = []
    link_names = {link: None for link, _ in links}
    for path, text in links:
        # Where the kernel will look for it: through its folder's own symlinks (``/bin/sh`` is in /usr/bin).
        parent = os.path.dirname(path)
        crosses = bool(_holders(parent, link_names))
        where = os.path.join(os.path.realpath(parent), os.path.basename(path)) if crosses else path
        if (
            crosses
            or where in folders
            or where in files
            or any(where == made for made, _ in made_links)
            or _holders(where, kept_mode)
        ):
            continue  # there already, or beneath a symlink made in its turn (``/bin/sh`` is /usr/bin's)
        make(parent)
        made_links.append((path, text))
    folders.setdefault("/proc")
    base = next(b for b in _BASES if os.path.isdir(b) and not os.path.islink(b))
    return RootLayout(
        base,
        tuple(kept),
        tuple(path for path in folders if path != os.sep),
        tuple(files),
        tuple(made_links),
        tuple(sorted(exact & {real for real, _, _ in kept})),
    )


def private_root(layout: RootLayout) -> None:
    """Make this mount namespace's root an empty read-only tmpfs holding ``layout``, then go back to the
    working folder where it is granted (else ``/``). Needs CAP_SYS_ADMIN in the namespace's user
    namespace: call it in the child, before the confinement. An ``exact`` path that no longer resolves to
    itself (a symlink swapped in since the layout) raises ``OSError`` (ELOOP): the spawn fails."""
    try:
        cwd: str | None = os.getcwd()
    except OSError:
        cwd = None
    for path in layout.exact:
        if os.path.realpath(path) != path:
            raise OSError(errno.ELOOP, f"{path!r} no longer resolves to itself (a symlink was swapped in)")
    clones = [
        (real, privileges.clone_tree(real), read_only, folder) for real, read_only, folder in layout.trees
    ]
    base = layout.base
    privileges.mount_tmpfs(base)
    for path in layout.folders:
        os.mkdir(base + path)
    for path in layout.files:
        os.close(os.open(base + path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600))
    for real, fd, read_only, folder in clones:
        target = base + real
        if not os.path.lexists(target):  # a tree inside another: where that tree holds it (made if not)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            if folder:
                os.makedirs(target, exist_ok=True)
            else:
                os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600))
        privileges.attach_tree(fd, target, read_only=read_only)
        os.close(fd)
    for path, text in layout.links:
        with contextlib.suppress(OSError):
            os.symlink(text, base + path)
    # Its own processes only (a PID namespace of its own): Landlock's rules check their paths through it.
    with contextlib.suppress(OSError):  # refused where the host's /proc is partly masked (a container)
        privileges.mount_proc(base + "/proc")
    privileges.enter_root(base)
    if cwd is not None:
        with contextlib.suppress(OSError):
            os.chdir(cwd)


def named_folders(argv: Any) -> list[str]:
    """The folders its command line names: they exist in its root (empty, read-only, unreadable to it) even
    where not granted, as under Landlock alone, where stat() sees them (a server that checks its arguments
    at start, such as the official filesystem server, starts before any root is granted)."""
    args = [argv] if isinstance(argv, (str, bytes, os.PathLike)) else list(argv)
    found = []
    for arg in args[1:64]:
        name = os.fsdecode(os.fspath(arg)) if isinstance(arg, (str, bytes, os.PathLike)) else ""
        if os.path.isabs(name) and os.path.isdir(name):
            found.append(os.path.realpath(name))
    return found


def _holders(path: str, folders: Mapping[str, object], *, itself: bool = True) -> list[str]:
    """The entries of ``folders`` that ``path`` is beneath (``itself``: or is), by its own ancestors: a
    lookup per level, not a comparison per entry."""
    found = [path] if itself and path in folders else []
    while True:
        parent = os.path.dirname(path)
        if parent == path:
            return found
        path = parent
        if path in folders:
            found.append(path)
