"""A server for the consent tests over stdio or streamable HTTP: one read tool, guarded by a RootsGuard that
asks the user for folders inside the ceiling given (``consent=True``)."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from mcp.server import MCPServer
from mcp_types import ToolAnnotations

from mcp_roots import RootsGuard


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ceiling", required=True)
    parser.add_argument("--http", type=int)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    guard = RootsGuard(ceiling=args.ceiling, consent=True, environ={}, user_config_dir=args.ceiling + "/none")
    server = MCPServer("notes")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    @guard.paths("path")
    def read(path: str) -> str:
        return Path(path).read_text()

    guard.install(server)
    if args.http is None:
        server.run("stdio")
    else:
        server.run("streamable-http", host="127.0.0.1", port=args.http)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
