"""The mcp-roots reference server: four file tools that cannot leave the client's roots.

    python examples/file_server.py                       # stdio
    python examples/file_server.py --http 8765           # streamable HTTP on 127.0.0.1:8765/mcp
    python examples/file_server.py --roots /srv/data,/srv/docs  # fallback roots for clients that send none

Written the way the README tells users to write theirs: a RootsGuard installed on the server, @guard.paths
on every tool that takes a path, and the race-free RootSet operations for every file access.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from typing import Any

from mcp.server import MCPServer
from mcp.server.mcpserver import Context, RequestStateSecurity
from mcp.server.mcpserver.exceptions import ToolError

from mcp_roots import RootsError, RootsGuard
from mcp_roots.filesystem import shared_request_state


def build_server(
    guard: RootsGuard,
    *,
    name: str = "mcp-roots-file-server",
    request_state_security: RequestStateSecurity | None = None,
) -> MCPServer:
    """An MCPServer with the reference tools, guarded by ``guard``.

    ``request_state_security`` seals the 2026-07-28 multi-round-trip state; the SDK's default is a key held by
    this process only, so replicas behind a load balancer must share one (``shared_request_state``).
    """
    server = MCPServer(name, request_state_security=request_state_security)
    guard.install(server)

    @server.tool()
    @guard.paths()
    async def list_roots(ctx: Context) -> list[dict[str, Any]]:
        """The roots this server may work in, as {uri, name, path, access}."""
        roots = await guard.roots(ctx)
        return [root.as_dict() for root in roots]

    @server.tool()
    @guard.paths("path")
    async def read_text(path: str, ctx: Context) -> str:
        """Read a UTF-8 text file inside the allowed roots."""
        # A missing file, a directory or a file past the cap: the guard answers one line naming the path.
        roots = await guard.roots(ctx)
        try:
            return roots.read_text(path, max_bytes=16 * 1024 * 1024)
        except UnicodeDecodeError:
            raise ToolError(f"{path!r} is not UTF-8 text") from None

    @server.tool()
    @guard.paths("path")
    async def write_text(path: str, content: str, ctx: Context) -> str:
        """Write (atomically replace) a UTF-8 text file inside the allowed roots."""
        roots = await guard.roots(ctx)
        roots.write_text(path, content)
        return f"wrote {len(content.encode())} bytes to {path}"

    @server.tool()
    @guard.paths("path")
    async def list_dir(path: str, ctx: Context) -> list[str]:
        """List a directory inside the allowed roots (directories end with '/')."""
        roots = await guard.roots(ctx)
        return sorted(e.name + "/" if e.is_dir else e.name for e in roots.scandir(path))

    return server


def _path_list(value: str) -> list[str]:
    """A comma-separated list of paths; an empty one is an error, never "unset"."""
    parts = [part for part in value.split(",") if part]
    if not parts:
        raise argparse.ArgumentTypeError(
            f"{value!r} names no path; give at least one (or leave the option out)"
        )
    return parts


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="file_server.py",
        description="The mcp-roots reference MCP server: read_text, write_text, list_dir, list_roots.",
    )
    parser.add_argument(
        "--http", type=int, metavar="PORT", help="serve streamable HTTP on 127.0.0.1:PORT/mcp"
    )
    parser.add_argument("--stateless", action="store_true", help="with --http: stateless HTTP (no sessions)")
    parser.add_argument(
        "--json-response",
        action="store_true",
        help="with --http: answer each POST with one JSON body (no SSE)",
    )
    parser.add_argument(
        "--roots", type=_path_list, help="comma-separated fallback roots for clients that send none"
    )
    parser.add_argument(
        "--ceiling", type=_path_list, help="comma-separated roots that client roots can never widen"
    )
    parser.add_argument("--project", help="project root (default: none; the working directory is never used)")
    parser.add_argument(
        "--allow-home", action="store_true", help="allow '/', your home or an ancestor as a fallback root"
    )
    parser.add_argument(
        "--timeout", type=float, default=5.0, help="roots/list timeout in seconds (default 5)"
    )
    parser.add_argument(
        "--state-key-file",
        metavar="FILE",
        help="with --http: a secret (>= 32 bytes) shared by every replica behind a load balancer, so that "
        "any replica can continue a 2026-07-28 multi-round-trip call another one started (default: a key "
        "of this process only)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log at debug level (to stderr)")
    parser.add_argument(
        "--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"], help="default INFO"
    )
    args = parser.parse_args(argv)
    # stderr only: on stdio, stdout is the protocol.
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else getattr(logging, args.log_level),
        stream=sys.stderr,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    try:
        guard = RootsGuard(
            args.roots,
            project_root=args.project,
            ceiling=args.ceiling,
            timeout=args.timeout,
            allow_home=args.allow_home,
        )
        security = shared_request_state(args.state_key_file) if args.state_key_file else None
    except (RootsError, OSError, ValueError) as exc:
        print(f"file_server.py: error: {exc}", file=sys.stderr)
        return 2
    server = build_server(guard, request_state_security=security)
    if args.http is not None:
        server.run(
            "streamable-http",
            host="127.0.0.1",
            port=args.http,
            stateless_http=args.stateless,
            json_response=args.json_response,
        )
    else:
        server.run("stdio")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
