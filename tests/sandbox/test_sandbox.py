"""Subprocesses confined to the roots by the kernel: real processes, real files, the real Landlock.

Every security test first runs the same command unconfined (the naive control) and shows that it leaks,
so that a refusal of the confined run is the confinement's doing, not a broken command.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mcp_roots import RootSet
from mcp_roots.sandbox import support
from tests.kit import SECRET, SandboxTree, kernel_refused

TESTS = Path(__file__).resolve().parents[1]
WITHOUT_LANDLOCK = TESTS / "without_landlock.py"
KERNEL = support()
needs_landlock = pytest.mark.skipif(not KERNEL.available, reason=f"no Landlock here: {KERNEL.reason}")


@pytest.fixture
def tree(tmp_path: Path) -> SandboxTree:
    return SandboxTree(tmp_path)


def naive(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """The control: the same command, unconfined."""
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False, **kwargs)


def confined(roots: RootSet, argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    result: subprocess.CompletedProcess[str] = roots.run(
        argv, capture_output=True, text=True, timeout=60, **kwargs
    )
    return result


def denied(stderr: str | bytes) -> bool:
    return kernel_refused(stderr)


def refused(result: subprocess.CompletedProcess[str]) -> bool:
    return result.returncode != 0 and denied(result.stderr) and SECRET not in result.stdout


# --- Reading ---------------------------------------------------------------------------------------------


@needs_landlock
def test_cat_reads_inside_and_is_refused_outside(tree: SandboxTree) -> None:
    assert SECRET in naive(["cat", str(tree.secret)]).stdout  # the control leaks
    inside = confined(tree.roots, ["cat", str(tree.inside_file)])
    assert (inside.returncode, inside.stdout) == (0, "inside content")
    outside = confined(tree.roots, ["cat", str(tree.secret)])
    assert refused(outside), outside
    assert "cat:" in outside.stderr  # EACCES from the kernel, as cat reports it


@needs_landlock
def test_an_in_root_symlink_pointing_out_is_refused(tree: SandboxTree) -> None:
    assert SECRET in naive(["cat", str(tree.link)]).stdout
    assert refused(confined(tree.roots, ["cat", str(tree.link)]))


@needs_landlock
def test_a_childs_child_inherits_the_confinement(tree: SandboxTree) -> None:
    script = f"sh -c 'cat {tree.secret}'"
    assert SECRET in naive(["sh", "-c", script]).stdout
    assert refused(confined(tree.roots, ["sh", "-c", script]))
    grandchild = f"import subprocess; subprocess.run(['cat', {str(tree.secret)!r}], check=True)"
    python = [
        sys.executable,
        "-c",
        f"import subprocess as s, sys; sys.exit(s.run([sys.executable, '-c', {grandchild!r}]).returncode)",
    ]
    assert SECRET in naive(python).stdout
    assert refused(confined(tree.roots, python))


@needs_landlock
def test_a_confined_python_child_cannot_open_etc_passwd(tree: SandboxTree) -> None:
    code = "print(open('/etc/passwd').readline())"
    assert "root:" in naive([sys.executable, "-c", code]).stdout
    result = confined(tree.roots, [sys.executable, "-c", code])
    assert result.returncode != 0
    assert denied(result.stderr)
    assert "root:" not in result.stdout


# --- Writing ---------------------------------------------------------------------------------------------


@needs_landlock
def test_write_false_refuses_a_write_inside(tree: SandboxTree) -> None:
    target = tree.root / "new.txt"
    command = ["sh", "-c", f"echo written > {target}"]
    assert naive(command).returncode == 0  # the control writes
    target.unlink()
    assert refused(confined(tree.roots, command))
    assert not target.exists()
    truncate = ["truncate", "-s", "0", str(tree.inside_file)]
    assert refused(confined(tree.roots, truncate))
    assert tree.inside_file.read_text() == "inside content"


TRUNCATIONS = {
    "truncate(2)": "os.truncate(path, 0)",
    "O_RDONLY|O_TRUNC": "os.close(os.open(path, os.O_RDONLY | os.O_TRUNC))",
    "O_WRONLY|O_TRUNC": "os.close(os.open(path, os.O_WRONLY | os.O_TRUNC))",
}


@needs_landlock
@pytest.mark.parametrize("how", sorted(TRUNCATIONS))
@pytest.mark.parametrize(
    "writable_beside", [False, True], ids=["write=False", "a read root beside a write root"]
)
def test_no_truncation_beneath_a_read_only_root(tree: SandboxTree, how: str, writable_beside: bool) -> None:
    # Where the child has a root of its own, a read-only root is mounted read-only and Landlock grants
    # truncation beneath it (EROFS answers first): every way to empty a file there is still refused.
    code = f"import os, sys; path = sys.argv[1]; {TRUNCATIONS[how]}"
    target = tree.root / "notes.txt"
    target.write_text(SECRET)
    assert naive([sys.executable, "-c", code, str(target)]).returncode == 0  # the control empties it
    assert target.read_text() == ""
    target.write_text(SECRET)
    roots, write = tree.roots, False
    if writable_beside:
        work = tree.outside / "work"
        work.mkdir()
        roots = RootSet([*RootSet.from_paths([work]), *tree.roots.with_access("read")])
        write = True
    result = confined(roots, [sys.executable, "-c", code, str(target)], write=write)
    assert result.returncode != 0, result
    assert "Error" in result.stderr, result.stderr
    assert target.read_text() == SECRET


@needs_landlock
def test_write_true_writes_inside_and_still_refuses_outside(tree: SandboxTree) -> None:
    inside = tree.root / "new.txt"
    result = confined(tree.roots, ["sh", "-c", f"echo written > {inside}"], write=True)
    assert result.returncode == 0, result.stderr
    assert inside.read_text() == "written\n"
    outside = tree.outside / "planted.txt"
    command = ["sh", "-c", f"echo planted > {outside}"]
    assert naive(command).returncode == 0
    outside.unlink()
    assert refused(confined(tree.roots, command, write=True))
    assert not outside.exists()
    # Truncation (Landlock ABI 3) of a file outside: the control empties a copy, the confined run cannot.
    copy = tree.outside / "copy.txt"
    copy.write_text(SECRET)
    assert naive(["truncate", "-s", "0", str(copy)]).returncode == 0
    assert copy.read_text() == ""
    copy.write_text(SECRET)
    assert refused(confined(tree.roots, ["truncate", "-s", "0", str(copy)], write=True))
    assert copy.read_text() == SECRET
    assert confined(tree.roots, ["truncate", "-s", "3", str(tree.inside_file)], write=True).returncode == 0
    assert tree.inside_file.read_text() == "ins"


@needs_landlock
def test_rename_within_a_root_works_and_across_the_boundary_fails(tree: SandboxTree) -> None:
    rename = "import os, sys; os.rename(sys.argv[1], sys.argv[2])"
    # Within the root, into another directory: needs the REFER right (ABI 2).
    result = confined(
        tree.roots,
        [sys.executable, "-c", rename, str(tree.inside_file), str(tree.root / "sub" / "moved.txt")],
        write=True,
    )
    assert result.returncode == 0, result.stderr
    assert (tree.root / "sub" / "moved.txt").read_text() == "inside content"
    # Across the boundary, both ways. The controls do it unconfined (and are undone).
    out_copy = tree.outside / "moved-out.txt"
    mover = tree.root / "sub" / "moved.txt"
    assert naive([sys.executable, "-c", rename, str(mover), str(out_copy)]).returncode == 0
    os.rename(out_copy, mover)
    result = confined(tree.roots, [sys.executable, "-c", rename, str(mover), str(out_copy)], write=True)
    assert result.returncode != 0
    assert "Error" in result.stderr
    assert mover.exists()
    assert not out_copy.exists()
    pulled_in = tree.root / "pulled.txt"
    assert naive([sys.executable, "-c", rename, str(tree.secret), str(pulled_in)]).returncode == 0
    os.rename(pulled_in, tree.secret)
    result = confined(
        tree.roots, [sys.executable, "-c", rename, str(tree.secret), str(pulled_in)], write=True
    )
    assert result.returncode != 0
    assert tree.secret.exists()
    assert not pulled_in.exists()


# --- Network ---------------------------------------------------------------------------------------------


@needs_landlock
@pytest.mark.skipif(KERNEL.abi < 4, reason="TCP confinement needs Landlock ABI 4")
def test_network_false_refuses_a_connect_that_an_unconfined_child_makes(tree: SandboxTree) -> None:
    with socket.create_server(("127.0.0.1", 0), backlog=8) as listener:
        port = listener.getsockname()[1]
        # The kernel completes the handshake into the backlog: no accept loop is needed.
        code = (
            f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=10).close(); "
            "print('connected')"
        )
        argv = [sys.executable, "-c", code]
        assert naive(argv).stdout.strip() == "connected"  # the control reaches the listener
        assert confined(tree.roots, argv).stdout.strip() == "connected"  # network=True: allowed
        result = confined(tree.roots, argv, network=False)
        assert result.returncode != 0
        assert "connected" not in result.stdout
        assert "PermissionError" in result.stderr


# --- The other forms: popen, run_async ---------------------------------------------------------------------


@needs_landlock
def test_popen_is_confined(tree: SandboxTree) -> None:
    with tree.roots.popen(
        ["cat", str(tree.inside_file), str(tree.secret)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as process:
        out, err = process.communicate(timeout=60)
    assert isinstance(process, subprocess.Popen)
    assert out == "inside content"
    assert denied(err)
    assert process.returncode != 0


@needs_landlock
def test_run_keeps_subprocess_semantics(tree: SandboxTree) -> None:
    result = tree.roots.run(["cat"], input=b"piped", capture_output=True)
    assert result.stdout == b"piped"
    with pytest.raises(subprocess.CalledProcessError) as caught:
        tree.roots.run(["cat", str(tree.secret)], check=True, capture_output=True)
    assert caught.value.returncode == 1
    with pytest.raises(FileNotFoundError):
        tree.roots.run(["no-such-command-here"])
    with pytest.raises(subprocess.TimeoutExpired):
        tree.roots.run(["sleep", "30"], timeout=0.2)


@needs_landlock
@pytest.mark.anyio
async def test_run_async_is_confined(tree: SandboxTree) -> None:
    result = await tree.roots.run_async(["cat", str(tree.inside_file)])
    assert result.stdout == b"inside content"
    assert result.args == ["cat", str(tree.inside_file)]
    outside = await tree.roots.run_async(["cat", str(tree.secret)], check=False)
    assert outside.returncode != 0
    assert denied(outside.stderr)
    assert SECRET.encode() not in outside.stdout
    with pytest.raises(subprocess.CalledProcessError):
        await tree.roots.run_async(["cat", str(tree.link)])
    written = await tree.roots.run_async(f"echo async > {tree.root / 'a.txt'}", write=True)
    assert written.returncode == 0
    assert (tree.root / "a.txt").read_text() == "async\n"


# --- Where Landlock is absent ------------------------------------------------------------------------------

ABSENT = """
import logging, sys
import mcp_roots
logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
roots = mcp_roots.RootSet.from_paths([sys.argv[1]])
try:
    roots.run(["true"])
