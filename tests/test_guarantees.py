"""docs/guarantees.md names the code that holds each guarantee: every module it names exists, and so does
every name it gives inside one (``paths/_write.keep_metadata``), and every test file it cites."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PAGE = (REPO / "docs" / "guarantees.md").read_text(encoding="utf-8")

#: `package/_module`, `package/_module.Name.attribute` or `package/module.py`, as the page spells code (MCP
#: method names such as `roots/list` and `files/write` are not code).
METHODS = re.compile(r"roots/list|files/\w+|notifications/[\w/]+")
MODULES = sorted(
    (module, names)
    for module, names in set(re.findall(r"`((?:[a-z_0-9]+/)+[a-z_0-9]+)((?:\.\w+)*)`", PAGE))
    if not METHODS.fullmatch(module)
)
MODULES = [(m, "" if n == ".py" else n) for m, n in MODULES if not m.rsplit("/", 1)[-1].startswith("test_")]
TESTS = sorted(set(re.findall(r"\b(test_\w+\.py)\b", PAGE)))


def test_the_page_names_code() -> None:
    assert len(MODULES) >= 10
    assert len(TESTS) >= 10


@pytest.mark.parametrize(("module", "names"), MODULES, ids=["".join(m) for m in MODULES])
def test_every_module_the_page_names_exists(module: str, names: str) -> None:
    path = REPO / "src" / "mcp_roots" / module
    assert path.with_suffix(".py").is_file() or (path / "__init__.py").is_file(), module
    obj: object = importlib.import_module("mcp_roots." + module.replace("/", "."))
    for name in filter(None, names.split(".")):
        assert hasattr(obj, name), f"{module}{names}"
        obj = getattr(obj, name)


@pytest.mark.parametrize("name", TESTS)
def test_every_test_file_the_page_cites_exists(name: str) -> None:
    assert list((REPO / "tests").rglob(name)), name
