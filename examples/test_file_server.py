"""A test of a guarded server, as you would write one for yours: ``assert_confined`` (the pytest plugin's
assertion) builds a scratch tree with canaries outside a root, serves it, and tries every known way out
through the tool's path argument; it fails with the findings if one gets out.

    pytest examples/test_file_server.py        (tests/test_examples.py runs it)
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from mcp_roots import RootsGuard
from mcp_roots.testing import assert_confined

sys.path.insert(0, str(Path(__file__).parent))
from file_server import build_server  # examples/ is not a package


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_read_text_cannot_leave_its_root() -> None:
    # In memory: build_server(guard) for the probe's scratch root, both protocol eras, with and without
    # client roots.
    await assert_confined(lambda root: build_server(RootsGuard([str(root)])), tool="read_text", arg="path")


@pytest.mark.anyio
async def test_the_server_as_a_process_cannot_leave_its_root() -> None:
    # Any stdio command: {root} is the scratch root (here a few techniques on one era, to keep it short).
    server = [sys.executable, str(Path(__file__).with_name("file_server.py")), "--roots", "{root}"]
    techniques = ["dotdot", "sibling-prefix", "symlink-final"]
    await assert_confined(server, tool="write_text", arg="path", eras=["legacy"], techniques=techniques)
