"""A guarded fastmcp 4 server: README.md's, runnable (python examples/fastmcp_server.py, stdio)."""

from fastmcp import Context, FastMCP

from mcp_roots import RootsGuard

server = FastMCP("files")
guard = RootsGuard()
guard.install(server)


@server.tool
@guard.paths("path")
async def read_text(path: str, ctx: Context) -> str:
    return (await guard.roots(ctx)).read_text(path)


if __name__ == "__main__":
    server.run()  # stdio; server.run("http", port=8000) for streamable HTTP
