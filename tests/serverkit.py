"""Test helpers for the server layer: a temporary project tree, roots callbacks, the reference server."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
from mcp.client.context import ClientRequestContext
from mcp_types import ErrorData, ListRootsResult, Root

from mcp_roots import path_to_uri

from .interopkit import FILE_SERVER


def load_file_server() -> ModuleType:
    """Import examples/file_server.py as a module (it is a script, not part of the package)."""
    spec = importlib.util.spec_from_file_location("mcp_roots_example_file_server", FILE_SERVER)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


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


class RootsCallback:
    """A list_roots_callback whose answer the test can change, and that counts the requests it gets."""

    def __init__(self, *paths: Path, answer: Callable[[], Any] | None = None) -> None:
        self.paths = list(paths)
        self.calls = 0
        self._answer = answer

    async def __call__(self, context: ClientRequestContext) -> ListRootsResult | ErrorData:
        self.calls += 1
        if self._answer is not None:
            result = self._answer()
            if isinstance(result, float):
                await anyio.sleep(result)
                return ListRootsResult(roots=[])
            assert isinstance(result, (ListRootsResult, ErrorData))
            return result
        return ListRootsResult(roots=[Root(uri=path_to_uri(p), name=p.name) for p in self.paths])


def text_of(result: Any) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)
