"""A confined child reaches no other process (limits, priority, scheduling, I/O priority, memory placement;
its own session and process group) and no IPC object, key or watch it did not make: the real kernel, the
attempts of ``_sys/attempts.py`` (which ``mcp-roots doctor`` makes too). Each test first shows the attempt
working on an unconfined child."""

from __future__ import annotations

import ctypes
import os
import random
import shlex
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcp_roots import RootSet
from mcp_roots.sandbox import support
from tests.kit import ATTEMPTS_COMMAND, confined, refused, unconfined

KERNEL = support()
pytestmark = pytest.mark.skipif(
    not KERNEL.complete,
    reason=f"needs Landlock and the seccomp filter: {KERNEL.reason or KERNEL.filter_reason}",
)

UNUSED_UID = "2147480000"
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long


@pytest.fixture
def places(tmp_path: Path) -> tuple[RootSet, Path]:
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    return RootSet.from_paths([root]), outside.resolve()


@pytest.fixture
def bystander() -> Iterator[int]:
    """Another process of the same user, not the child's parent."""
    process = subprocess.Popen(["sleep", "120"])
    try:
        yield process.pid
    finally:
        process.kill()
        process.wait()


# --- limits, priority, scheduling: of itself only --------------------------------------------------------

CALLS = [
    "prlimit",
    "sched_setaffinity",
    "sched_setscheduler",
    "sched_setparam",
    "ioprio_set",
    "migrate_pages",
]


@pytest.mark.parametrize("call", CALLS)
@pytest.mark.parametrize("target", ["parent", "bystander"])
def test_no_reach_into_the_parent_or_a_bystander(
    places: tuple[RootSet, Path], bystander: int, call: str, target: str
) -> None:
    roots, _ = places
    pid = str(os.getpid() if target == "parent" else bystander)
    control = unconfined(call, pid)
    if not control["ok"]:
        pytest.skip(f"{call} on another process fails unconfined here too: {control}")
    # Refused by the filter, or not even there (a PID namespace of its own: another process's number
    # names nothing).
    said = confined(roots, call, pid)
    assert refused(said) or refused(said, "ESRCH"), call
    assert confined(roots, call, "0")["ok"], f"{call} on itself (pid 0) must still work"


def test_prlimit_and_setpriority_change_a_bystander_unconfined_and_not_confined(
    places: tuple[RootSet, Path], bystander: int
) -> None:
    roots, _ = places
    limit = os.sysconf("SC_OPEN_MAX")
    assert unconfined("prlimit", str(bystander), "100")["ok"]  # the naive control changes its limit
    assert Path(f"/proc/{bystander}/limits").read_text().count(" 100 ") >= 1
    assert unconfined("setpriority", "0", str(bystander), "5")["ok"]
    assert os.getpriority(os.PRIO_PROCESS, bystander) == 5
    assert refused(confined(roots, "prlimit", str(bystander), "3"))
    assert refused(confined(roots, "setpriority", "0", str(bystander), "7"))
    assert os.getpriority(os.PRIO_PROCESS, bystander) == 5
    assert (
        " 3 " not in Path(f"/proc/{bystander}/limits").read_text().split("Max open files")[1].split("\n")[0]
    )
    assert limit  # our own is untouched


def test_prio_pgrp_and_prio_user_reach_only_the_childs_own_group(places: tuple[RootSet, Path]) -> None:
    roots, _ = places
    # The control: a child that shares a process group with a stand-in server (a sleep) lowers the
    # priority of the whole group with setpriority(PRIO_PGRP, 0), the stand-in's too.
    script = f"sleep 30 & echo $!; {shlex.join(ATTEMPTS_COMMAND)} setpriority 1 0 5"
    control = subprocess.run(["sh", "-c", script], start_new_session=True, capture_output=True, text=True)
    stand_in = int(control.stdout.split()[0])
    try:
        assert os.getpriority(os.PRIO_PROCESS, stand_in) == 5
    finally:
        os.kill(stand_in, signal.SIGKILL)
    # Confined: a session and group of its own, so the same call reaches only its own group.
    probe = [sys.executable, "-c", "import os; print(os.getpgrp(), os.getsid(0))"]
    theirs = roots.run(probe, capture_output=True, text=True).stdout.split()
    assert theirs[0] == theirs[1] != str(os.getpgrp())
    ours = os.getpriority(os.PRIO_PROCESS, 0)
    assert confined(roots, "setpriority", "1", "0", "5")["ok"]  # its own group
    assert os.getpriority(os.PRIO_PROCESS, 0) == ours
    ours_named = confined(roots, "setpriority", "1", str(os.getpgrp()))  # refused, or not there to name
    assert refused(ours_named) or refused(ours_named, "ESRCH")
    # PRIO_USER: every process of a uid. A uid without processes: unconfined the kernel looks and answers
    # ESRCH (naming our own uid would renice every process of the user); confined the filter answers EPERM.
    assert unconfined("setpriority", "2", UNUSED_UID, "0")["error"] == "ESRCH"
    assert refused(confined(roots, "setpriority", "2", UNUSED_UID, "0"))
    assert refused(confined(roots, "setpriority", "2", "0", "0"))


def test_a_confined_child_cannot_be_put_in_our_process_group(places: tuple[RootSet, Path]) -> None:
    roots, _ = places
    with pytest.raises(ValueError, match="session of its own"):
        roots.run(["true"], start_new_session=False)
    with pytest.raises(ValueError, match="session of its own"):
        roots.run(["true"], process_group=0)


# --- System V IPC, keyrings ------------------------------------------------------------------------------

