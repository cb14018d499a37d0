"""RootSet file operations beyond the case table: special files, magic links, limits, atomic writes,
descriptor lifetime, nested and file roots, and contains()/resolve() through the root descriptors."""

from __future__ import annotations

import contextlib
import errno
import gc
import logging
import os
import signal
import socket
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcp_roots import Entry, FileTooLarge, InvalidPath, PathOutsideRoots, RootSet
from mcp_roots._sys import linux
from mcp_roots.paths import _beneath
from mcp_roots.paths._canonical import canonicalize
from mcp_roots.paths._descriptors import MAX_OPEN_ROOTS
from mcp_roots.paths._fold import folding_for
from mcp_roots.paths._index import RootIndex
from tests.corpus import STRATEGIES, strategy_in_force
from tests.kit import open_fds


@pytest.fixture(params=STRATEGIES)
def strategy(request: pytest.FixtureRequest) -> Iterator[str]:
    with strategy_in_force(request.param) as name:
        yield name


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "root" / "sub").mkdir(parents=True)
    (tmp_path / "out").mkdir()
    (tmp_path / "root" / "f").write_text("inside")
    (tmp_path / "out" / "secret").write_text("OUTSIDE")
    return tmp_path


@contextlib.contextmanager
def must_not_hang(seconds: float = 5.0) -> Iterator[None]:
    def fail(signum: int, frame: object) -> None:
        raise AssertionError(f"the operation blocked for more than {seconds} s")

    old = signal.signal(signal.SIGALRM, fail)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


# --- special files -------------------------------------------------------------------------------------


def test_fifo_is_refused_without_blocking(tree: Path, strategy: str) -> None:
    os.mkfifo(tree / "root" / "fifo")
    roots = RootSet.from_paths([tree / "root"])
    with must_not_hang():
        for call in (
            lambda: roots.read_bytes("fifo"),
            lambda: roots.read_text("fifo"),
            lambda: roots.open("fifo"),
            lambda: roots.open("fifo", "wb"),
        ):
            with pytest.raises(InvalidPath, match="is a FIFO, not a regular file"):
                call()


def test_socket_is_refused(tree: Path, strategy: str) -> None:
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(tree / "root" / "sock"))
        roots = RootSet.from_paths([tree / "root"])
        with must_not_hang():
            with pytest.raises(InvalidPath, match="is a socket"):
                roots.read_bytes("sock")
            with pytest.raises(InvalidPath, match="is a socket"):
                roots.open("sock", "w")
    finally:
        sock.close()


def test_device_reached_through_a_symlink_into_another_root_is_refused(tree: Path, strategy: str) -> None:
    os.symlink("/dev/zero", tree / "root" / "zero")
    roots = RootSet.from_paths([tree / "root", "/dev"])
    with must_not_hang(), pytest.raises(InvalidPath, match="is a character device"):
        roots.read_bytes("zero")


# --- magic links -----------------------------------------------------------------------------------------


def test_magic_links_are_refused_even_inside_a_root(tree: Path, strategy: str) -> None:
    """/proc as a root: /proc/self/fd/N and /proc/self/root jump anywhere, so they are refused, directly
    and through a symlink in another root."""
    secret = os.open(tree / "out" / "secret", os.O_RDONLY)
    try:
        os.symlink(f"/proc/self/fd/{secret}", tree / "root" / "fdlink")
        os.symlink("/proc/self/root", tree / "root" / "rootlink")
        roots = RootSet.from_paths([tree / "root", "/proc"])
        for path in (
            f"/proc/self/fd/{secret}",
            f"/proc/thread-self/fd/{secret}",
            f"/proc/self/root{tree}/out/secret",
            "fdlink",
            f"rootlink{tree}/out/secret",
        ):
            with pytest.raises(PathOutsideRoots):
                roots.read_text(path)
            with pytest.raises(PathOutsideRoots):
                roots.open(path, "w")
            assert not roots.contains(path)
        assert (tree / "out" / "secret").read_text() == "OUTSIDE"
        assert roots.read_text("/proc/self/comm")  # plain procfs files stay readable
    finally:
        os.close(secret)


