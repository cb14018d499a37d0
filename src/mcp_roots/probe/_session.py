"""What the probe needs of a connection to a server, whatever client speaks it: list the tools, call one,
read a resource, all answered as plain JSON; and the connection settings (era, declared roots) it tries.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["Connection", "Session", "Target", "as_json", "resource_lists"]

LEGACY = "legacy"
MODERN = "modern"


@dataclass(frozen=True)
class Connection:
    """One way of connecting: the protocol era asked for, and whether the client declares roots."""

    era: str  # LEGACY (initialize, 2025-11-25) or MODERN (2026-07-28 where the server speaks it)
    declare_roots: bool

    @property
    def label(self) -> str:
        return f"{self.era}{'+roots' if self.declare_roots else ''}"


class Session(Protocol):
    """A connected client. Errors of the server (JSON-RPC errors, a refused call) come back as
    ``{"error": "..."}``; only a lost connection raises."""

    @property
    def protocol_version(self) -> str: ...

    @property
    def has_resources(self) -> bool: ...

    async def list_tools(self) -> list[dict[str, Any]]: ...

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]: ...

    async def read_resource(self, uri: str) -> dict[str, Any]: ...

    async def list_resources(self) -> tuple[list[str], list[str]]:
        """The URIs of the resources and the URI templates the server lists (first page of each; empty when
        it has none or refuses)."""
        ...


class Target(Protocol):
    """Something the probe can connect to, once per connection setting."""

    #: Whether the server's working directory is the scratch tree's (relative paths then stay in it).
    cwd_is_scratch: bool
    #: The eras this target's client can ask for.
    eras: tuple[str, ...]

    def describe(self) -> str: ...

    def connect(
        self, connection: Connection, roots: list[str], root: str, cwd: str, errlog: str
    ) -> AbstractAsyncContextManager[Session]:
        """Open a session; ``roots`` are the file: URIs to declare when ``connection.declare_roots``,
        ``root`` the scratch root for a ``{root}`` placeholder, ``cwd`` the server's working directory,
        ``errlog`` a file for its stderr."""
        ...


def resource_lists(resources: Any, templates: Any) -> tuple[list[str], list[str]]:
    """(resource URIs, URI templates) from a resources/list and a resources/templates/list result."""
    listed = as_json(resources).get("resources") or [] if resources is not None else []
    shapes = as_json(templates).get("resourceTemplates") or [] if templates is not None else []
    return (
        [str(r.get("uri")) for r in listed if isinstance(r, dict)][:1000],
        [str(t.get("uriTemplate")) for t in shapes if isinstance(t, dict)][:1000],
    )


def as_json(result: Any) -> dict[str, Any]:
    """A pydantic result (any SDK) as JSON data."""
    dump = getattr(result, "model_dump", None)
    if dump is not None:
        data = dump(mode="json", by_alias=True, exclude_none=True)
        return data if isinstance(data, dict) else {"value": data}
    if isinstance(result, dict):
        return result
    return {"value": repr(result)}
