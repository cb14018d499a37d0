"""The path table through every operation, under every resolution strategy, self-checked (Go's os.Root
rootTestCases, cap-std's racy_asserts).

Two kinds of rows, one table: the corpus rows of tests/corpus.py (one shared tree; each row states the
``contains`` verdict, what every operation does with it, ``ops``, and the unconfined control,
``reaches_outside``), and the world rows below, each building its own small tree, naming the file a
following operation (open, write_text, listdir) must touch (``target``), the name a non-following one
(mkdir, remove, rename) must touch (``ltarget``), or the error it must raise, and whether plain ``os``
calls escape with it (``reaches``). Refused rows check that nothing outside was read, created or changed.
Corpus rows also go through the operations that act on the final name (remove, rename, write, mkdir),
each on a fresh tree, where what holds for every row is that nothing outside the roots changes.

The spelling matrix (Go's root consistency tests) spells one name every way (``N``, ``N/``, ``N/.``,
``DIR/../N``...) as each kind of file and runs every operation beside the plain ``os`` call in a twin
tree: the same answer and the same tree, the kernel being the judge.

Every row x every operation x every strategy this machine has (openat2, the O_PATH walk, the walk without
O_PATH that macOS and the BSDs get), with MCP_ROOTS_SELF_CHECK's comparison on: every openat2 answer is
re-done by the walk and must reach the same inode.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import socket
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from mcp_roots import InvalidPath, PathOutsideRoots, ReadOnlyPath, RootsError, RootSet
from mcp_roots.errors import NotRegularFile
from tests.corpus import CASES as CORPUS
from tests.corpus import (
    INSIDE,
    OPERATION_OUTCOMES,
    REACHES_OUTSIDE,
    STRATEGIES,
    CorpusTree,
    build_tree,
    strategy_in_force,
)
from tests.corpus import Case as CorpusCase

BAIT = b"OUTSIDE"
DEEP = "d/" * 1000  # 2,000 bytes of path: deep, and still far below PATH_MAX
LONG_NAME = "\u00e9" * 126  # 252 bytes in UTF-8: NAME_MAX allows it; a temporary name must fit beside it


#: Outside names of every kind that make_world creates beside the root (the '..' rule's probes).
PROBES = [
    ("nothere", "a missing name"),
    ("out", "a directory"),
    ("out_file", "a file"),
    ("out_link", "a symlink"),
    ("out_fifo", "a FIFO"),
]


@dataclass(frozen=True)
class Case:
    name: str
    path: str
    fs: tuple[str, ...] = ()
    target: str | None = None  # what a following operation touches (relative to the root, or "{OTHER}/x")
    ltarget: str | None = None  # what a non-following operation touches, when it differs from target
    error: type[BaseException] | None = None  # for following operations
    lerror: type[BaseException] | None = None  # for non-following ones (default: error, unless ltarget)
    reaches: bool = False  # the unconfined control: plain open() of the path reads the outside bait


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
    Case("dotdot out", "../out/target", error=PathOutsideRoots, reaches=True),
    Case("dotdot out and back in", "../root/target", error=PathOutsideRoots),
    Case("deeper dotdot out and back in", "a/../../root/target", fs=("a/",), error=PathOutsideRoots),
    # The one '..' rule: out through an outside name of any kind and back in is refused the
    # same way, whatever the name is (no oracle of what lies outside).
    *[
        Case(f"dotdot out through {kind} and back in", f"../{probe}/../root/target", error=PathOutsideRoots)
        for probe, kind in PROBES
    ],
    Case("absolute outside", "{OUT}/target", error=PathOutsideRoots, reaches=True),
    Case("sibling with the root as prefix", "{ROOT}_evil/target", error=PathOutsideRoots, reaches=True),
    Case("relative symlink out", "link/target", fs=("link => ../out",), error=PathOutsideRoots, reaches=True),
    Case("absolute symlink out", "link/target", fs=("link => {OUT}",), error=PathOutsideRoots, reaches=True),
    Case(
        "symlink up and up",
        "a/up/out/target",
        fs=("a/", "a/up => ../.."),
        error=PathOutsideRoots,
        reaches=True,
    ),
    Case(
        "dangling final symlink out (create target)",
        "link",
        fs=("link => ../out/target",),
        ltarget="link",
        error=PathOutsideRoots,
        reaches=True,
    ),
    Case(
        "dangling absolute final symlink out",
        "link",
        fs=("link => {OUT}/target",),
        ltarget="link",
        error=PathOutsideRoots,
        reaches=True,
    ),
    Case("symlink loop", "l1/target", fs=("l1 => l2", "l2 => l1"), error=PathOutsideRoots),
    Case("magic link /proc/self/root", "/proc/self/root{OUT}/target", error=PathOutsideRoots, reaches=True),
    Case(
        "symlink to /proc/self/root",
        "p{OUT}/target",
        fs=("p => /proc/self/root",),
        error=PathOutsideRoots,
        reaches=True,
    ),
    Case("regular file used as a directory", "file/target", fs=("file",), error=NotADirectoryError),
    Case("empty path", "", error=InvalidPath),
    # The portable walk's two old bugs, and limits.
    Case("a FIFO as a middle component", "fifo/target", fs=("fifo|",), error=NotADirectoryError),
    Case(
        "in-root symlink in the middle, then deeper", "l/b/target", fs=("a/b/", "l => a"), target="a/b/target"
    ),
    Case(
        "in-root symlink in the middle climbing",
        "a/l/target",
        fs=("a/", "b/", "a/l => ../b"),
        target="b/target",
    ),
    Case("a tree 1,000 levels deep", DEEP + "target", fs=(DEEP,), target=DEEP + "target"),
    Case("a legal 252-byte multibyte name", LONG_NAME, target=LONG_NAME),
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
    (tmp / "out_file").write_bytes(BAIT)
    (tmp / "out_link").symlink_to("out")
    os.mkfifo(tmp / "out_fifo")
    roots = RootSet.from_paths([tmp / "root", tmp / "other"])
    world = World(tmp, tmp / "root", tmp / "out", tmp / "other", roots)
    for spec in case.fs:
        if " => " in spec:
            name, target = spec.split(" => ")
            os.symlink(world.fmt(target), world.root / name)
        elif spec.endswith("|"):
            os.mkfifo(world.root / spec[:-1])
        elif spec.endswith("/"):
            make_dirs(world.root, spec)
        else:
            (world.root / spec).write_bytes(b"fs")
    return world


def make_dirs(base: Path, rel: str) -> None:
    """mkdir -p without recursion (pathlib's recurses once per missing level)."""
    fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for name in [c for c in rel.split("/") if c]:
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, dir_fd=fd)
            nfd = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = nfd
    finally:
        os.close(fd)


