"""A guarded fastmcp 4.x server as the README shows it; test_adapter_fastmcp4.py runs it over stdio and
streamable HTTP (``--http PORT``, on 127.0.0.1)."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from fastmcp import Context, FastMCP

from mcp_roots import RootsGuard

server = FastMCP("files")
guard = RootsGuard(environ={}, user_config_dir=Path(__file__).parent / "no-such-config")
guard.install(server)


@server.tool
@guard.paths("path")
async def read_text(path: str, ctx: Context) -> str:
    roots = await guard.roots(ctx)
    return roots.read_text(path)


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)  # stderr: stdout is the transport
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        server.run("http", host="127.0.0.1", port=int(sys.argv[2]), show_banner=False, log_level="warning")
    else:
        server.run(show_banner=False)
