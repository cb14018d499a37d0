"""The fast paths of RootSet.open, read_bytes and contains(): each must answer exactly what the general path
answers (the file object the builtin would build, the canonical path the name walk would find), refuse what
it refuses, and leak no descriptor."""

from __future__ import annotations

import errno
import io
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcp_roots import InvalidPath, PathOutsideRoots, RootSet
from mcp_roots._sys import linux
from mcp_roots.paths import _beneath
from mcp_roots.paths._canonical import canonicalize
from mcp_roots.paths._descriptors import RootDescriptors, open_root
from mcp_roots.paths._router import common_path
from tests.corpus import STRATEGIES, strategy_in_force
from tests.kit import open_fds

needs_openat2 = pytest.mark.skipif(linux.OPENAT2 is None, reason="openat2 is not available here")


@pytest.fixture(params=STRATEGIES)
def strategy(request: pytest.FixtureRequest) -> Iterator[str]:
    with strategy_in_force(request.param) as name:
        yield name


# --- open() for reading builds the builtin's file object ------------------------------------------------


@pytest.mark.parametrize("mode", ["r", "rt", "rb"])
def test_read_modes_build_what_the_builtin_builds(tmp_path: Path, strategy: str, mode: str) -> None:
    (tmp_path / "d").mkdir()
    path = tmp_path / "d" / "f.txt"
    path.write_bytes(b"one\r\ntwo\n\xc3\xa9")
    roots = RootSet.from_paths([tmp_path])
    encoding = None if "b" in mode else "utf-8"
    with open(path, mode, encoding=encoding) as theirs, roots.open(path, mode, encoding=encoding) as ours:
        assert type(ours) is type(theirs)
        assert ours.name == theirs.name == str(path)
        assert ours.mode == theirs.mode
        assert repr(ours) == repr(theirs)
        if "b" in mode:
            assert isinstance(ours, io.BufferedReader)
            assert isinstance(theirs, io.BufferedReader)
            raw_ours, raw_theirs = ours.raw, theirs.raw
        else:
            assert isinstance(ours, io.TextIOWrapper)
            assert isinstance(theirs, io.TextIOWrapper)
            assert ours.encoding == theirs.encoding
            assert ours.line_buffering == theirs.line_buffering is False
            assert isinstance(ours.buffer, io.BufferedReader)
            assert isinstance(theirs.buffer, io.BufferedReader)
            raw_ours, raw_theirs = ours.buffer.raw, theirs.buffer.raw
        assert isinstance(raw_ours, io.FileIO)
        assert isinstance(raw_theirs, io.FileIO)
        assert raw_ours.name == raw_theirs.name
        assert raw_ours.mode == raw_theirs.mode
        assert raw_ours._blksize == raw_theirs._blksize  # type: ignore[attr-defined]
        assert ours.read() == theirs.read()  # newline translation included
        assert not os.get_inheritable(ours.fileno())
    assert ours.closed
    with roots.open(path, "r", encoding="latin-1", newline="") as ours:
        assert ours.read() == "one\r\ntwo\n\xc3\xa9"


def test_a_failing_read_open_leaks_no_descriptor(tmp_path: Path, strategy: str) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "f").write_text("x")
    os.mkfifo(tmp_path / "fifo")
    roots = RootSet.from_paths([tmp_path])
    roots.contains(tmp_path / "f")
    roots.open(tmp_path / "f", "rb").close()  # the root descriptor is open from here on
    before = open_fds(tmp_path)
    with pytest.raises(LookupError):
        roots.open(tmp_path / "f", "r", encoding="no-such-codec")
    with pytest.raises(IsADirectoryError) as info:
        roots.open(tmp_path / "sub", "rb")
    assert info.value.filename == str(tmp_path / "sub")
    with pytest.raises(InvalidPath, match="FIFO"):
        roots.open(tmp_path / "fifo", "rb")
    with pytest.raises(FileNotFoundError):
        roots.open(tmp_path / "missing", "rt")
    with pytest.raises(ValueError, match="binary mode"):
        roots.open(tmp_path / "f", "rb", encoding="utf-8")  # the builtin's own check, through its path
    with pytest.raises(ValueError, match="binary mode"):
        roots.open(tmp_path / "f", "rb", newline="")  # an empty newline is one too
    with pytest.raises(TypeError):
        roots.open(tmp_path / "f", "rb", -1.0)  # type: ignore[call-overload]  # as the builtin: not an int
    assert open_fds(tmp_path) == before


