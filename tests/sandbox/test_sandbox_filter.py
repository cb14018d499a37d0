"""The seccomp filter beside Landlock: metadata by path, sockets with network=False, terminal ioctls,
io_uring and foreign system-call ABIs, each tried by a real child on the real kernel.

Every refusal is shown against a naive control first: the same probe, run unconfined, gets through.
Run with the namespaces off (``without_namespaces``): this pins what the filter holds by itself, as where
the kernel refuses namespaces; with them, the outside names are not even there.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

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
AS_ROOT = os.geteuid() == 0

# Each attempt is (name, code); the probe prints {name: "ok" | errno name} as JSON.
PROBE = """
import ctypes, errno, json, os, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
def sys_call(number, *args):
    if libc.syscall(ctypes.c_long(number), *args) < 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
results = {}
for name, code in json.loads(sys.argv[1]):
    try:
        exec(code, {"os": os, "socket": socket, "sys_call": sys_call, "ctypes": ctypes, "arg": sys.argv[2:]})
        results[name] = "ok"
    except OSError as exc:
        results[name] = errno.errorcode.get(exc.errno, str(exc.errno))
print(json.dumps(results))
"""


def probe(
    attempts: list[tuple[str, str]], *args: str, roots: RootSet | None = None, **options: Any
) -> dict[str, str]:
    argv = [sys.executable, "-c", PROBE, json.dumps(attempts), *args]
    if roots is None:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    else:
        result = roots.run(argv, capture_output=True, text=True, timeout=60, **options)
    assert result.returncode == 0, result.stderr
    answer: dict[str, str] = json.loads(result.stdout)
    return answer


@pytest.fixture
def places(tmp_path: Path) -> tuple[RootSet, Path, Path]:
    base = tmp_path.resolve()
    (base / "root").mkdir()
    (base / "outside").mkdir()
    return RootSet.from_paths([base / "root"]), base / "root", base / "outside"


# --- Observation 1: metadata outside the roots ------------------------------------------------------------

PATH_METADATA = [
    ("chmod", "os.chmod(arg[0], 0o666)"),
    ("lchmod (fchmodat2)", "os.chmod(arg[0], 0o644, follow_symlinks=False)"),
    ("utime", "os.utime(arg[0], (0, 0))"),
    ("utimes", "sys_call(235, arg[0].encode(), None)"),
    ("utime(2)", "sys_call(132, arg[0].encode(), None)"),
    ("futimesat", "sys_call(261, -100, arg[0].encode(), None)"),
    ("setxattr", "os.setxattr(arg[0], 'user.planted', b'1')"),
    ("lsetxattr", "os.setxattr(arg[0], 'user.planted', b'1', follow_symlinks=False)"),
    ("removexattr", "os.removexattr(arg[0], 'user.kept')"),
    ("chown", "os.chown(arg[0], os.getuid(), os.getgid())"),
    ("lchown", "os.lchown(arg[0], os.getuid(), os.getgid())"),
    ("fchmodat", "sys_call(268, -100, arg[0].encode(), 0o666)"),
    # With an O_PATH descriptor (which Landlock lets a child open anywhere) and AT_EMPTY_PATH.
    ("fchmodat2 AT_EMPTY_PATH", "sys_call(452, os.open(arg[0], os.O_PATH), b'', 0o666, 0x1000)"),
    ("fchownat AT_EMPTY_PATH", "sys_call(260, os.open(arg[0], os.O_PATH), b'', os.getuid(), -1, 0x1000)"),
    ("utimensat AT_EMPTY_PATH", "sys_call(280, os.open(arg[0], os.O_PATH), b'', None, 0x1000)"),
    ("setxattrat", "sys_call(463, -100, arg[0].encode(), 0, None, 0)"),
    ("removexattrat", "sys_call(466, -100, arg[0].encode(), 0, b'user.kept')"),
]


def _metadata(path: Path) -> tuple[int, int, int, int, list[str]]:
    st = path.stat()
    return st.st_mode, st.st_mtime_ns, st.st_uid, st.st_gid, sorted(os.listxattr(path))


def test_metadata_of_an_outside_file_is_unchanged(places: tuple[RootSet, Path, Path]) -> None:
    roots, _, outside = places

    def fresh(name: str) -> Path:
        target = outside / name
        target.write_text("x")
        target.chmod(0o600)
        os.utime(target, (1_000_000, 1_000_000))
        os.setxattr(target, "user.kept", b"1")
        return target

    # The naive control: unconfined, every call changes the file (the raw ones answer EFAULT/EINVAL for
    # their dummy arguments: they reach the kernel's code, not a refusal).
    control = fresh("control")
    before = _metadata(control)
    answers = probe(PATH_METADATA, str(control))
    assert answers["chmod"] == answers["utime"] == answers["setxattr"] == "ok", answers
    assert "EPERM" not in answers.values(), answers
    assert _metadata(control) != before
    # Confined, with write=True: every path-based call is EPERM and nothing changed.
    target = fresh("target")
    before = _metadata(target)
    answers = probe(PATH_METADATA, str(target), roots=roots, write=True)
    assert answers == dict.fromkeys(answers, "EPERM"), answers
    assert set(answers) == {name for name, _ in PATH_METADATA}
    assert _metadata(target) == before


DESCRIPTOR_METADATA = [
    ("fchmod", "fd = os.open(arg[0], os.O_WRONLY); os.fchmod(fd, 0o640)"),
    ("futimens", "fd = os.open(arg[0], os.O_WRONLY); os.utime(fd, (5, 5))"),
    ("touch", "fd = os.open(arg[0], os.O_WRONLY); os.utime(fd)"),
    ("fsetxattr", "fd = os.open(arg[0], os.O_WRONLY); os.setxattr(fd, 'user.mine', b'1')"),
    ("fchown", "fd = os.open(arg[0], os.O_WRONLY); os.fchown(fd, os.getuid(), os.getgid())"),
    # An O_PATH descriptor on an outside file opens, but the descriptor forms refuse it (EBADF).
    ("fchmod O_PATH outside", "os.fchmod(os.open(arg[1], os.O_PATH), 0o666)"),
    ("fsetxattr O_PATH outside", "os.setxattr(os.open(arg[1], os.O_PATH), 'user.x', b'1')"),
]


def test_descriptor_forms_work_inside_and_not_through_an_o_path_descriptor(
    places: tuple[RootSet, Path, Path],
) -> None:
    roots, root, outside = places
    mine = root / "mine.txt"
    mine.write_text("x")
    other = outside / "other.txt"
    other.write_text("x")
    other.chmod(0o600)
    answers = probe(DESCRIPTOR_METADATA, str(mine), str(other), roots=roots, write=True)
    assert answers == {
        "fchmod": "ok",
        "futimens": "ok",
        "touch": "ok",
        "fsetxattr": "ok",
        "fchown": "ok",
        "fchmod O_PATH outside": "EBADF",
        "fsetxattr O_PATH outside": "EBADF",
    }
    assert stat.S_IMODE(mine.stat().st_mode) == 0o640
    assert stat.S_IMODE(other.stat().st_mode) == 0o600


# --- Observations 2 and 3: sockets with network=False -----------------------------------------------------

SOCKETS = [
    (
        "unix socket file",
        "s = socket.socket(socket.AF_UNIX); s.connect(arg[0]); s.sendall(b'agent')",
    ),
    (
        "mptcp",
        "s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262); s.settimeout(10); "
        "s.connect(('127.0.0.1', int(arg[1]))); s.sendall(b'm')",
    ),
    ("udp", "socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'u', ('127.0.0.1', int(arg[2])))"),
    ("udp6 socket", "socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)"),
    ("netlink socket", "socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)"),
    ("io_uring_setup", "sys_call(425, 1, ctypes.create_string_buffer(120))"),
]
if AS_ROOT:
    SOCKETS.append(("raw icmp", "socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)"))
# A socketpair stays (a program's own plumbing), but only one that cannot be pointed elsewhere: a datagram
# pair could sendto() a socket file.
PAIRS = [
    ("socketpair stream", "a, b = socket.socketpair(); a.sendall(b'x'); assert b.recv(1) == b'x'"),
    ("socketpair seqpacket", "socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)"),
    (
        "socketpair dgram sendto",
        "a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM); a.sendto(b'agent', arg[0])",
    ),
]


def test_network_false_refuses_unix_socket_files_mptcp_udp_and_raw_sockets(
    places: tuple[RootSet, Path, Path],
) -> None:
    roots, _, outside = places
    agent = outside / "agent.sock"  # a stand-in for SSH_AUTH_SOCK or /var/run/docker.sock
    dgram_agent = outside / "dgram.sock"
    with (
        socket.socket(socket.AF_UNIX) as unix_listener,
        socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as unix_dgram,
        socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262) as mptcp,
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp,
    ):
        unix_listener.bind(str(agent))
        unix_listener.listen(8)
        unix_dgram.bind(str(dgram_agent))
        unix_dgram.settimeout(0)
        mptcp.bind(("127.0.0.1", 0))
        mptcp.listen(8)
        udp.bind(("127.0.0.1", 0))
        udp.settimeout(0)
        args = (str(agent), str(mptcp.getsockname()[1]), str(udp.getsockname()[1]))
        # The naive control, and network=True: everything goes through.
        assert probe(SOCKETS, *args) == dict.fromkeys(dict(SOCKETS), "ok")
        assert probe(SOCKETS[:3], *args, roots=roots) == dict.fromkeys(dict(SOCKETS[:3]), "ok")
        assert (udp.recv(16), udp.recv(16)) == (b"u", b"u")
        pairs_args = (str(dgram_agent), *args[1:])
        assert probe(PAIRS, *pairs_args) == dict.fromkeys(dict(PAIRS), "ok")
        assert unix_dgram.recv(16) == b"agent"
        # network=False: refused, and nothing arrives.
        refused = probe(SOCKETS, *args, roots=roots, network=False)
        assert refused == dict.fromkeys(dict(SOCKETS), "EPERM")
        with pytest.raises(BlockingIOError):
            udp.recv(16)
        assert probe(PAIRS, *pairs_args, roots=roots, network=False) == {
            "socketpair stream": "ok",
            "socketpair seqpacket": "ok",
            "socketpair dgram sendto": "EPERM",
        }
        with pytest.raises(BlockingIOError):
            unix_dgram.recv(16)


# --- Foreign system-call ABIs and calls newer than the filter -------------------------------------------


I386_GETPID = """
import ctypes, mmap, os
code = bytes([0xB8, 0x14, 0, 0, 0, 0xCD, 0x80, 0xC3])  # mov eax, 20 (i386 getpid); int 0x80; ret
page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
page.write(code)
print(ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(page)))() == os.getpid())
"""
X32_GETPID = "import ctypes; print(ctypes.CDLL(None).syscall(0x40000000 | 39))"


def test_i386_and_x32_calls_are_killed_and_unknown_calls_answer_enosys(
    places: tuple[RootSet, Path, Path],
) -> None:
    # An i386 (int 0x80) or x32 system call has other numbers: the filter would judge the wrong call.
    roots, _, _ = places
    control = subprocess.run([sys.executable, "-c", I386_GETPID], capture_output=True, text=True, check=False)
    assert control.stdout.strip() == "True"  # the control: the i386 getpid answers
    control = subprocess.run([sys.executable, "-c", X32_GETPID], capture_output=True, text=True, check=False)
    assert control.returncode == 0  # answered (ENOSYS where the kernel has no x32): no kill
    for code in (I386_GETPID, X32_GETPID):
        result = roots.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        assert result.returncode == -31  # SIGSYS: the filter kills the process
    assert probe([("syscall 470", "sys_call(470)")]) == {"syscall 470": "ENOSYS"}
    assert probe([("syscall 470", "sys_call(470)")], roots=roots) == {"syscall 470": "ENOSYS"}
    assert probe([("file_setattr", "sys_call(469, -100, b'/', None, 0, 0)")], roots=roots) == {
        "file_setattr": "EPERM"
    }


# --- Where the filter cannot be installed: fail closed ----------------------------------------------------

WITHOUT = Path(__file__).resolve().parents[1] / "without_landlock.py"
NO_FILTER = """
import logging, sys
from mcp_roots import RootSet, SandboxUnavailable
logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
roots = RootSet.from_paths([sys.argv[1]])
for network in (False, True):
    try:
        roots.run(["true"], network=network)
        print("RAN")
    except SandboxUnavailable as exc:
        print("REFUSED", exc)
