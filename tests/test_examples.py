"""The examples as a reader runs them: examples/test_file_server.py (a test with ``assert_confined``) passes
under pytest, and examples/fastmcp_server.py answers README.md's client as the README shows (inside read,
outside refused). (examples/mcp1_server.py: tests/mcp1/test_readme_mcp1.py; examples/file_server.py and the
demo: tests/adapters/test_server.py, tests/test_demo.py.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from .kit import README, REPO, blocks

EXAMPLES = REPO / "examples"


def test_the_example_test_with_assert_confined_passes(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
         f"--basetemp={tmp_path / 'p'}", str(EXAMPLES / "test_file_server.py")],
        cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "2 passed" in done.stdout


def test_the_framework_examples_are_the_readmes_servers() -> None:
    # The README's blocks are run (tests/test_docs.py); the examples are the same servers as files.
    by_name = {b.file_name: b.text for b in blocks(README) if b.file_name}
    for example, block in (("fastmcp_server.py", "server_fastmcp.py"), ("mcp1_server.py", "server_mcp1.py")):
        text = (EXAMPLES / example).read_text(encoding="utf-8")
        assert text.split("\n", 1)[1].lstrip("\n") == by_name[block].split("\n", 1)[1].lstrip("\n"), example


def test_the_fastmcp_example_reads_inside_and_refuses_outside(tmp_path: Path) -> None:
    client = next(b for b in blocks(README) if b.file_name == "client.py")
    (tmp_path / "client.py").write_text(client.text, encoding="utf-8")
    project = tmp_path / "project"
    project.mkdir()
    (project / "notes.txt").write_text("hello")
    done = subprocess.run(
        [sys.executable, "client.py", str(EXAMPLES / "fastmcp_server.py"), str(project)],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == [
        f"{project}/notes.txt -> hello",
        f"/etc/passwd -> Access denied: '/etc/passwd' is outside the allowed roots ({project})",
    ]
