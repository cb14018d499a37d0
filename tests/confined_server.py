"""A small stdio MCP server for tests/sandbox/test_sandbox_server.py: a guarded tool, a tool its author forgot
to guard, and a tool that shells out through ``guard.run``.

    python tests/confined_server.py confined|unconfined CEILING

With ``confined``, ``RootsGuard(confine=True)`` confines the whole process by the kernel to CEILING (plus
what Python needs) before anything starts a thread; ``unconfined`` is the naive control.
"""

from __future__ import annotations

import sys

from mcp_roots import RootsGuard

mode, ceiling = sys.argv[1], sys.argv[2]
# First thing: before the server (or anything else) starts a thread.
guard = RootsGuard(roots=[ceiling], ceiling=ceiling, confine=mode == "confined")

from mcp.server import MCPServer  # noqa: E402  (after the confinement, on purpose)
from mcp.server.mcpserver import Context  # noqa: E402

server = MCPServer("confined-test-server")
guard.install(server)


@server.tool()
@guard.paths("path")
async def read_guarded(path: str, ctx: Context) -> str:
    roots = await guard.roots(ctx)
    return roots.read_text(path)


@server.tool()
def read_unguarded(path: str) -> str:
    """The tool an author forgot to guard: a plain open() of whatever path the model sends."""
    with open(path, encoding="utf-8") as file:
        return file.read()


@server.tool()
async def cat(path: str, ctx: Context) -> str:
    """Shells out with the call's roots: the child is confined to them by the kernel."""
    result = await guard.run(ctx, ["cat", path], check=False)
    return f"exit {result.returncode}: {result.stdout.decode()}{result.stderr.decode()}"


if __name__ == "__main__":
    server.run()