IPC_CREAT, IPC_RMID, IPC_NOWAIT, SETVAL = 0o1000, 0, 0o4000, 16


def test_system_v_shared_memory_of_the_parent(places: tuple[RootSet, Path]) -> None:
    roots, _ = places
    key = random.randrange(1 << 20, 1 << 30)
    shmid = libc.syscall(29, ctypes.c_int(key), ctypes.c_size_t(4096), IPC_CREAT | 0o600)
    assert shmid >= 0, os.strerror(ctypes.get_errno())
    libc.shmat.restype = ctypes.c_void_p
    address = libc.shmat(ctypes.c_int(shmid), None, 0)
    try:
        ctypes.memmove(address, b"SEGMENT SECRET", 14)
        assert unconfined("shm", str(key)) == {"ok": True, "value": "SEGMENT SECRET"}
        assert refused(confined(roots, "shm", str(key)))
        assert refused(confined(roots, "sysv"))  # not even a segment of its own
    finally:
        libc.shmdt(ctypes.c_void_p(address))
        libc.syscall(31, shmid, IPC_RMID, None)


def test_system_v_message_queues_and_semaphores_of_the_parent(places: tuple[RootSet, Path]) -> None:
    roots, _ = places
    key = random.randrange(1 << 20, 1 << 30)
    qid = libc.syscall(68, ctypes.c_int(key), IPC_CREAT | 0o600)
    semid = libc.syscall(64, ctypes.c_int(key), 1, IPC_CREAT | 0o600)
    assert qid >= 0
    assert semid >= 0
    try:
        message = ctypes.create_string_buffer((1).to_bytes(8, sys.byteorder) + b"QUEUE SECRET")
        for _ in range(2):
            assert libc.syscall(69, qid, message, ctypes.c_size_t(12), IPC_NOWAIT) == 0
        assert libc.syscall(66, semid, 0, SETVAL, 7) == 0
        assert unconfined("msg", str(key)) == {"ok": True, "value": "QUEUE SECRET"}
        assert unconfined("sem", str(key)) == {"ok": True, "value": 7}
        assert refused(confined(roots, "msg", str(key)))
        assert refused(confined(roots, "sem", str(key)))
    finally:
        libc.syscall(71, qid, IPC_RMID, None)
        libc.syscall(66, semid, 0, IPC_RMID)


def test_a_key_in_the_parents_keyring(places: tuple[RootSet, Path]) -> None:
    roots, _ = places
    description = f"mcp-roots-test-{random.randrange(1 << 30)}"
    serial = libc.syscall(248, b"user", description.encode(), b"KEYRING SECRET", 14, ctypes.c_int(-3))
    if serial < 0:
        pytest.skip(f"add_key refused here: {os.strerror(ctypes.get_errno())}")
    try:
        assert unconfined("key", description) == {"ok": True, "value": "KEYRING SECRET"}
        assert refused(confined(roots, "key", description))
        assert refused(confined(roots, "keyring"))
    finally:
        libc.syscall(250, 21, ctypes.c_long(serial))  # KEYCTL_INVALIDATE


# --- watches, perf, userfaultfd --------------------------------------------------------------------------


def test_inotify_on_an_outside_folder(places: tuple[RootSet, Path]) -> None:
    roots, outside = places
    watcher = subprocess.Popen(
        [*ATTEMPTS_COMMAND, "inotify", str(outside), "20"], stdout=subprocess.PIPE, text=True
    )
    with watcher:
        assert watcher.stdout is not None
        assert watcher.stdout.readline().strip() == "watching"
        (outside / "a-name-created-outside.txt").write_text("x")
        said = watcher.stdout.read()
    assert '"a-name-created-outside.txt"' in said  # the control learns the name
    assert refused(confined(roots, "inotify", str(outside)))
    assert refused(confined(roots, "inotify", str(roots.paths[0])))  # inside too: all of them, said so


@pytest.mark.parametrize("call", ["fanotify", "perf_event_open", "userfaultfd"])
def test_fanotify_perf_event_open_and_userfaultfd(places: tuple[RootSet, Path], call: str) -> None:
    roots, outside = places
    args = (str(outside),) if call == "fanotify" else ()
    control = unconfined(call, *args)
    if not control["ok"]:
        pytest.skip(f"{call} fails unconfined here too: {control}")
    assert refused(confined(roots, call, *args))


def test_doctor_proves_every_promise_with_a_live_attempt() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "mcp_roots.cli", "doctor", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    import json

    report = json.loads(out.stdout)
    proven = {p["promise"]: p for p in report["proven"]}
    assert out.returncode == 0, [p for p in proven.values() if not p["held"]]
    for promise in (
        "read a file outside the roots",
        "write .git/config in a writable root",
        "rename .git (to write .git2/config)",
        "prlimit64 on this process",
        "System V shared memory",
        "the user's keyring",
        "an inotify watch outside the roots",
        "hold a capability",
        "chmod a file outside the roots (write=True)",
        "connect to a unix socket file outside the roots, network on",
        "connect to an abstract unix socket of the host, network on",
        "leave a daemon (setsid, fork) running after the child ends",
    ):
        assert proven[promise]["held"] is True, proven[promise]
    assert proven["leave a daemon (setsid, fork) running after the child ends"]["mechanism"] == (
        "a PID namespace of its own"
    )
    assert {e["name"] for e in report["protected"]} >= {".git/config", ".mcp.json"}
    text = subprocess.run([sys.executable, "-m", "mcp_roots.cli", "doctor"], capture_output=True, text=True)
    assert "[held] write .git/config in a writable root: refused (EROFS)" in text.stdout
    assert "namespaces: available: a confined command's whole tree ends with it" in text.stdout
