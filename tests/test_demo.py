"""make demo runs the real thing: the reference server over stdio and a real client; hold it to its story."""

from __future__ import annotations

import subprocess
import sys

from .kit import REPO


def test_demo_shows_the_boundary_and_its_change() -> None:
    proc = subprocess.run(
        [sys.executable, str(REPO / "examples" / "demo.py")], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    lines = [line.strip() for line in out.splitlines()]
    assert "allowed  read_text project/src/main.py" in lines
    assert "REFUSED  read_text project/../../../../../etc/passwd" in lines
    assert "REFUSED  read_text project/escape/secret.txt (symlink out)" in lines
    assert "REFUSED  read_text notes/todo.md (not a root yet)" in lines
    assert "allowed  read_text notes/todo.md" in lines
    assert "REFUSED  read_text project/src/main.py (no longer a root)" in lines
    assert "no-such-folder" in out  # the provider says which folder it will not offer, and why
    assert "TOP SECRET" not in out
    assert "root:" not in proc.stderr  # the server's info logs stay out of the demo
    assert out.startswith("mcp-roots demo: ")  # it says what it shows before anything else
    assert "WARNING" not in proc.stderr  # no line that looks like an error
    assert "Traceback" not in proc.stderr


def test_make_demo_says_what_it_installs_before_each_quiet_step() -> None:
    # make -n prints the recipe without running it: each quiet pip install has a line saying what comes
    recipe = subprocess.run(
        ["make", "-n", "-B", ".venv-demo/.installed"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.splitlines()
    steps = [i for i, line in enumerate(recipe) if " -m venv " in line or " -m pip install " in line]
    assert len(steps) == 3
    for number, step in enumerate(steps, 1):
        assert recipe[step - 1].startswith('echo "make demo: '), recipe[step - 1]
        assert f"{number}/3" in recipe[step - 1]
