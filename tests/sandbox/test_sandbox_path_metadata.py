"""``path_metadata=True``: the opt-in that lets a confined build chmod by path (GNU ld's chmod +x), and
the hole it opens (the same calls reach outside the roots), each shown by a real child on the real kernel.
Run with the namespaces off (``without_namespaces``): where they are on, only the grant exists for the child
and metadata calls work without any opt-in (test_sandbox_toolchains.py).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from mcp_roots import RootSet
from mcp_roots.sandbox import support

KERNEL = support()
pytestmark = [
    pytest.mark.skipif(
        not KERNEL.complete, reason=f"no Landlock or seccomp filter: {KERNEL.reason or KERNEL.filter_reason}"
    ),
    pytest.mark.usefixtures("without_namespaces"),
]
GCC = shutil.which("gcc") or ""
HELLO = '#include <stdio.h>\nint main(void) { puts("built inside"); return 7; }\n'


@pytest.fixture
def places(tmp_path: Path) -> tuple[RootSet, Path, Path]:
    base = tmp_path.resolve()
    (base / "root").mkdir()
    (base / "outside").mkdir()
    (base / "root" / "h.c").write_text(HELLO)
    return RootSet.from_paths([base / "root"]), base / "root", base / "outside"


def _executable(path: Path) -> bool:
    return bool(path.stat().st_mode & stat.S_IXUSR)


def _gcc(roots: RootSet, root: Path, **options: bool) -> Path:
    # gcc's temporary files go beneath the root (TMPDIR): /tmp is not granted.
    env = {**os.environ, "TMPDIR": str(root)}
    result = roots.run(
        [GCC, "h.c", "-o", "a.out"], cwd=root, env=env, capture_output=True, text=True, timeout=120, **options
    )
    assert result.returncode == 0, result.stderr
    return root / "a.out"


@pytest.mark.skipif(not GCC, reason="no gcc here")
def test_gcc_builds_an_executable_only_with_path_metadata(places: tuple[RootSet, Path, Path]) -> None:
    roots, root, _ = places
    # The naive control: unconfined, GNU ld sets the execute bit of its output.
    control = root / "control"
    control.mkdir()
    (control / "h.c").write_text(HELLO)
    subprocess.run([GCC, "h.c", "-o", "a.out"], cwd=control, check=True, timeout=120)
    assert _executable(control / "a.out")
    # Without the opt-in (the default), gcc exits 0 but a.out stays 0644: ld's chmod by path is refused.
    built = _gcc(roots, root, write=True)
    assert built.exists()
    assert not _executable(built)
    built.unlink()
    # With it, a.out is executable and runs (confined, inside the root).
    built = _gcc(roots, root, write=True, path_metadata=True)
    assert _executable(built)
    ran = roots.run([str(built)], capture_output=True, text=True, timeout=60)
    assert (ran.returncode, ran.stdout) == (7, "built inside\n")


# Each attempt is (name, code) on the file arg; the probe prints {name: "ok" | errno name}.
PROBE = """
import ctypes, errno, json, os, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
def sys_call(number, *args):
    if libc.syscall(ctypes.c_long(number), *args) < 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
arg, results = sys.argv[1], {}
for name, code in json.loads(sys.argv[2]):
    try:
        exec(code, {"os": os, "socket": socket, "sys_call": sys_call, "arg": arg})
        results[name] = "ok"
    except OSError as exc:
        results[name] = errno.errorcode.get(exc.errno, str(exc.errno))
