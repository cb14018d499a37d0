"""The protected set: the files in a writable root that make programs run code.
One table, and where its names are in a set of roots.
"""

# The protected set: the files inside a writable root that make other programs run code, as ONE table,
# and where they are in a given set of roots (what a confined child's mount namespace binds read-only).
#
# A grant to write a project is otherwise a grant to run code: ``.git/config`` (a ``[filter]`` the next
# ``git add`` runs), ``.git/hooks/``, ``.mcp.json`` (servers a host starts), editor and agent settings, shell
# startup files. ``.git/objects``, refs and the index stay writable, so ``git add`` and ``git commit`` work.

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "MAX_FOLDERS",
    "PROTECTED",
    "Binds",
    "Protected",
    "find_protected",
    "git_folders",
    "protected_hit",
    "protected_names",
]


@dataclass(frozen=True)
class Protected:
    """A name beneath a writable root (or beneath a folder directly in it) that a confined child may read
    but not change, remove or rename; ``kind`` is "file", "folder" or "gitdir file" (``.git`` only when it is
    a file, a ``gitdir:`` redirect; a ``.git`` folder is pinned instead, see ``find_protected``)."""

    name: str
    kind: str
    why: str


#: The protected set, the one table (``doctor`` and docs/sandbox.md show it).
PROTECTED: tuple[Protected, ...] = (
    Protected(
        ".git/config", "file", "a [filter], [core] or [alias] entry runs a program on the next git command"
    ),
    Protected(".git/hooks", "folder", "hooks run on commit, checkout, merge and push"),
    Protected(".git/commondir", "file", "points git at another repository's config and hooks"),
    Protected(".git/config.worktree", "file", "per-worktree settings, read beside .git/config"),
    Protected(".git/worktrees", "folder", "linked worktrees' gitdir, commondir and config.worktree"),
    Protected(".git/modules", "folder", "submodules' repositories: their config and hooks"),
    Protected(".git/info", "folder", "attributes (which filter and diff drivers run) and excludes"),
    Protected(".git/objects/info/alternates", "file", "objects read from another repository"),
    Protected(
        ".git", "gitdir file", "a gitdir: redirect points git at a repository (and hooks) of the child's"
    ),
    Protected(".gitmodules", "file", "submodule URLs and update commands"),
    Protected(".gitconfig", "file", "git's settings where the root is a home folder"),
    Protected(".bashrc", "file", "run by every interactive bash"),
    Protected(".bash_profile", "file", "run by every login bash"),
    Protected(".profile", "file", "run by every login shell"),
    Protected(".zshrc", "file", "run by every interactive zsh"),
    Protected(".zprofile", "file", "run by every login zsh"),
    Protected(".envrc", "file", "direnv runs it on entering the folder"),
    Protected(".husky", "folder", "git hooks installed by husky"),
    Protected(".pre-commit-config.yaml", "file", "hooks that pre-commit installs and runs"),
    Protected(".mcp.json", "file", "MCP servers a host starts"),
    Protected(".vscode", "folder", "tasks, launch configurations and settings that run programs"),
    Protected(".idea", "folder", "run configurations and settings that run programs"),
    Protected(".claude", "folder", "agent settings, hooks and commands"),
)

#: How many folders directly beneath a root are looked into (a root that is a workspace of projects);
#: beyond them, and deeper down, protected names are not found and so not protected (docs/sandbox.md).
MAX_FOLDERS = 512

_BY_NAME = {entry.name: entry for entry in PROTECTED}


def protected_names(
    protect: bool | Iterable[str] = True, *, add: Iterable[str] = (), remove: Iterable[str] = ()
) -> tuple[str, ...]:
    """The names to protect: the table's (``protect=True``), none (``False``), or the given names; then
    ``add`` and ``remove`` (``mcp-roots run --protect/--unprotect``). A name is a relative path without
    ``..``; anything else is a ``ValueError`` naming it."""
    if protect is True:
        names = [entry.name for entry in PROTECTED]
    elif protect is False:
        names = []
    elif isinstance(protect, (str, bytes)):
        raise ValueError("protect= takes True, False or a list of names, not a single string")
    else:
        names = list(protect)
    names += [name for name in add if name not in names]
    dropped = set(remove)
    for name in (*names, *dropped):
        _check_name(name)
    return tuple(os.path.normpath(name) for name in names if name not in dropped)


