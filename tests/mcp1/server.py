"""Guarded mcp 1.x servers (FastMCP and the low-level Server), written as the README shows, run as real
subprocesses by tests/mcp1/test_adapter_mcp1.py over stdio or streamable HTTP (127.0.0.1 only).

    python tests/mcp1/server.py fastmcp|lowlevel [--http PORT] [--roots DIR] [--ceiling DIR]
        [--first-answer-timeout S] [--order below|above] [--no-install] [--strict] [--backend asyncio|trio]
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
from mcp.server.fastmcp import Context, FastMCP
from mcp.server.lowlevel import Server

from mcp_roots import RootsGuard


def make_guard(args: argparse.Namespace) -> RootsGuard:
    return RootsGuard(
        roots=args.roots,
        ceiling=args.ceiling,
        environ={},
        user_config_dir=Path(__file__).parent / "no-such-config",
        first_answer_timeout=args.first_answer_timeout,
        strict=args.strict,
    )


def fastmcp_server(guard: RootsGuard, args: argparse.Namespace) -> FastMCP:
    server = FastMCP("files", host="127.0.0.1", port=args.http or 8000, log_level="WARNING")
    if args.install:
        guard.install(server)
    if args.order == "below":

        @server.tool()
        @guard.paths("path")
        async def read_text(path: str, ctx: Context) -> str:  # type: ignore[type-arg]
            roots = await guard.roots(ctx)
            return roots.read_text(path)

    else:

        @guard.paths("path")
        @server.tool()
        async def read_text(path: str, ctx: Context) -> str:  # type: ignore[type-arg]
            roots = await guard.roots(ctx)
            return roots.read_text(path)

    @server.tool()
    async def plain_read(path: str, ctx: Context) -> str:  # type: ignore[type-arg]
        return await anyio.Path(path).read_text()

    if args.resources:
        add_resources(server, guard, Path(args.resources), args.order)
    return server


def add_resources(server: FastMCP, guard: RootsGuard, base: Path, order: str) -> None:
    """``file:`` resources (inside the project, outside, through the symlink out), a guarded ``notes://``
    template (a file name, relative to the first root) and its unguarded twin (relative to the project)."""
    for path in (
        base / "project" / "hello.txt",
        base / "outside" / "secret.txt",
        base / "project" / "escape" / "secret.txt",
    ):

        def make_reader(target: Path) -> Any:
            return lambda: target.read_text()

        server.resource(path.as_uri(), name=f"file-{len(path.parts)}-{path.name}")(make_reader(path))

    if order == "below":

        @server.resource("notes://{name}")
        @guard.paths("name")
        def note(name: str) -> str:
            return Path(name).read_text()

    else:

        @guard.paths("name")
        @server.resource("notes://{name}")
        def note(name: str) -> str:
            return Path(name).read_text()

    @server.resource("plain://{name}")
    def plain_note(name: str) -> str:
        return (base / "project" / name).read_text()


Content = list[types.TextContent]
READ_SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}


def lowlevel_server(guard: RootsGuard, args: argparse.Namespace) -> Server[Any, Any]:
    server: Server[Any, Any] = Server("files")
    if args.install:
        guard.install(server)

    @server.list_tools()
    async def list_tools() -> list[types.Tool]:
        return [
            types.Tool(name="read_text", inputSchema=READ_SCHEMA),
            types.Tool(name="plain_read", inputSchema=READ_SCHEMA),
        ]

    @server.call_tool()
    async def call_tool(name: str, arguments: dict[str, Any]) -> Content | types.CallToolResult:
        if name == "plain_read":
            return [types.TextContent(type="text", text=await anyio.Path(arguments["path"]).read_text())]
        roots = await guard.roots(server.request_context)
        try:
            return [types.TextContent(type="text", text=roots.read_text(arguments["path"]))]
        except (OSError, ValueError) as exc:  # RootsError is a PermissionError or a ValueError
            return guard.refusal(str(exc))

    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("kind", choices=["fastmcp", "lowlevel"])
    parser.add_argument("--http", type=int, default=0)
    parser.add_argument("--roots", action="append")
    parser.add_argument("--ceiling")
    parser.add_argument("--first-answer-timeout", type=float, default=30)
    parser.add_argument("--order", choices=["below", "above"], default="below")
    parser.add_argument("--no-install", dest="install", action="store_false")
    parser.add_argument("--strict", action="store_true")
    parser.add_argument("--resources", help="the test tree's base: serve resources from it (fastmcp only)")
    # The event loop of a stdio server (the tests run it on the test's backend); uvicorn is asyncio-only.
    parser.add_argument("--backend", choices=["asyncio", "trio"], default="asyncio")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)  # stderr: stdout is the stdio transport
    guard = make_guard(args)
    if args.kind == "fastmcp":
        server = fastmcp_server(guard, args)
        if args.http:
            server.run("streamable-http")
        else:
            anyio.run(server.run_stdio_async, backend=args.backend)
        return
    low = lowlevel_server(guard, args)
    if args.http:
        run_lowlevel_http(low, args.http)
    else:
        anyio.run(run_lowlevel_stdio, low, backend=args.backend)


async def run_lowlevel_stdio(server: Server[Any, Any]) -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def run_lowlevel_http(server: Server[Any, Any], port: int) -> None:
    import contextlib
    from collections.abc import AsyncIterator

    import uvicorn
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from starlette.applications import Starlette
    from starlette.routing import Mount
    from starlette.types import Receive, Scope, Send

    manager = StreamableHTTPSessionManager(app=server)

    async def handle(scope: Scope, receive: Receive, send: Send) -> None:
        await manager.handle_request(scope, receive, send)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with manager.run():
            yield

    app = Starlette(routes=[Mount("/mcp", app=handle)], lifespan=lifespan)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
