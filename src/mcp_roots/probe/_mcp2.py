"""The probe's client on the official ``mcp`` 2.x SDK: a stdio command, a streamable HTTP URL, or an
in-memory ``MCPServer`` / low-level ``Server``, on either era, declaring roots or not.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import warnings
from collections.abc import AsyncIterator
from typing import Any

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.context import ClientRequestContext
from mcp.server import MCPServer, Server
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, ListRootsResult, Root

from ..sandbox import tree_command
from ._procs import child_groups
from ._session import LEGACY, MODERN, Connection, Session, as_json, resource_lists

__all__ = ["InMemoryTarget", "McpSession", "StdioTarget", "UrlTarget", "client_session", "command_line"]


class McpSession:
    """A ``Session`` over an ``mcp.Client``."""

    def __init__(self, client: Client) -> None:
        self._client = client

    @property
    def protocol_version(self) -> str:
        return str(self._client.protocol_version)

    @property
    def has_resources(self) -> bool:
        return self._client.server_capabilities.resources is not None

    async def list_tools(self) -> list[dict[str, Any]]:
        if self._client.server_capabilities.tools is None:
            return []
        tools: list[dict[str, Any]] = []
        cursor: str | None = None
        for _ in range(100):  # bounded: a server that pages forever stops here
            result = (
                await self._client.list_tools(cursor=cursor) if cursor else await self._client.list_tools()
            )
            tools += [as_json(t) for t in result.tools]
            cursor = result.next_cursor
            if not cursor:
                break
        return tools

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        try:
            return as_json(await self._client.call_tool(name, arguments))
        except MCPError as exc:
            return _error(exc)

    async def read_resource(self, uri: str) -> dict[str, Any]:
        try:
            return as_json(await self._client.read_resource(uri, cache_mode="bypass"))
        except MCPError as exc:
            return _error(exc)
        except ValueError as exc:  # the SDK refused the URI itself before sending it
            return {"error": f"client refused the URI: {exc}"}

    async def list_resources(self) -> tuple[list[str], list[str]]:
        if not self.has_resources:
            return [], []
        answers: list[Any] = []
        for call in (
            lambda: self._client.list_resources(cache_mode="bypass"),
            lambda: self._client.list_resource_templates(cache_mode="bypass"),
        ):
            try:
                answers.append(await call())
            except MCPError:  # not offered (method not found), or refused: nothing listed
                answers.append(None)
        return resource_lists(*answers)


def _error(exc: MCPError) -> dict[str, Any]:
    """A JSON-RPC error as data; a closed connection (the server went away) raises, so the run sees it."""
    if exc.code == CONNECTION_CLOSED:
        raise anyio.BrokenResourceError(str(exc)) from None
    return {"error": str(exc), "data": repr(exc.error)}


def _roots_callback(uris: list[str]) -> Any:
    async def list_roots(context: ClientRequestContext) -> ListRootsResult:
        return ListRootsResult(roots=[Root(uri=uri, name=f"probe root {i}") for i, uri in enumerate(uris)])  # type: ignore[arg-type]

    return list_roots


@contextlib.asynccontextmanager
async def client_session(server: Any, connection: Connection, roots: list[str]) -> AsyncIterator[Session]:
    """A session to ``server`` (whatever ``mcp.Client`` takes) for one connection setting."""
    mode = "legacy" if connection.era == LEGACY else "auto"
    callback = _roots_callback(roots) if connection.declare_roots else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the SDK's deprecation notes about roots are not the probe's news
        client = Client(server, mode=mode, list_roots_callback=callback, cache=None)
    async with client:
        yield McpSession(client)


def command_line(argv: list[str], root: str, port: int | None = None) -> list[str]:
    """``argv`` for a server that runs in the scratch tree: ``{root}`` (and ``{port}``) replaced, the program
    found here as the shell would, and arguments naming an existing file here made absolute."""
    line = [arg.replace("{root}", root).replace("{port}", str(port)) for arg in argv]
    line[0] = os.path.abspath(line[0]) if os.sep in line[0] else (shutil.which(line[0]) or line[0])
    return [line[0]] + [
        os.path.abspath(arg) if not arg.startswith("-") and "{root}" not in a and os.path.exists(arg) else arg
        for a, arg in zip(argv[1:], line[1:], strict=True)
    ]


class StdioTarget:
    """A server started as ``argv`` (``{root}`` replaced by the scratch root), spoken to over stdio."""

    cwd_is_scratch: bool = True
    eras: tuple[str, ...] = (LEGACY, MODERN)

    def __init__(self, argv: list[str], env: dict[str, str] | None = None) -> None:
        self.argv = argv
        self.env = env
        self.groups: set[int] = set()  # the process groups of the servers started: killed whole on exit

    def describe(self) -> str:
        return " ".join(self.argv)

    @contextlib.asynccontextmanager
    async def connect(
        self, connection: Connection, roots: list[str], root: str, cwd: str, errlog: str
    ) -> AsyncIterator[Session]:
        # Through the launcher: every process the server starts ends with it, one that left its group too.
        argv = tree_command(command_line(self.argv, root))
        params = StdioServerParameters(command=argv[0], args=argv[1:], env=self.env, cwd=cwd)
        with open(errlog, "a", encoding="utf-8", errors="replace") as log:  # noqa: ASYNC230 - once, local
            from mcp.client.stdio import stdio_client

            async with contextlib.AsyncExitStack() as stack:
                transport = stdio_client(params, errlog=log)
                mode = "legacy" if connection.era == LEGACY else "auto"
                callback = _roots_callback(roots) if connection.declare_roots else None
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    client = Client(transport, mode=mode, list_roots_callback=callback, cache=None)
                before = child_groups()
                try:
                    await stack.enter_async_context(client)
                finally:
                    self.groups |= child_groups() - before
                yield McpSession(client)


class UrlTarget:
    """A server already listening on a streamable HTTP URL (started by the user, or by the probe)."""

    eras: tuple[str, ...] = (LEGACY, MODERN)

    def __init__(self, url: str, *, cwd_is_scratch: bool = False) -> None:
        self.url = url
        self.cwd_is_scratch = cwd_is_scratch

    def describe(self) -> str:
        return self.url

    @contextlib.asynccontextmanager
    async def connect(
        self, connection: Connection, roots: list[str], root: str, cwd: str, errlog: str
    ) -> AsyncIterator[Session]:
        async with client_session(self.url, connection, roots) as session:
            yield session


class InMemoryTarget:
    """An ``MCPServer`` or low-level ``Server`` of this process, connected in memory."""

    cwd_is_scratch: bool = False
    eras: tuple[str, ...] = (LEGACY, MODERN)

    def __init__(self, server: MCPServer | Server[Any]) -> None:
        self.server = server

    def describe(self) -> str:
        return f"in-memory {type(self.server).__name__} {getattr(self.server, 'name', '')!r}"

    @contextlib.asynccontextmanager
    async def connect(
        self, connection: Connection, roots: list[str], root: str, cwd: str, errlog: str
    ) -> AsyncIterator[Session]:
        async with client_session(self.server, connection, roots) as session:
            yield session
