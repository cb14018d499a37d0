"""How a confined child is started: nothing it could have written runs unconfined, it never gets the server's
own stdio channel, `mcp-roots run` gives it no controlling terminal, and `--clean-env` trims its environment.

Real processes, a real pty, a real venv inside a writable root; each refusal is shown against a control.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import anyio
import pytest

from mcp_roots import RootSet
from mcp_roots.sandbox import support

KERNEL = support()
pytestmark = pytest.mark.skipif(
    not KERNEL.complete, reason=f"no Landlock or seccomp filter: {KERNEL.reason or KERNEL.filter_reason}"
)
SRC = Path(__file__).resolve().parents[2] / "src"


@pytest.fixture
def places(tmp_path: Path) -> tuple[Path, Path]:
    base = tmp_path.resolve()
    (base / "root").mkdir()
    (base / "outside").mkdir()
    return base / "root", base / "outside"


# --- nothing a confined child wrote runs before the confinement ---------------------------------------------

ATTACK = """
import sys, anyio
from mcp_roots import RootSet
root, marker = sys.argv[1], sys.argv[2]
roots = RootSet.from_paths([root])
fake = f"#!/bin/sh\\necho unconfined > {marker}\\n"
async def main():
    # A write=True command replaces the venv's interpreter, a file inside its writable root.
    replace = (
        "import os, sys; os.unlink(sys.argv[1]); "
        "os.write(os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o755), sys.argv[2].encode())"
    )
    await roots.run_async([sys.executable, "-c", replace, sys.executable, fake], write=True)
    # The next confined command: nothing may run the rewritten interpreter outside the confinement.
    result = await roots.run_async(["true"], check=False)
    print("exit", result.returncode)
anyio.run(main)
"""


def test_a_rewritten_interpreter_inside_a_writable_root_never_runs_unconfined(
    places: tuple[Path, Path],
) -> None:
    root, outside = places
    venv = root / ".venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--copies", "--without-pip", str(venv)], check=True, timeout=120
    )
    python = venv / "bin" / "python"
    marker = outside / "marker"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), sysconfig.get_paths()["purelib"]])}
    # The attack: the server runs from that venv and uses run_async twice.
    result = subprocess.run(
        [str(python), "-c", ATTACK, str(root), str(marker)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "exit 0"
    assert python.read_bytes().startswith(b"#!/bin/sh")  # the rewrite happened...
    assert not marker.exists()  # ...and never ran
    subprocess.run([str(python)], check=True, timeout=60)  # the control: run, it escapes
    assert marker.read_text() == "unconfined\n"


# --- the server's own stdin and stdout are not the child's --------------------------------------------------

STDIO = """
import sys, anyio
from mcp_roots import RootSet
roots = RootSet.from_paths([sys.argv[1]])
code = "import os; os.write(1, b'FORGED'); os.write(2, b'READ %r\\\\n' % os.read(0, 64))"
child = [sys.executable, "-c", code]
roots.run(child)
roots.popen(child).wait()
async def main():
    await roots.run_async(child, stderr=None)
anyio.run(main)
"""


def test_a_confined_child_gets_neither_the_servers_stdin_nor_its_stdout(places: tuple[Path, Path]) -> None:
    root, _ = places
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    # The control: a plain subprocess.run in the same "server" reads its stdin and writes its stdout.
    control = STDIO.replace("roots.run(child)", "import subprocess; subprocess.run(child)")
    for script, expect_leak in ((control, True), (STDIO, False)):
        server = subprocess.run(
            [sys.executable, "-c", script, str(root)],
            input=b"CLIENT-MESSAGE\n" * 20,
            capture_output=True,
            timeout=120,
            env=env,
            check=False,
        )
        assert server.returncode == 0, server.stderr
        reads = [line for line in server.stderr.splitlines() if line.startswith(b"READ ")]
        assert len(reads) == 3, server.stderr
        if expect_leak:
            assert server.stdout.startswith(b"FORGED")
            assert b"CLIENT-MESSAGE" in reads[0]
        else:
            assert server.stdout == b""
            assert reads == [b"READ b''"] * 3


# --- `mcp-roots run` and the user's terminal ----------------------------------------------------------------

PTY_DRIVER = """
import fcntl, os, pty, struct, subprocess, sys, termios
pid, master = pty.fork()
if pid == 0:  # a login shell's position: the pty is this session's controlling terminal
    code = subprocess.run(sys.argv[1:]).returncode
    pending = struct.unpack("i", fcntl.ioctl(0, termios.FIONREAD, b"\\0" * 4))[0]
    print(f"EXIT {code} PENDING {pending}", flush=True)
    os._exit(0)
output = b""
while True:
    try:
        chunk = os.read(master, 4096)
    except OSError:
        break
    if not chunk:
        break
    output += chunk
os.waitpid(pid, 0)
sys.stdout.write(output.decode(errors="replace"))
"""
INJECT = """
import errno, fcntl, os, termios
try:
    for byte in b"id\\n":
        fcntl.ioctl(0, termios.TIOCSTI, bytes([byte]))
    print("TIOCSTI ok")
