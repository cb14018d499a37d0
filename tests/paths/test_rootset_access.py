"""Per-root access: a read-only root refuses every writing operation beneath it, in every spelling of it,
and reads as before; the innermost root decides; a read-write root (the control) writes the same calls.
The check made inside an operation holds when a symlink is swapped after the check made before it."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from mcp_roots import PathOutsideRoots, ReadOnlyPath, Root, RootSet, TreeEntry
from mcp_roots.paths import _access

Write = Callable[[RootSet, Path], object]


def _open_fd(flags: int) -> Write:
    """open_fd with ``flags``, and a write where they allow one."""

    def write(roots: RootSet, target: Path) -> None:
        fd = roots.open_fd(target, flags, 0o644)
        try:
            if flags & (os.O_WRONLY | os.O_RDWR):
                os.write(fd, b"new")
        finally:
            os.close(fd)

    return write


def _open(mode: str) -> Write:
    """open in ``mode``, and a write."""

    def write(roots: RootSet, target: Path) -> None:
        with roots.open(target, mode) as f:
            f.write(b"new" if "b" in mode else "new")

    return write


#: Every writing operation, on ``target`` (an existing file ``f``, or a name ``new`` that does not exist).
WRITES: dict[str, tuple[str, Write]] = {
    "write_text": ("f", lambda r, t: r.write_text(t, "new")),
    "write_bytes new": ("new", lambda r, t: r.write_bytes(t, b"new")),
    **{f"open {mode}": ("f", _open(mode)) for mode in ("w", "wb", "wt", "a", "ab", "at", "r+", "rb+", "r+b")},
    **{f"open {mode}": ("f", _open(mode)) for mode in ("w+", "wb+", "a+", "ab+")},
    **{f"open {mode} new": ("new", _open(mode)) for mode in ("x", "xb", "xt", "x+", "w", "a")},
    "open_fd O_WRONLY": ("f", _open_fd(os.O_WRONLY)),
    "open_fd O_RDWR": ("f", _open_fd(os.O_RDWR)),
    "open_fd O_APPEND": ("f", _open_fd(os.O_WRONLY | os.O_APPEND)),
    "open_fd O_TRUNC": ("f", _open_fd(os.O_RDONLY | os.O_TRUNC)),
    "open_fd O_CREAT": ("new", _open_fd(os.O_RDONLY | os.O_CREAT)),
    "open_fd O_CREAT|O_EXCL": ("new", _open_fd(os.O_WRONLY | os.O_CREAT | os.O_EXCL)),
    "mkdir": ("new", lambda r, t: r.mkdir(t)),
    "mkdir parents": ("new", lambda r, t: r.mkdir(t / "a" / "b", parents=True)),
    "remove": ("f", lambda r, t: r.remove(t)),
    "remove dir": ("d", lambda r, t: r.remove(t, recursive=True)),
    "rename source": ("f", lambda r, t: r.rename(t, t.parent / "moved")),
    "rename target": ("f", lambda r, t: r.rename(t.parent / "d" / "g", t)),
    "rename no-replace target": ("new", lambda r, t: r.rename(t.parent / "d" / "g", t, replace=False)),
}
#: How the target can be spelled (the root's text ``R``): plain, through '.', '..' and a symlinked folder.
SPELLINGS: dict[str, Callable[[Path, str], Path]] = {
    "plain": lambda root, name: root / name,
    "dot": lambda root, name: Path(f"{root}/./{name}"),
    "dotdot": lambda root, name: Path(f"{root}/d/../{name}"),
    "via a link in another root": lambda root, name: root.parent / "rw" / "to_ro" / name,
}


def snapshot(base: Path) -> dict[str, object]:
    """Every name under ``base`` with its bytes (a file), its target (a link) or its kind."""
    seen: dict[str, object] = {}
    for dirpath, dirnames, filenames in os.walk(base):
        for name in dirnames + filenames:
            full = Path(dirpath, name)
            mode = full.lstat().st_mode
            rel = str(full.relative_to(base))
            if stat.S_ISLNK(mode):
                seen[rel] = os.readlink(full)
            else:
                seen[rel] = full.read_bytes() if stat.S_ISREG(mode) else "dir"
    return seen


@pytest.fixture
def world(tmp_path: Path) -> Path:
    """``ro/`` and ``rw/``, side by side, each with a file ``f`` and a folder ``d`` holding ``g``;
    ``rw/to_ro`` is a symlink to ``ro``."""
    for name in ("ro", "rw"):
        (tmp_path / name / "d").mkdir(parents=True)
        (tmp_path / name / "f").write_bytes(b"old")
        (tmp_path / name / "d" / "g").write_bytes(b"g")
    (tmp_path / "rw" / "to_ro").symlink_to(tmp_path / "ro")
    return tmp_path.resolve()


def both(world: Path) -> RootSet:
    return RootSet([Root.from_path(world / "ro", access="read"), Root.from_path(world / "rw")])


@pytest.mark.parametrize("spelling", list(SPELLINGS))
@pytest.mark.parametrize("op", list(WRITES))
def test_every_write_beneath_a_read_only_root_is_refused(world: Path, op: str, spelling: str) -> None:
    name, write = WRITES[op]
    target = SPELLINGS[spelling](world / "ro", name)
    before = snapshot(world / "ro")
    with (
        both(world) as roots,
        pytest.raises(ReadOnlyPath, match=r"read-only root .*ro'; it cannot be written"),
    ):
        write(roots, target)
    assert snapshot(world / "ro") == before
    # The control: the same call with the same root read-write writes.
    with RootSet.from_paths([world / "ro", world / "rw"]) as roots:
        write(roots, target)
    assert snapshot(world / "ro") != before


@pytest.mark.parametrize("op", list(WRITES))
def test_the_read_write_root_beside_it_writes(world: Path, op: str) -> None:
    name, write = WRITES[op]
    before = snapshot(world / "rw")
    with both(world) as roots:
        write(roots, world / "rw" / name)
    assert snapshot(world / "rw") != before


def test_renames_across_roots_are_refused_either_way(world: Path) -> None:
    with both(world) as roots:
        with pytest.raises(ReadOnlyPath):
            roots.rename(world / "rw" / "f", world / "ro" / "new")
        with pytest.raises(ReadOnlyPath):
            roots.rename(world / "ro" / "f", world / "rw" / "new")
    assert (world / "rw" / "f").read_bytes() == (world / "ro" / "f").read_bytes() == b"old"
    assert not (world / "ro" / "new").exists()
    assert not (world / "rw" / "new").exists()


def test_reads_listings_and_questions_are_unchanged(world: Path) -> None:
    ro = world / "ro"
    with both(world) as roots:
        assert roots.read_bytes(ro / "f") == b"old"
        assert roots.read_text(ro / "d" / "g") == "g"
        with roots.open(ro / "f") as f:
            assert f.read() == "old"
        with roots.open(ro / "f", "rb", buffering=0) as raw:
            assert raw.read() == b"old"
        os.close(roots.open_fd(ro / "f", os.O_RDONLY))
        os.close(roots.open_fd(ro / "d", os.O_RDONLY | os.O_DIRECTORY))
        assert sorted(roots.listdir(ro)) == ["d", "f"]
        assert sorted(e.name for e in roots.scandir(ro)) == ["d", "f"]
        seen: list[str] = []

        def visit(fd: int, entry: TreeEntry) -> bool:
            seen.append(entry.name)
            return entry.is_dir

        roots.walk(ro, visit)
        assert sorted(seen) == ["d", "f", "g"]
        assert roots.stat(ro / "f").st_size == 3
        assert roots.contains(ro / "f")
        assert roots.resolve(world / "rw" / "to_ro" / "f") == ro / "f"
        assert not roots.writable(ro / "f")
        assert not roots.writable(world / "rw" / "to_ro" / "new")
        assert roots.writable(world / "rw" / "f")
        assert not roots.writable(world / "elsewhere")
        assert roots.root_of(ro / "f") == Root.from_path(ro, access="read")


# --- nested roots: the innermost decides ----------------------------------------------------------------


@pytest.fixture
def nested(tmp_path: Path) -> Path:
    """``outer/`` holding ``outer/inner/``, a file in each, and ``outer/link`` -> ``inner``."""
    (tmp_path / "outer" / "inner").mkdir(parents=True)
    (tmp_path / "outer" / "f").write_bytes(b"old")
    (tmp_path / "outer" / "inner" / "f").write_bytes(b"old")
    (tmp_path / "outer" / "link").symlink_to("inner")
    return tmp_path.resolve() / "outer"


def test_a_read_write_root_inside_a_read_only_one_writes(nested: Path) -> None:
    roots = RootSet([Root.from_path(nested, access="read"), Root.from_path(nested / "inner")])
    roots.write_text(nested / "inner" / "f", "new")
    roots.write_text(nested / "link" / "via", "new")  # through a link in the read-only root: lands inside
    roots.mkdir(nested / "inner" / "sub")
    roots.rename(nested / "inner" / "sub", nested / "inner" / "sub2")
    with pytest.raises(ReadOnlyPath):
        roots.write_text(nested / "f", "new")
    with pytest.raises(ReadOnlyPath, match="under the read-only root"):
        roots.rename(nested / "inner" / "f", nested / "moved")
    with pytest.raises(ReadOnlyPath):  # the inner root itself is a name in the read-only one
        roots.rename(nested / "inner", nested / "inner2")
    assert (nested / "f").read_bytes() == b"old"
    assert (nested / "inner" / "via").read_bytes() == b"new"


def test_a_read_only_root_inside_a_read_write_one_is_read_only(nested: Path) -> None:
    roots = RootSet([Root.from_path(nested), Root.from_path(nested / "inner", access="read")])
    roots.write_text(nested / "f", "new")
    writes: list[Callable[[], object]] = [
        lambda: roots.write_text(nested / "inner" / "f", "new"),
        lambda: roots.write_text(nested / "link" / "f", "new"),  # the link's target decides
        lambda: roots.open(nested / "link" / "f", "a").close(),
        lambda: roots.mkdir(nested / "link" / "d"),
        lambda: roots.remove(nested / "link" / "f"),
    ]
    for write in writes:
        with pytest.raises(ReadOnlyPath, match="inner'; it cannot be written"):
            write()
    roots.remove(nested / "link")  # a link is a name in the outer root: never followed by remove
    assert (nested / "inner" / "f").read_bytes() == b"old"


def test_moving_or_removing_a_folder_that_holds_a_read_only_root_is_refused(tmp_path: Path) -> None:
    (tmp_path / "outer" / "a" / "ro").mkdir(parents=True)
    outer = tmp_path.resolve() / "outer"
    roots = RootSet([Root.from_path(outer), Root.from_path(outer / "a" / "ro", access="read")])
    with pytest.raises(ReadOnlyPath, match=r"holds the read-only root .*; it cannot be moved or removed"):
        roots.rename(outer / "a", outer / "b")
    with pytest.raises(ReadOnlyPath, match="holds the read-only root"):
        roots.remove(outer / "a", recursive=True)
    assert (outer / "a" / "ro").is_dir()
    roots.with_access("read-write").rename(outer / "a", outer / "b")  # the control
    assert (outer / "b" / "ro").is_dir()


# --- the check inside the operation: a symlink swapped after the check before it -------------------------


#: A write through ``p``, and how many checks it makes before it acts (a rename checks both names).
SWAPPED: dict[str, tuple[int, Write]] = {
    "write_text": (1, lambda r, p: r.write_text(p / "f", "new")),
    "mkdir": (1, lambda r, p: r.mkdir(p / "new")),
    "mkdir parents": (1, lambda r, p: r.mkdir(p / "a" / "b", parents=True)),
    "remove": (1, lambda r, p: r.remove(p / "f")),
    "rename": (2, lambda r, p: r.rename(p / "f", p / "g")),
    "open a": (1, lambda r, p: _open("a")(r, p / "f")),
    "open_fd": (1, lambda r, p: _open_fd(os.O_WRONLY | os.O_APPEND)(r, p / "f")),
}


@pytest.mark.parametrize("op", list(SWAPPED))
def test_a_symlink_swapped_after_the_check_cannot_carry_a_write_into_a_read_only_root(
    nested: Path, monkeypatch: pytest.MonkeyPatch, op: str
) -> None:
    """``outer/swap`` points at a writable folder while the check looks, and at the read-only root when
    the operation runs (a concurrent rename, made deterministic: it happens as the last check returns)."""
    checks, write = SWAPPED[op]
    (nested / "plain").mkdir()
    (nested / "plain" / "f").write_bytes(b"old")
    (nested / "inner" / "f").write_bytes(b"old")
    swap = nested / "swap"
    swap.symlink_to("plain")
    checked = _access.WriteRule.check
    made: list[object] = []

    def check_then_swap(self: _access.WriteRule, path: object, **kwargs: bool) -> None:
        checked(self, path, **kwargs)
        made.append(path)
        if len(made) == checks:
            (nested / "swap.new").symlink_to("inner")
            os.rename(nested / "swap.new", swap)

    monkeypatch.setattr(_access.WriteRule, "check", check_then_swap)
    roots = RootSet([Root.from_path(nested), Root.from_path(nested / "inner", access="read")])
    before = snapshot(nested / "inner")
    with pytest.raises(ReadOnlyPath, match="leads under the read-only root"):
        write(roots, swap)
    assert snapshot(nested / "inner") == before
    # The control: without the check inside the operation, the same swap writes in the read-only root.
    swap.unlink()
    swap.symlink_to("plain")
    made.clear()
    monkeypatch.setattr(_access.WriteRule, "check_fd", lambda self, fd, text: None)
    write(RootSet([Root.from_path(nested), Root.from_path(nested / "inner", access="read")]), swap)
    assert snapshot(nested / "inner") != before


# --- building such roots --------------------------------------------------------------------------------


def test_access_is_built_kept_shown_and_compared(world: Path) -> None:
    ro, rw = world / "ro", world / "rw"
    read = RootSet.from_paths([ro], access="read", source="consent")
    assert [r.access for r in read] == ["read"]
    assert not read.roots[0].writable
    assert RootSet.from_uris([ro.as_uri()], access="read") == read
    assert read != RootSet.from_paths([ro])
    assert hash(read) != hash(RootSet.from_paths([ro]))
    assert read.with_access("read-write") == RootSet.from_paths([ro])
    assert RootSet.from_paths([ro]).with_access("read") == read
    mixed = read.with_roots([*read, Root.from_path(rw)])
    assert [r.access for r in mixed] == ["read", "read-write"]
    assert mixed.source == "consent"
    for copy in (mixed.with_source("x"), mixed.protecting(), mixed.protecting().with_source("y")):
        assert [r.access for r in copy] == ["read", "read-write"]
        with pytest.raises(ReadOnlyPath):
            copy.write_text(ro / "f", "new")
    assert mixed.describe() == f"{ro} (read-only), {rw}"
    assert repr(mixed) == f"RootSet({[str(ro), str(rw)]!r}, source='consent', read_only={[str(ro)]!r})"
    assert repr(RootSet.from_paths([rw])) == f"RootSet({[str(rw)]!r}, source='explicit')"
    assert mixed.roots[0].as_dict() == {"uri": ro.as_uri(), "name": None, "path": str(ro), "access": "read"}
    assert '"access": "read"' in mixed.as_env()["MCP_ROOTS_JSON"]
    # The same folder twice: one root, the read-only one (fail closed), in either order.
    for order in (
        [Root.from_path(ro), Root.from_path(ro, access="read")],
        [Root.from_path(ro, access="read")],
    ):
        assert RootSet(order).roots == (Root.from_path(ro, access="read"),)
    # Outside stays outside, in the same words.
    with pytest.raises(PathOutsideRoots, match="is outside the allowed roots") as refused:
        mixed.write_text(world / "elsewhere", "x")
    assert not isinstance(refused.value, ReadOnlyPath)


@pytest.mark.parametrize("bad", ["write", "READ", "", "rw"])
def test_an_unknown_access_is_refused_by_name(world: Path, bad: str) -> None:
    with pytest.raises(ValueError, match=f"access is 'read' or 'read-write', not {bad!r}"):
        Root.from_path(world / "ro", access=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="access is 'read' or 'read-write'"):
        RootSet.from_paths([world / "ro"]).with_access(bad)  # type: ignore[arg-type]


def test_a_refusal_is_a_path_outside_roots_with_the_path_and_the_rule(world: Path) -> None:
    with pytest.raises(PathOutsideRoots) as refused:
        both(world).write_text(world / "ro" / "f", "x")
    assert str(refused.value) == (
        f"Access denied: {str(world / 'ro' / 'f')!r} is under the read-only root {str(world / 'ro')!r}; "
        "it cannot be written"
    )
