"""Test helpers for the server layer: a temporary project tree, roots callbacks, the reference server."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
from mcp.client.context import ClientRequestContext
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp_types import (
    CallToolRequestParams,
    CallToolResult,
    ErrorData,
    ListRootsResult,
    ListToolsResult,
    Root,
    TextContent,
    Tool,
)

from mcp_roots import RootsError, RootsGuard, path_to_uri

from .interopkit import FILE_SERVER
from .tree import Tree

__all__ = ["RootsCallback", "Tree", "load_file_server", "lowlevel_server", "text_of"]


def load_file_server() -> ModuleType:
    """Import examples/file_server.py as a module (it is a script, not part of the package)."""
    spec = importlib.util.spec_from_file_location("mcp_roots_example_file_server", FILE_SERVER)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


class RootsCallback:
    """The test kit's list_roots_callback: answers ``paths`` (a list the test can change), or what
    ``answer()`` returns (a result, an error, or a float: sleep that long, then no roots; None: the paths);
    counts the requests it gets."""

    def __init__(self, *paths: Path, answer: Callable[[], Any] | None = None) -> None:
        self.paths = list(paths)
        self.calls = 0
        self._answer = answer

    async def __call__(self, context: ClientRequestContext) -> ListRootsResult | ErrorData:
        self.calls += 1
        if self._answer is not None:
            result = self._answer()
            if isinstance(result, float):
                await anyio.sleep(result)
                return ListRootsResult(roots=[])
            if result is not None:
                assert isinstance(result, (ListRootsResult, ErrorData))
                return result
        return self.result(*self.paths)

    @staticmethod
    def result(*paths: Path) -> ListRootsResult:
        """The roots/list answer granting ``paths``."""
        return ListRootsResult(roots=[Root(uri=path_to_uri(p), name=p.name) for p in paths])


def text_of(result: Any) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


def lowlevel_server(guard: RootsGuard) -> Server[Any]:
    """A low-level Server with one tool, written the way the README shows for hand-written handlers."""

    async def list_tools(ctx: ServerRequestContext[Any, Any], params: Any) -> ListToolsResult:
        schema = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
        return ListToolsResult(tools=[Tool(name="read_text", input_schema=schema)])

    async def call_tool(ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams) -> CallToolResult:
        roots = await guard.roots(ctx)
        try:
            text = roots.read_text((params.arguments or {})["path"])
        except RootsError as exc:
            return guard.refusal(exc)
        return CallToolResult(content=[TextContent(type="text", text=text)])

    server: Server[Any] = Server("lowlevel", on_list_tools=list_tools, on_call_tool=call_tool)
    guard.install(server)
    return server
