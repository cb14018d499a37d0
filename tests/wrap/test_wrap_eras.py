"""Both eras through wrap with children built on real SDKs (the official Python SDK's MCPServer, FastMCP 4,
the TypeScript SDK): the SDK's own client in its default ``mode="auto"`` speaks 2026-07-28 to wrap, each
child gets its requests in the era it was initialized in, and the roots of each request hold.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from mcp_roots.sandbox import support
from tests.kit import PYTHON, REPO, RootsCallback, node, text_of, wrap_argv

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not support().complete, reason="needs Landlock and the seccomp filter"),
]
ERA_SERVER = REPO / "tests" / "servers" / "era_server.py"
CHILDREN = {
    "mcp": lambda: [PYTHON, str(ERA_SERVER), "mcp"],
    "fastmcp": lambda: [PYTHON, str(ERA_SERVER), "fastmcp"],
    "typescript": lambda: [node(), str(REPO / "tests" / "interop" / "era_server.mjs")],
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # wrap and its child run in processes of their own


@pytest.mark.parametrize("child", CHILDREN)
async def test_every_call_is_answered_on_2026_07_28_and_each_request_has_its_own_roots(
    tmp_path: Path, child: str
) -> None:
    served, other = tmp_path / "ceiling" / "served", tmp_path / "ceiling" / "other"
    for folder in (served, other):
        folder.mkdir(parents=True)
    (served / "hello.txt").write_text("hello served")
    (other / "notes.txt").write_text("OTHER NOTES 3c1a")
    callback = RootsCallback(served)
    argv = wrap_argv([tmp_path / "ceiling"], CHILDREN[child](), "--cache-dir", str(tmp_path / "cache"))
    params = StdioServerParameters(command=argv[0], args=argv[1:])
    async with Client(params, mode="auto", list_roots_callback=callback) as client:
        assert client.protocol_version == "2026-07-28"
        assert [tool.name for tool in (await client.list_tools()).tools] == ["read"]
        hello = await client.call_tool("read", {"path": str(served / "hello.txt")})
        assert (hello.is_error, text_of(hello)) == (False, "hello served")
        refused = await client.call_tool("read", {"path": str(other / "notes.txt")})
        assert refused.is_error
        assert "is outside the allowed roots" in text_of(refused)
        callback.paths = [other]  # the next request's roots: other alone
        notes = await client.call_tool("read", {"path": str(other / "notes.txt")})
        assert (notes.is_error, text_of(notes)) == (False, "OTHER NOTES 3c1a")
        gone = await client.call_tool("read", {"path": str(served / "hello.txt")})
        assert gone.is_error
        assert "hello served" not in text_of(gone)
