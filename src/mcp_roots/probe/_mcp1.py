"""The probe's client on the official ``mcp`` 1.x SDK: an in-memory ``mcp.server.fastmcp.FastMCP`` or
low-level ``Server`` of this process, over the SDK's memory streams (legacy era only, as mcp 1.x has no
other).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from mcp import types
from mcp.shared.memory import create_connected_server_and_client_session

from ._session import LEGACY, Connection, Session, as_json, resource_lists

__all__ = ["Mcp1Target"]


class Mcp1Session:
    def __init__(self, session: Any) -> None:
        self._session = session

    @property
    def protocol_version(self) -> str:
        return "mcp 1.x (legacy)"  # the 1.x ClientSession keeps the negotiated version to itself

    @property
    def has_resources(self) -> bool:
        capabilities = self._session.get_server_capabilities()
        return capabilities is not None and capabilities.resources is not None

    async def list_tools(self) -> list[dict[str, Any]]:
        capabilities = self._session.get_server_capabilities()
        if capabilities is None or capabilities.tools is None:
            return []
        return [as_json(t) for t in (await self._session.list_tools()).tools]

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        try:
            return as_json(await self._session.call_tool(name, arguments))
        except Exception as exc:  # mcp 1.x raises McpError for a JSON-RPC error
            if type(exc).__name__ != "McpError":
                raise
            return {"error": str(exc)}

    async def read_resource(self, uri: str) -> dict[str, Any]:
        try:
            return as_json(await self._session.read_resource(uri))
        except Exception as exc:
            if type(exc).__name__ not in ("McpError", "ValidationError"):
                raise
            return {"error": str(exc)}

    async def list_resources(self) -> tuple[list[str], list[str]]:
        if not self.has_resources:
            return [], []
        answers: list[Any] = []
        for call in (self._session.list_resources, self._session.list_resource_templates):
            try:
                answers.append(await call())
            except Exception as exc:  # mcp 1.x raises McpError: not offered, or refused
                if type(exc).__name__ != "McpError":
                    raise
                answers.append(None)
        return resource_lists(*answers)


class Mcp1Target:
    """An mcp 1.x server object of this process."""

    cwd_is_scratch: bool = False
    eras: tuple[str, ...] = (LEGACY,)

    def __init__(self, server: Any) -> None:
        self.server = server

    def describe(self) -> str:
        return f"in-memory mcp 1.x {type(self.server).__name__} {getattr(self.server, 'name', '')!r}"

    @contextlib.asynccontextmanager
    async def connect(
        self, connection: Connection, roots: list[str], root: str, cwd: str, errlog: str
    ) -> AsyncIterator[Session]:
        async def list_roots(context: Any) -> types.ListRootsResult:
            entries = [
                types.Root.model_validate({"uri": u, "name": f"probe root {i}"}) for i, u in enumerate(roots)
            ]
            return types.ListRootsResult(roots=entries)

        callback = list_roots if connection.declare_roots else None
        async with create_connected_server_and_client_session(
            self.server, list_roots_callback=callback
        ) as session:
            yield Mcp1Session(session)
