"""A first look at mcp-roots: build a RootSet over a temporary project and ask it about paths."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from mcp_roots import PathOutsideRoots, RootSet


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        project = base / "project"
        (project / "src").mkdir(parents=True)
        (project / "src" / "main.py").write_text("print('hello')\n")
        (base / "project_evil").mkdir()
        (project / "escape").symlink_to("/etc")
        roots = RootSet.from_paths([project])
        print(f"roots: {roots.describe()}\n")
        for path in [
            project / "src" / "main.py",
            project / "src" / "not-yet-written.py",
            base / "project_evil" / "x",
            project / ".." / ".." / "etc" / "passwd",
            project / "escape" / "passwd",
            "src/main.py",
        ]:
            try:
                print(f"  allowed  {os.fspath(path)}\n           -> {roots.resolve(path)}")
            except PathOutsideRoots as exc:
                print(f"  REFUSED  {os.fspath(path)}\n           -> {exc}")


if __name__ == "__main__":
    main()