# --- reads, writes, modes -----------------------------------------------------------------------------


def test_max_bytes(tree: Path, strategy: str) -> None:
    roots = RootSet.from_paths([tree / "root"])
    assert roots.read_bytes("f", max_bytes=6) == b"inside"
    assert roots.read_text("f", max_bytes=100) == "inside"
    with pytest.raises(FileTooLarge, match="max_bytes=5"):
        roots.read_bytes("f", max_bytes=5)
    with pytest.raises(FileTooLarge):
        roots.read_text("f", max_bytes=0)
    with pytest.raises(ValueError, match="max_bytes"):
        roots.read_bytes("f", max_bytes=-1)


def test_open_mirrors_builtin_modes(tree: Path, strategy: str) -> None:
    roots = RootSet.from_paths([tree / "root"])
    with roots.open("f") as f:
        assert f.read() == "inside"
        assert f.name == str(tree / "root" / "f")
        assert not os.get_inheritable(f.fileno())
    with roots.open("f", "a", encoding="utf-8") as f:
        f.write("+more")
    with roots.open("f", "r+b") as f:
        assert f.read() == b"inside+more"
    with pytest.raises(FileExistsError):
        roots.open("f", "x")
    with roots.open("new", "x", newline="") as f:
        f.write("a\r\nb")
    assert (tree / "root" / "new").read_bytes() == b"a\r\nb"
    with pytest.raises(IsADirectoryError):
        roots.open("sub")
    with pytest.raises(IsADirectoryError):
        roots.read_bytes("sub")
    with pytest.raises(FileNotFoundError) as info:
        roots.open("missing")
    assert info.value.filename == str(tree / "root" / "missing")
    with pytest.raises(ValueError, match="mode"):
        roots.open("f", "rw")


def test_open_fd_is_confined_and_not_inheritable(tree: Path, strategy: str) -> None:
    roots = RootSet.from_paths([tree / "root"])
    fd = roots.open_fd("f", os.O_RDONLY)
    try:
        assert os.read(fd, 100) == b"inside"
        assert not os.get_inheritable(fd)
    finally:
        os.close(fd)
    os.symlink("../out/secret", tree / "root" / "esc")
    with pytest.raises(PathOutsideRoots):
        roots.open_fd("esc", os.O_RDONLY)


def test_atomic_write_keeps_mode_and_never_leaves_its_temp_file(tree: Path, strategy: str) -> None:
    roots = RootSet.from_paths([tree / "root"])
    os.chmod(tree / "root" / "f", 0o640)
    roots.write_text("f", "replaced")
    assert (tree / "root" / "f").read_text() == "replaced"
    assert stat.S_IMODE(os.stat(tree / "root" / "f").st_mode) == 0o640
    # A failing rename (the target is a non-empty directory) leaves everything as it was.
    (tree / "root" / "sub" / "keep").write_text("k")
    with pytest.raises(IsADirectoryError):
        roots.write_bytes("sub", b"data")
    assert sorted(os.listdir(tree / "root")) == ["f", "sub"]
    # A data object that fails half-way is refused before anything is created.
    with pytest.raises(TypeError):
        roots.write_bytes("g", "not bytes")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        roots.write_bytes("g", 5)  # type: ignore[arg-type]
    assert sorted(os.listdir(tree / "root")) == ["f", "sub"]


def test_atomic_write_through_an_inside_symlink_replaces_the_target(tree: Path, strategy: str) -> None:
    os.symlink("sub/real", tree / "root" / "link")
    roots = RootSet.from_paths([tree / "root"])
    roots.write_text("link", "via link")
    assert (tree / "root" / "link").is_symlink()
    assert (tree / "root" / "sub" / "real").read_text() == "via link"


# --- directories -------------------------------------------------------------------------------------


