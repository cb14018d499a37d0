"""The test kit's one port picker and one HTTP server launcher: ``COMMAND --http PORT ARGS`` as a subprocess
on 127.0.0.1, started and stopped within bounds (sync, and an async face); no MCP SDK import (the mcp 1.x
venv uses it too)."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import anyio

from mcp_roots.probe._procs import descends_from, listeners

START_TIMEOUT = 30.0  # a loaded CI machine starts uvicorn slowly; the bound only stops a hung test


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class HttpServer:
    proc: subprocess.Popen[bytes]
    port: int
    log: Path
    #: what a client must send on every request (``mcp-roots serve --http``'s bearer token)
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def stderr(self) -> str:
        return self.log.read_text(errors="replace")


@contextlib.contextmanager
def launch_http(
    command: Sequence[str],
    *args: str,
    log: Path | None = None,
    start_timeout: float = START_TIMEOUT,
) -> Iterator[HttpServer]:
    """Run ``command --http PORT *args``; yield it once it listens; stop it on exit (terminate, then kill).

    stdout (uvicorn's access log) is discarded; stderr goes to ``log`` (a temporary file when None), which
    the caller can show on failure and which an early exit or a start timeout reports. The server is ready
    when the listener on PORT is its own: another worker's server may take a port picked free a moment ago,
    and then this one is started again on another (at most ``PORT_TRIES`` times).
    """
    with contextlib.ExitStack() as stack:
        if log is None:
            log = (
                Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="mcp-roots-http-")))
                / "server.log"
            )
        for attempt in range(1, PORT_TRIES + 1):
            server = _start(command, args, log)
            try:
                if _wait_listening(server, " ".join(command), start_timeout, last=attempt == PORT_TRIES):
                    break
            except BaseException:
                _stop(server.proc)
                raise
        try:
            yield server
        finally:
            _stop(server.proc)


PORT_TRIES = 3


def _start(command: Sequence[str], args: Sequence[str], log: Path) -> HttpServer:
    port = free_port()
    with log.open("wb") as err:
        proc = subprocess.Popen([*command, "--http", str(port), *args], stdout=subprocess.DEVNULL, stderr=err)
    return HttpServer(proc, port, log)


def _wait_listening(server: HttpServer, what: str, start_timeout: float, *, last: bool) -> bool:
    """True once ``server`` listens on its port; False when it exited because another process holds the
    port (unless ``last``); RuntimeError on any other early exit or after ``start_timeout``."""
    proc, port = server.proc, server.port
    deadline = time.monotonic() + start_timeout
    while True:
        if proc.poll() is not None:
            holders = listeners(port)
            if holders and not last:
                return False  # the port went to another process: start again on another
            raise RuntimeError(f"{what} exited early ({proc.returncode}):\n{server.stderr()}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                holders = listeners(port)
                if holders is None or any(descends_from(pid, proc.pid) for pid in holders):
                    return True
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} not listening after {start_timeout} s:\n{server.stderr()}")
        time.sleep(0.05)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


@contextlib.asynccontextmanager
async def http_server(command: list[str], log: Path) -> AsyncIterator[str]:
    """``launch_http`` for async tests, started and stopped in a worker thread; yields the endpoint URL."""
    launcher = launch_http(command, log=log)
    server = await anyio.to_thread.run_sync(launcher.__enter__)
    try:
        yield server.url
    finally:
        await anyio.to_thread.run_sync(launcher.__exit__, None, None, None)
