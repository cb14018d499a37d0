"""Tests of the mcp 1.x adapter: they run in .venv-mcp1 (`make pytest-mcp1`), where mcp 1.x is installed.

The main venv has mcp 2.x, which cannot import mcp 1.x servers; there these files are not collected (they
are not skipped: they run in their own venv, as `make test` does).
"""

from __future__ import annotations

import importlib.metadata

MCP_MAJOR = int(importlib.metadata.version("mcp").split(".")[0])

if MCP_MAJOR >= 2:
    collect_ignore_glob = ["test_*.py"]