except mcp_roots.SandboxUnavailable as exc:
    print("REFUSED", exc)
for _ in range(2):
    result = roots.run(["cat", sys.argv[2]], allow_unconfined=True, capture_output=True, text=True)
    print("RAN", result.stdout)
"""


@pytest.mark.skipif(sys.platform != "linux", reason="the simulation is a Linux seccomp filter")
@pytest.mark.parametrize(
    ("error", "words"),
    [("ENOSYS", "no Landlock system calls"), ("EPERM", "seccomp"), ("EOPNOTSUPP", "lsm=")],
)
def test_without_landlock_run_refuses_unless_allow_unconfined_with_one_warning(
    tree: SandboxTree, error: str, words: str
) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            str(WITHOUT_LANDLOCK),
            error,
            sys.executable,
            "-c",
            ABSENT,
            str(tree.root),
            str(tree.secret),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("REFUSED ")
    assert words in lines[0]
    assert "allow_unconfined=True" in lines[0]
    # Honest: allowed to run unconfined, it is unconfined (the secret is readable), and says so once.
    assert lines[1:] == [f"RAN {SECRET}", f"RAN {SECRET}"]
    warnings = [line for line in proc.stderr.splitlines() if "UNCONFINED" in line]
    assert len(warnings) == 1, proc.stderr
    assert words in warnings[0]


# --- The command -----------------------------------------------------------------------------------------


def cli(
    *args: str, prefix: tuple[str, ...] = (), cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_ROOTS")}
    return subprocess.run(
        [*prefix, sys.executable, "-m", "mcp_roots.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
        cwd=cwd,
    )


@needs_landlock
def test_cli_run_confines_and_passes_the_exit_code_through(tree: SandboxTree) -> None:
    roots = ("--roots", str(tree.root))
    result = cli("run", *roots, "--", "cat", str(tree.inside_file))
    assert (result.returncode, result.stdout) == (0, "inside content")
    result = cli("run", *roots, "--", "cat", str(tree.secret))
    assert result.returncode == 1
    assert denied(result.stderr)
    assert SECRET not in result.stdout
    assert cli("run", *roots, "--", "sh", "-c", "exit 42").returncode == 42
    assert cli("run", *roots, "--", "sh", "-c", "kill -TERM $$").returncode == 128 + 15
    missing = cli("run", *roots, "--", "no-such-command-here")
    assert missing.returncode == 127
    assert missing.stderr.strip() == "mcp-roots: error: no-such-command-here: command not found"
    nothing = cli("run", *roots)
    assert nothing.returncode == 2
    assert "needs a command" in nothing.stderr
    target = tree.root / "cli.txt"
    assert cli("run", *roots, "--", "sh", "-c", f"echo x > {target}").returncode != 0
    assert cli("run", *roots, "--write", "--", "sh", "-c", f"echo x > {target}").returncode == 0
    assert target.read_text() == "x\n"
    # The roots come from the same sources as the other commands, never the working directory implicitly.
    assert cli("run", "--project", str(tree.root), "--", "cat", "inside.txt", cwd=tree.root).stdout == (
        "inside content"
    )
    unconfigured = cli("run", "--", "cat", "inside.txt", cwd=tree.root)
    assert unconfigured.returncode == 2
    assert "has no roots to confine the command to" in unconfigured.stderr
    assert "on the command line, as in 'mcp-roots run --roots DIR -- COMMAND'" in unconfigured.stderr
    assert "clients that send none" not in unconfigured.stderr  # a server's words, not a command's
    assert unconfigured.stdout == ""
    assert "Traceback" not in result.stderr


@pytest.mark.skipif(sys.platform != "linux", reason="the simulation is a Linux seccomp filter")
def test_cli_without_landlock(tree: SandboxTree) -> None:
    prefix = (sys.executable, str(WITHOUT_LANDLOCK), "ENOSYS")
    result = cli("run", "--roots", str(tree.root), "--", "true", prefix=prefix)
    assert result.returncode == 2
    assert result.stderr.startswith("mcp-roots: error: no kernel confinement")
    assert "--allow-unconfined" in result.stderr
    result = cli(
        "run", "--roots", str(tree.root), "--allow-unconfined", "--", "cat", str(tree.secret), prefix=prefix
    )
    assert (result.returncode, result.stdout) == (0, SECRET)
    assert "UNCONFINED" in result.stderr
    doctor = cli("doctor", prefix=prefix)
    assert doctor.returncode == 1
    assert "Landlock: unavailable" in doctor.stdout


@needs_landlock
def test_cli_doctor_reports_the_abi_and_what_is_enforced() -> None:
    result = cli("doctor")
    assert result.returncode == 0
    assert f"Landlock: ABI {KERNEL.abi}" in result.stdout
    assert "[x] file reads and writes outside the allowed paths" in result.stdout
    as_json = cli("doctor", "--json")
    import json

    document = json.loads(as_json.stdout)
    assert document["landlock_abi"] == KERNEL.abi
    assert document["available"] is True
    assert "/usr" in document["read_only_paths"]


@needs_landlock
def test_a_root_swapped_for_a_symlink_after_the_rootset_was_built_is_refused(tree: SandboxTree) -> None:
    import dataclasses

    from mcp_roots import SandboxUnavailable
    from mcp_roots._sys.landlock import EXACT_PATH
    from mcp_roots.sandbox._plan import plan
    from mcp_roots.sandbox._spawn import spawn_confined

    roots = tree.roots
    tree.root.rename(tree.base / "root.real")
    tree.root.symlink_to(tree.outside)  # the root's path now leads outside
    secret_via_root = tree.root / "secret.txt"
    # The naive control: the same rules without the exact-path check grant the symlink's target.
    confinement = plan(roots.paths, program="/usr/bin/cat")
    assert confinement is not None
    loose = dataclasses.replace(confinement, rules=tuple((p, r & ~EXACT_PATH) for p, r in confinement.rules))
    with spawn_confined(loose, ["cat", str(secret_via_root)], {"stdout": subprocess.PIPE}) as leaky:
        assert leaky.communicate(timeout=60)[0] == SECRET.encode()
    with pytest.raises(SandboxUnavailable, match="no longer resolves to itself"):
        roots.run(["cat", str(secret_via_root)])


@pytest.mark.parametrize("command", ["run", "doctor"])
def test_sandbox_commands_have_help(command: str) -> None:
    result = cli(command, "--help")
    assert result.returncode == 0
    assert f"usage: mcp-roots {command}" in result.stdout
    assert "Exit code" in result.stdout


@needs_landlock
@pytest.mark.skipif(KERNEL.abi < 6, reason="signal scoping needs Landlock ABI 6")
def test_a_confined_child_cannot_signal_processes_outside_its_sandbox(tree: SandboxTree) -> None:
    victims = [subprocess.Popen(["sleep", "60"]) for _ in range(2)]
    try:
        assert naive(["kill", "-TERM", str(victims[0].pid)]).returncode == 0  # the control kills
        assert victims[0].wait(timeout=60) == -15
        result = confined(tree.roots, ["kill", "-TERM", str(victims[1].pid)])
        assert result.returncode != 0
        # Refused by the Landlock scope, or not even there (a PID namespace of its own).
        assert "Operation not permitted" in result.stderr or "No such process" in result.stderr
        assert victims[1].poll() is None
        # Its own children are its to signal.
        own = confined(tree.roots, ["sh", "-c", "sleep 60 & kill -TERM $!; wait $!; echo $?"])
        assert own.stdout.strip() == str(128 + 15)
    finally:
        for victim in victims:
            victim.kill()
            victim.wait(timeout=60)