def files_under(base: Path) -> Iterator[str]:
    """Every non-directory under ``base``, walked with a stack (os.walk and Path.glob recurse)."""
    stack = [str(base)]
    while stack:
        with os.scandir(stack.pop()) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                else:
                    yield entry.path


def remove_iteratively(base: Path) -> None:
    if not base.exists():
        return
    dirs, stack = [], [str(base)]
    while stack:
        top = stack.pop()
        dirs.append(top)
        with os.scandir(top) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                else:
                    os.unlink(entry.path)
    for d in reversed(dirs):
        os.rmdir(d)


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


def op_stat(w: World, case: Case) -> None:
    if case.error:
        with pytest.raises(case.error):
            w.roots.stat(w.fmt(case.path))
        return
    assert case.target is not None
    w.at(case.target).write_bytes(b"stat me")
    assert w.roots.stat(w.fmt(case.path)).st_ino == os.stat(w.at(case.target)).st_ino


def op_mkdir_parents(w: World, case: Case) -> None:
    want = lerror(case)
    if want:
        with pytest.raises(want):
            w.roots.mkdir(w.fmt(case.path), parents=True)
        return
    if case.ltarget is not None:
        with pytest.raises(FileExistsError):
            w.roots.mkdir(w.fmt(case.path), parents=True)
        return
    assert case.target is not None
    w.roots.mkdir(w.fmt(case.path) + "/x/y", parents=True)
    assert (w.at(case.target) / "x" / "y").is_dir()


def op_remove_tree(w: World, case: Case) -> None:
    want = lerror(case)
    if want:
        with pytest.raises(want):
            w.roots.remove(w.fmt(case.path), recursive=True)
        return
    victim = w.at(case.ltarget or case.target or "")
    if case.ltarget is None:
        (victim / "a" / "b").mkdir(parents=True)
        (victim / "a" / "b" / "f").write_bytes(b"doomed")
        os.symlink(w.out, victim / "a" / "out")  # removed as a link, never followed
    w.roots.remove(w.fmt(case.path), recursive=True)
    assert not os.path.lexists(victim)


