"""Helpers for the filesystem server tests: a fixed tree, `mcp-roots serve` and the official server as real
subprocesses, and one scripted session run through the official Python client or the official TypeScript
SDK client, both reduced to the same JSON shape."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp_types import ListRootsResult, Root

from mcp_roots import path_to_uri

REPO = Path(__file__).resolve().parent.parent
INTEROP = REPO / "tests" / "interop"
SESSION_SCRIPT = INTEROP / "fs_session.mjs"
OFFICIAL_SERVER = (
    INTEROP / "node_modules" / "@modelcontextprotocol" / "server-filesystem" / "dist" / "index.js"
)

Call = tuple[str, dict[str, Any]]


@dataclass(frozen=True)
class Tree:
    """A fixed tree: ``root`` is served; ``outside`` must never be reachable."""

    base: Path
    root: Path
    outside: Path

    @classmethod
    def make(cls, base: Path) -> Tree:
        base = base.resolve()
        root, outside = base / "root", base / "outside"
        files: dict[str, bytes] = {
            "abc.txt": b"a\nb\nc",  # no trailing newline
            "lines.txt": b"1\n2\n3\n4\n5\n",
            "edit.txt": b"alpha\nbeta\ngamma\n",
            "bin.dat": b"\x00\x01\x02binary",
            "pic.png": b"\x89PNG\r\n\x1a\nfake",
            "sub/xy.txt": b"x\ny\n",
            "sub/deep/z.py": b"print()\n",
            "node_modules/m.js": b"module\n",
            "code.js": b"function f() {\n    if (x) {\n        return 1;\n    }\n    return 2;\n}\n",
            ".hidden/h.txt": b"hidden\n",
        }
        files.update({f"many/f{i:02d}.txt": b"m\n" for i in range(12)})
        for rel, data in files.items():
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        (root / "empty").mkdir()
        outside.mkdir()
        (outside / "secret.txt").write_text("TOP SECRET")
        (root / "escape.txt").symlink_to(outside / "secret.txt")
        (root / "escape_dir").symlink_to(outside)
        (root / "inner_link.txt").symlink_to(root / "sub" / "xy.txt")
        return cls(base, root, outside)


def serve_command(*args: str) -> list[str]:
    return [sys.executable, "-c", "from mcp_roots.cli import main; raise SystemExit(main())", "serve", *args]


def official_command(*dirs: str) -> list[str]:
    if not OFFICIAL_SERVER.exists():
        pytest.fail(f"{OFFICIAL_SERVER} is missing: run `npm ci --prefix tests/interop` (make test does)")
    return [node(), str(OFFICIAL_SERVER), *dirs]


def node() -> str:
    found = shutil.which("node")
    if found is None:
        pytest.fail("node is not installed; the filesystem interop tests need Node >= 20")
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def http_serve(*args: str, start_timeout: float = 30.0) -> Iterator[str]:
    """``mcp-roots serve --http PORT *args`` as a subprocess; yields its URL; stopped on exit."""
    port = free_port()
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            serve_command("--http", str(port), *args), stdout=subprocess.DEVNULL, stderr=err
        )
        try:
            deadline = time.monotonic() + start_timeout
            while True:
                if proc.poll() is not None:
                    err.seek(0)
                    raise RuntimeError(f"mcp-roots serve exited early: {err.read().decode(errors='replace')}")
                with socket.socket() as s:
                    if s.connect_ex(("127.0.0.1", port)) == 0:
                        break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"mcp-roots serve not listening after {start_timeout} s")
                time.sleep(0.05)
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


def _roots_callback(dirs: Sequence[Path]) -> Any:
    async def answer(_context: Any) -> ListRootsResult:
        return ListRootsResult(roots=[Root(uri=path_to_uri(d), name=d.name) for d in dirs])

    return answer


async def py_session(
    target: list[str] | str, calls: Sequence[Call], roots: Sequence[Path] | None = None
) -> dict[str, Any]:
    """The session through the official Python client: ``target`` is a command line (stdio) or a URL."""
    kwargs: dict[str, Any] = {} if roots is None else {"list_roots_callback": _roots_callback(roots)}
    server: Any = (
        target
        if isinstance(target, str)
        else StdioServerParameters(command=target[0], args=target[1:], env=dict(os.environ))
    )
    out: dict[str, Any] = {"results": []}
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
    return out


def ts_session(
    target: list[str] | str, calls: Sequence[Call], roots: Sequence[Path] | None = None, deadline: float = 120
) -> dict[str, Any]:
    """The session through the official TypeScript SDK client (tests/interop/fs_session.mjs)."""
    spec: dict[str, Any] = {
        "roots": None if roots is None else [str(r) for r in roots],
        "calls": [[name, args] for name, args in calls],
        "deadline": deadline,
    }
    if isinstance(target, str):
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
