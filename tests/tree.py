"""The directory tree the server-layer tests work in; no MCP SDK import (the mcp 1.x venv uses it too)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


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
        (self.outside / "secret.txt").write_text("TOP SECRET")
        (self.project / "escape").symlink_to(self.outside)