def test_o_nonblock_stays_only_where_it_changes_nothing(tmp_path: Path) -> None:
    # procfs honours O_NONBLOCK for some of its regular files: a read there must be blocking again.
    proc = RootSet.from_paths(["/proc/sys/kernel"])
    with proc.open("/proc/sys/kernel/ostype", "rb") as f:
        assert os.get_blocking(f.fileno())
        assert f.read()
    assert proc.read_text("/proc/sys/kernel/ostype")
    # A write is always blocking, whatever the filesystem.
    roots = RootSet.from_paths([tmp_path])
    with roots.open(tmp_path / "w", "wb") as f:
        assert os.get_blocking(f.fileno())
    with roots.open(tmp_path / "w", "rb", buffering=0) as f:  # the builtin's path: blocking too
        assert os.get_blocking(f.fileno())
    descriptor = open_root(str(tmp_path))
    on_plain = linux.filesystem_type(descriptor.fd) in linux.PLAIN_FILESYSTEMS
    os.close(descriptor.fd)
    assert descriptor.plain_dev == (os.stat(tmp_path).st_dev if on_plain else -1)
    with roots.open(tmp_path / "w", "rb") as f:
        assert os.get_blocking(f.fileno()) is not on_plain
        assert f.read() == b""


def test_the_one_frame_read_opens_what_the_general_path_opens_and_nothing_else(tmp_path: Path) -> None:
    """``Router.read_fast`` (RootSet.open and read_bytes, every root path of one length, the root's
    descriptor open: held through RootDescriptors.hold) answers a regular file, 1 or 9 names deep, with the
    inode the general path opens and the text of the path; for anything else it opens nothing that stays
    open and answers None, so that the general path words the refusal."""
    root = tmp_path / "root"
    deep = root.joinpath(*(f"d{i}" for i in range(8)))
    deep.mkdir(parents=True)
    (root / "f").write_text("one")
    (deep / "f").write_text("nine")
    os.mkfifo(deep / "fifo")
    os.symlink("f", root / "link")  # a symlink as the final name: the general path follows it
    (tmp_path / "outside").write_text("secret")
    os.symlink("../../../../../../../../../outside", deep / "out")  # leads out of the root
    (tmp_path / "zoot").mkdir()
    roots = RootSet.from_paths([root, tmp_path / "zoot"])  # two roots of one length
    router = roots._router
    assert router.read_fast(root / "f") is None  # the descriptor is not open yet (hold: no I/O)
    assert roots.read_text(root / "f") == "one"  # Router.fast opens it (acquire)
    before = open_fds(tmp_path)
    for path, text in ((root / "f", "one"), (deep / "f", "nine")):
        hit = router.read_fast(str(path))
        assert hit is not None, path
        fd, st, text_of_path = hit
        assert text_of_path == str(path)
        try:
            assert (st.st_dev, st.st_ino) == (os.stat(path).st_dev, os.stat(path).st_ino)
            assert os.read(fd, 100) == text.encode()
        finally:
            os.close(fd)
        assert roots.read_text(path) == text
    for other in (deep / "fifo", deep, root / "link", deep / "out", deep / "missing", root / "missing"):
        assert router.read_fast(str(other)) is None, other
    # An empty name is not the common path (common_path): the general path answers 'a//b' and 'ROOT//f'.
    doubled = str(deep).replace("/d3/", "/d3//") + "/f"
    assert router.read_fast(doubled) is None
    assert router.read_fast(f"{root}//f") is None
    for spelling, content in (
        (doubled, b"nine"),
        (f"{root}//f", b"one"),
        (f"{root}//d0/d1/d2/d3/d4/d5/d6/d7/f", b"nine"),
    ):
        with roots.open(spelling, "rb") as f:
            assert f.name == spelling
            assert f.read() == content
    assert open_fds(tmp_path) == before
    assert roots.read_text(root / "link") == "one"
    with pytest.raises(InvalidPath, match="FIFO"):
        roots.open(deep / "fifo", "rb")
    with pytest.raises(PathOutsideRoots):
        roots.open(deep / "out", "rb")
    with _beneath.forced("openat2", self_check=True):  # the self-check re-does every answer: not here
        assert router.read_fast(str(deep / "f")) is None
        assert roots.read_text(deep / "f") == "nine"
    assert open_fds(tmp_path) == before