OPERATIONS: dict[str, Callable[[World, Case], None]] = {
    "stat": op_stat,
    "mkdir-parents": op_mkdir_parents,
    "remove-tree": op_remove_tree,
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
    try:
        with world.roots:
            OPERATIONS[op](world, case)
    finally:
        if case.fs and case.fs[0] == DEEP:  # pytest's own cleanup recurses once per level
            remove_iteratively(tmp_path / "root" / "d")
    after = world.outside()
    if op == "listdir":
        before = {k: v for k, v in before.items() if "target_dir" not in k}
        after = {k: v for k, v in after.items() if "target_dir" not in k}
    assert after == before, "something outside the roots changed"
    leftovers = [p for p in files_under(tmp_path / "root") if p.endswith(".tmp")]
    assert leftovers == [], "an atomic write left its temporary file"


def test_every_escape_row_escapes_without_the_guard(tmp_path: Path) -> None:
    """The unconfined control (Go's alwaysFails): each world row marked ``reaches`` reads the outside bait
    when opened with plain open(); a row that stops escaping (a typo in its tree) tests nothing."""
    for i, case in enumerate(c for c in CASES if c.reaches):
        (tmp_path / str(i)).mkdir()
        world = make_world(tmp_path / str(i), case)
        with open(world.at(case.path), "rb") as f:
            assert f.read() == BAIT, case.name
        world.roots.close()


# --- the corpus rows through every operation -------------------------------------------------------------

OUTSIDE_SENTENCE = "is outside the allowed roots"


def _stat(roots: RootSet, path: object) -> object:
    return roots.stat(path)  # type: ignore[arg-type]  # the corpus holds hostile non-path values too


def _open_read(roots: RootSet, path: object) -> object:
    with roots.open(path, "rb") as f:  # type: ignore[call-overload]
        return f.read(1)


def _write(roots: RootSet, path: object) -> object:
    roots.write_bytes(path, b"written")  # type: ignore[arg-type]
    return None


CORPUS_OPERATIONS: dict[str, Callable[[RootSet, object], object]] = {
    "stat": _stat,
    "open-read": _open_read,
    "read_bytes": lambda roots, path: roots.read_bytes(path),  # type: ignore[arg-type]
    "listdir": lambda roots, path: roots.listdir(path),  # type: ignore[arg-type]
    "scandir": lambda roots, path: roots.scandir(path),  # type: ignore[arg-type]
    "open_fd": lambda roots, path: os.close(roots.open_fd(path, os.O_RDONLY | os.O_NONBLOCK)),  # type: ignore[arg-type]
    "write_bytes": _write,
    "mkdir-parents": lambda roots, path: roots.mkdir(path, parents=True, exist_ok=True),  # type: ignore[arg-type]
}
#: Operations that change the tree. A corpus row states what operations that follow the path do; these
#: two run only the rows that must be refused (and change nothing in the shared tree). remove and rename
#: act on the final name itself (a loop link inside the root is removable), so they run on the world rows
#: above, which hold per-row expectations for them (``ltarget``, ``lerror``).
NAME_OPERATIONS = frozenset({"write_bytes", "mkdir-parents"})
REFUSED = frozenset({"outside", "invalid", "no-roots"})


@pytest.fixture(scope="module")
def shared_tree(tmp_path_factory: pytest.TempPathFactory) -> CorpusTree:
    return build_tree(tmp_path_factory.mktemp("corpus"))


def test_corpus_rows_have_unique_reasons() -> None:
    """``ops`` and ``reaches_outside`` are keyed by ``why``: two rows with one reason would share them."""
    whys = [c.why for c in CORPUS]
    assert len(whys) == len(set(whys))
    assert set(OPERATION_OUTCOMES) <= set(whys)
    assert set(whys) >= REACHES_OUTSIDE


@pytest.mark.parametrize("case", [c for c in CORPUS if c.reaches_outside], ids=lambda c: c.id)
def test_corpus_escape_rows_escape_without_the_guard(case: CorpusCase, shared_tree: CorpusTree) -> None:
    """The unconfined control column: plain os.stat follows the row's path to an existing file outside
    every root of its root set, so the guard's refusal of it stops something real."""
    path = case.path_for(shared_tree)
    real = os.path.realpath(str(path))
    assert os.path.exists(real), case.why
    roots = shared_tree.rootsets[case.roots]
    assert not any(real == str(p) or real.startswith(str(p).rstrip("/") + "/") for p in roots.paths)
    assert not roots.contains(path), "the guard must refuse what escapes"


def _corpus_params() -> Iterator[object]:
    for case in CORPUS:
        for op in CORPUS_OPERATIONS:
            if op not in NAME_OPERATIONS or case.ops in REFUSED:
                yield pytest.param(case, op, id=f"{op}:{case.id}")


@pytest.mark.parametrize(("case", "op"), list(_corpus_params()))
def test_corpus_row_through_operation(
    case: CorpusCase, op: str, strategy: str, shared_tree: CorpusTree
) -> None:
    expected = case.ops
    tree = shared_tree
    roots = tree.rootsets[case.roots]
    path = case.path_for(tree)
    try:
        with roots:
            CORPUS_OPERATIONS[op](roots, path)
        outcome: BaseException | None = None
    except (RootsError, OSError) as exc:
        outcome = exc
    if op in NAME_OPERATIONS:
        assert isinstance(outcome, RootsError), f"{case.why}: {op} was not refused: {outcome!r}"
        if expected == "outside" and type(outcome) is PathOutsideRoots:
            assert OUTSIDE_SENTENCE in str(outcome), str(outcome)
        return
    if expected == "allowed":
        assert not isinstance(outcome, RootsError), f"{case.why}: refused: {outcome}"
        assert contains_verdict(case, tree)
    elif expected == "oserror":
        assert isinstance(outcome, OSError), (case.why, outcome)
        assert not isinstance(outcome, RootsError), (case.why, outcome)
    elif expected == "outside":
        assert type(outcome) is PathOutsideRoots, (case.why, outcome)
        assert OUTSIDE_SENTENCE in str(outcome), str(outcome)
    elif expected == "no-roots":
        assert type(outcome) is PathOutsideRoots, outcome
        assert "no allowed roots" in str(outcome), outcome
    else:
        assert type(outcome) is InvalidPath, (case.why, outcome)


def contains_verdict(case: CorpusCase, tree: CorpusTree) -> bool:
    return tree.rootsets[case.roots].contains(case.path_for(tree)) is (case.expect == INSIDE)


# --- the corpus rows through the operations that act on the final name, each on a fresh tree -------------

TREE_CHANGING_OPERATIONS: dict[str, Callable[[RootSet, object], object]] = {
    "remove": lambda roots, path: roots.remove(path),  # type: ignore[arg-type]
    "remove-tree": lambda roots, path: roots.remove(path, recursive=True),  # type: ignore[arg-type]
    "rename-source": lambda roots, path: roots.rename(path, "renamed-by-the-table"),  # type: ignore[arg-type]
    "rename-target": lambda roots, path: roots.rename("file.txt", path),  # type: ignore[arg-type]
    "write_bytes": _write,
    "mkdir": lambda roots, path: roots.mkdir(path, parents=True),  # type: ignore[arg-type]
}


def outside_snapshot(tree: CorpusTree, roots: RootSet) -> dict[str, object]:
    """Everything in the corpus tree that lies outside ``roots`` (symlinks as their text, files as their
    bytes), walked with a stack and never through a symlink."""
    inside = [str(p) for p in roots.paths]

    def under_a_root(path: str) -> bool:
        return any(path == r or path.startswith(r.rstrip("/") + "/") for r in inside)

    seen: dict[str, object] = {}
    stack = [str(tree.base)]
    while stack:
        with os.scandir(stack.pop()) as entries:
            for entry in entries:
                if under_a_root(entry.path):
                    continue
                if entry.is_symlink():
                    seen[entry.path] = ("link", os.readlink(entry.path))
                elif entry.is_dir():
                    seen[entry.path] = "dir"
                    stack.append(entry.path)
                elif stat.S_ISFIFO(entry.stat().st_mode):
                    seen[entry.path] = "fifo"
                else:
                    seen[entry.path] = Path(entry.path).read_bytes()
    return seen


def _tree_changing_params() -> Iterator[object]:
    for case in CORPUS:
        if case.roots in ("slash", "empty"):  # '/' has no outside to watch; no roots refuse before any I/O
            continue
        for op in TREE_CHANGING_OPERATIONS:
            yield pytest.param(case, op, id=f"{op}:{case.id}")


def tree_state(base: Path) -> dict[str, tuple[object, ...]]:
    """Every entry under ``base`` as lstat sees it (type and permission bits, size, inode, change and
    modification times) and a symlink's text: equal states are the same tree, so a row may reuse it."""
    state: dict[str, tuple[object, ...]] = {}
    stack = [str(base)]
    while stack:
        with os.scandir(stack.pop()) as entries:
            for entry in entries:
                st = entry.stat(follow_symlinks=False)
                link = os.readlink(entry.path) if stat.S_ISLNK(st.st_mode) else None
                state[entry.path] = (st.st_mode, st.st_size, st.st_ino, st.st_mtime_ns, st.st_ctime_ns, link)
                if stat.S_ISDIR(st.st_mode):
                    stack.append(entry.path)
    return state


class ReusedTree:
    """The corpus tree for the tree-changing rows, built again only after a row changed it (most rows are
    refused, or act on a name that does not exist, and leave it as it was)."""

    def __init__(self, factory: pytest.TempPathFactory) -> None:
        self.factory = factory
        self.tree: CorpusTree | None = None
        self.state: dict[str, tuple[object, ...]] = {}
        self.builds = 0

    def get(self) -> CorpusTree:
        if self.tree is None:
            self.tree = build_tree(self.factory.mktemp("changing"))
            self.state = tree_state(self.tree.base)
            self.builds += 1
        return self.tree

    def check(self) -> None:
        """After a row: keep the tree only if it is exactly as built."""
        if self.tree is not None and tree_state(self.tree.base) != self.state:
            for roots in self.tree.rootsets.values():
                roots.close()
            self.tree = None


@pytest.fixture(scope="module")
def reused_tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReusedTree]:
    reused = ReusedTree(tmp_path_factory)
    yield reused
    if reused.tree is not None:
        for roots in reused.tree.rootsets.values():
            roots.close()


