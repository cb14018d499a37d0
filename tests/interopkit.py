"""Helpers for the interop tests: a directory tree with one file per root, and the reference server run as
a real subprocess (stdio command line, or streamable HTTP on 127.0.0.1 with bounded start and stop)."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FILE_SERVER = REPO / "examples" / "file_server.py"


@dataclass(frozen=True)
class Dirs:
    """Three client roots (a, b, c), the server's fallback root and an outside directory, one file each."""

    base: Path
    a: Path
    b: Path
    c: Path
    fallback: Path
    outside: Path

    @classmethod
    def make(cls, base: Path) -> Dirs:
        base = base.resolve()
        dirs = cls(base, base / "a", base / "b", base / "c", base / "fallback", base / "outside")
        contents = {
            dirs.a / "a.txt": "alpha",
            dirs.b / "b.txt": "beta",
            dirs.c / "c.txt": "gamma",
            dirs.fallback / "fallback.txt": "from the fallback root",
            dirs.outside / "secret.txt": "TOP SECRET",
        }
        for path, text in contents.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        return dirs


def server_command(*args: str, script: Path = FILE_SERVER) -> list[str]:
    return [sys.executable, str(script), *args]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class HttpServer:
    proc: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def stderr(self) -> str:
        return self.log.read_text(errors="replace")


@contextlib.contextmanager
def http_server(
    *args: str,
    start_timeout: float = 20.0,
    script: Path = FILE_SERVER,
    command: Sequence[str] | None = None,
) -> Iterator[HttpServer]:
    """Run ``examples/file_server.py --http PORT *args`` (or another ``script``, or the argv ``command``,
    with the same flag); stop it on exit (terminate, then kill).

    stdout (uvicorn's access log) is discarded; stderr goes to a file the caller can show on failure.
    """
    with tempfile.TemporaryDirectory(prefix="mcp-roots-http-") as tmp:
        log = Path(tmp) / "server.log"
        port = free_port()
        what = script.name if command is None else " ".join(command)
        argv = (
            [*command, "--http", str(port), *args]
            if command is not None
            else server_command("--http", str(port), *args, script=script)
        )
        with log.open("wb") as err:
            proc = subprocess.Popen(
                argv,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )
        server = HttpServer(proc, port, log)
        try:
            deadline = time.monotonic() + start_timeout
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(f"{what} exited early ({proc.returncode}):\n{server.stderr()}")
                with socket.socket() as s:
                    if s.connect_ex(("127.0.0.1", port)) == 0:
                        break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{what} not listening after {start_timeout} s:\n{server.stderr()}")
                time.sleep(0.05)
            yield server
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