def test_the_read_lane_takes_root_paths_of_different_lengths(tmp_path: Path) -> None:
    """Two projects rarely have root paths of one length: ``Router.read_fast`` then finds the root by
    ``innermost_prefix`` and reads a regular file beneath either in the lane (the inode the general route
    opens); the root itself and what is not a regular file it leaves to the general route."""
    short, longer = tmp_path / "a", tmp_path / "a-longer-name"
    (short / "d").mkdir(parents=True)
    longer.mkdir()
    (short / "d" / "f").write_text("one")
    (longer / "f").write_text("two")
    roots = RootSet.from_paths([short, longer])
    router = roots._router
    for path, text in ((short / "d" / "f", "one"), (longer / "f", "two")):
        assert roots.read_text(path) == text  # the general route opens the root's descriptor
        hit = router.read_fast(str(path))
        assert hit is not None, path
        fd, st, text_of_path = hit
        try:
            assert text_of_path == str(path)
            assert (st.st_dev, st.st_ino) == (os.stat(path).st_dev, os.stat(path).st_ino)
            assert os.read(fd, 100) == text.encode()
        finally:
            os.close(fd)
    before = open_fds(tmp_path)
    for other in (short, longer, short / "d", f"{short}/", tmp_path / "a-long" / "f"):
        assert router.read_fast(str(other)) is None, other
    assert open_fds(tmp_path) == before
    roots.close()


# --- the one common-path test, and the descriptors held through RootDescriptors ---------------------------


def test_common_path_is_the_one_test_every_lane_makes(tmp_path: Path) -> None:
    """``common_path`` says which paths the fast lanes take; every lane answers None (its op never called,
    nothing opened) for each path it refuses, and the general route answers them all as before."""
    root = tmp_path / "root"
    (root / "d").mkdir(parents=True)
    (root / "d" / "f").write_text("x")
    (root / "d" / ".hidden").write_text("h")
    roots = RootSet.from_paths([root])
    router = roots._router
    top = str(root)
    taken = [f"{top}/d/f", f"{top}/d/.hidden", f"{top}/d/", top, Path(f"{top}/d/f")]
    refused: list[object] = [
        f"{top}//d/f",  # an empty component
        f"{top}/./d/f",  # '.'
        f"{top}/d/../d/f",  # '..'
        f"{top}/d/f/.",
        f"{top}/d/f/..",
        "d/f",  # relative
        f"{top}/d/\u00e9",  # not ASCII
        f"{top}/d/f\x00",  # a NUL
        "/" + "a" * 5000,  # PATH_MAX or longer
        b"/bytes",  # not text
        "",
    ]
    for path in taken:
        assert common_path(path) == str(path), path
    for path in refused:
        assert common_path(path) is None, path

    def never(*args: object) -> int:
        raise AssertionError(f"a lane ran its op for a path it should leave: {args!r}")

    assert roots.read_text(root / "d" / "f") == "x"  # the root's descriptor is open: the lanes could run
    before = open_fds(tmp_path)
    for path in refused:
        assert router.read_fast(path) is None, path
        assert router.fast(path, never, os.O_RDONLY, 0) is None, path
        assert router.canonical_fast(path) is None, path
    assert open_fds(tmp_path) == before
    with roots.open(f"{top}//d/f", "rb") as f:  # the general route answers what the lanes leave
        assert f.read() == b"x"
    assert roots.resolve(f"{top}/./d/../d/f") == root / "d" / "f"


