"""What every mcp-roots command shares: the program's name, the exit codes, and how a line is written."""

from __future__ import annotations

from typing import Any

PROG = "mcp-roots"

EXIT_OK = 0
EXIT_OUTSIDE = 1
EXIT_ERROR = 2
EXIT_INTERRUPTED = 130

#: The shells ``mcp-roots completion`` writes a script for.
SHELLS = ("bash", "zsh")


def say(stream: Any, text: str) -> None:
    """Write one line to ``stream`` and flush it (stdout is what a shell or a host reads)."""
    stream.write(text + "\n")
    stream.flush()
