"""A mcp 1.x FastMCP stdio server whose tool shells out through ``guard.run``, for
tests/mcp1/test_sandbox_stdio_mcp1.py: mcp 1.x leaves its channel on fds 0 and 1, where a child inherits it.

    python tests/mcp1/sandbox_server.py ROOT
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from mcp.server.fastmcp import Context, FastMCP

from mcp_roots import RootsGuard

guard = RootsGuard(roots=[sys.argv[1]], environ={}, user_config_dir=Path(__file__).parent / "no-such-config")
server = FastMCP("sandbox-stdio", log_level="WARNING")
guard.install(server)

CHILD_STDIO = """
import os, sys
for fd, name in ((0, "stdin"), (1, "stdout")):
    st = os.fstat(fd)
    same = f"{st.st_dev}:{st.st_ino}" == sys.argv[1 + fd]
    print(name, "is the server's" if same else "is not the server's")
"""


@server.tool()
async def child_stdio(ctx: Context) -> str:  # type: ignore[type-arg]
    """What a child started through guard.run holds as fds 0 and 1: this server's own stdio channel?"""
    own = [f"{os.fstat(fd).st_dev}:{os.fstat(fd).st_ino}" for fd in (0, 1)]
    result = await guard.run(ctx, [sys.executable, "-c", CHILD_STDIO, *own], check=False)
    return f"{result.stdout.decode()}{result.stderr.decode()}"


if __name__ == "__main__":
    server.run()
