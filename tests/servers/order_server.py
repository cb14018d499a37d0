"""A server for the guard's transport tests: one read tool guarded below or above @server.tool(), or
not at all, or a low-level Server whose handler calls guard.roots(ctx); install() can be left out."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

import anyio
import uvicorn
from mcp.server import MCPServer, Server
from mcp.server.context import ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp_types import CallToolRequestParams, CallToolResult, ListToolsResult, TextContent, Tool

from mcp_roots import RootsError, RootsGuard


def build(kind: str, guard: RootsGuard, install: bool) -> MCPServer | Server[Any]:
    if kind == "lowlevel":

        async def list_tools(ctx: ServerRequestContext[Any, Any], params: Any) -> ListToolsResult:
            schema = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
            return ListToolsResult(tools=[Tool(name="read_text", input_schema=schema)])

        async def call_tool(
            ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams
        ) -> CallToolResult:
            roots = await guard.roots(ctx)
            try:
                text = roots.read_text((params.arguments or {})["path"])
            except RootsError as exc:
                return guard.refusal(exc)
            return CallToolResult(content=[TextContent(type="text", text=text)])

        lowlevel: Server[Any] = Server("lowlevel", on_list_tools=list_tools, on_call_tool=call_tool)
        if install:
            guard.install(lowlevel)
        return lowlevel
    server = MCPServer(f"order-{kind}")
    if install:
        guard.install(server)
    if kind == "below":

        @server.tool()
        @guard.paths("path")
        def read_text(path: str) -> str:
            return Path(path).read_text()

    elif kind == "above":

        @guard.paths("path")
        @server.tool()
        def read_text(path: str) -> str:
            return Path(path).read_text()

    else:

        @server.tool()
        def read_text(path: str) -> str:
            return Path(path).read_text()

    return server


async def serve_stdio(server: Server[Any]) -> None:
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("kind", choices=["below", "above", "naive", "lowlevel"])
    parser.add_argument("--no-install", action="store_true")
    parser.add_argument("--roots", required=True)
    parser.add_argument("--http", type=int)
    parser.add_argument("--stateless", action="store_true")
    parser.add_argument("--json-response", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    server = build(args.kind, RootsGuard([args.roots]), not args.no_install)
    if isinstance(server, MCPServer):
        if args.http is None:
            server.run("stdio")
        else:
            server.run(
                "streamable-http",
                host="127.0.0.1",
                port=args.http,
                stateless_http=args.stateless,
                json_response=args.json_response,
            )
    elif args.http is None:
        anyio.run(serve_stdio, server)
    else:
        app = server.streamable_http_app(stateless_http=args.stateless, json_response=args.json_response)
        uvicorn.run(app, host="127.0.0.1", port=args.http, log_level="warning")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
