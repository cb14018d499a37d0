"""A raw JSON-RPC host for the wrap tests: starts a stdio server (bare, or under ``mcp-roots wrap``) as a
subprocess, speaks one JSON object per line, answers roots/list (and sampling) from what the test says, and
keeps every message it saw, ids included. No SDK model sits in between, so what passes through is tested as
it is on the wire.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import Process

REPO = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
HOSTILE = REPO / "tests" / "servers" / "hostile_stdio_server.py"
LEGACY = "2025-11-25"


class Host:
    """One connection to a stdio server, as a legacy-era host with roots (``roots`` is what it answers)."""

    def __init__(self, process: Process, roots: list[str] | None) -> None:
        self.process = process
        self.roots = roots
        self.seen: list[dict[str, Any]] = []
        self.answers: dict[object, dict[str, Any]] = {}
        self.waiters: dict[object, anyio.Event] = {}
        self.notifications: list[dict[str, Any]] = []
        self.requests: list[dict[str, Any]] = []
        self.sample_text = "sampled!"
        self._next = 0
        self._buffer = b""

    async def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send((json.dumps({"jsonrpc": "2.0", **message}) + "\n").encode())

    async def request(
        self, method: str, params: Any = None, *, id_: object = None, limit: float = 30
    ) -> dict[str, Any]:
        if id_ is None:
            self._next += 1
            id_ = self._next
        event = self.waiters[id_] = anyio.Event()
        message: dict[str, Any] = {"id": id_, "method": method}
        if params is not None:
            message["params"] = params
        await self.send(message)
        with anyio.fail_after(limit):
            await event.wait()
        return self.answers.pop(id_)

    async def call(self, name: str, arguments: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
        return await self.request("tools/call", {"name": name, "arguments": arguments or {}}, **kw)

    async def text(self, name: str, arguments: dict[str, Any] | None = None) -> str:
        answer = await self.call(name, arguments)
        if "error" in answer:
            return f"JSONRPC-ERROR: {answer['error']['message']}"
        return "\n".join(c.get("text", "") for c in answer["result"]["content"])

    async def notify(self, method: str, params: Any = None) -> None:
        message: dict[str, Any] = {"method": method}
        if params is not None:
            message["params"] = params
        await self.send(message)

    async def initialize(self, *, roots: bool = True) -> dict[str, Any]:
        capabilities: dict[str, Any] = {"sampling": {}}
        if roots:
            capabilities["roots"] = {"listChanged": True}
        answer = await self.request(
            "initialize",
            {
                "protocolVersion": LEGACY,
                "capabilities": capabilities,
                "clientInfo": {"name": "wrapkit", "version": "0"},
            },
        )
        await self.notify("notifications/initialized")
        return answer

    async def set_roots(self, roots: list[str]) -> None:
        self.roots = roots
        await self.notify("notifications/roots/list_changed")

    async def _read(self) -> None:
        assert self.process.stdout is not None
        async for chunk in self.process.stdout:
            self._buffer += chunk
            while b"\n" in self._buffer:
                line, self._buffer = self._buffer.split(b"\n", 1)
                if line.strip():
                    await self._take(json.loads(line))

    async def _take(self, message: dict[str, Any]) -> None:
        self.seen.append(message)
        if "method" not in message:
            self.answers[message["id"]] = message
            event = self.waiters.pop(message["id"], None)
            if event is not None:
                event.set()
        elif "id" in message:
            self.requests.append(message)
            if message["method"] == "roots/list":
                roots = [{"uri": Path(r).as_uri()} for r in self.roots or []]
                await self.send({"id": message["id"], "result": {"roots": roots}})
            elif message["method"] == "sampling/createMessage":
                content = {"type": "text", "text": self.sample_text}
                await self.send(
                    {"id": message["id"], "result": {"role": "assistant", "content": content, "model": "m"}}
                )
            else:
                await self.send({"id": message["id"], "error": {"code": -32601, "message": "no"}})
        else:
            self.notifications.append(message)


def hostile_argv(secret: Path, plant: Path, inside: Path | None = None) -> list[str]:
    argv = [PYTHON, str(HOSTILE), "--secret", str(secret), "--plant", str(plant)]
    if inside is not None:
        argv += ["--inside", str(inside)]
    return argv


def wrap_argv(ceiling: Sequence[Path], command: Sequence[str], *options: str) -> list[str]:
    argv = [PYTHON, "-m", "mcp_roots", "wrap"]
    for path in ceiling:
        argv += ["--ceiling", str(path)]
    return [*argv, *options, "--", *command]


@asynccontextmanager
async def connected(argv: Sequence[str], roots: list[str] | None = None, **env: str) -> AsyncIterator[Host]:
    environ = {**os.environ, **env}
    async with await anyio.open_process(
        list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None, env=environ
    ) as process:
        host = Host(process, roots)
        async with anyio.create_task_group() as group:
            group.start_soon(host._read)
            try:
                yield host
            finally:
                assert process.stdin is not None
                await process.stdin.aclose()
                with anyio.move_on_after(5):
                    await process.wait()
                if process.returncode is None:
                    process.kill()
                group.cancel_scope.cancel()
