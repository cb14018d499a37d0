"""One tool server on a real SDK for wrap's era tests: ``mcp`` (the official Python SDK's MCPServer) or
``fastmcp`` (FastMCP 4); its tool ``read`` reads whatever path it is given.

Usage: python tests/servers/era_server.py mcp|fastmcp
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any


def read(path: str) -> str:
    """Read a text file."""
    return Path(path).read_text()


def main() -> None:
    server: Any
    if sys.argv[1] == "fastmcp":
        from fastmcp import FastMCP

        server = FastMCP("era-fastmcp")
    else:
        from mcp.server import MCPServer

        server = MCPServer("era-mcp")
    server.tool()(read)
    server.run("stdio") if sys.argv[1] != "fastmcp" else server.run(transport="stdio", show_banner=False)


if __name__ == "__main__":
    main()