except OSError as exc:
    print("TIOCSTI", errno.errorcode[exc.errno])
print("NEW SESSION", os.getsid(0) == os.getpid())
try:
    os.tcgetpgrp(0)
    print("CONTROLLING TERMINAL yes")
except OSError:
    print("CONTROLLING TERMINAL no")
"""


def _in_a_pty(argv: list[str], cwd: Path) -> str:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    result = subprocess.run(
        [sys.executable, "-c", PTY_DRIVER, *argv],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=cwd,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.replace("\r\n", "\n")


def test_mcp_roots_run_cannot_type_into_the_users_terminal(places: tuple[Path, Path]) -> None:
    root, _ = places
    # The control: the same child, plainly in the terminal's session, injects a line the shell would run.
    control = _in_a_pty([sys.executable, "-c", INJECT], root)
    if "TIOCSTI ok" not in control:
        pytest.skip(f"TIOCSTI is refused here for everyone (not root, legacy_tiocsti=0): {control}")
    assert "CONTROLLING TERMINAL yes" in control
    assert "PENDING 3" in control  # "id\n" waits in the terminal's input for the next reader
    confined = _in_a_pty(
        [
            sys.executable,
            "-m",
            "mcp_roots.cli",
            "run",
            "--roots",
            str(root),
            "--",
            sys.executable,
            "-c",
            INJECT,
        ],
        root,
    )
    assert "TIOCSTI EPERM" in confined, confined
    assert "NEW SESSION True" in confined
    assert "CONTROLLING TERMINAL no" in confined
    assert "EXIT 0 PENDING 0" in confined


# --- the child's environment --------------------------------------------------------------------------------


def test_clean_env_keeps_only_path_home_lang_term_and_mcp_roots(places: tuple[Path, Path]) -> None:
    root, _ = places
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(root.parent / "outside"),
        "LANG": "C.UTF-8",
        "SSH_AUTH_SOCK": "/tmp/agent.sock",
        "GITHUB_TOKEN": "t0ken",
        "PYTHONPATH": str(SRC),
        "MCP_ROOTS_EXTRA": "kept",
    }

    def child_env(*flags: str) -> set[str]:
        command = [sys.executable, "-m", "mcp_roots.cli", "run", "--roots", str(root), *flags, "--", "env"]
        result = subprocess.run(command, capture_output=True, text=True, timeout=60, env=env, check=True)
        return {line.split("=", 1)[0] for line in result.stdout.splitlines()}

    # The default is subprocess's: the whole environment (the control shows the agent socket leaks).
    assert {"SSH_AUTH_SOCK", "GITHUB_TOKEN", "PYTHONPATH"} <= child_env()
    assert child_env("--clean-env") == {"PATH", "HOME", "LANG", "MCP_ROOTS_EXTRA"}


CATCHER = """
import signal, sys, time
signal.signal(signal.SIGINT, lambda *_: (print("GOT SIGINT", flush=True), sys.exit(3)))
print("READY", flush=True)
time.sleep(60)
"""


def test_mcp_roots_run_passes_ctrl_c_on_to_the_command_in_its_own_session(places: tuple[Path, Path]) -> None:
    # In a new session the terminal's Ctrl-C reaches only mcp-roots itself: it must pass it on.
    root, _ = places
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    command = [sys.executable, "-m", "mcp_roots.cli", "run", "--roots", str(root), "--"]
    with subprocess.Popen(
        [*command, sys.executable, "-c", CATCHER], stdout=subprocess.PIPE, text=True, env=env
    ) as process:
        assert process.stdout is not None
        assert process.stdout.readline() == "READY\n"
        process.send_signal(signal.SIGINT)
        rest = process.stdout.read()
        assert process.wait(timeout=60) == 3
    assert rest == "GOT SIGINT\n"


# --- run_async: cancelling kills the child (asyncio and trio) ----------------------------------------------


@pytest.mark.anyio
async def test_cancelling_run_async_kills_the_confined_child(places: tuple[Path, Path]) -> None:
    root, _ = places
    # Its number here (its own namespace may number it otherwise), found by a mark in its command line.
    mark = f"mcp-roots-cancel-{os.getpid()}-{time.monotonic_ns()}"
    code = "import os, sys, time; os.write(2, b'up'); time.sleep(600)"
    read_end, write_end = os.pipe()
    try:
        with anyio.fail_after(60):  # a bound on a hung test only
            async with anyio.create_task_group() as group:

                async def cancel_once_started() -> None:
                    await anyio.to_thread.run_sync(os.read, read_end, 32)
                    group.cancel_scope.cancel()

                group.start_soon(cancel_once_started)
                await RootSet.from_paths([root]).run_async(
                    [sys.executable, "-c", code, mark], stderr=write_end
                )
            while _with_mark(mark):  # killed, then reaped by the worker thread it was abandoned on  # noqa: ASYNC110
                await anyio.sleep(0.01)
    finally:
        os.close(read_end)
        os.close(write_end)


def _with_mark(mark: str) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        try:
            if name.isdigit() and mark.encode() in Path(f"/proc/{name}/cmdline").read_bytes():
                found.append(int(name))
        except OSError:
            continue
    return found
