"""docs/guide-without-roots.md as a reader meets it: its server and client files, written out under their
names, run as its console block says, and print what it shows (the question, the grant, the refusal).
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

from .kit import REPO, blocks, command_lines

GUIDE = REPO / "docs" / "guide-without-roots.md"


def test_the_guides_server_and_client_run_as_the_guide_shows(tmp_path: Path) -> None:
    found = blocks(GUIDE)
    files = {b.file_name: b.text for b in found if b.file_name}
    assert set(files) == {"notes_server.py", "consent_client.py"}
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    console = next(b for b in found if b.info == "console")
    setup, run = command_lines(console)
    shown = [line for line in console.text.splitlines() if line and not line.startswith("$ ")]
    ceiling = str(tmp_path / "notes")
    subprocess.run(["bash", "-c", setup.replace("/tmp/notes", ceiling)], check=True)
    argv = shlex.split(run.replace("/tmp/notes", ceiling))
    assert argv[:2] == ["python", "consent_client.py"]
    done = subprocess.run(
        [sys.executable, *argv[1:]], cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == [line.replace("/tmp/notes", ceiling) for line in shown]
