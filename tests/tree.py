"""The test kit's directory trees, one class per shape: ``Tree`` (server layer), ``FsTree`` (filesystem
server), ``SandboxTree`` (Landlock sandbox); no MCP SDK import (the mcp 1.x venv uses it too)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from mcp_roots import RootSet

SECRET = "TOP SECRET"


@dataclass
class Tree:
    """A project, a second project, a fallback directory and an outside directory, with a symlink out."""

    base: Path
    project: Path = field(init=False)
    other: Path = field(init=False)
    fallback: Path = field(init=False)
    outside: Path = field(init=False)

    def __post_init__(self) -> None:
        self.base = self.base.resolve()
        self.project = self.base / "project"
        self.other = self.base / "other"
        self.fallback = self.base / "fallback"
        self.outside = self.base / "outside"
        for d in (self.project / "sub", self.other, self.fallback, self.outside):
            d.mkdir(parents=True)
        (self.project / "hello.txt").write_text("hello from project")
        (self.project / "sub" / "deep.txt").write_text("deep")
        (self.other / "other.txt").write_text("hello from other")
        (self.fallback / "fb.txt").write_text("hello from fallback")
        (self.outside / "secret.txt").write_text(SECRET)
        (self.project / "escape").symlink_to(self.outside)


@dataclass(frozen=True)
class FsTree:
    """A fixed tree: ``root`` is served; ``outside`` must never be reachable."""

    base: Path
    root: Path
    outside: Path

    @classmethod
    def make(cls, base: Path) -> FsTree:
        base = base.resolve()
        root, outside = base / "root", base / "outside"
        files: dict[str, bytes] = {
            "abc.txt": b"a\nb\nc",  # no trailing newline
            "lines.txt": b"1\n2\n3\n4\n5\n",
            "edit.txt": b"alpha\nbeta\ngamma\n",
            "bin.dat": b"\x00\x01\x02binary",
            "pic.png": b"\x89PNG\r\n\x1a\nfake",
            "sub/xy.txt": b"x\ny\n",
            "sub/deep/z.py": b"print()\n",
            "node_modules/m.js": b"module\n",
            "code.js": b"function f() {\n    if (x) {\n        return 1;\n    }\n    return 2;\n}\n",
            ".hidden/h.txt": b"hidden\n",
        }
        files.update({f"many/f{i:02d}.txt": b"m\n" for i in range(12)})
        for rel, data in files.items():
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        (root / "empty").mkdir()
        outside.mkdir()
        (outside / "secret.txt").write_text("TOP SECRET")
        (root / "escape.txt").symlink_to(outside / "secret.txt")
        (root / "escape_dir").symlink_to(outside)
        (root / "inner_link.txt").symlink_to(root / "sub" / "xy.txt")
        return cls(base, root, outside)


@dataclass
class SandboxTree:
    """A root with a file, a subdirectory and a symlink pointing out; an outside directory with a secret."""

    base: Path

    def __post_init__(self) -> None:
        self.base = self.base.resolve()
        self.root = self.base / "root"
        self.outside = self.base / "outside"
        (self.root / "sub").mkdir(parents=True)
        self.outside.mkdir()
        self.inside_file = self.root / "inside.txt"
        self.inside_file.write_text("inside content")
        self.secret = self.outside / "secret.txt"
        self.secret.write_text(SECRET)
        self.link = self.root / "link.txt"
        self.link.symlink_to(self.secret)
        self.roots = RootSet.from_paths([self.root])