def test_root_descriptors_hold_acquire_release_and_retire(tmp_path: Path) -> None:
    """``hold`` never opens (any path may be asked), ``acquire`` opens a root once, ``close`` retires: a
    descriptor still held stays open until its last holder releases it, and is then closed."""
    descriptors = RootDescriptors()
    before = open_fds(tmp_path)
    assert descriptors.hold(str(tmp_path)) is None  # not open: hold opens nothing
    assert open_fds(tmp_path) == before
    held = descriptors.acquire(str(tmp_path))
    assert open_fds(tmp_path) == before + 1
    again = descriptors.hold(str(tmp_path))
    assert again is held
    assert held.holders == [None, None]
    descriptors.release(again)
    descriptors.close()  # retired while one holder remains: still open
    assert held.retired
    assert not held.closed
    os.fstat(held.fd)
    assert descriptors.hold(str(tmp_path)) is None  # retired: no longer handed out
    descriptors.release(held)  # the last holder closes it
    assert held.closed
    assert open_fds(tmp_path) == before


# --- contains(): one lookup without symlinks, the same answer as the name walk ---------------------------


@needs_openat2
def test_lookup_without_symlinks_refuses_every_symlink(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "f").write_text("x")
    os.symlink("a", tmp_path / "link")
    os.symlink("f", tmp_path / "a" / "b" / "flink")
    assert _beneath.lookup_without_symlinks(f"{tmp_path}/a/b/f") == 0
    assert _beneath.lookup_without_symlinks(f"{tmp_path}/a/b") == 0
    assert _beneath.lookup_without_symlinks(f"{tmp_path}/link/b/f") == errno.ELOOP
    assert _beneath.lookup_without_symlinks(f"{tmp_path}/a/b/flink") == errno.ELOOP
    assert _beneath.lookup_without_symlinks(f"{tmp_path}/a/missing") == errno.ENOENT
    assert _beneath.lookup_without_symlinks(f"{tmp_path}/a/b/f/x") == errno.ENOTDIR
    assert _beneath.lookup_without_symlinks("/proc/self/root") == errno.ELOOP


def by_name(roots: RootSet, path: Path) -> bool:
    """The reference answer: the name-by-name walk, then the index."""
    try:
        return roots.root_above(canonicalize(str(path))) is not None
    except Exception:
        return False


@needs_openat2
def test_a_moved_root_is_judged_by_name_as_the_walk_judges_it(tmp_path: Path) -> None:
    """The kernel's answer is used only when no component of the path is a symlink, so a root that was moved
    and whose old name now points elsewhere cannot be answered by the descriptor that followed it."""
    (tmp_path / "a" / "root").mkdir(parents=True)
    (tmp_path / "a" / "root" / "f").write_text("x")
    (tmp_path / "elsewhere").mkdir()
    root = tmp_path / "a" / "root"
    roots = RootSet.from_paths([root])
    target = root / "f"
    assert roots.contains(target)
    roots.open(target).close()  # the root descriptor now pins the directory

    # The root moves away; its old name becomes a symlink to where it went.
    os.rename(root, tmp_path / "elsewhere" / "root")
    os.symlink(tmp_path / "elsewhere" / "root", root)
    assert by_name(roots, target) is False
    assert roots.contains(target) is False

    # An intermediate component replaced by a symlink to the directory it used to be.
    os.unlink(root)
    os.rename(tmp_path / "elsewhere" / "root", root)
    os.rename(tmp_path / "a", tmp_path / "moved")
    os.symlink(tmp_path / "moved", tmp_path / "a")
    assert by_name(roots, target) is False
    assert roots.contains(target) is False

    # A real directory under the old name again: inside by name, for both.
    os.unlink(tmp_path / "a")
    (tmp_path / "a" / "root").mkdir(parents=True)
    (tmp_path / "a" / "root" / "f").write_text("new")
    assert by_name(roots, target) is True
    assert roots.contains(target) is True
    assert roots.resolve(target) == target


