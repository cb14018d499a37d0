"""Helpers for the filesystem server tests: `mcp-roots serve` and the official server as real
subprocesses, and one scripted session run through the official Python client or the official TypeScript
SDK client, both reduced to the same JSON shape."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from . import forkserver
from .serverkit import RootsCallback
from .subprocs import HttpServer, launch_http

REPO = Path(__file__).resolve().parent.parent
INTEROP = REPO / "tests" / "interop"
SESSION_SCRIPT = INTEROP / "fs_session.mjs"
OFFICIAL_SERVER = (
    INTEROP / "node_modules" / "@modelcontextprotocol" / "server-filesystem" / "dist" / "index.js"
)

Call = tuple[str, dict[str, Any]]


SERVE = "from mcp_roots.cli import main; raise SystemExit(main())"


def serve_command(*args: str) -> list[str]:
    """``mcp-roots serve ARGS`` started cold (an HTTP server: the test kit checks whose listener it is)."""
    return [sys.executable, "-c", SERVE, "serve", *args]


def write_token(directory: Path) -> tuple[Path, str]:
    """A token file for ``serve --http --token-file`` in ``directory`` (mode 0600), and its token."""
    token = secrets.token_urlsafe(32)
    path = directory / "http-token"
    path.write_text(token + "\n")
    path.chmod(0o600)
    return path, token


@contextlib.contextmanager
def serve_http(*args: str) -> Iterator[HttpServer]:
    """``mcp-roots serve --http PORT ARGS`` with a token file of its own; the server's ``headers`` carry
    the token (``Authorization: Bearer ...``) for every client of the tests."""
    with tempfile.TemporaryDirectory(prefix="mcp-roots-token-") as directory:
        path, token = write_token(Path(directory))
        with launch_http(serve_command("--token-file", str(path)), *args) as server:
            server.headers = {"Authorization": f"Bearer {token}"}
            yield server


def stdio_serve_command(*args: str) -> list[str]:
    """``mcp-roots serve ARGS`` over stdio, a real process forked warm (tests/forkserver.py)."""
    return forkserver.command("-c", SERVE, "serve", *args)


def official_command(*dirs: str) -> list[str]:
    if not OFFICIAL_SERVER.exists():
        pytest.fail(f"{OFFICIAL_SERVER} is missing: run `npm ci --prefix tests/interop` (make test does)")
    return [node(), str(OFFICIAL_SERVER), *dirs]


def node() -> str:
    found = shutil.which("node")
    if found is None:
        pytest.fail("node is not installed; the filesystem interop tests need Node >= 20")
    return found


async def py_session(
    target: list[str] | str | HttpServer, calls: Sequence[Call], roots: Sequence[Path] | None = None
) -> dict[str, Any]:
    """The session through the official Python client: ``target`` is a command line (stdio), a URL, or an
    HTTP server whose headers (its token) every request carries."""
    kwargs: dict[str, Any] = {} if roots is None else {"list_roots_callback": RootsCallback(*roots)}
    out: dict[str, Any] = {"results": []}
    async with contextlib.AsyncExitStack() as stack:
        server: Any
        if isinstance(target, HttpServer):
            http = await stack.enter_async_context(
                httpx2.AsyncClient(headers=target.headers, timeout=httpx2.Timeout(30, read=300))
            )
            server = streamable_http_client(target.url, http_client=http)
        elif isinstance(target, str):
            server = target
        else:
            server = StdioServerParameters(command=target[0], args=target[1:], env=dict(os.environ))
        await _py_calls(server, calls, kwargs, out)
    return out


async def _py_calls(server: Any, calls: Sequence[Call], kwargs: dict[str, Any], out: dict[str, Any]) -> None:
    with anyio.fail_after(120):
        async with Client(server, mode="legacy", **kwargs) as client:
            tools = await client.list_tools()
            out["tools"] = [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools.tools]
            for name, args in calls:
                try:
                    result = await client.call_tool(name, args)
                except Exception as exc:  # a protocol error (unknown tool): reported like the TS script does
                    out["results"].append(
                        {
                            "isError": True,
                            "content": [{"type": "text", "text": str(exc)}],
                            "protocolError": True,
                        }
                    )
                    continue
                dumped = result.model_dump(mode="json", by_alias=True, exclude_none=True)
                out["results"].append(
                    {
                        "isError": bool(result.is_error),
                        "content": dumped.get("content", []),
                        "structured": dumped.get("structuredContent"),
                    }
                )


def ts_session(
    target: list[str] | str | HttpServer,
    calls: Sequence[Call],
    roots: Sequence[Path] | None = None,
    deadline: float = 120,
) -> dict[str, Any]:
    """The session through the official TypeScript SDK client (tests/interop/fs_session.mjs)."""
    spec: dict[str, Any] = {
        "roots": None if roots is None else [str(r) for r in roots],
        "calls": [[name, args] for name, args in calls],
        "deadline": deadline,
    }
    if isinstance(target, HttpServer):
        spec.update(transport="http", url=target.url, headers=target.headers)
    elif isinstance(target, str):
        spec.update(transport="http", url=target)
    else:
        spec.update(transport="stdio", command=target)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(spec, f)
    try:
        proc = subprocess.run(
            [node(), str(SESSION_SCRIPT), f.name],
            capture_output=True,
            text=True,
            timeout=deadline + 30,
            cwd=INTEROP,
            check=False,
        )
    finally:
        os.unlink(f.name)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        raise AssertionError(f"fs_session.mjs failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    summary: dict[str, Any] = json.loads(lines[-1])
    return summary


def text(result: dict[str, Any]) -> str:
    return "".join(block.get("text", "") for block in result["content"])