print(json.dumps(results))
"""

BY_PATH = [
    ("chmod", "os.chmod(arg, 0o666)"),
    ("utime", "os.utime(arg, (0, 0))"),
    ("setxattr", "os.setxattr(arg, 'user.planted', b'1')"),
]
STILL_REFUSED = [
    ("file_setattr", "sys_call(469, -100, arg.encode(), 0, None, 0)"),
    ("io_uring_setup", "sys_call(425, 1, None)"),
    ("udp socket", "socket.socket(socket.AF_INET, socket.SOCK_DGRAM)"),
    ("unix socket", "socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)"),
]


def _probe(roots: RootSet, target: Path, attempts: list[tuple[str, str]], **options: bool) -> dict[str, str]:
    argv = [sys.executable, "-c", PROBE, str(target), json.dumps(attempts)]
    result = roots.run(argv, capture_output=True, text=True, timeout=60, **options)
    assert result.returncode == 0, result.stderr
    answer: dict[str, str] = json.loads(result.stdout)
    return answer


def test_not_enforced_with_path_metadata_an_outside_files_metadata_changes(
    places: tuple[RootSet, Path, Path],
) -> None:
    # README's table says so: with path_metadata=True, chmod/utime/xattr by path reach outside the roots.
    roots, _, outside = places
    target = outside / "target"
    target.write_text("x")
    target.chmod(0o600)
    # The default refuses every one of them, and the file is unchanged.
    assert _probe(roots, target, BY_PATH, write=True) == dict.fromkeys(dict(BY_PATH), "EPERM")
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    answers = _probe(roots, target, BY_PATH, write=True, path_metadata=True)
    assert answers == dict.fromkeys(dict(BY_PATH), "ok"), answers
    assert stat.S_IMODE(target.stat().st_mode) == 0o666
    assert target.stat().st_mtime_ns == 0
    assert os.getxattr(target, "user.planted") == b"1"
    # The rest of the filter is unchanged: file_setattr, io_uring, and sockets with network=False.
    answers = _probe(roots, target, STILL_REFUSED, write=True, network=False, path_metadata=True)
    assert answers == dict.fromkeys(dict(STILL_REFUSED), "EPERM"), answers


@pytest.mark.anyio
async def test_path_metadata_through_run_async(places: tuple[RootSet, Path, Path]) -> None:
    roots, root, _ = places
    script = root / "script"
    script.write_text("#!/bin/sh\n")
    refused = await roots.run_async(["chmod", "+x", str(script)], write=True, check=False)
    assert refused.returncode != 0
    assert not _executable(script)
    await roots.run_async(["chmod", "+x", str(script)], write=True, path_metadata=True)
    assert _executable(script)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_ROOTS")}
    env["MCP_ROOTS_NO_NAMESPACES"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "mcp_roots.cli", "run", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )


def test_cli_allow_path_metadata(places: tuple[RootSet, Path, Path]) -> None:
    _, root, _ = places
    script = root / "script"
    script.write_text("#!/bin/sh\n")
    roots = ("--roots", str(root))
    assert cli(*roots, "--write", "--", "chmod", "+x", str(script)).returncode != 0
    assert not _executable(script)
    assert cli(*roots, "--write", "--allow-path-metadata", "--", "chmod", "+x", str(script)).returncode == 0
    assert _executable(script)
    read_only = cli(*roots, "--allow-path-metadata", "--", "true")
    assert read_only.returncode == 2
    assert "--allow-path-metadata' needs --write" in read_only.stderr
    assert "Traceback" not in read_only.stderr


@pytest.mark.anyio
async def test_path_metadata_without_write_is_refused(places: tuple[RootSet, Path, Path]) -> None:
    roots, root, _ = places
    marker = root / "ran"
    argv = ["touch", str(marker)]
    rule = "path_metadata=True needs write=True"
    with pytest.raises(ValueError, match=rule):
        roots.run(argv, path_metadata=True)
    with pytest.raises(ValueError, match=rule):
        roots.popen(argv, path_metadata=True)
    with pytest.raises(ValueError, match=rule):
        await roots.run_async(argv, path_metadata=True)
    with pytest.raises(ValueError, match=rule):
        roots.run(argv, write=False, path_metadata=True, allow_unconfined=True)
    assert not marker.exists()
