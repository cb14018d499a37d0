"""The public signatures as mypy sees them: right uses that must type-check, wrong ones that must not.

Never run, only checked: ``make typecheck`` runs ``mypy --strict`` over it with ``warn_unused_ignores``,
so each wrong use's ``# type: ignore[code]`` fails the check the day that use type-checks.
"""

from __future__ import annotations

import io
import os
import subprocess
from pathlib import Path
from typing import IO, Any, BinaryIO, assert_type

from fastmcp import Context as FastMCPContext
from fastmcp import FastMCP
from mcp.server import MCPServer, Server, ServerRequestContext
from mcp.server.mcpserver import Context
from mcp.types import CallToolResult

from mcp_roots import RootSet, RootsGuard, SupportedContext, SupportedServer, fallback_roots, uri_to_path
from mcp_roots.broker import BrokeredFiles
from mcp_roots.testing import assert_confined


def right_uses(tmp: Path) -> None:
    RootsGuard(["/srv/project", Path("/srv/data")], project_root=Path("/srv"), user_config_dir="/etc/x")
    RootsGuard("/srv/project", ceiling=Path("/srv"))
    fallback_roots([Path("/srv")])
    guard = RootsGuard()
    guard.install(MCPServer("mcp 2.x"))
    guard.install(Server("mcp 2.x low-level"))
    guard.install(FastMCP("fastmcp 4.x"))
    roots = RootSet.from_paths([tmp])
    assert_type(roots.contains(tmp / "f"), bool)
    assert_type(roots.resolve("f"), Path)
    assert_type(roots.run(["ls", tmp]), subprocess.CompletedProcess[Any])
    assert_type(roots.open(tmp / "f").read(), str)
    assert_type(roots.open(tmp / "f", "rb").read(), bytes)
    assert_type(roots.open(tmp / "f", "rb"), io.BufferedReader)
    assert_type(roots.open(tmp / "f", "w", encoding="utf-8"), io.TextIOWrapper)
    assert_type(roots.open(tmp / "f", "wb"), io.BufferedWriter)
    assert_type(roots.open(tmp / "f", "r+b"), io.BufferedRandom)
    assert_type(roots.open(tmp / "f", "ab", buffering=0), io.FileIO)
    assert_type(roots.open(tmp / "f", "rb", 1 << 16), BinaryIO)
    assert_type(roots.open(tmp / "f", str(tmp)), IO[Any])
    assert_type(uri_to_path("file:///srv"), str)
    assert_type(RootsGuard.refusal("no"), CallToolResult)
    server: SupportedServer = MCPServer("x")
    del server


async def right_contexts(
    guard: RootsGuard, ctx: Context, low: ServerRequestContext, fast: FastMCPContext
) -> None:
    for each in (ctx, low, fast):
        context: SupportedContext = each
        assert_type(await guard.roots(context), RootSet)
    assert_type(await guard.files(ctx, timeout=5.0, chunk_size=1 << 20), BrokeredFiles)
    await guard.run(ctx, ["git", "status"], cwd=os.getcwd())
    await assert_confined(["python", "server.py", "{root}"])
    await assert_confined("python server.py {root}")
    await assert_confined(lambda root: MCPServer(str(root)))


async def wrong_uses(guard: RootsGuard, roots: RootSet, ctx: Context, server: MCPServer) -> None:
    RootsGuard(roots=[123])  # type: ignore[list-item]
    RootsGuard(roots=123)  # type: ignore[arg-type]
    RootsGuard(project_root=5)  # type: ignore[arg-type]
    RootsGuard(user_config_dir=[b"/etc"])  # type: ignore[arg-type]
    fallback_roots([None])  # type: ignore[list-item]
    guard.install("server.py")  # type: ignore[arg-type]
    guard.install(Path("server.py"))  # type: ignore[arg-type]
    guard.audit(ctx)  # type: ignore[arg-type]
    await guard.roots(server)  # type: ignore[arg-type]
    await guard.roots(None)  # type: ignore[arg-type]
    await guard.files(ctx, timeout="5")  # type: ignore[arg-type]
    await guard.files(ctx, retries=3)  # type: ignore[call-arg]
    await guard.run(ctx, 123)  # type: ignore[arg-type]
    guard.refusal(404)  # type: ignore[arg-type]
    roots.contains(123)  # type: ignore[arg-type]
    roots.resolve(None)  # type: ignore[arg-type]
    roots.resolve_text([b"f"])  # type: ignore[arg-type]
    roots.run(123)  # type: ignore[arg-type]
    roots.open("f").write(b"text mode takes str")  # type: ignore[arg-type]
    roots.open("f", "rb").read().encode()  # type: ignore[attr-defined]
    uri_to_path(b"file:///srv")  # type: ignore[arg-type]
    await assert_confined(123)  # type: ignore[arg-type]
