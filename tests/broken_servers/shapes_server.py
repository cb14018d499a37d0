"""Deliberately broken MCP servers whose path is not a top-level string argument: a field of a pydantic
model, a field of each element of an array of objects, a field two objects deep, and a file: URI decoded after
its check. A probe that looks only at top-level strings reports them clean. DO NOT COPY.

    python tests/broken_servers/shapes_server.py SHAPE ROOT      (stdio, mcp 2.x MCPServer)
"""

from __future__ import annotations

import os
import sys
from urllib.parse import unquote, urlsplit

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field


class Job(BaseModel):
    path: str
    content: str


class Item(BaseModel):
    file_path: str
    content: str


class Output(BaseModel):
    path: str
    overwrite: bool = False


class Export(BaseModel):
    title: str
    output: Output


class Doc(BaseModel):
    uri: str = Field(json_schema_extra={"format": "uri"})


#: shape -> (tool, the locator of its path, the technique that catches its bug)
SHAPES = {
    "model": ("write_job", "job.path", "sibling-prefix"),
    "array": ("save_all", "items[].file_path", "sibling-prefix"),
    "deep": ("export", "request.output.path", "sibling-prefix"),
    "uri": ("open_doc", "doc.uri", "percent-encoded"),
}


def build(shape: str, root: str) -> MCPServer:
    server = MCPServer(f"broken-shape-{shape}")
    real_root = os.path.realpath(root)

    def allowed(path: str) -> str:
        # The bug: a prefix check without a separator ('/x/root_evil' passes for '/x/root').
        if not os.path.realpath(path).startswith(real_root):
            raise ToolError(f"Access denied: {path} is outside {root}")
        return path

    def read(path: str) -> str:
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                return f.read(65536)
        except (OSError, ValueError) as exc:
            raise ToolError(f"cannot read {path}: {exc}") from None

    def write(path: str, content: str) -> None:
        try:
            with open(path, "w", encoding="utf-8") as f:
                f.write(content)
        except (OSError, ValueError) as exc:
            raise ToolError(f"cannot write {path}: {exc}") from None

    if shape == "model":

        @server.tool()
        def write_job(job: Job) -> str:
            """Run a job: write its content to its file and return what was there."""
            path = allowed(job.path)
            before = read(path) if os.path.isfile(path) else ""
            write(path, job.content)
            return before

    elif shape == "array":

        @server.tool()
        def save_all(items: list[Item]) -> str:
            """Save each item's content to its file; return the old contents."""
            old = []
            for item in items:
                path = allowed(item.file_path)
                old.append(read(path) if os.path.isfile(path) else "")
                write(path, item.content)
            return "\n".join(old)

    elif shape == "deep":

        @server.tool()
        def export(request: Export) -> str:
            """Export a report to request.output.path; return what was there before."""
            path = allowed(request.output.path)
            return read(path) if os.path.isfile(path) else f"new file {request.title}"

    elif shape == "uri":

        @server.tool()
        def open_doc(doc: Doc) -> str:
            """Open a document by its file: URI."""
            parts = urlsplit(doc.uri)
            if parts.scheme != "file":
                raise ToolError("only file: URIs")
            checked = os.path.normpath(parts.path)  # checked while still percent-encoded...
            if not (checked == real_root or checked.startswith(real_root + "/")):
                raise ToolError(f"Access denied: {doc.uri}")
            return read(unquote(parts.path))  # ...and decoded after the check: '%2e%2e' is '..'

    else:
        raise ValueError(f"unknown shape {shape!r}")
    return server


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in SHAPES:
        sys.exit(f"usage: shapes_server.py {{{'|'.join(SHAPES)}}} ROOT")
    build(sys.argv[1], sys.argv[2]).run("stdio")