def test_mkdir_parents_and_exist_ok(tree: Path, strategy: str) -> None:
    roots = RootSet.from_paths([tree / "root"])
    roots.mkdir("a/b/c", parents=True)
    assert (tree / "root" / "a" / "b" / "c").is_dir()
    with pytest.raises(FileExistsError):
        roots.mkdir("a/b/c")
    roots.mkdir("a/b/c", exist_ok=True)
    with pytest.raises(FileExistsError):
        roots.mkdir("f", exist_ok=True)  # exists, but is not a directory
    with pytest.raises(FileNotFoundError):
        roots.mkdir("x/y")
    roots.mkdir(tree / "root", exist_ok=True)
    with pytest.raises(FileExistsError):
        roots.mkdir(tree / "root")
    os.symlink("../out", tree / "root" / "esc")
    with pytest.raises(PathOutsideRoots):
        roots.mkdir("esc/new/deeper", parents=True)
    assert sorted(os.listdir(tree / "out")) == ["secret"]


def test_recursive_remove_never_follows_symlinks(tree: Path, strategy: str) -> None:
    d = tree / "root" / "d"
    (d / "e").mkdir(parents=True)
    (d / "e" / "file").write_text("x")
    os.symlink(tree / "out", d / "abs_out")
    os.symlink("../../../out", d / "e" / "rel_out")
    roots = RootSet.from_paths([tree / "root"])
    with pytest.raises(OSError, match="not empty") as info:
        roots.remove("d")
    assert info.value.errno == errno.ENOTEMPTY
    roots.remove("d", recursive=True)
    assert not d.exists()
    assert sorted(os.listdir(tree / "out")) == ["secret"]


def test_remove_a_root_is_refused_unless_an_outer_root_holds_it(tree: Path, strategy: str) -> None:
    inner = RootSet.from_paths([tree / "root" / "sub"])
    with pytest.raises(InvalidPath, match="allowed roots itself"):
        inner.remove(tree / "root" / "sub")
    nested = RootSet.from_paths([tree / "root", tree / "root" / "sub"])
    nested.remove(tree / "root" / "sub")
    assert not (tree / "root" / "sub").exists()


def test_rename_across_roots_and_refused_out(tree: Path, strategy: str) -> None:
    (tree / "other").mkdir()
    roots = RootSet.from_paths([tree / "root", tree / "other"])
    roots.rename("f", tree / "other" / "g")
    assert (tree / "other" / "g").read_text() == "inside"
    with pytest.raises(PathOutsideRoots):
        roots.rename(tree / "other" / "g", tree / "out" / "stolen")
    with pytest.raises(PathOutsideRoots):
        roots.rename(tree / "out" / "secret", "taken")
    assert sorted(os.listdir(tree / "out")) == ["secret"]


def test_scandir_reports_types_sizes_and_hides_outside_targets(tree: Path, strategy: str) -> None:
    root = tree / "root"
    os.symlink("../out/secret", root / "esc")
    os.symlink("sub", root / "to_sub")
    os.symlink("nowhere", root / "dangling")
    roots = RootSet.from_paths([root])
    entries = {e.name: e for e in roots.scandir(".")}
    assert entries["f"] == Entry("f", root / "f", False, True, False, 6)
    assert (entries["sub"].is_dir, entries["sub"].is_symlink) == (True, False)
    assert (entries["to_sub"].is_dir, entries["to_sub"].is_symlink) == (True, True)
    assert entries["to_sub"].path == root / "to_sub"
    for name in ("esc", "dangling"):
        assert (entries[name].is_symlink, entries[name].is_dir, entries[name].is_file) == (True, False, False)
    assert sorted(roots.listdir("sub")) == []


# --- roots that are files, roots that move -------------------------------------------------------------


def test_a_file_root(tree: Path, strategy: str) -> None:
    roots = RootSet.from_paths([tree / "root" / "f"])
    assert roots.read_text(tree / "root" / "f") == "inside"
    roots.write_text(tree / "root" / "f", "rewritten")
    assert (tree / "root" / "f").read_text() == "rewritten"
    with pytest.raises(NotADirectoryError):
        roots.read_text(tree / "root" / "f" / "x")
    with pytest.raises(PathOutsideRoots):
        roots.read_text(tree / "out" / "secret")


