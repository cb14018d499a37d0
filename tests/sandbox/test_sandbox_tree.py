"""A confined child's whole tree ends with it: a daemon it starts (``setsid`` and a second fork, out of its
session and process group) reading a root is gone once the child is ended or ends, before the caller goes
on. The control: the same daemon under a plain ``Popen`` in a session of its own outlives the killed group."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcp_roots import RootSet
from mcp_roots.sandbox import end, mount_namespace, support

KERNEL = support()
pytestmark = [
    pytest.mark.skipif(not KERNEL.complete, reason="needs Landlock and the seccomp filter"),
    pytest.mark.skipif(mount_namespace() is not None, reason=f"no namespaces here: {mount_namespace()}"),
]

# Forks a daemon (setsid, then forks again) that keeps reading FILE, says "up" once it runs, and stays
# (``stay``) or exits (``leave``).
DAEMON = """
import os, sys, time
path, mark, then = sys.argv[1:4]
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        while True:
            open(path).read()
            time.sleep(0.05)
    os._exit(0)
os.wait()
time.sleep(0.2)
print("up", flush=True)
if then == "stay":
    time.sleep(600)
"""


def _with_mark(mark: str) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        try:
            if name.isdigit() and mark.encode() in Path(f"/proc/{name}/cmdline").read_bytes():
                found.append(int(name))
        except OSError:
            continue
    return found


@pytest.fixture
def mark() -> Iterator[str]:
    """A mark in the daemon's command line (its number inside a PID namespace is not ours); whatever is
    left with it is killed after the test."""
    text = f"mcp-roots-tree-{os.getpid()}-{time.monotonic_ns()}"
    yield text
    for pid in _with_mark(text):
        os.kill(pid, signal.SIGKILL)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "secret.txt").write_text("the root's content\n")
    return tmp_path


def _argv(root: Path, mark: str, then: str) -> list[str]:
    return [sys.executable, "-c", DAEMON, str(root / "secret.txt"), mark, then]


def test_the_control_a_double_forked_daemon_outlives_its_killed_process_group(root: Path, mark: str) -> None:
    process = subprocess.Popen(_argv(root, mark, "stay"), stdout=subprocess.PIPE, start_new_session=True)
    assert process.stdout is not None
    assert process.stdout.readline() == b"up\n"
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    process.stdout.close()
    assert _with_mark(mark), "the daemon left the group: killing the group missed it"


@pytest.mark.parametrize("how", ["kill", "end", "terminate"])
def test_a_daemon_started_by_a_popen_child_ends_with_it(root: Path, mark: str, how: str) -> None:
    roots = RootSet.from_paths([root])
    process = roots.popen(_argv(root, mark, "stay"), stdout=subprocess.PIPE)
    assert process.stdout is not None
    assert process.stdout.readline() == b"up\n"
    assert len(_with_mark(mark)) == 2  # the child and its daemon, reading the root
    if how == "kill":
        process.kill()
        process.wait()
    elif how == "terminate":
        process.terminate()  # passed on to the program; its end ends the namespace
        assert process.wait() == -signal.SIGTERM
    else:
        end(process)
    process.stdout.close()
    assert _with_mark(mark) == []  # gone before the caller goes on: no waiting here


def test_a_daemon_started_by_a_run_child_ends_when_the_child_exits(root: Path, mark: str) -> None:
    done = RootSet.from_paths([root]).run(_argv(root, mark, "leave"), capture_output=True, write=True)
    assert done.returncode == 0
    assert done.stdout == b"up\n"
    assert _with_mark(mark) == []


def test_a_child_keeps_its_exit_status_and_signals(root: Path) -> None:
    roots = RootSet.from_paths([root])
    assert roots.run(["sh", "-c", "exit 7"]).returncode == 7
    assert roots.run(["sh", "-c", "kill -KILL $$"]).returncode == -signal.SIGKILL
    started = roots.popen(
        ["sh", "-c", "trap 'exit 9' HUP; echo ready; while :; do sleep 0.05; done"], stdout=subprocess.PIPE
    )
    assert started.stdout is not None
    assert started.stdout.readline() == b"ready\n"
    started.send_signal(signal.SIGHUP)
    assert started.wait() == 9
    started.stdout.close()
