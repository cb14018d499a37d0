"""A read-only root stays read-only for a confined child: ``RootSet.run``/``popen``/``run_async`` with
``write=True`` write the read-write roots only; the control, the same roots read-write, writes them all.
The real kernel is the judge."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from mcp_roots import Root, RootSet, SandboxUnavailable
from mcp_roots.sandbox import support
from tests.kit import kernel_refused

KERNEL = support()
needs_landlock = pytest.mark.skipif(not KERNEL.available, reason=f"no Landlock here: {KERNEL.reason}")


def write_into(roots: RootSet, folder: Path, **kwargs: object) -> subprocess.CompletedProcess[str]:
    command = ["sh", "-c", f"echo written > {folder / 'new.txt'}"]
    result: subprocess.CompletedProcess[str] = roots.run(
        command,
        write=True,
        capture_output=True,
        text=True,
        timeout=60,
        **kwargs,  # type: ignore[arg-type]
    )
    return result


@pytest.fixture
def folders(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "ro").mkdir()
    (tmp_path / "rw").mkdir()
    (tmp_path / "ro" / "f").write_text("old")
    return (tmp_path / "ro").resolve(), (tmp_path / "rw").resolve()


@needs_landlock
def test_a_child_writes_the_read_write_root_and_not_the_read_only_one(folders: tuple[Path, Path]) -> None:
    ro, rw = folders
    roots = RootSet([Root.from_path(ro, access="read"), Root.from_path(rw)])
    assert write_into(roots, rw).returncode == 0
    assert (rw / "new.txt").read_text() == "written\n"
    refused = write_into(roots, ro)
    assert refused.returncode != 0
    assert kernel_refused(refused.stderr)
    assert not (ro / "new.txt").exists()
    read = roots.run(["cat", str(ro / "f")], capture_output=True, text=True, timeout=60, write=True)
    assert read.stdout == "old"  # still readable
    # The control: the same roots, read-write, the same command writes there.
    assert write_into(roots.with_access("read-write"), ro).returncode == 0
    assert (ro / "new.txt").read_text() == "written\n"


@needs_landlock
def test_popen_keeps_a_read_only_root_read_only(folders: tuple[Path, Path]) -> None:
    ro, rw = folders
    roots = RootSet([Root.from_path(ro, access="read"), Root.from_path(rw)])
    command = ["sh", "-c", f"echo written > {ro / 'new.txt'}"]
    with roots.popen(command, write=True, stderr=subprocess.PIPE) as child:
        _, err = child.communicate(timeout=60)
    assert child.returncode != 0
    assert kernel_refused(err)
    assert not (ro / "new.txt").exists()


@needs_landlock
@pytest.mark.anyio
async def test_run_async_keeps_a_read_only_root_read_only(folders: tuple[Path, Path]) -> None:
    ro, rw = folders
    roots = RootSet([Root.from_path(ro, access="read"), Root.from_path(rw)])
    refused = await roots.run_async(f"echo written > {ro / 'new.txt'}", write=True, check=False)
    assert refused.returncode != 0
    assert kernel_refused(refused.stderr)
    written = await roots.run_async(f"echo written > {rw / 'new.txt'}", write=True)
    assert written.returncode == 0
    assert not (ro / "new.txt").exists()
    assert (rw / "new.txt").exists()


@needs_landlock
def test_a_read_write_root_inside_a_read_only_one_is_writable_there_only(tmp_path: Path) -> None:
    (tmp_path / "outer" / "inner").mkdir(parents=True)
    outer = tmp_path.resolve() / "outer"
    roots = RootSet([Root.from_path(outer, access="read"), Root.from_path(outer / "inner")])
    assert write_into(roots, outer / "inner").returncode == 0
    refused = write_into(roots, outer)
    assert refused.returncode != 0
    assert kernel_refused(refused.stderr)
    assert not (outer / "new.txt").exists()


def test_a_read_only_root_inside_a_read_write_one_cannot_be_kept_so_and_is_refused(tmp_path: Path) -> None:
    (tmp_path / "outer" / "inner").mkdir(parents=True)
    outer = tmp_path.resolve() / "outer"
    roots = RootSet([Root.from_path(outer), Root.from_path(outer / "inner", access="read")])
    with pytest.raises(SandboxUnavailable, match=r"read-only root .*inner.* lies inside the read-write root"):
        write_into(roots, outer)
    assert not (outer / "new.txt").exists()
