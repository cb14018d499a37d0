"""Race tests, bounded in time: another process rearranges the tree while the operations open paths.

Each test first runs the naive guard (``os.path.realpath`` then check then open by name) under the same
attack and asserts that it leaks at least once, so the test proves it can see a leak; then it asserts the
RootSet operations, with openat2 and with the walk, never read the outside file.
"""

from __future__ import annotations

import functools
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from mcp_roots import PathOutsideRoots, RootSet
from tests.corpus import STRATEGIES, strategy_in_force

VICTIM_SECONDS = 0.5  # how long the operations are hammered, per strategy
# The naive control stops at its first leak (usually within milliseconds), or after this long: generous,
# because on a loaded machine the attacker process may get little CPU for a while.
CONTROL_CAP_SECONDS = 30.0

# The attacker runs in its own process (no GIL between it and the victim) and stops by itself after
# ATTACK_CAP seconds even if nobody terminates it.
ATTACKER = r"""
import ctypes, os, sys, time
mode, a, b = sys.argv[1], sys.argv[2].encode(), sys.argv[3].encode()
cap = time.monotonic() + float(sys.argv[4])
nr = {"x86_64": 316, "aarch64": 276}.get(os.uname().machine)
libc = ctypes.CDLL(None, use_errno=True)
print("ready", flush=True)
while time.monotonic() < cap:
    for _ in range(200):
        if mode == "exchange" and nr is not None:
            libc.syscall(nr, -100, a, -100, b, 2)  # renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE)
        elif mode == "exchange":
            os.rename(a, a + b".tmp"); os.rename(b, a); os.rename(a + b".tmp", b)
        else:  # "move": the directory a leaves for b and comes back
            os.rename(a, b); os.rename(b, a)
"""


@contextmanager
def attacker(mode: str, a: Path, b: Path) -> Iterator[subprocess.Popen[str]]:
    cap = VICTIM_SECONDS * 2 + CONTROL_CAP_SECONDS + 10
    proc = subprocess.Popen(
        [sys.executable, "-c", ATTACKER, mode, str(a), str(b), str(cap)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        yield proc
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def control_must_leak(proc: subprocess.Popen[str], path: Path, root: Path) -> None:
    """The naive guard must leak under the attack, or the test could not have seen a leak."""
    if naive_leaks(path, root, b"OUTSIDE") >= 1:
        return
    if proc.poll() is None:
        state = "still running"
    else:
        state = f"exited {proc.returncode}: {proc.stderr.read() if proc.stderr else ''}"
    raise AssertionError(
        f"the control never leaked in {CONTROL_CAP_SECONDS}s: the race did not run (attacker {state})"
    )


def naive_leaks(path: Path, root: Path, secret: bytes) -> int:
    """The check-then-use guard a server might write: realpath, check the prefix, open by name. Runs until
    its first leak (or the cap) and returns how many outside reads it made."""
    deadline = time.monotonic() + CONTROL_CAP_SECONDS
    while time.monotonic() < deadline:
        try:
            if not os.path.realpath(path).startswith(str(root) + os.sep):
                continue
            with open(path, "rb") as f:
                if f.read() == secret:
                    return 1
        except OSError:
            continue
    return 0


def hammer(read: Callable[[], bytes], secret: bytes) -> tuple[int, int]:
    """(outside reads, inside reads) of ``read`` over VICTIM_SECONDS."""
    leaks = good = 0
    deadline = time.monotonic() + VICTIM_SECONDS
    while time.monotonic() < deadline:
        try:
            data = read()
        except (PathOutsideRoots, OSError):
            continue
        if data == secret:
            leaks += 1
        else:
            good += 1
    return leaks, good


def assert_never_leaks(strategy: str, read: Callable[[], bytes]) -> None:
    """Hammer ``read`` under the attack: no outside read, and at least one inside read."""
    leaks, good = hammer(read, b"OUTSIDE")
    assert leaks == 0, f"{strategy}: {leaks} reads of the outside file"
    assert good > 0, f"{strategy}: never read the inside file, the test proved nothing"


def strategies() -> list[str]:
    return STRATEGIES


@pytest.mark.skipif(platform.system() != "Linux", reason="renameat2 and /proc are Linux")
def test_swapping_a_directory_with_an_escaping_symlink_never_leaks(
    tmp_path: Path,
) -> None:
    root, out = tmp_path / "root", tmp_path / "out"
    (root / "d").mkdir(parents=True)
    out.mkdir()
    (root / "d" / "f").write_bytes(b"inside")
    (out / "f").write_bytes(b"OUTSIDE")
    os.symlink("../out", root / "x")  # swapped with d: d becomes a symlink out, and back
    target = root / "d" / "f"
    with attacker("exchange", root / "d", root / "x") as proc:
        control_must_leak(proc, target, root)
        for name in strategies():
            with strategy_in_force(name, self_check=False):  # a race makes fast and slow differ, rightly
                confined = RootSet.from_paths([root])
                assert_never_leaks(name, functools.partial(confined.read_bytes, target))

                def through_open(c: RootSet = confined) -> bytes:
                    with c.open(target, "rb") as f:
                        data: bytes = f.read()
                        return data

                assert_never_leaks(name, through_open)
                confined.close()


@pytest.mark.skipif(platform.system() != "Linux", reason="renameat2 and /proc are Linux")
def test_a_directory_moved_out_mid_lookup_never_leads_outside(
    tmp_path: Path,
) -> None:
    """``d/s1/.../s40/../../...../f`` names root/f. If d moves out of the root while the lookup is deep
    inside it, a lookup that takes '..' physically climbs to d's new parent and reads the outside f."""
    depth = 40
    root, out = tmp_path / "root", tmp_path / "out" / "x"
    deep = root / "d"
    for i in range(depth):
        deep = deep / f"s{i}"
    deep.mkdir(parents=True)
    out.mkdir(parents=True)
    (root / "f").write_bytes(b"inside")
    (out / "f").write_bytes(b"OUTSIDE")
    rel = "d/" + "/".join(f"s{i}" for i in range(depth)) + "/.." * (depth + 1) + "/f"
    target = root / rel
    with attacker("move", root / "d", out / "d") as proc:
        control_must_leak(proc, target, root)
        for name in strategies():
            with strategy_in_force(name, self_check=False):
                confined = RootSet.from_paths([root])
                assert_never_leaks(name, functools.partial(confined.read_bytes, target))
                confined.close()
