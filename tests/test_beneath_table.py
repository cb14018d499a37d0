"""One table of path cases, every RootSet operation, both resolution strategies (Go os.Root style).

Each case builds a small tree inside the root, names a path, and says which file a following operation
(open, write_text, listdir) must touch (``target``), which name a non-following one (mkdir, remove,
rename) must touch (``ltarget``), or which error it must raise. Refused cases also check that nothing
outside the root was read, created or changed: a bait file waits at every place an escape would land.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from mcp_roots import InvalidPath, PathOutsideRoots, RootSet
from tests.corpus import STRATEGIES, strategy_in_force

BAIT = b"OUTSIDE"


@dataclass(frozen=True)
class Case:
    name: str
    path: str
    fs: tuple[str, ...] = ()
    target: str | None = None  # what a following operation touches (relative to the root, or "{OTHER}/x")
    ltarget: str | None = None  # what a non-following operation touches, when it differs from target
    error: type[BaseException] | None = None  # for following operations
    lerror: type[BaseException] | None = None  # for non-following ones (default: error, unless ltarget)


CASES = [
    Case("plain name", "target", target="target"),
    Case("in a subdirectory", "a/target", fs=("a/",), target="a/target"),
    Case("dot components", "./a/./target", fs=("a/",), target="a/target"),
    Case("double slashes", "a//target", fs=("a/",), target="a/target"),
    Case("dotdot that stays inside", "a/../b/target", fs=("a/", "b/"), target="b/target"),
    Case("absolute path inside", "{ROOT}/a/target", fs=("a/",), target="a/target"),
    Case("symlinked directory inside", "link/target", fs=("a/", "link => a"), target="a/target"),
    Case("symlink chain inside", "l1/target", fs=("a/", "l1 => l2", "l2 => a"), target="a/target"),
    Case("final symlink inside", "link", fs=("link => target",), target="target", ltarget="link"),
    Case(
        "final symlink climbing inside",
        "a/link",
        fs=("a/", "a/link => ../target"),
        target="target",
        ltarget="a/link",
    ),
    Case("dotdot after a symlinked dir", "link/../target", fs=("a/b/", "link => a/b"), target="a/target"),
    Case("symlink into another root", "link/target", fs=("link => {OTHER}",), target="{OTHER}/target"),
    Case(
        "absolute symlink inside the same root",
        "link/target",
        fs=("a/", "link => {ROOT}/a"),
        target="a/target",
    ),
    # Escapes and refusals.
    Case("dotdot out", "../out/target", error=PathOutsideRoots),
    Case("dotdot out and back in", "../root/target", error=PathOutsideRoots),
    Case("deeper dotdot out and back in", "a/../../root/target", fs=("a/",), error=PathOutsideRoots),
    Case("absolute outside", "{OUT}/target", error=PathOutsideRoots),
    Case("sibling with the root as prefix", "{ROOT}_evil/target", error=PathOutsideRoots),
    Case("relative symlink out", "link/target", fs=("link => ../out",), error=PathOutsideRoots),
    Case("absolute symlink out", "link/target", fs=("link => {OUT}",), error=PathOutsideRoots),
    Case("symlink up and up", "a/up/out/target", fs=("a/", "a/up => ../.."), error=PathOutsideRoots),
    Case(
        "dangling final symlink out (create target)",
        "link",
        fs=("link => ../out/target",),
        ltarget="link",
        error=PathOutsideRoots,
    ),
    Case(
        "dangling absolute final symlink out",
        "link",
        fs=("link => {OUT}/target",),
        ltarget="link",
        error=PathOutsideRoots,
    ),
    Case("symlink loop", "l1/target", fs=("l1 => l2", "l2 => l1"), error=PathOutsideRoots),
    Case("magic link /proc/self/root", "/proc/self/root{OUT}/target", error=PathOutsideRoots),
    Case(
        "symlink to /proc/self/root",
        "p{OUT}/target",
        fs=("p => /proc/self/root",),
        error=PathOutsideRoots,
    ),
    Case("regular file used as a directory", "file/target", fs=("file",), error=NotADirectoryError),
    Case("empty path", "", error=InvalidPath),
    Case("NUL byte", "a\x00b", error=InvalidPath),
]


@dataclass
class World:
    tmp: Path
    root: Path
    out: Path
    other: Path
    roots: RootSet

    def fmt(self, text: str) -> str:
        return text.format(ROOT=self.root, OUT=self.out, OTHER=self.other)

    def at(self, rel: str) -> Path:
        text = self.fmt(rel)
        return Path(text) if text.startswith("/") else self.root / text

    def outside(self) -> dict[str, bytes | str]:
        """Everything outside the roots that an escape could touch, for before/after comparison."""
        seen: dict[str, bytes | str] = {}
        for base in (self.out, self.tmp / "root_evil"):
            for dirpath, dirnames, filenames in os.walk(base):
                for d in dirnames:
                    seen[os.path.join(dirpath, d)] = "dir"
                for f in filenames:
                    seen[os.path.join(dirpath, f)] = Path(dirpath, f).read_bytes()
        return seen


@pytest.fixture(params=STRATEGIES)
def strategy(request: pytest.FixtureRequest) -> Iterator[str]:
    with strategy_in_force(request.param) as name:
        yield name


def make_world(tmp: Path, case: Case) -> World:
    for name in ("root", "out", "other", "root_evil"):
        (tmp / name).mkdir()
    (tmp / "out" / "target").write_bytes(BAIT)
    (tmp / "root_evil" / "target").write_bytes(BAIT)
    roots = RootSet.from_paths([tmp / "root", tmp / "other"])
    world = World(tmp, tmp / "root", tmp / "out", tmp / "other", roots)
    for spec in case.fs:
        if " => " in spec:
            name, target = spec.split(" => ")
            os.symlink(world.fmt(target), world.root / name)
        elif spec.endswith("/"):
            (world.root / spec).mkdir(parents=True)
        else:
            (world.root / spec).write_bytes(b"fs")
    return world


def lerror(case: Case) -> type[BaseException] | None:
    if case.lerror is not None:
        return case.lerror
    return None if case.ltarget is not None else case.error


# --- the operations ------------------------------------------------------------------------------------


def op_open_read(w: World, case: Case) -> None:
    if case.error:
        with pytest.raises(case.error):
            w.roots.open(w.fmt(case.path), "rb")
        return
    assert case.target is not None
    w.at(case.target).write_bytes(b"inside")
    with w.roots.open(w.fmt(case.path), "rb") as f:
        assert f.read() == b"inside"


def op_read_text(w: World, case: Case) -> None:
    if case.error:
        with pytest.raises(case.error):
            w.roots.read_text(w.fmt(case.path))
        return
    assert case.target is not None
    w.at(case.target).write_text("inside")
    assert w.roots.read_text(w.fmt(case.path)) == "inside"


def op_open_write(w: World, case: Case) -> None:
    if case.error:
        with pytest.raises(case.error):
            w.roots.open(w.fmt(case.path), "w")
        return
    assert case.target is not None
    with w.roots.open(w.fmt(case.path), "w") as f:
        f.write("written")
    assert w.at(case.target).read_text() == "written"


def op_write_text(w: World, case: Case) -> None:
    if case.error:
        with pytest.raises(case.error):
            w.roots.write_text(w.fmt(case.path), "written")
        return
    assert case.target is not None
    w.roots.write_text(w.fmt(case.path), "written")
    assert w.at(case.target).read_text() == "written"
    assert not w.at(case.target).is_symlink()
    # the final symlink (if any) still is one: the atomic write replaced its target, not the link
    if case.ltarget is not None:
        assert w.at(case.ltarget).is_symlink()


def op_mkdir(w: World, case: Case) -> None:
    want = lerror(case)
    if want:
        with pytest.raises(want):
            w.roots.mkdir(w.fmt(case.path))
        return
    if case.ltarget is not None:  # the final name is a symlink: mkdir never follows it
        with pytest.raises(FileExistsError):
            w.roots.mkdir(w.fmt(case.path))
        return
    assert case.target is not None
    w.roots.mkdir(w.fmt(case.path))
    assert w.at(case.target).is_dir()


def op_remove(w: World, case: Case) -> None:
    want = lerror(case)
    if want:
        with pytest.raises(want):
            w.roots.remove(w.fmt(case.path))
        return
    victim = w.at(case.ltarget or case.target or "")
    if case.ltarget is None:
        victim.write_bytes(b"doomed")
    w.roots.remove(w.fmt(case.path))
    assert not os.path.lexists(victim)
    if case.ltarget is not None and case.target is not None:
        assert not os.path.lexists(w.at(case.target))  # the link's target was never created nor touched


def op_rename_source(w: World, case: Case) -> None:
    want = lerror(case)
    if want:
        with pytest.raises(want):
            w.roots.rename(w.fmt(case.path), "renamed")
        return
    moved = w.at(case.ltarget or case.target or "")
    if case.ltarget is None:
        moved.write_bytes(b"moving")
    w.roots.rename(w.fmt(case.path), "renamed")
    assert not os.path.lexists(moved)
    assert (w.root / "renamed").is_symlink() == (case.ltarget is not None)


def op_rename_target(w: World, case: Case) -> None:
    (w.root / "source").write_bytes(b"moved")
    want = lerror(case)
    if want:
        with pytest.raises(want):
            w.roots.rename("source", w.fmt(case.path))
        assert (w.root / "source").read_bytes() == b"moved"
        return
    w.roots.rename("source", w.fmt(case.path))
    landed = w.at(case.ltarget or case.target or "")
    assert not landed.is_symlink()
    assert landed.read_bytes() == b"moved"


def op_listdir(w: World, case: Case) -> None:
    bait_dir = w.out / "target_dir"
    bait_dir.mkdir()
    (bait_dir / "secret").write_bytes(BAIT)
    path = w.fmt(case.path)
    if case.error:
        with pytest.raises(case.error):
            w.roots.listdir(path)
        return
    assert case.target is not None
    w.at(case.target).mkdir()
    (w.at(case.target) / "inner").write_bytes(b"")
    assert w.roots.listdir(path) == ["inner"]
    assert [e.name for e in w.roots.scandir(path)] == ["inner"]


OPERATIONS: dict[str, Callable[[World, Case], None]] = {
    "open-read": op_open_read,
    "read_text": op_read_text,
    "open-write": op_open_write,
    "write_text": op_write_text,
    "mkdir": op_mkdir,
    "remove": op_remove,
    "rename-source": op_rename_source,
    "rename-target": op_rename_target,
    "listdir": op_listdir,
}


def _params() -> Iterator[object]:
    for case in CASES:
        for op in OPERATIONS:
            yield pytest.param(case, op, id=f"{op}:{case.name}")


@pytest.mark.parametrize(("case", "op"), list(_params()))
def test_case_through_operation(tmp_path: Path, strategy: str, case: Case, op: str) -> None:
    world = make_world(tmp_path, case)
    before = world.outside()
    with world.roots:
        OPERATIONS[op](world, case)
    after = world.outside()
    if op == "listdir":
        before = {k: v for k, v in before.items() if "target_dir" not in k}
        after = {k: v for k, v in after.items() if "target_dir" not in k}
    assert after == before, "something outside the roots changed"
    assert list((tmp_path / "root").glob("**/.*.tmp")) == [], "an atomic write left its temporary file"
