"""README.md's mcp 1.x server block (``server_mcp1.py``), run as the README says (``python server_mcp1.py``,
stdio) and asked by an mcp 1.x client that sends one root for a file inside and one outside. (The mcp 2.x and
fastmcp 4 blocks: tests/test_docs.py.)"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

import pytest
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client

from mcp_roots import path_to_uri

from ..kit import README, blocks


@pytest.fixture
def errlog(tmp_path: Path) -> Iterator[TextIO]:
    with open(tmp_path / "stderr.log", "w") as file:
        yield file


@pytest.mark.anyio
async def test_the_readmes_mcp1_server_reads_inside_and_refuses_outside(
    tmp_path: Path, errlog: TextIO
) -> None:
    block = next(b for b in blocks(README) if b.file_name == "server_mcp1.py")
    (tmp_path / "server_mcp1.py").write_text(block.text, encoding="utf-8")
    project = tmp_path / "project"
    project.mkdir()
    (project / "notes.txt").write_text("hello")

    async def list_roots(context: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri=path_to_uri(project), name="project")])  # type: ignore[arg-type]

    params = StdioServerParameters(
        command=sys.executable, args=[str(tmp_path / "server_mcp1.py")], cwd=tmp_path
    )
    async with (
        stdio_client(params, errlog=errlog) as (read, write),
        ClientSession(read, write, list_roots_callback=list_roots) as session,
    ):
        await session.initialize()
        inside = await session.call_tool("read_text", {"path": str(project / "notes.txt")})
        outside = await session.call_tool("read_text", {"path": "/etc/passwd"})
    assert not inside.isError
    assert inside.content[0].text == "hello"  # type: ignore[union-attr]
    assert outside.isError
    assert outside.content[0].text == f"Access denied: '/etc/passwd' is outside the allowed roots ({project})"  # type: ignore[union-attr]
