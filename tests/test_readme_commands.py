"""The README's command lines that are not Python files (tests/test_docs.py runs those), run as written and
held to the transcripts the README shows: ``mcp-roots wrap`` around the official filesystem server, and the
probe of ``mcp-roots serve``. Its install lines run in ``make dist`` (tools/check_dist.py); ``make demo`` and
``make test`` are what runs this.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from .kit import INTEROP, README, SECRET, blocks, command_lines, connected

BIN = str(Path(sys.executable).parent)  # this environment's mcp-roots, first on PATH as an install puts it
NPX_SERVER = "npx -y @modelcontextprotocol/server-filesystem"


def _line(info: str, start: str) -> tuple[str, list[str]]:
    """The README's command line beginning ``start`` in an ``info`` block, and the lines it shows printed."""
    for block in blocks(README):
        if block.info == info:
            for line in command_lines(block):
                if line.startswith(start):
                    shown = [s for s in block.text.splitlines() if s and not s.startswith("$ ")]
                    return line, shown
    raise AssertionError(f"README.md has no {info} block with {start!r}")


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # the server is a process: one loop is enough
async def test_the_readmes_wrap_line_confines_the_official_server_to_the_clients_roots(
    anyio_backend: str, tmp_path: Path
) -> None:
    line, _ = _line("sh", "mcp-roots wrap")
    assert NPX_SERVER in line
    # npx from the pinned local install, offline (no network reaches the tests), readable by the server
    local = f"npx --prefix {shlex.quote(str(INTEROP))} --no-install --offline mcp-server-filesystem"
    line = line.replace(NPX_SERVER, local).replace("mcp-roots wrap", f"mcp-roots wrap --read {INTEROP}", 1)
    code = tmp_path / "code"
    code.mkdir()
    (code / "notes.txt").write_text("hello")
    (tmp_path / "secret.txt").write_text(SECRET)
    env = {"HOME": str(tmp_path), "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    env["npm_config_cache"] = str(Path.home() / ".npm")  # npx's cache stays where it was filled
    async with connected(["bash", "-c", f"exec {line}"], [str(code)], **env) as host:
        await host.initialize()
        assert await host.text("read_text_file", {"path": str(code / "notes.txt")}) == "hello"
        answer = await host.call("read_text_file", {"path": str(tmp_path / "secret.txt")})
    assert answer["result"]["isError"] is True
    assert SECRET not in str(answer)


def test_the_readmes_probe_of_serve_prints_what_the_readme_shows(tmp_path: Path) -> None:
    line, shown = _line("console", "mcp-roots probe")
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "TMPDIR": str(tmp_path)}
    done = subprocess.run(
        ["bash", "-c", line], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    # the last line's counts and time vary with the machine: the rest is as shown
    figures = re.compile(r"in \d+ calls, [\d.]+ s$")
    assert [figures.sub("in N calls, T s", s) for s in done.stdout.splitlines() if s] == [
        figures.sub("in N calls, T s", s) for s in shown
    ]
