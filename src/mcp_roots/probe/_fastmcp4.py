"""The probe's client for a ``fastmcp`` 4.x server object, connected in memory through fastmcp's own
``Client`` (both eras; roots declared or not).
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import AsyncIterator
from typing import Any

from fastmcp import Client
from mcp.shared.exceptions import MCPError

from ._session import LEGACY, MODERN, Connection, Session, as_json, resource_lists

__all__ = ["FastmcpTarget"]


class FastmcpSession:
    def __init__(self, client: Client[Any]) -> None:
        self._client = client

    @property
    def protocol_version(self) -> str:
        return str(self._client.protocol_version)

    @property
    def has_resources(self) -> bool:
        capabilities = self._client.server_capabilities
        return capabilities is not None and capabilities.resources is not None

    async def list_tools(self) -> list[dict[str, Any]]:
        capabilities = self._client.server_capabilities
        if capabilities is None or capabilities.tools is None:
            return []
        return [as_json(t) for t in (await self._client.list_tools_mcp(cache_mode="bypass")).tools]

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        try:
            return as_json(await self._client.call_tool_mcp(name, arguments))
        except MCPError as exc:
            return {"error": str(exc)}

    async def read_resource(self, uri: str) -> dict[str, Any]:
        try:
            return as_json(await self._client.read_resource_mcp(uri))
        except (MCPError, ValueError) as exc:
            return {"error": str(exc)}

    async def list_resources(self) -> tuple[list[str], list[str]]:
        if not self.has_resources:
            return [], []
        answers: list[Any] = []
        for call in (
            lambda: self._client.list_resources_mcp(),
            lambda: self._client.list_resource_templates_mcp(),
        ):
            try:
                answers.append(await call())
            except MCPError:  # not offered (method not found), or refused: nothing listed
                answers.append(None)
        return resource_lists(*answers)


class FastmcpTarget:
    """A ``fastmcp.FastMCP`` server of this process."""

    cwd_is_scratch: bool = False
    eras: tuple[str, ...] = (LEGACY, MODERN)

    def __init__(self, server: Any) -> None:
        self.server = server

    def describe(self) -> str:
        return f"in-memory fastmcp server {getattr(self.server, 'name', '')!r}"

    @contextlib.asynccontextmanager
    async def connect(
        self, connection: Connection, roots: list[str], root: str, cwd: str, errlog: str
    ) -> AsyncIterator[Session]:
        mode = "legacy" if connection.era == LEGACY else "auto"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            client: Client[Any] = Client(
                self.server, roots=roots if connection.declare_roots else None, mode=mode
            )
        async with client:
            yield FastmcpSession(client)
