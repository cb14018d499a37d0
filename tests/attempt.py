"""Run one attempt of ``mcp_roots/_sys/attempts.py`` (the script ``mcp-roots doctor`` runs too) in a child:
unconfined (the naive control) or confined by ``RootSet.run``; its one JSON line, parsed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from mcp_roots import RootSet
from mcp_roots._sys import attempts

SCRIPT = str(Path(attempts.__file__).resolve())
COMMAND = [sys.executable, "-I", "-S", SCRIPT]


def parse(result: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    lines = result.stdout.strip().splitlines()
    assert lines, result.stderr
    said: dict[str, Any] = json.loads(lines[-1])
    return said


def unconfined(*argv: str) -> dict[str, Any]:
    return parse(subprocess.run([*COMMAND, *argv], capture_output=True, text=True, timeout=60, check=False))


def confined(roots: RootSet, *argv: str, **kwargs: Any) -> dict[str, Any]:
    result: subprocess.CompletedProcess[str] = roots.run(
        [*COMMAND, *argv], capture_output=True, text=True, timeout=60, extra_read=[SCRIPT], **kwargs
    )
    return parse(result)


def refused(said: dict[str, Any], error: str = "EPERM") -> bool:
    return said.get("ok") is False and said.get("error") == error