for _ in range(2):  # allowed: Landlock still confines (the secret stays unreadable), one warning
    print("RAN", roots.run(["cat", sys.argv[2]], allow_unconfined=True, capture_output=True).returncode)
"""


def test_without_the_filter_run_refuses_and_doctor_says_so(places: tuple[RootSet, Path, Path]) -> None:
    _, root, outside = places
    secret = outside / "secret.txt"
    secret.write_text("TOP SECRET")
    prefix = [sys.executable, str(WITHOUT), "NOSECCOMP", sys.executable]
    proc = subprocess.run(
        [*prefix, "-c", NO_FILTER, str(root), str(secret)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("REFUSED no system-call filter (network=False and the metadata rules need it)")
    assert lines[1].startswith("REFUSED no system-call filter (the metadata rules need it)")
    assert all("seccomp" in line and "allow_unconfined=True" in line for line in lines[:2])
    assert lines[2:] == ["RAN 1", "RAN 1"]
    warnings = [line for line in proc.stderr.splitlines() if "WITHOUT THE SYSTEM-CALL FILTER" in line]
    assert len(warnings) == 1, proc.stderr
    doctor = subprocess.run(
        [*prefix, "-m", "mcp_roots.cli", "doctor", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert doctor.returncode == 1
    report = json.loads(doctor.stdout)
    assert (report["landlock_abi"], report["seccomp"], report["no_new_privs"]) == (KERNEL.abi, False, True)
    assert "refuses seccomp filters" in report["seccomp_reason"]
    here = subprocess.run(  # this machine as it is (the namespaces on: the fallback does not hold them all)
        [sys.executable, "-m", "mcp_roots.cli", "doctor"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={k: v for k, v in os.environ.items() if k != "MCP_ROOTS_NO_NAMESPACES"},
    )
    assert here.returncode == 0
    assert "seccomp: the system-call filter is installed" in here.stdout
    assert "no_new_privs: available" in here.stdout


# --- What the kernel does not enforce (README's table says so; these keep the table true) ---------------


def test_not_enforced_stat_of_an_outside_name(places: tuple[RootSet, Path, Path]) -> None:
    roots, _, outside = places
    secret = outside / "secret.txt"
    secret.write_text("TOP SECRET")
    attempts = [("stat", "os.stat(arg[0])"), ("list", "os.listdir(arg[1])"), ("read", "open(arg[0]).read()")]
    answers = probe(attempts, str(secret), str(outside), roots=roots, write=True, network=False)
    # Existence, size and times of a name the child knows stay visible; listing and reading do not.
    assert answers == {"stat": "ok", "list": "EACCES", "read": "EACCES"}


def test_not_enforced_a_hard_link_already_inside_a_root(places: tuple[RootSet, Path, Path]) -> None:
    roots, root, outside = places
    secret = outside / "secret.txt"
    secret.write_text("TOP SECRET")
    os.link(secret, root / "linked.txt")  # made by someone outside the sandbox, before it started
    result = roots.run(["cat", str(root / "linked.txt")], capture_output=True, text=True, timeout=60)
    assert result.stdout == "TOP SECRET"
    # A confined child cannot make such a link itself.
    made = probe(
        [("link", "os.link(arg[0], arg[1])")], str(secret), str(root / "new.txt"), roots=roots, write=True
    )
    assert made == {"link": "EXDEV"}


def test_not_enforced_a_descriptor_passed_on_purpose(places: tuple[RootSet, Path, Path]) -> None:
    roots, _, outside = places
    secret = outside / "secret.txt"
    secret.write_text("TOP SECRET")
    with secret.open("rb") as handle:
        fd = handle.fileno()
        code = f"import os; print(os.read({fd}, 100).decode())"
        result = roots.run(
            [sys.executable, "-c", code], pass_fds=[fd], capture_output=True, text=True, timeout=60
        )
    assert result.stdout.strip() == "TOP SECRET"


def test_not_enforced_metadata_through_a_descriptor_the_child_may_open(
    places: tuple[RootSet, Path, Path],
) -> None:
    roots, _, outside = places
    mine = outside / "readable.txt"
    mine.write_text("x")
    mine.chmod(0o644)
    # write=True and a file it may read (extra_read; as root, also the system paths): fchmod on a read-only
    # descriptor goes through (the kernel asks for ownership, not a writable descriptor); by path it is EPERM.
    attempts = [
        ("chmod", "os.chmod(arg[0], 0o600)"),
        ("fchmod read-only fd", "os.fchmod(os.open(arg[0], os.O_RDONLY), 0o640)"),
    ]
    answers = probe(attempts, str(mine), roots=roots, write=True, extra_read=[str(mine)])
    assert answers == {"chmod": "EPERM", "fchmod read-only fd": "ok"}
    assert stat.S_IMODE(mine.stat().st_mode) == 0o640


def test_write_false_refuses_the_descriptor_forms_too(places: tuple[RootSet, Path, Path]) -> None:
    roots, root, _ = places
    mine = root / "readonly.txt"
    mine.write_text("x")
    mine.chmod(0o644)
    os.utime(mine, (1_000_000, 1_000_000))
    attempts = [
        ("fchmod", "os.fchmod(os.open(arg[0], os.O_RDONLY), 0o600)"),
        ("futimens", "os.utime(os.open(arg[0], os.O_RDONLY), (5, 5))"),
        ("fsetxattr", "os.setxattr(os.open(arg[0], os.O_RDONLY), 'user.x', b'1')"),
        ("fchown", "os.fchown(os.open(arg[0], os.O_RDONLY), os.getuid(), os.getgid())"),
    ]
    before = _metadata(mine)
    assert probe(attempts, str(mine)) == dict.fromkeys(dict(attempts), "ok")  # the control
    os.chmod(mine, 0o644)
    os.utime(mine, (1_000_000, 1_000_000))
    os.removexattr(mine, "user.x")
    assert _metadata(mine) == before
    # A read-only child may open its root's files for reading, and change none of their metadata.
    assert probe(attempts, str(mine), roots=roots) == dict.fromkeys(dict(attempts), "EPERM")
    assert _metadata(mine) == before