@pytest.mark.parametrize(("case", "op"), list(_tree_changing_params()))
def test_corpus_row_through_a_tree_changing_operation(
    case: CorpusCase, op: str, strategy: str, reused_tree: ReusedTree
) -> None:
    """Operations on the final name (remove, rename, write, mkdir) may act on a name inside a root that
    contains() calls outside (a loop link is removable), so the row's ``ops`` column is not theirs; what
    holds for every row: invalid input is InvalidPath, a refusal uses the row's sentence, and nothing
    outside the roots is ever created, changed or removed. Each row starts from the tree as built
    (``ReusedTree`` builds it again after any row that changed it)."""
    tree = reused_tree.get()
    roots = tree.rootsets[case.roots]
    before = outside_snapshot(tree, roots)
    try:
        try:
            with roots:
                TREE_CHANGING_OPERATIONS[op](roots, case.path_for(tree))
            outcome: BaseException | None = None
        except (RootsError, OSError) as exc:
            outcome = exc
        assert outside_snapshot(tree, roots) == before, f"{case.why}: {op} changed something outside"
    finally:
        reused_tree.check()
    if case.ops == "invalid":
        assert type(outcome) is InvalidPath, (case.why, outcome)
    elif type(outcome) is PathOutsideRoots:
        assert OUTSIDE_SENTENCE in str(outcome), str(outcome)


