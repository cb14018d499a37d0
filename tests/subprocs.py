"""A server subprocess on streamable HTTP (127.0.0.1, a free port), started and stopped within bounds; no
MCP SDK import (the mcp 1.x venv uses it too)."""

from __future__ import annotations

import contextlib
import socket
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import anyio

START_TIMEOUT = 30.0  # a loaded CI machine starts uvicorn slowly; the bound only stops a hung test


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.asynccontextmanager
async def http_server(command: list[str], log: Path) -> AsyncIterator[str]:
    """Run ``command --http PORT``; yield its MCP endpoint URL; terminate it (then kill) on exit.
    stdout is discarded; stderr goes to ``log``."""
    port = _free_port()

    def start() -> subprocess.Popen[bytes]:
        with log.open("wb") as err:
            return subprocess.Popen([*command, "--http", str(port)], stdout=subprocess.DEVNULL, stderr=err)

    proc = await anyio.to_thread.run_sync(start)
    try:
        with anyio.fail_after(START_TIMEOUT):
            while True:
                if proc.poll() is not None:
                    output = await anyio.Path(log).read_text()
                    raise RuntimeError(f"server exited early ({proc.returncode}):\n{output}")
                with socket.socket() as s:
                    if s.connect_ex(("127.0.0.1", port)) == 0:
                        break
                await anyio.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            await anyio.to_thread.run_sync(lambda: proc.wait(timeout=10))
        except subprocess.TimeoutExpired:
            proc.kill()
            await anyio.to_thread.run_sync(proc.wait)
