"""The house style that a reader meets first: every module opens with a docstring of at most three lines,
and no code or test names an issue number (a reader cannot look one up; the text says what it means)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SRC = REPO / "src" / "mcp_roots"
MODULES = sorted(SRC.rglob("*.py"))
ISSUE_NUMBER = re.compile(r"\bissues? #?[0-9]+|#[0-9]{2}\b", re.IGNORECASE)


@pytest.mark.parametrize("path", MODULES, ids=[str(p.relative_to(SRC)) for p in MODULES])
def test_every_module_opens_with_a_docstring_of_at_most_three_lines(path: Path) -> None:
    docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")), clean=False)
    assert docstring, "a module starts with a docstring that says its job"
    lines = docstring.strip("\n").split("\n")
    assert len(lines) <= 3, "at most three lines: the rest goes into a comment below it, or the docs"


def test_no_source_or_test_names_an_issue_number() -> None:
    found = [
        f"{path.relative_to(REPO)}:{number}: {line.strip()}"
        for folder in ("src", "tests")
        for path in sorted((REPO / folder).rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if ISSUE_NUMBER.search(line) and path.name != "test_style.py" and "node_modules" not in path.parts
    ]
    assert found == []
