"""The confined program is started as subprocess would exec it, though the namespace's first process spawns
it: the same errors for a command that cannot run, `shell=`, `executable=`, `pass_fds` passed and every
other descriptor closed, the environment given."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mcp_roots import RootSet
from mcp_roots.sandbox import mount_namespace, support

pytestmark = [
    pytest.mark.skipif(not support().complete, reason="needs Landlock and the seccomp filter"),
    pytest.mark.skipif(mount_namespace() is not None, reason=f"no namespaces here: {mount_namespace()}"),
]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    made = tmp_path / "root"
    made.mkdir()
    return made.resolve()


def test_a_command_that_cannot_run_raises_what_subprocess_raises(root: Path) -> None:
    script = root / "not-executable.sh"
    script.write_text("#!/bin/sh\necho ran\n")  # mode 0644: exec answers EACCES
    for argv in (["no-such-command-here"], [str(script)], [str(root / "missing")]):
        with pytest.raises(OSError) as bare:  # noqa: PT011 (which one is the point: the same as bare)
            subprocess.run(argv, check=False)
        with pytest.raises(OSError) as confined:  # noqa: PT011
            RootSet.from_paths([root]).run(argv)
        assert type(confined.value) is type(bare.value)
        assert (confined.value.errno, confined.value.filename) == (bare.value.errno, bare.value.filename)


def test_shell_executable_and_env_mean_what_they_mean_to_subprocess(root: Path) -> None:
    roots = RootSet.from_paths([root])
    shell = roots.run("echo $0 $X", shell=True, capture_output=True, text=True, env={"X": "given"})
    assert shell.stdout == "/bin/sh given\n"
    named = roots.run(["argv0", "-c", 'echo "$0"'], executable="/bin/sh", capture_output=True, text=True)
    assert named.stdout == "argv0\n"


WRITES = "import os, sys\nfor fd in sys.argv[1:]: os.write(int(fd), b'written\\n')"


def test_pass_fds_are_passed_and_every_other_descriptor_is_closed(root: Path) -> None:
    passed_r, passed_w = os.pipe()
    kept_r, kept_w = os.pipe()
    os.set_inheritable(kept_w, True)  # inheritable, yet not passed: close_fds closes it
    try:
        done = RootSet.from_paths([root]).run(
            [sys.executable, "-c", WRITES, str(passed_w), str(kept_w)],
            pass_fds=[passed_w],
            capture_output=True,
            text=True,
        )
        os.close(passed_w)
        os.close(kept_w)
        assert os.read(passed_r, 100) == b"written\n"
        assert os.read(kept_r, 100) == b""
        assert done.returncode != 0
        assert "Bad file descriptor" in done.stderr
    finally:
        for fd in (passed_r, kept_r):
            os.close(fd)
