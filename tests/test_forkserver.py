"""The test kit's warm launcher (tests/forkserver.py) starts a server as ``python SCRIPT`` would: the same
argv, environment, directory, stdio, exit status and signals, and no process left behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from . import forkserver

SCRIPT = """
import json, os, sys, threading, time
what = sys.argv[1]
if what == "report":
    print(json.dumps({"argv": sys.argv, "cwd": os.getcwd(), "env": os.environ.get("PROBE"),
                      "stdin": sys.stdin.read(), "path0": sys.path[0], "main": __name__,
                      "ours": "mcp_roots" in sys.modules, "threads": threading.active_count()}))
    sys.stderr.write("to stderr\\n")
elif what == "exit":
    sys.exit(int(sys.argv[2]))
elif what == "raise":
    raise RuntimeError("boom")
elif what == "pid":
    print(os.getpid(), flush=True)
    time.sleep(60)
"""


@pytest.fixture(autouse=True)
def warm(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests are of the warm launcher, whatever MCP_ROOTS_TEST_FORK says for the rest of the run."""
    monkeypatch.setenv("MCP_ROOTS_TEST_FORK", "1")


@pytest.fixture
def script(tmp_path: Path) -> str:
    path = tmp_path / "server.py"
    path.write_text(SCRIPT)
    return str(path)


def run(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, **kwargs)  # type: ignore[call-overload, no-any-return]


def test_argv_environment_directory_and_stdio_are_the_callers(script: str, tmp_path: Path) -> None:
    env = {"PATH": os.environ["PATH"], "PROBE": "here"}
    cold = run([sys.executable, script, "report", "x"], input="in", env=env, cwd=tmp_path)
    warm = run(forkserver.command(script, "report", "x"), input="in", env=env, cwd=tmp_path)
    assert warm.returncode == cold.returncode == 0
    assert warm.stdout == cold.stdout  # argv, cwd, env, stdin, sys.path[0], __main__, no mcp_roots, 1 thread
    assert warm.stderr == cold.stderr == "to stderr\n"


def test_exit_codes_and_uncaught_exceptions_come_back(script: str) -> None:
    assert run(forkserver.command(script, "exit", "7")).returncode == 7
    failed = run(forkserver.command(script, "raise"))
    assert failed.returncode == 1
    assert "RuntimeError: boom" in failed.stderr
    code = run(forkserver.command("-c", "import sys; sys.exit(sys.argv[1:] == ['a'] and 3)", "a"))
    assert code.returncode == 3


def test_a_signal_reaches_the_server_and_its_death_comes_back(script: str) -> None:
    proc = subprocess.Popen(forkserver.command(script, "pid"), stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    server = int(proc.stdout.readline())
    assert server != proc.pid
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == -signal.SIGTERM
    assert not _alive(server)


def test_a_launcher_killed_outright_takes_its_server_with_it(script: str) -> None:
    proc = subprocess.Popen(forkserver.command(script, "pid"), stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    server = int(proc.stdout.readline())
    proc.kill()
    proc.wait(timeout=30)
    deadline = time.monotonic() + 30  # bounds a failing test only: the zygote kills it at once
    while _alive(server) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not _alive(server)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except (FileNotFoundError, ProcessLookupError):  # gone, or reaped between the open and the read (ESRCH)
        return False