# --- deep trees: loops, not recursion -------------------------------------------------------------------


def test_mkdir_parents_1500_deep(tmp_path: Path, strategy: str) -> None:
    roots = RootSet.from_paths([tmp_path])
    rel = "/".join(["m"] * 1500)
    try:
        roots.mkdir(rel, parents=True)
        assert roots.stat(rel).st_mode & 0o170000 == 0o040000
        roots.mkdir(rel, parents=True, exist_ok=True)
    finally:
        roots.close()
        remove_iteratively(tmp_path / "m")  # pytest's own cleanup recurses once per level


def test_remove_recursive_1200_deep(tmp_path: Path, strategy: str) -> None:
    make_dirs(tmp_path, "top/" + "r/" * 1199)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep").write_bytes(BAIT)
    os.symlink(tmp_path / "out", tmp_path / "top" / "r" / "link")
    roots = RootSet.from_paths([tmp_path])
    try:
        roots.remove("top", recursive=True)
        assert not (tmp_path / "top").exists()
        assert (tmp_path / "out" / "keep").read_bytes() == BAIT, "a symlink in the tree was never followed"
    finally:
        roots.close()
        remove_iteratively(tmp_path / "top")


def test_a_directory_moved_out_of_a_tree_being_removed_stops_the_removal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Going back up, the removal opens '..' and checks it is the directory it came down from."""
    make_dirs(tmp_path, "top/a/b")
    (tmp_path / "top" / "a" / "b" / "f").write_bytes(b"x")
    (tmp_path / "elsewhere").mkdir()
    real_unlink = os.unlink
    moved: list[bool] = []

    def unlink_then_move(name: str, *, dir_fd: int) -> None:
        real_unlink(name, dir_fd=dir_fd)
        if not moved:  # the attacker moves 'b' out while the removal is inside it
            os.rename(tmp_path / "top" / "a" / "b", tmp_path / "elsewhere" / "b")
            moved.append(True)

    roots = RootSet.from_paths([tmp_path / "top"])
    monkeypatch.setattr(os, "unlink", unlink_then_move)  # the path layer's removal calls os.unlink
    with pytest.raises(OSError, match="moved"):
        roots.remove(str(tmp_path / "top" / "a"), recursive=True)
    monkeypatch.undo()
    assert (tmp_path / "elsewhere").is_dir()
    roots.close()


# --- the spelling matrix: every spelling of a name x every kind of file, beside the kernel ----------------

#: How a name inside the root can be spelled (Go's testFileRefs, less the escaping ones: rows above).
SPELLINGS = {
    "b": "{N}",
    "bs": "{N}/",
    "bd": "{N}/.",
    "dpb": "DIR/../{N}",
    "dpbs": "DIR/../{N}/",
    "dpbd": "DIR/../{N}/.",
}
#: What the name is. A symlink's target is another name, spelled one of the ways, of one of three kinds.
PLAIN_KINDS = ("absent", "file", "dir", "fifo", "socket")
LINK_KINDS = tuple(
    f"link:{ref}:{kind}" for ref in ("b", "bs", "bd", "dpb") for kind in ("absent", "file", "dir")
)


def make_spelled(base: Path, kind: str) -> None:
    """The tree of one matrix row: ``base/DIR/`` and the name ``target`` of ``kind`` (a link's target is
    the name ``tgt``). A directory holds one file, so removing it without ``recursive`` fails."""
    base.mkdir()
    (base / "DIR").mkdir()
    name = "target"
    if kind.startswith("link:"):
        _, ref, kind = kind.split(":")
        os.symlink(SPELLINGS[ref].format(N="tgt"), base / name)
        name = "tgt"
    if kind == "file":
        (base / name).write_bytes(b"old")
    elif kind == "dir":
        (base / name).mkdir()
        (base / name / "inner").write_bytes(b"inner")
    elif kind == "fifo":
        os.mkfifo(base / name)
    elif kind == "socket":
        here = os.getcwd()
        os.chdir(base)  # a socket's path must fit sun_path (108 bytes): bind the name relative to it
        try:
            with socket.socket(socket.AF_UNIX) as s:
                s.bind(name)
        finally:
            os.chdir(here)


def tree_of(base: Path) -> dict[str, object]:
    """What is under ``base``: each name's kind, a file's bytes, a link's text (never followed)."""
    seen: dict[str, object] = {}
    for dirpath, dirnames, filenames in os.walk(base):
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            mode = os.lstat(full).st_mode
            rel = os.path.relpath(full, base)
            if stat.S_ISLNK(mode):
                seen[rel] = ("link", os.readlink(full))
            elif stat.S_ISREG(mode):
                seen[rel] = Path(full).read_bytes()
            else:
                seen[rel] = kind_letter(mode)
    return seen


