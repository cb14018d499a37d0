"""RootSet.walk / _tree.walk, the path layer's one descriptor walk down a tree: order, symlinks never
followed, two descriptors whatever the depth, a moved directory stops it, errors skip or stop, and the
recursive remove built on it."""

from __future__ import annotations

import errno
import gc
import os
from pathlib import Path

import pytest

from mcp_roots import PathOutsideRoots, RootSet, TreeEntry
from mcp_roots.paths._tree import descend, walk


def _tree(base: Path) -> None:
    for d in ("a/b", "c", "out"):
        (base / d).mkdir(parents=True)
    (base / "a" / "f").write_bytes(b"")
    (base / "a" / "b" / "g").write_bytes(b"")
    (base / "z").write_bytes(b"")
    (base / "out" / "secret").write_bytes(b"")
    os.symlink("../out", base / "c" / "link")


def test_walk_is_depth_first_in_name_order_and_never_follows_a_symlink(tmp_path: Path) -> None:
    _tree(tmp_path)
    seen: list[tuple[str, int, bool, bool]] = []
    left: list[str] = []

    def visit(dir_fd: int, entry: TreeEntry) -> bool:
        seen.append((entry.rel, entry.depth, entry.is_dir, entry.is_symlink))
        return entry.name != "out"

    with RootSet.from_paths([tmp_path]) as roots:
        roots.walk(tmp_path, visit, leave=lambda fd, e: left.append(e.rel))
    assert seen == [
        ("a", 0, True, False),
        ("a/b", 1, True, False),
        ("a/b/g", 2, False, False),
        ("a/f", 1, False, False),
        ("c", 0, True, False),
        ("c/link", 1, False, True),  # listed, not entered: the walk never reaches out/secret through it
        ("out", 0, True, False),
        ("z", 0, False, False),
    ]
    assert left == ["a/b", "a", "c"]


def test_walk_starts_only_inside_the_roots(tmp_path: Path) -> None:
    _tree(tmp_path)
    with RootSet.from_paths([tmp_path / "a"]) as roots, pytest.raises(PathOutsideRoots):
        roots.walk(tmp_path / "a" / ".." / "out", lambda fd, e: True)


def _open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc")
def test_walk_holds_two_descriptors_whatever_the_depth(tmp_path: Path) -> None:
    top = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.close(descend(top, ["d"] * 300, os.O_RDONLY, create=True))
    finally:
        os.close(top)
    gc.collect()  # a RootSet of an earlier test closing its descriptors now would skew the count
    gc.disable()
    before = _open_descriptors()
    most = 0

    def visit(dir_fd: int, entry: TreeEntry) -> bool:
        nonlocal most
        most = max(most, _open_descriptors() - before)
        return True

    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        walk(fd, visit)
    finally:
        os.close(fd)
        gc.enable()
    # the walk's one directory descriptor, plus the listing of /proc/self/fd that counts it
    assert most <= 2, most
    assert _open_descriptors() == before


def test_a_directory_moved_during_the_walk_stops_it(tmp_path: Path) -> None:
    _tree(tmp_path)
    (tmp_path / "elsewhere").mkdir()

    def visit(dir_fd: int, entry: TreeEntry) -> bool:
        if entry.rel == "a/b/g":  # the attacker moves 'b' out while the walk is inside it
            os.rename(tmp_path / "a" / "b", tmp_path / "elsewhere" / "b")
        return True

    with RootSet.from_paths([tmp_path]) as roots, pytest.raises(OSError, match="moved") as raised:
        roots.walk(tmp_path, visit)
    assert raised.value.errno == errno.ESTALE


def test_a_directory_that_cannot_be_entered_is_skipped_or_stops_the_walk(tmp_path: Path) -> None:
    _tree(tmp_path)

    def swap(dir_fd: int, entry: TreeEntry) -> bool:
        if entry.rel == "a":  # listed as a directory, a symlink by the time it is entered
            os.rename(tmp_path / "a", tmp_path / "a.old")
            os.symlink("out", tmp_path / "a")
        return True

    with RootSet.from_paths([tmp_path]) as roots:
        with pytest.raises((NotADirectoryError, OSError), match=r"directory|symbolic"):
            roots.walk(tmp_path, swap)
        os.unlink(tmp_path / "a")
        os.rename(tmp_path / "a.old", tmp_path / "a")
        skipped: list[str] = []
        seen: list[str] = []

        def visit(dir_fd: int, entry: TreeEntry) -> bool:
            seen.append(entry.rel)
            return swap(dir_fd, entry)

        roots.walk(tmp_path, visit, on_error=lambda exc, e: skipped.append(e.rel))
    assert skipped == ["a"]
    assert "out/secret" in seen
    assert not any(rel.startswith("a/") for rel in seen), "the swapped-in symlink was followed"


def test_descend_refuses_a_symlink_at_any_level(tmp_path: Path) -> None:
    (tmp_path / "real" / "x").mkdir(parents=True)
    os.symlink("real", tmp_path / "link")
    top = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with pytest.raises(OSError, match=r"directory|symbolic") as raised:
            descend(top, ["link", "x"], os.O_RDONLY)
        assert raised.value.errno in (errno.ELOOP, errno.ENOTDIR)
        fd = descend(top, ["real", "x", "new", "deeper"], os.O_RDONLY, create=True)
        os.close(fd)
    finally:
        os.close(top)
    assert (tmp_path / "real" / "x" / "new" / "deeper").is_dir()