def test_no_roots_means_every_operation_is_refused(tree: Path) -> None:
    roots = RootSet.empty()
    with pytest.raises(PathOutsideRoots):
        roots.read_text(tree / "root" / "f")
    with pytest.raises(PathOutsideRoots):
        roots.write_text("relative", "x")
    with pytest.raises(PathOutsideRoots):
        roots.listdir(tree / "root")


def test_operations_follow_the_root_directory_not_its_old_name(tree: Path, strategy: str) -> None:
    roots = RootSet.from_paths([tree / "root"])
    assert roots.read_text("f") == "inside"  # the root descriptor is open now
    os.rename(tree / "root", tree / "moved")
    os.symlink(tree / "out", tree / "root")  # an attacker puts a symlink where the root was
    assert roots.read_text(tree / "root" / "f") == "inside"  # still the granted directory
    with pytest.raises((PathOutsideRoots, FileNotFoundError)):
        roots.read_text(tree / "root" / "secret")
    fresh = RootSet.from_paths([tree / "moved"])
    os.unlink(tree / "root")
    (tree / "root").mkdir()
    os.rename(tree / "moved", tree / "gone")
    os.symlink(tree / "out", tree / "moved")
    with pytest.raises(PathOutsideRoots, match="was replaced"):
        fresh.read_text(tree / "moved" / "secret")


# --- descriptors -----------------------------------------------------------------------------------------


def exercise(roots: RootSet, base: Path) -> None:
    roots.write_text(base / "w", "x")
    assert roots.read_text(base / "w") == "x"
    with roots.open(base / "w") as f:
        f.read()
    roots.listdir(base)
    roots.scandir(base)
    roots.stat(base / "w")
    roots.mkdir(base / "d")
    roots.rename(base / "d", base / "e")
    roots.remove(base / "e")
    roots.remove(base / "w")
    assert roots.contains(base)
    with contextlib.suppress(PathOutsideRoots):
        roots.read_text(base / ".." / "out" / "secret")
    with contextlib.suppress(FileNotFoundError):
        roots.read_text(base / "missing")


def test_no_descriptor_leaks(tree: Path, strategy: str) -> None:
    dirs = [tree / f"r{i}" for i in range(5)]
    for d in dirs:
        d.mkdir()
    baseline = open_fds(tree)
    with RootSet.from_paths(dirs) as roots:
        for _ in range(3):
            for d in dirs:
                exercise(roots, d)
        assert open_fds(tree) == baseline + len(dirs)  # one descriptor per root, opened once
    assert open_fds(tree) == baseline
    exercise(roots, dirs[0])  # usable after close(): opens its root again
    roots.close()
    assert open_fds(tree) == baseline


def test_replaced_root_sets_release_their_descriptors(tree: Path, strategy: str) -> None:
    baseline = open_fds(tree)
    for _ in range(50):  # what the roots lifecycle does: a new RootSet on every refresh, the old dropped
        roots = RootSet.from_paths([tree / "root"])
        exercise(roots, tree / "root")
        roots.with_source("copy").read_text("f")
    del roots
    gc.collect()
    assert open_fds(tree) == baseline


def test_open_root_descriptors_are_bounded(tree: Path, strategy: str) -> None:
    dirs = [tree / f"r{i}" for i in range(MAX_OPEN_ROOTS + 30)]
    for d in dirs:
        d.mkdir()
        (d / "f").write_text(d.name)
    baseline = open_fds(tree)
    roots = RootSet.from_paths(dirs)
    for d in dirs:
        assert roots.read_text(d / "f") == d.name
    assert open_fds(tree) <= baseline + MAX_OPEN_ROOTS
    roots.close()
    assert open_fds(tree) == baseline


# --- strategy fallback -----------------------------------------------------------------------------------