@needs_openat2
def test_fast_contains_agrees_with_the_walk_on_shapes_of_paths(tmp_path: Path) -> None:
    (tmp_path / "root" / ".git" / "objects").mkdir(parents=True)
    (tmp_path / "root" / "f").write_text("x")
    (tmp_path / "root" / "..f").write_text("x")
    (tmp_path / "out").mkdir()
    os.symlink("../out", tmp_path / "root" / "esc")
    os.symlink("f", tmp_path / "root" / "inner")
    roots = RootSet.from_paths([tmp_path / "root"])
    base = str(tmp_path / "root")
    shapes = [
        base,
        base + "/",
        base + "/f",
        base + "/f/",
        base + "/f/.",
        base + "/./f",
        base + "//f",
        base + "/..f",
        base + "/.git/objects",
        base + "/.git/../f",
        base + "/esc",
        base + "/esc/x",
        base + "/inner",
        base + "/missing/new",
        base + "/../out",
        base + "/../root/f",
        str(tmp_path / "out"),
        "/",
    ]
    fast = {shape: (roots.contains(shape), _resolved(roots, shape)) for shape in shapes}
    with strategy_in_force("walk-no-opath"):  # the name walk only
        slow = RootSet.from_paths([tmp_path / "root"])
        for shape in shapes:
            assert fast[shape] == (slow.contains(shape), _resolved(slow, shape)), shape


def _resolved(roots: RootSet, path: str) -> str | None:
    """resolve()'s answer, which resolve_text() must give as text (its fast path answers alone)."""
    try:
        text = roots.resolve_text(path)
    except Exception as exc:
        text = type(exc).__name__
    try:
        answer = str(roots.resolve(path))
    except Exception as exc:
        answer = type(exc).__name__
    assert text == answer, path
    return answer


def test_plain_filesystem_numbers_are_statfs_magics() -> None:
    fd = os.open("/proc", os.O_RDONLY | os.O_DIRECTORY)
    try:
        kind = linux.filesystem_type(fd)
    finally:
        os.close(fd)
    if kind is None:  # pragma: no cover - not Linux x86_64/arm64
        assert kind is None
    else:
        assert kind == 0x9FA0  # PROC_SUPER_MAGIC: procfs is not a plain filesystem
        assert kind not in linux.PLAIN_FILESYSTEMS


# --- the self-check mode (cap-std's racy_asserts) ----------------------------------------------------------


@needs_openat2
def test_the_self_check_catches_a_fast_path_that_opens_the_wrong_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The control for every self-checked test: a fast path that lies is caught by the walk."""
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "f").write_text("right")
    (tmp_path / "wrong").write_text("wrong")
    assert linux.OPENAT2 is not None
    honest = linux.OPENAT2.beneath

    def lying(dirfd: int, path: bytes, flags: int, mode: int) -> int:
        if path == b"a/f":
            path = b"wrong"
        return honest(dirfd, path, flags, mode)

    monkeypatch.setattr(linux.OPENAT2, "beneath", lying)
    with strategy_in_force("openat2", self_check=False):
        roots = RootSet.from_paths([tmp_path])
        assert roots.read_text("a/f") == "wrong", "without the self-check the lie goes through"
        roots.close()
    with strategy_in_force("openat2", self_check=True):
        roots = RootSet.from_paths([tmp_path])
        with pytest.raises(AssertionError, match="self-check"):
            roots.read_text("a/f")
        roots.close()