def kind_letter(mode: int) -> str:
    """The file's type as ``ls -l`` writes it: '-', 'd', 'l', 'p' (FIFO), 's' (socket)..."""
    return stat.filemode(mode)[0]


def go_remove(p: str) -> None:
    """Go's os.Remove: unlink, else rmdir; rmdir's error unless it is ENOTDIR (then unlink's)."""
    try:
        os.unlink(p)
    except OSError as first:
        try:
            os.rmdir(p)
        except OSError as second:
            raise (first if second.errno == errno.ENOTDIR else second) from None


def plain_read(p: str) -> bytes:
    """open(p, 'rb').read() that never blocks: a FIFO or a socket is 'not regular', as RootSet says."""
    fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, "is a directory")
        if not stat.S_ISREG(mode):
            raise NotRegularFile(stat.filemode(mode))
        return os.read(fd, 100)
    finally:
        os.close(fd)


def plain_write(p: str) -> None:
    """open(p, 'wb').write(b'new') that never blocks (a FIFO with no reader is ENXIO: not regular)."""
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NONBLOCK, 0o666)
    try:
        os.write(fd, b"new")
    finally:
        os.close(fd)


def makedirs(p: str, exist_ok: bool = False) -> None:
    """os.makedirs, where a final '/.' names the directory to make with its parents (makedirs itself
    also returns quietly when that name is a dangling symlink; RootSet says EEXIST, as mkdir does)."""
    os.makedirs(p[:-1] if p.endswith("/.") else p, exist_ok=exist_ok)


