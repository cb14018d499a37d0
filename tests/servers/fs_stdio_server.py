"""The filesystem server of `mcp-roots serve` on one of two stdio transports, for the transport's
differential tests: ``sdk`` (the SDK's own ``stdio_server()``) or ``fast`` (``filesystem._stdio``).

Usage: python tests/servers/fs_stdio_server.py sdk|fast ROOT [MAX_LINE_BYTES]
"""

from __future__ import annotations

import functools
import logging
import sys

import anyio

from mcp_roots import RootsGuard
from mcp_roots.filesystem import Settings, build_server
from mcp_roots.filesystem._stdio import DEFAULT_MAX_LINE_BYTES, serve_stdio


def main() -> None:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    transport, root = sys.argv[1], sys.argv[2]
    max_line = int(sys.argv[3]) if len(sys.argv) > 3 else DEFAULT_MAX_LINE_BYTES
    server = build_server(RootsGuard([root], ceiling=[root]), Settings())
    if transport == "sdk":
        server.run("stdio")
    else:
        anyio.run(functools.partial(serve_stdio, server, max_line_bytes=max_line))


if __name__ == "__main__":
    main()
