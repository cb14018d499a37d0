"""The control for bench_sessions.py: the reference server's read_text WITHOUT mcp-roots (do not deploy).

It trusts every path, as a server that only lists the client's roots would. Run against it, the session
benchmark must count cross-session grants: proof that the benchmark can see a leak, and the cost baseline
of the same SDK, transport and tool without the guard.

    python benchmarks/plain_server.py --http PORT
"""

from __future__ import annotations

import argparse
from pathlib import Path

from mcp.server import MCPServer


def main() -> int:
    parser = argparse.ArgumentParser(description="unguarded control server (127.0.0.1 only)")
    parser.add_argument("--http", type=int, metavar="PORT", required=True)
    parser.add_argument("--roots", help="accepted and ignored, for the same command line as file_server.py")
    args = parser.parse_args()
    server = MCPServer("plain-file-server")

    @server.tool()
    async def list_roots() -> list[dict[str, str]]:
        """Nothing: this server does not look at roots."""
        return []

    @server.tool()
    async def read_text(path: str) -> str:
        """Read any file: no boundary at all."""
        return Path(path).read_text()  # noqa: ASYNC240 - the control mirrors a naive server

    server.run("streamable-http", host="127.0.0.1", port=args.http)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
