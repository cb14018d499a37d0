"""An atomic rewrite keeps who owns the file and never hands set-id bits to new content.

As root (the test machine's user), a file owned by another uid with mode 6755 is rewritten through
RootSet.write_bytes: the new file must be that uid's, 0755, with the new content. The naive control, the
old copy of ``S_IMODE``, leaves a root-owned 6755 file: a set-user-id program of root's with content a
client chose. Where the owner cannot be kept (not root), the rewrite is refused and the file unchanged.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path

import pytest

from mcp_roots import RootSet
from mcp_roots.paths._write import keep_metadata, new_file_mode

OTHER_UID, OTHER_GID = 4321, 4322

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make another user's file")


def _set_id_file(path: Path) -> None:
    path.write_bytes(b"#!/bin/sh\necho old\n")
    os.chown(path, OTHER_UID, OTHER_GID)
    os.chmod(path, 0o6755)  # after the chown, which clears set-id bits
    st = os.stat(path)
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (OTHER_UID, OTHER_GID, 0o6755)


@as_root
def test_the_naive_mode_copy_makes_a_root_owned_set_id_file(tmp_path: Path) -> None:
    """The control: what write_atomic did before (fchmod of S_IMODE on root's new file)."""
    victim = tmp_path / "tool"
    _set_id_file(victim)
    fd = os.open(tmp_path / "tmp", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.fchmod(fd, stat.S_IMODE(os.stat(victim).st_mode))
        os.write(fd, b"#!/bin/sh\nid\n")
    finally:
        os.close(fd)
    os.rename(tmp_path / "tmp", victim)
    st = os.stat(victim)
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (0, 0o6755)  # root's, set-user-id: the hole


@as_root
@pytest.mark.parametrize("mode", [0o6755, 0o4755, 0o2755, 0o1777, 0o640], ids=oct)
def test_write_bytes_keeps_the_owner_and_drops_set_id_bits(tmp_path: Path, mode: int) -> None:
    victim = tmp_path / "tool"
    _set_id_file(victim)
    os.chmod(victim, mode)
    with RootSet.from_paths([tmp_path]) as roots:
        roots.write_bytes(victim, b"#!/bin/sh\nid\n")
    st = os.stat(victim)
    assert victim.read_bytes() == b"#!/bin/sh\nid\n"
    assert (st.st_uid, st.st_gid) == (OTHER_UID, OTHER_GID), "the owner changed"
    assert stat.S_IMODE(st.st_mode) == mode & 0o777, oct(st.st_mode)
    assert [p.name for p in tmp_path.iterdir()] == ["tool"], "a temporary file was left"


@as_root
def test_a_file_root_rewritten_in_place_loses_its_set_id_bits(tmp_path: Path) -> None:
    victim = tmp_path / "tool"
    _set_id_file(victim)
    with RootSet.from_paths([victim]) as roots:
        roots.write_bytes(victim, b"new")
    st = os.stat(victim)
    assert victim.read_bytes() == b"new"
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (OTHER_UID, OTHER_GID, 0o755)


@as_root
def test_where_the_owner_cannot_be_kept_the_rewrite_is_refused() -> None:
    """A process that is not root (a forked child that dropped to another uid) rewriting a file it may
    replace (the directory is writable to it) but whose owner it cannot give the new file: refused, with
    the file and the directory as they were."""
    top = Path(tempfile.mkdtemp())  # not under pytest's 0700 basetemp: the child must reach it
    try:
        os.chmod(top, 0o755)
        shared = top / "shared"
        shared.mkdir()
        os.chmod(shared, 0o777)
        _refused_in(shared)
    finally:
        shutil.rmtree(top)


def _refused_in(shared: Path) -> None:
    victim = shared / "notes"
    victim.write_bytes(b"theirs")
    os.chown(victim, OTHER_UID, OTHER_GID)
    os.chmod(victim, 0o666)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        os.close(read)
        try:
            os.setgroups([])
            os.setresgid(OTHER_GID + 1, OTHER_GID + 1, OTHER_GID + 1)
            os.setresuid(OTHER_UID + 1, OTHER_UID + 1, OTHER_UID + 1)
            with RootSet.from_paths([shared]) as roots:
                roots.write_bytes(victim, b"mine now")
            os.write(write, b"written")
        except PermissionError as exc:
            os.write(write, f"refused: {exc}".encode())
        except BaseException as exc:
            os.write(write, f"other: {exc!r}".encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        said = pipe.read().decode()
    os.waitpid(pid, 0)
    assert said.startswith("refused: "), said
    assert "cannot keep the owner" in said, said
    st = os.stat(victim)
    assert victim.read_bytes() == b"theirs"
    assert (st.st_uid, st.st_gid) == (OTHER_UID, OTHER_GID)
    assert sorted(p.name for p in shared.iterdir()) == ["notes"], "a temporary file was left"


def test_keep_metadata_is_the_one_function_the_broker_calls_too(tmp_path: Path) -> None:
    """Without root: the caller's own file keeps its bits, minus set-id ones (a user may set them on a
    file of their own, and they must not reach new content either)."""
    old = tmp_path / "old"
    old.write_bytes(b"")
    os.chmod(old, 0o4750)
    new = tmp_path / "new"
    fd = os.open(new, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        keep_metadata(fd, os.stat(old), "old")
    finally:
        os.close(fd)
    assert stat.S_IMODE(os.stat(new).st_mode) == 0o750


@pytest.mark.parametrize("existing", [None, 0o600, 0o640])
def test_the_new_content_is_never_open_to_a_mode_the_result_would_refuse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, existing: int | None
) -> None:
    """The temporary file write_bytes fills is 0600 while the content goes in (a new file gets its mode
    once it is all written; an existing file's mode is given first), so no one the result's mode would
    refuse can open it meanwhile and read the content through that descriptor. (Created 0666 less the
    umask, it was readable by everyone while a secret was written into it.)"""
    target = tmp_path / "secret.txt"
    if existing is not None:
        target.write_bytes(b"old")
        target.chmod(existing)
    seen: list[int] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:  # after the content is written, before the file is put in place
        if stat.S_ISREG(os.fstat(fd).st_mode):
            seen.append(stat.S_IMODE(os.fstat(fd).st_mode))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    RootSet.from_paths([tmp_path]).write_bytes(target, b"TOP SECRET")
    assert seen == [0o600 if existing is None else existing], seen
    final = stat.S_IMODE(target.stat().st_mode)
    assert final == (new_file_mode() if existing is None else existing)
    assert target.read_bytes() == b"TOP SECRET"