def fd_kind(fd: int) -> str:
    try:
        return kind_letter(os.fstat(fd).st_mode)
    finally:
        os.close(fd)


def ours_open_write(roots: RootSet, p: str) -> None:
    with roots.open(p, "wb") as f:
        f.write(b"new")


def ours_open_read(roots: RootSet, p: str) -> bytes:
    with roots.open(p, "rb") as f:
        return f.read()


#: Each operation twice: RootSet's, and the plain os calls a program would make, judged by the kernel.
#: (RootSet's ``p`` is absolute in its tree; the plain call's is the same name in the twin tree.)
SPELLED_OPERATIONS: dict[
    str, tuple[Callable[[RootSet, str, Path], object], Callable[[str, Path], object]]
] = {
    "stat": (lambda r, p, b: kind_letter(r.stat(p).st_mode), lambda p, b: kind_letter(os.stat(p).st_mode)),
    "open-read": (lambda r, p, b: ours_open_read(r, p), lambda p, b: plain_read(p)),
    "read_bytes": (lambda r, p, b: r.read_bytes(p), lambda p, b: plain_read(p)),
    "listdir": (lambda r, p, b: sorted(r.listdir(p)), lambda p, b: sorted(os.listdir(p))),
    "open_fd-O_PATH": (
        lambda r, p, b: fd_kind(r.open_fd(p, os.O_PATH)),
        lambda p, b: fd_kind(os.open(p, os.O_PATH)),
    ),
    "open_fd-O_PATH|O_NOFOLLOW": (
        lambda r, p, b: fd_kind(r.open_fd(p, os.O_PATH | os.O_NOFOLLOW)),
        lambda p, b: fd_kind(os.open(p, os.O_PATH | os.O_NOFOLLOW)),
    ),
    "open_fd-O_NOFOLLOW": (
        lambda r, p, b: fd_kind(r.open_fd(p, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)),
        lambda p, b: fd_kind(os.open(p, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)),
    ),
    "write_bytes": (lambda r, p, b: r.write_bytes(p, b"new"), lambda p, b: plain_write(p)),
    "open-write": (lambda r, p, b: ours_open_write(r, p), lambda p, b: plain_write(p)),
    "remove": (lambda r, p, b: r.remove(p), lambda p, b: go_remove(p)),
    "mkdir": (lambda r, p, b: r.mkdir(p), lambda p, b: os.mkdir(p)),
    "mkdir-parents": (lambda r, p, b: r.mkdir(p, parents=True), lambda p, b: makedirs(p)),
    "mkdir-exist_ok": (
        lambda r, p, b: r.mkdir(p, parents=True, exist_ok=True),
        lambda p, b: makedirs(p, exist_ok=True),
    ),
    "rename-source": (lambda r, p, b: r.rename(p, "moved"), lambda p, b: os.rename(p, b / "moved")),
    "rename-file-to": (lambda r, p, b: r.rename("DIR/f", p), lambda p, b: os.rename(b / "DIR/f", p)),
    "rename-dir-to": (lambda r, p, b: r.rename("DIR/d", p), lambda p, b: os.rename(b / "DIR/d", p)),
}


def outcome(call: Callable[[], object]) -> tuple[object, ...]:
    """An answer as both sides can give it: ('ok', result), the errno's name, 'not regular' (RootSet's
    InvalidPath, the plain call's ENXIO or file-type check) or 'loop' (RootSet's one refusal of ELOOP)."""
    try:
        return ("ok", call())
    except NotRegularFile:
        return ("not regular",)
    except PathOutsideRoots:
        return ("loop",)
    except InvalidPath as exc:
        return ("not regular",) if "not a regular file" in str(exc) else ("invalid", str(exc))
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            return ("not regular",)
        if exc.errno == errno.ELOOP:
            return ("loop",)
        return (errno.errorcode.get(exc.errno or 0, exc.errno),)


def _spelled_params() -> Iterator[object]:
    for spelling in SPELLINGS:
        for kind in PLAIN_KINDS + (LINK_KINDS if spelling in ("b", "bs", "bd") else ()):
            yield pytest.param(spelling, kind, id=f"{spelling}:{kind}")


@pytest.fixture(scope="module")
def spelled_base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("spelled")