@pytest.mark.skipif(linux.OPENAT2 is None, reason="openat2 is not available on this platform")
def test_a_kernel_without_openat2_falls_back_to_the_walk_once(
    tree: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    assert linux.OPENAT2 is not None
    # The kernel's answer is faked on the syscall object (ENOSYS, as on Linux < 5.6), not on a module global.
    monkeypatch.setattr(linux.OPENAT2, "beneath", lambda *args: -errno.ENOSYS)
    with strategy_in_force("openat2", self_check=False):
        roots = RootSet.from_paths([tree / "root"])
        with caplog.at_level(logging.WARNING, logger="mcp_roots"):
            assert roots.read_text("sub/../f") == "inside"
            assert roots.read_text("sub/../f") == "inside"
            os.symlink("../out/secret", tree / "root" / "esc")
            with pytest.raises(PathOutsideRoots):
                roots.read_text("esc")
        assert _beneath.strategy().name == "walk"
        roots.close()
    assert len([r for r in caplog.records if "openat2 is unavailable" in r.message]) == 1


@pytest.mark.skipif(linux.OPENAT2 is None, reason="openat2 is not available on this platform")
def test_the_self_check_sees_a_walk_that_opens_what_openat2_refused(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The self-check re-does openat2's 'no such file' and 'not a directory' by the walk, so a walk that
    reads a link's target 'f/.' as the file f (as the walk once did) fails it instead of passing unseen."""
    os.symlink("f/.", tree / "root" / "lf")
    with strategy_in_force("openat2", self_check=True):
        roots = RootSet.from_paths([tree / "root"])
        with pytest.raises(NotADirectoryError):
            roots.read_bytes("lf")
        monkeypatch.setattr(_beneath, "_ending", lambda path: (False, False))  # '/' and '/.' not read
        with pytest.raises(AssertionError, match="self-check: openat2 said ENOTDIR"):
            roots.read_bytes("lf")
        roots.close()


# --- contains / resolve through the descriptors --------------------------------------------------------


def test_contains_and_resolve_agree_with_the_name_walk(tree: Path) -> None:
    root, out = tree / "root", tree / "out"
    (tree / "other").mkdir()
    (root / "sub" / "deep").mkdir()
    (root / "sub" / "deep" / "file").write_text("x")
    links = {
        "in": "sub",
        "abs_in": str(root / "sub"),
        "out": "../out",
        "abs_out": str(out),
        "other": "../other",
        "loop": "loop",
        "dotdot_back": "../root/sub",
        "proc": "/proc/self/root",
    }
    for name, target in links.items():
        os.symlink(target, root / name)
    roots = RootSet.from_paths([root, tree / "other"])
    paths: list[str | Path] = [
        root,
        root / "f",
        root / "f/",
        root / "f" / "x",
        root / "missing",
        root / "missing" / "..",
        root / "sub" / "deep" / "file",
        root / "sub" / ".." / "f",
        root / ".." / "root" / "f",
        root / ".." / "out" / "secret",
        *(root / name for name in links),
        *(root / name / "x" for name in links),
        root / "in" / "deep" / "file",
        root / "other" / "..",
        tree / "root_evil",
        out / "secret",
        "f",
        "sub/deep",
        "../out/secret",
    ]

    def strictly_beneath_a_root(position: str) -> bool:  # where the one '..' rule lets a '..' apply
        return any(position.startswith(str(p) + "/") for p in roots.paths)

    for path in paths:
        with_descriptor = roots.contains(path)
        try:
            resolved: object = roots.resolve(path)
        except PathOutsideRoots:
            resolved = None
        text = str(path) if str(path).startswith("/") else str(root / path)
        try:
            canonical = canonicalize(text, strictly_beneath_a_root)
            by_name = roots.root_above(canonical) is not None
        except Exception:
            by_name, canonical = False, None
        assert with_descriptor == by_name, path
        assert resolved == (Path(canonical) if by_name and canonical else None), path


def test_contains_uses_one_descriptor_open_for_an_existing_path(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if linux.OPENAT2 is None:  # pragma: no cover
        pytest.skip("openat2 is not available on this platform")
    (tree / "root" / "a" / "b").mkdir(parents=True)
    (tree / "root" / "a" / "b" / "c").write_text("x")
    roots = RootSet.from_paths([tree / "root"])
    lstats: list[object] = []
    real_lstat = os.lstat

    def counting_lstat(p: str, **kw: Any) -> os.stat_result:
        lstats.append(p)
        return real_lstat(p, **kw)

    monkeypatch.setattr(os, "lstat", counting_lstat)
    assert roots.contains(tree / "root" / "a" / "b" / "c")
    assert roots.resolve(tree / "root" / "a" / "b" / "c") == tree / "root" / "a" / "b" / "c"
    assert lstats == []  # no name-by-name walk for an existing path
    assert roots.contains(tree / "root" / "a" / "new")
    assert lstats  # a path that does not exist yet still goes through the walk


def test_a_file_root_with_dotdot_is_not_the_file(tree: Path) -> None:
    file_root = tree / "root" / "f"
    roots = RootSet.from_paths([file_root])
    assert roots.contains(file_root)
    # A trailing '/' needs a directory, as for the kernel (stat('f/') is ENOTDIR); the descriptor answer
    # used to drop the '/' and say inside, where the name walk (and MCP_ROOTS_SELF_CHECK) said outside.
    assert not roots.contains(str(file_root) + "/")
    with pytest.raises(NotADirectoryError):
        roots.read_text(str(file_root) + "/")
    assert roots.read_text(file_root) == (file_root).read_text()
    assert not roots.contains(str(file_root) + "/..")
    with pytest.raises(PathOutsideRoots):
        roots.read_text(str(file_root) + "/..")


def test_close_while_other_threads_operate_never_breaks_them(tree: Path) -> None:
    """close() drops the descriptors while operations in other threads still hold them: those finish on
    the descriptor they started with (no EBADF, no reused number), later ones reopen."""
    import threading
    import time

    roots = RootSet.from_paths([tree / "root"])
    failures: list[BaseException] = []
    reads = [0]
    stop = time.monotonic() + 0.5

    def reader() -> None:
        while time.monotonic() < stop:
            try:
                assert roots.read_text("f") == "inside"
                reads[0] += 1
            except BaseException as exc:
                failures.append(exc)
                return

    threads = [threading.Thread(target=reader) for _ in range(3)]
    for t in threads:
        t.start()
    closes = 0
    while time.monotonic() < stop:
        roots.close()
        closes += 1
    for t in threads:
        t.join()
    assert failures == []
    assert reads[0] > 0
    assert closes > 0


def test_innermost_root_matches_the_component_probe(tmp_path: Path) -> None:
    names = ["a", "ab", "a/b", "a/b/c", "abc/d", "x" * 30, "a/bc"]
    for name in names:
        (tmp_path / name).mkdir(parents=True, exist_ok=True)
    index = RootIndex([f"{tmp_path}/{n}" for n in names], folding_for("linux"))
    assert index.lengths, "the by-length probe is in use"
    probes = [
        f"{tmp_path}/{rest}"
        for rest in ["a", "a/", "a/b", "a/bx", "a/b/c/d", "ab/c", "abc", "abc/d/e", "a/bc/d", "x" * 31, "zz"]
    ]
    for text in [*probes, str(tmp_path), "/", "/x"]:
        assert index.innermost_prefix(text) == index.above(text), text
    everything = RootIndex(["/", f"{tmp_path}/a"], folding_for("linux"))
    for text in [*probes, "/", "/x"]:
        assert everything.innermost_prefix(text) == everything.above(text), text


@pytest.mark.parametrize("suffix", ["f/", "./f/", "./f/.", "sub/../f/", "f/."])
def test_a_trailing_slash_on_a_file_is_not_a_directory(tree: Path, strategy: str, suffix: str) -> None:
    (tree / "root" / "f").write_bytes(b"data")
    (tree / "root" / "sub").mkdir(exist_ok=True)
    roots = RootSet.from_paths([tree / "root"])
    with pytest.raises(NotADirectoryError):
        roots.read_bytes(f"{tree / 'root'}/{suffix}")
    assert roots.read_bytes(f"{tree / 'root'}/./f") == b"data"
    roots.close()