def _check_name(name: str) -> None:
    normal = os.path.normpath(name) if isinstance(name, str) and name else ""
    if not normal or os.path.isabs(normal) or normal == "." or normal.split(os.sep)[0] == "..":
        raise ValueError(f"protected name {name!r}: a relative path inside a root (such as .git/config)")


@dataclass(frozen=True)
class Binds:
    """What a child's mount namespace binds: (path, read-only) pairs, outer paths first (a folder pinned
    onto itself, read-write, so that renaming it answers EBUSY, then the protected paths read-only), and
    the protected names found that cannot be held (symlinks), for the log."""

    mounts: tuple[tuple[str, bool], ...]
    not_held: tuple[str, ...] = ()


def find_protected(roots: Iterable[str], names: Iterable[str]) -> Binds:
    """Where ``names`` exist in ``roots`` (canonical folders; a root that is a file is skipped): at the top
    of each root and in the folders directly beneath it (the first ``MAX_FOLDERS``). Every folder between
    the root and a protected path is pinned too: ``mv .git .git2`` then answers EBUSY, where binding
    ``.git/config`` alone would be undone by renaming its folder. A name that does not exist is not bound
    (nothing is ever created in the user's tree), nor one that is a symlink (its target is not the name)."""
    wanted = tuple(names)
    mounts: dict[str, bool] = {}
    not_held: list[str] = []
    for root in roots:
        for base in _bases(os.fspath(root)):
            for name in wanted:
                path = os.path.join(base, name)
                try:
                    mode = os.lstat(path).st_mode
                except (FileNotFoundError, NotADirectoryError):
                    continue
                except OSError:
                    not_held.append(path)
                    continue
                if stat.S_ISLNK(mode):
                    not_held.append(path)
                    continue
                entry = _BY_NAME.get(name)
                if entry is not None and entry.kind == "gitdir file" and not stat.S_ISREG(mode):
                    continue
                _pin_between(os.fspath(root), path, mounts)
                mounts[path] = True
    ordered = sorted(mounts.items(), key=lambda item: (item[0].count(os.sep), item[0]))
    return Binds(tuple(ordered), tuple(not_held))


def git_folders(roots: Iterable[str]) -> list[str]:
    """The ``.git`` folders at the top of ``roots`` and in the folders directly beneath them (strict mode
    binds them read-only whole)."""
    found = []
    for root in roots:
        for base in _bases(os.fspath(root)):
            path = os.path.join(base, ".git")
            if os.path.isdir(path) and not os.path.islink(path):
                found.append(path)
    return found


def _bases(root: str) -> list[str]:
    if not os.path.isdir(root) or os.path.islink(root):
        return []
    bases = [root]
    try:
        with os.scandir(root) as entries:
            for entry in entries:
                if len(bases) > MAX_FOLDERS:
                    break
                if entry.is_dir(follow_symlinks=False):
                    bases.append(entry.path)
    except OSError:
        pass
    return bases


def _pin_between(root: str, path: str, mounts: dict[str, bool]) -> None:
    parent = os.path.dirname(path)
    while len(parent) > len(root) and parent.startswith(root.rstrip(os.sep) + os.sep):
        mounts.setdefault(parent, False)
        parent = os.path.dirname(parent)


def protected_hit(root: str, path: str, names: Iterable[str], *, holder: bool = False) -> str | None:
    """The protected name that ``path`` (canonical, beneath the canonical ``root``) is, or lies in, at the
    top of the root or in a folder directly in it; with ``holder`` (a removal or a rename of ``path``) also
    one that exists beneath it. None when it is none of them. (``RootSet.protecting()``: text and a few
    lstat calls, no mount.)"""
    rel = os.path.relpath(path, root)
    parts = [] if rel == "." else rel.split(os.sep)
    for name in names:
        wanted = name.split(os.sep)
        entry = _BY_NAME.get(name)
        for start in (0, 1):
            here = parts[start : start + len(wanted)]
            if len(parts) >= start + len(wanted) and here == wanted:
                if entry is not None and entry.kind == "gitdir file":
                    target = os.path.join(root, *parts[: start + len(wanted)])
                    if not (os.path.isfile(target) and not os.path.islink(target)):
                        continue
                return name
            tail = parts[start:]
            ancestor = len(parts) >= start and len(tail) < len(wanted) and wanted[: len(tail)] == tail
            if holder and ancestor and os.path.lexists(os.path.join(root, *parts[:start], *wanted)):
                return name
        if holder and len(parts) <= 1 and find_protected([path], [name]).mounts:
            return name
    return None
