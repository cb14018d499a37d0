"""The fenced code blocks of README.md and docs/*.md, for the tests that run and parse them
(tests/test_docs.py; tests/mcp1/test_readme_mcp1.py runs the mcp 1.x server block).

A block is its info string (``python``, ``json``, ``sh``, ``console``...) and its text. A Python block whose
first line is ``# NAME.py`` is a file the README asks the reader to write under that name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
DOCS = REPO / "docs"

_FENCE = re.compile(
    r"^(?P<indent> *)(?P<fence>```+|~~~+)(?P<info>[^\n`]*)\n(?P<body>.*?)^(?P=indent)(?P=fence)\s*$",
    re.M | re.S,
)
_FILE_NAME = re.compile(r"# (\S+\.py)\b")


@dataclass(frozen=True)
class Block:
    source: Path
    line: int
    info: str
    text: str

    @property
    def where(self) -> str:
        return f"{self.source.relative_to(REPO)}:{self.line}"

    @property
    def file_name(self) -> str | None:
        """``NAME.py`` when the block's first line names the file it is."""
        match = _FILE_NAME.match(self.text)
        return match.group(1) if self.info == "python" and match else None


def blocks(path: Path) -> list[Block]:
    text = path.read_text(encoding="utf-8")
    found = []
    for match in _FENCE.finditer(text):
        indent = len(match.group("indent"))
        body = "".join(line[indent:] + "\n" for line in match.group("body").splitlines())
        line = text.count("\n", 0, match.start()) + 1
        found.append(Block(path, line, match.group("info").strip().split(" ")[0], body))
    return found


def documents() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


def command_lines(block: Block) -> list[str]:
    """The shell command lines of a ``sh``/``console`` block (a console block's commands start with ``$``;
    a trailing comment is left out, continuation lines are joined)."""
    lines: list[str] = []
    pending = ""
    for raw in block.text.splitlines():
        if block.info == "console":
            if not raw.startswith("$ ") and not pending:
                continue
            raw = raw[2:] if raw.startswith("$ ") else raw
        line = pending + raw
        if line.endswith("\\"):
            pending = line[:-1]
            continue
        pending = ""
        if line.strip() and not line.lstrip().startswith("#"):
            lines.append(line)
    return lines
