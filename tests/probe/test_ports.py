"""A port picked free a moment ago may go to another process before the server binds it (other workers start
servers too): the test kit's launcher and the probe's own server start take the server as ready only when the
listener is the server's own, and the launcher starts it again on another port."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcp_roots.probe import command
from mcp_roots.probe._procs import listeners
from tests import kit

# A stand-in server: binds --http PORT or exits 1 (what uvicorn does when the port is taken).
FAKE_SERVER = """
import socket, sys, time
port = int(sys.argv[sys.argv.index("--http") + 1])
s = socket.socket()
try:
    s.bind(("127.0.0.1", port))
except OSError:
    sys.exit(1)
s.listen()
time.sleep(60)
"""


@pytest.fixture
def squatter() -> Iterator[socket.socket]:
    """Another process's listener, as far as the server under test is concerned."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s


def test_a_taken_port_is_not_mistaken_for_the_server(
    tmp_path: Path, squatter: socket.socket, monkeypatch: pytest.MonkeyPatch
) -> None:
    taken = squatter.getsockname()[1]
    # The naive readiness check (something answers on the port) is fooled: the squatter answers.
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", taken)) == 0
    script = tmp_path / "server.py"
    script.write_text(FAKE_SERVER)
    picks = iter([taken])
    real = kit.free_port
    monkeypatch.setattr(kit, "free_port", lambda: next(picks, 0) or real())
    with kit.launch_http([sys.executable, str(script)]) as server:
        assert server.port != taken
        assert listeners(server.port) == {server.proc.pid}
    assert listeners(taken) == {os.getpid()}


def test_listeners_names_the_holder_and_nobody_for_a_closed_port() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        assert listeners(port) == set()  # bound, not listening
        s.listen()
        assert listeners(port) == {os.getpid()}


@pytest.fixture
def bystander() -> Iterator[int]:
    """A process the squatter's holder (this process) does not descend from: the probe's server."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield proc.pid
    proc.kill()
    proc.wait()


@pytest.mark.anyio
async def test_the_probe_does_not_take_another_listener_for_its_server(
    squatter: socket.socket, bystander: int
) -> None:
    taken = squatter.getsockname()[1]
    assert await command._listening(taken, bystander) is False
    assert await command._listening(taken, os.getpid()) is True  # the listener's own: ready
