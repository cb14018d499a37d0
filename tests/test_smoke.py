"""The public API imports and the basic boundary holds (the full corpus lives in test_rootset_corpus)."""

from __future__ import annotations

from pathlib import Path

import pytest

import mcp_roots
from mcp_roots import PathOutsideRoots, RootSet


def test_public_api_names_resolve() -> None:
    for name in mcp_roots.__all__:
        assert hasattr(mcp_roots, name), name


def test_sibling_prefix_is_outside(tmp_path: Path) -> None:
    (tmp_path / "root").mkdir()
    (tmp_path / "root_evil").mkdir()
    roots = RootSet.from_paths([tmp_path / "root"])
    assert roots.contains(tmp_path / "root" / "x")
    assert not roots.contains(tmp_path / "root_evil" / "x")
    with pytest.raises(PathOutsideRoots, match="root_evil"):
        roots.resolve(tmp_path / "root_evil")
