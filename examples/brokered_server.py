"""An MCP server that reads and writes the *client's* files through client-brokered access (files/*).

It has no file access of its own: every operation is a request to the client, which runs it beneath its
roots under the user's consent. Run it over stdio (legacy protocol era) from a client that installs
``mcp_roots.broker.FileBroker``; see tests/broker/test_broker_e2e.py and benchmarks/bench_broker.py.

    python examples/brokered_server.py
"""

from __future__ import annotations

import base64
import hashlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Literal, TypeVar

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError

from mcp_roots import BrokerError, BrokeringUnavailable
from mcp_roots.broker import BrokeredFiles, enable_brokering, files

server = MCPServer("brokered-files")
enable_brokering(server)  # records the client's filesystemBrokering capability, routes watch events

T = TypeVar("T")


async def broker(ctx: Context, chunk_size: int | None = None, max_read: int | None = None) -> BrokeredFiles:
    options: dict[str, int] = {}
    if chunk_size is not None:
        options["chunk_size"] = chunk_size
    if max_read is not None:  # the most one fs.read() may hold (default 64 MiB)
        options["max_read"] = max_read
    try:
        return await files(ctx, **options)
    except BrokeringUnavailable as exc:
        raise ToolError(f"UNAVAILABLE: {exc}") from None


async def guarded(operation: Callable[[], Awaitable[T]]) -> T:
    """Turn a refused operation into a tool error that names the reason (``PERMISSION_DENIED: ...``)."""
    try:
        return await operation()
    except BrokerError as exc:
        raise ToolError(f"{exc.reason}: {exc.message}") from None


@server.tool()
async def brokered_consent(
    message: str, ctx: Context, paths: list[str] | None = None, access: Literal["read", "write"] = "read"
) -> dict[str, Any]:
    """Ask the user for access to paths (default: every root)."""
    fs = await broker(ctx)
    grant = await guarded(lambda: fs.consent(message, paths, access=access))
    return {"granted": grant.granted, "denied": grant.denied, "access": grant.access}


@server.tool()
async def brokered_read(path: str, ctx: Context) -> str:
    """The text of a file on the client."""
    fs = await broker(ctx)
    return await guarded(lambda: fs.read_text(path))


@server.tool()
async def brokered_read_base64(path: str, ctx: Context, offset: int = 0, length: int | None = None) -> str:
    """Bytes of a file on the client, base64 encoded."""
    fs = await broker(ctx)
    data = await guarded(lambda: fs.read(path, offset=offset, length=length))
    return base64.b64encode(data).decode("ascii")


@server.tool()
async def brokered_checksum(
    path: str, ctx: Context, chunk_size: int | None = None, whole: bool = False
) -> dict[str, Any]:
    """Stream a (large) file from the client in chunks and report its size and SHA-256 (``whole``: read it
    with ``fs.read``, two requests in flight, instead of streaming)."""
    fs = await broker(ctx, chunk_size, max_read=1024 * 1024 * 1024)  # whole: this tool may hold up to 1 GiB

    async def digest() -> dict[str, Any]:
        if whole:
            data = await fs.read(path)
            return {"size": len(data), "sha256": hashlib.sha256(data).hexdigest(), "chunks": None}
        sha, size, chunks = hashlib.sha256(), 0, 0
        async for chunk in fs.open_read(path):
            sha.update(chunk)
            size += len(chunk)
            chunks += 1
        return {"size": size, "sha256": sha.hexdigest(), "chunks": chunks}

    return await guarded(digest)


@server.tool()
async def brokered_write(
    path: str, content: str, ctx: Context, if_match: str | None = None
) -> dict[str, Any]:
    """Write text to a file on the client (atomic on the client); returns the new etag."""
    fs = await broker(ctx)
    info = await guarded(lambda: fs.write(path, content, if_match=if_match))
    return {"etag": info.etag, "size": info.size}


@server.tool()
async def brokered_write_base64(path: str, data: str, ctx: Context) -> dict[str, Any]:
    """Write bytes (base64) to a file on the client."""
    fs = await broker(ctx)
    info = await guarded(lambda: fs.write(path, base64.b64decode(data)))
    return {"etag": info.etag, "size": info.size}


@server.tool()
async def brokered_write_pattern(path: str, size: int, ctx: Context) -> dict[str, Any]:
    """Write ``size`` bytes of a deterministic pattern (sent in chunks) and report their SHA-256."""
    fs = await broker(ctx)
    block = hashlib.sha256(b"mcp-roots").digest() * 2048  # 64 KiB
    data = (block * (size // len(block) + 1))[:size]
    info = await guarded(lambda: fs.write(path, data))
    return {"size": info.size, "sha256": hashlib.sha256(data).hexdigest()}


@server.tool()
async def brokered_list(ctx: Context, path: str = "") -> list[dict[str, Any]]:
    """The entries of a directory on the client."""
    fs = await broker(ctx)
    entries = await guarded(lambda: fs.list(path))
    return [{"name": e.name, "type": e.type, "size": e.size} for e in entries]


@server.tool()
async def brokered_stat(path: str, ctx: Context) -> dict[str, Any]:
    fs = await broker(ctx)
    info = await guarded(lambda: fs.stat(path))
    return {"type": info.type, "size": info.size, "etag": info.etag}


@server.tool()
async def brokered_create(path: str, ctx: Context, type: Literal["file", "directory"] = "file") -> str:
    fs = await broker(ctx)
    await guarded(lambda: fs.create(path, type))
    return f"created {type} {path}"


@server.tool()
async def brokered_delete(path: str, ctx: Context, recursive: bool = False) -> str:
    fs = await broker(ctx)
    await guarded(lambda: fs.delete(path, recursive=recursive))
    return f"deleted {path}"


@server.tool()
async def brokered_rename(path: str, new_path: str, ctx: Context, overwrite: bool = False) -> str:
    fs = await broker(ctx)
    await guarded(lambda: fs.rename(path, new_path, overwrite=overwrite))
    return f"renamed {path} to {new_path}"


@server.tool()
async def brokered_watch(
    ctx: Context, path: str = "", recursive: bool = False, events: int = 1, seconds: float = 10.0
) -> list[dict[str, Any]]:
    """Watch a path on the client until ``events`` changes arrived or ``seconds`` passed."""
    fs = await broker(ctx)

    async def collect() -> list[dict[str, Any]]:
        seen: list[dict[str, Any]] = []
        with anyio.move_on_after(seconds):
            async with fs.watch(path, recursive=recursive) as changes:
                async for change in changes:
                    seen.append({"path": change.path, "kind": change.kind})
                    if len(seen) >= events:
                        break
        return seen

    return await guarded(collect)


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)  # stderr; stdout carries the protocol
    server.run()