Answer = tuple[tuple[object, ...], dict[str, object]]


def spelled_answers(spelling: str, kind: str, op: str, here: Path) -> tuple[Answer, Answer]:
    """RootSet's answer and the plain call's, each in a fresh twin of the row's tree; each with the tree
    it left."""
    ours, plain = here / "ours", here / "plain"
    here.mkdir()
    for base in (ours, plain):
        make_spelled(base, kind)
        (base / "DIR" / "f").write_bytes(b"moved")
        (base / "DIR" / "d").mkdir()
    name = SPELLINGS[spelling].format(N="target")
    our_op, plain_op = SPELLED_OPERATIONS[op]
    with RootSet.from_paths([ours]) as roots:
        got = outcome(lambda: our_op(roots, f"{ours}/{name}", ours))
    want = outcome(lambda: plain_op(f"{plain}/{name}", plain))
    return (got, tree_of(ours)), (want, tree_of(plain))


@pytest.mark.parametrize(("spelling", "kind"), list(_spelled_params()))
def test_spelling_through_every_operation_as_the_kernel_answers(
    spelling: str, kind: str, strategy: str, spelled_base: Path
) -> None:
    """Go's root consistency check: every operation on every spelling of a name of every kind answers as
    the plain os call does (the kernel's rule: a trailing '/' needs a directory, a final '.' is the
    directory itself, a link's target read the same way) and leaves the same tree, under every strategy.
    A write never replaces what is not a regular file (a FIFO, a socket: refused, as open() refuses)."""
    differ = []
    for op in SPELLED_OPERATIONS:
        here = spelled_base / f"{op}-{spelling}-{kind}-{strategy}".replace(":", "_").replace("|", "_")
        got, want = spelled_answers(spelling, kind, op, here)
        if strategy == "walk-no-opath" and op == "stat" and want[0] == ("ok", "s") and "socket" in kind:
            # Without O_PATH (macOS, the BSDs) a socket cannot be opened, not even to be fstat'ed.
            want = (("not regular",), want[1])
        if got != want:
            differ.append(
                f"{op}: RootSet says {got[0]}, the kernel {want[0]}"
                + ("" if got[0] != want[0] else f"; trees {got[1]} != {want[1]}")
            )
    assert not differ, "\n".join(differ)


#: The matrix's operations that write: beneath a read-only root each one is refused, whatever it names.
WRITING_OPERATIONS = frozenset(
    {"write_bytes", "open-write", "remove", "mkdir", "mkdir-parents", "mkdir-exist_ok"}
    | {"rename-source", "rename-file-to", "rename-dir-to"}
)


@pytest.mark.parametrize(("spelling", "kind"), list(_spelled_params()))
def test_spelling_under_a_read_only_root(spelling: str, kind: str, strategy: str, spelled_base: Path) -> None:
    """The matrix beneath a read-only root: every writing operation on every spelling of a name of every
    kind is refused as read-only and leaves the tree as it was; every reading one answers as it does when
    the same root is read-write (the control, on the same tree)."""
    base = spelled_base / f"read-only-{spelling}-{kind}-{strategy}".replace(":", "_").replace("|", "_")
    make_spelled(base, kind)
    (base / "DIR" / "f").write_bytes(b"moved")
    (base / "DIR" / "d").mkdir()
    before = tree_of(base)
    path = f"{base}/{SPELLINGS[spelling].format(N='target')}"
    wrong = []
    with RootSet.from_paths([base], access="read") as read_only, RootSet.from_paths([base]) as read_write:
        for op, (our_op, _) in SPELLED_OPERATIONS.items():
            got = refused_as_read_only(functools.partial(our_op, read_only, path, base))
            control = functools.partial(our_op, read_write, path, base)
            want = ("read-only",) if op in WRITING_OPERATIONS else outcome(control)
            if got != want:
                wrong.append(f"{op}: {got} beneath a read-only root, {want} expected")
            if tree_of(base) != before:
                wrong.append(f"{op} changed the tree: {tree_of(base)}")
                break
    assert not wrong, "\n".join(wrong)


def refused_as_read_only(call: Callable[[], object]) -> tuple[object, ...]:
    """:func:`outcome`, with the read-only refusal (ReadOnlyPath) as its own answer."""
    refused: list[ReadOnlyPath] = []

    def run() -> object:
        try:
            return call()
        except ReadOnlyPath as exc:
            refused.append(exc)
            raise

    got = outcome(run)
    return ("read-only",) if refused else got
