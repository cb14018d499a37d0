"""A guarded server on the official mcp SDK 1.x: the README's, runnable (python examples/mcp1_server.py)."""

from mcp.server.fastmcp import Context, FastMCP

from mcp_roots import RootsGuard

server = FastMCP("files")
guard = RootsGuard()
guard.install(server)


@server.tool()
@guard.paths("path")
async def read_text(path: str, ctx: Context) -> str:
    return (await guard.roots(ctx)).read_text(path)


if __name__ == "__main__":
    server.run()  # stdio; server.run("streamable-http") for HTTP
