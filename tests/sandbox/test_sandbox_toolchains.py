"""The toolchains people shell out to run confined, read-only and read-write: node under ``mcp-roots run``
(it reads OpenSSL's configuration at start), and what the sandbox's one plan of a runtime's needs grants."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mcp_roots.sandbox import support

KERNEL = support()
pytestmark = pytest.mark.skipif(not KERNEL.complete, reason="needs Landlock and the seccomp filter")

NODE = shutil.which("node")


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_ROOTS")}
    return subprocess.run(
        [sys.executable, "-m", "mcp_roots.cli", "run", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=env,
        cwd=cwd,
    )


@pytest.mark.skipif(
    NODE is None, reason="node is not installed"
)
@pytest.mark.parametrize("write", [False, True])
def test_node_starts_under_run(tmp_path: Path, write: bool) -> None:
    script = tmp_path / "hash.js"
    script.write_text(
        "const fs = require('fs');\n"
        "console.log(require('crypto').createHash('sha256').update('x').digest('hex'));\n"
        f"if ({'true' if write else 'false'}) fs.writeFileSync({str(tmp_path / 'out.txt')!r}, 'written');\n"
    )
    done = run("--roots", str(tmp_path), *(["--write"] if write else []), "--", "node", str(script))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881")
    assert (tmp_path / "out.txt").exists() == write
