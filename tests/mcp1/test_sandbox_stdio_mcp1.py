"""On mcp 1.x: a stdio server's channel is fds 0 and 1; a child that ``guard.run`` starts
must hold neither (it could read the client's next message, or forge one). Runs in .venv-mcp1.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from mcp_roots.sandbox import support

SERVER = Path(__file__).resolve().parent / "sandbox_server.py"
KERNEL = support()
pytestmark = pytest.mark.anyio


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path.resolve()


@pytest.mark.skipif(not KERNEL.complete, reason=f"no confinement: {KERNEL.reason or KERNEL.filter_reason}")
async def test_a_guard_run_child_gets_neither_fd_0_nor_fd_1_of_a_stdio_server(root: Path) -> None:
    params = StdioServerParameters(command=sys.executable, args=[str(SERVER), str(root)])
    with open(root / "server.log", "w") as errlog:  # noqa: ASYNC230 (a local file, before any await)
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as client:
            await client.initialize()
            result = await client.call_tool("child_stdio", {})
    text = "".join(getattr(block, "text", "") for block in result.content)
    assert not result.isError, text
    assert text.splitlines() == ["stdin is not the server's", "stdout is not the server's"]
