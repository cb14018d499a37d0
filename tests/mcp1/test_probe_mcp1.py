"""assert_confined against mcp 1.x servers in memory (the SDK's memory streams, legacy era): the guarded
FastMCP and low-level Server of tests/mcp1/server.py pass; their unguarded `plain_read` tool fails."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from mcp_roots.testing import assert_confined

from .server import fastmcp_server, lowlevel_server, make_guard

pytestmark = pytest.mark.anyio

QUICK = ["absolute-outside", "dotdot", "symlink-final", "dotdot-after-symlink", "magic-link", "swap-race"]


def args_for(root: Path) -> argparse.Namespace:
    return argparse.Namespace(
        roots=[str(root)], ceiling=None, first_answer_timeout=30, strict=False, http=0, install=True,
        order="below", resources=None, kind="fastmcp", backend="asyncio",
    )  # fmt: skip


def build_fastmcp(root: Path) -> Any:
    args = args_for(root)
    return fastmcp_server(make_guard(args), args)


def build_lowlevel(root: Path) -> Any:
    args = args_for(root)
    return lowlevel_server(make_guard(args), args)


@pytest.mark.parametrize("build", [build_fastmcp, build_lowlevel], ids=["fastmcp", "lowlevel"])
async def test_guarded_mcp1_servers_are_confined(build: Any) -> None:
    report = await assert_confined(build, tool="read_text", arg="path", techniques=QUICK, race_attempts=8)
    assert set(report.connections) == {"legacy", "legacy+roots"}  # mcp 1.x has no other era
    assert report.rows
    assert not report.findings


async def test_the_unguarded_mcp1_tool_is_caught() -> None:
    with pytest.raises(AssertionError, match="plain_read path: absolute-outside ESCAPED"):
        await assert_confined(build_fastmcp, tool="plain_read", arg="path", techniques=["absolute-outside"])
