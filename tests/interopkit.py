"""Helpers for the interop tests: a directory tree with one file per root, and the reference server run as
a real subprocess (stdio command line, or streamable HTTP through the kit's launcher in tests/subprocs.py)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from .subprocs import START_TIMEOUT, HttpServer, launch_http

__all__ = ["FILE_SERVER", "REPO", "Dirs", "HttpServer", "http_server", "server_command"]

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


@contextlib.contextmanager
def http_server(
    *args: str,
    start_timeout: float = START_TIMEOUT,
    script: Path = FILE_SERVER,
    command: Sequence[str] | None = None,
) -> Iterator[HttpServer]:
    """``launch_http`` of examples/file_server.py (or another ``script``, or the argv ``command``) with
    ``--http PORT *args``."""
    with launch_http(
        server_command(script=script) if command is None else command, *args, start_timeout=start_timeout
    ) as server:
        yield server
