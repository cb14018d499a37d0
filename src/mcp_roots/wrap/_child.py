"""One wrapped server process: spawned confined to a set of roots (``mcp_roots.sandbox``), its pipes framed
as JSON-RPC lines, the requests wrap forwarded to it and the ones wrap asked itself, killed with its whole
process group.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import signal
import subprocess
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from .. import RootSet, guard
from ..errors import SandboxUnavailable
from ._plan import Plan, spawn
from ._wire import Lines, Message, Writer, request

if TYPE_CHECKING:
    from ..guard import PathSlot

__all__ = ["Child", "ChildFailed", "Forwarded", "kill", "roots_answer", "wait_any"]

logger = logging.getLogger("mcp_roots.wrap")

_MAX_TOOL_PAGES = 20


class ChildFailed(Exception):
    """The wrapped server could not be started, did not answer, or exited: one line for the host."""


@dataclass
class Forwarded:
    """A host request forwarded to a child: the host's id, and its method (for the error if it is lost)."""

    host_id: object
    method: str


class Child:
    """A running wrapped server confined to ``roots``. Its reader (``read``) is run by the proxy."""

    def __init__(
        self, process: subprocess.Popen[bytes], roots: RootSet, generation: int, max_bytes: int
    ) -> None:
        assert process.stdin is not None
        assert process.stdout is not None
        self.process = process
        self.roots = roots
        self.generation = generation
        self.lines = Lines(process.stdout.fileno(), f"the wrapped server (child #{generation})", max_bytes)
        self.writer = Writer(process.stdin.fileno())
        self.forwarded: dict[int, Forwarded] = {}  # wrap's id on this child -> the host request
        self._own: dict[int, tuple[anyio.Event, list[Message]]] = {}
        self.gone = anyio.Event()
        self.exit_note = ""
        self.init_result: dict[str, Any] | None = None
        self._tools: dict[str, list[PathSlot]] | None = None
        self._tools_lock = anyio.Lock()
        self._idle: anyio.Event | None = None

    @classmethod
    async def spawn(
        cls,
        plan: Plan,
        roots: RootSet,
        generation: int,
        *,
        write: bool,
        network: bool,
        max_bytes: int,
        process: subprocess.Popen[bytes] | None = None,
    ) -> Child:
        """The server started confined to ``roots`` (on a worker thread), or ``process`` when the caller
        started it so already (``_plan.spawn``, before the event loop)."""
        if process is None:
            paths = [str(p) for p in roots.paths]
            start = functools.partial(spawn, plan, paths, write=write, network=network)
            try:
                process = await anyio.to_thread.run_sync(start)
            except (OSError, SandboxUnavailable) as exc:
                raise ChildFailed(f"the wrapped server could not be started: {exc}") from None
        logger.info("started child #%d (pid %d) confined to %s", generation, process.pid, roots.describe())
        return cls(process, roots, generation, max_bytes)

    @property
    def alive(self) -> bool:
        return not self.gone.is_set()

    async def send(self, message: Message) -> None:
        if self.writer.closed:
            raise ChildFailed("the wrapped server has closed its input")
        await self.writer.send(message)

    async def ask(self, id_: int, method: str, params: object, limit: float) -> Message:
        """Send wrap's own request and return the child's answer (a result or an error message)."""
        event = anyio.Event()
        slot: list[Message] = []
        self._own[id_] = (event, slot)
        try:
            await self.send(request(id_, method, params))
            with anyio.move_on_after(limit):
                await wait_any(event, self.gone)
            if not slot:
                why = self.exit_note or f"no answer to {method} within {limit:g}s"
                raise ChildFailed(f"the wrapped server failed: {why}")
            return slot[0]
        finally:
            self._own.pop(id_, None)

    def take_answer(self, message: Message) -> Forwarded | None:
        """An answer from the child: wrap's own (delivered, None returned) or a host request's."""
        id_ = message.get("id")
        if isinstance(id_, int):
            own = self._own.get(id_)
            if own is not None:
                own[1].append(message)
                own[0].set()
                return None
            call = self.forwarded.pop(id_, None)
            if not self.forwarded and self._idle is not None:
                self._idle.set()
            return call
        return None

    async def drained(self) -> None:
        """Return when no forwarded call is left (or the child is gone)."""
        if self.forwarded and self.alive:
            self._idle = anyio.Event()
            await wait_any(self._idle, self.gone)

    async def tool_slots(self, name: str, next_id: Any, limit: float) -> list[PathSlot] | None:
        """Where the paths are in tool ``name``'s arguments, from the child's tools/list (asked once, again
        after a list_changed); None when the child does not list that tool."""
        async with self._tools_lock:
            if self._tools is None:
                tools: dict[str, list[PathSlot]] = {}
                cursor: object = None
                for _ in range(_MAX_TOOL_PAGES):
                    answer = await self.ask(
                        next_id(), "tools/list", {"cursor": cursor} if cursor else {}, limit
                    )
                    listed = answer.get("result")
                    if not isinstance(listed, dict):
                        break
                    for tool in listed.get("tools") or []:
                        if isinstance(tool, dict) and isinstance(tool.get("name"), str):
                            schema = tool.get("inputSchema")
                            tools[tool["name"]] = guard.path_slots(schema if isinstance(schema, dict) else {})
                    cursor = listed.get("nextCursor")
                    if not cursor:
                        break
                self._tools = tools
            return self._tools.get(name)

    def tools_changed(self) -> None:
        self._tools = None

    async def note_exit(self) -> None:
        """The child's output ended: wait a moment for its exit status, and say it is gone."""
        code = self.process.poll()
        with anyio.move_on_after(1):
            while code is None:
                await anyio.sleep(0.01)
                code = self.process.poll()
        self.exit_note = f"it exited (status {code})" if code is not None else "it closed its output"
        self.gone.set()

    async def kill(self) -> None:
        """SIGKILL the child's process group, and reap it."""
        await kill(self.process)


async def kill(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL a child's process group (it has a session of its own), reap it, close its pipes."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    await anyio.to_thread.run_sync(process.wait)
    for stream in (process.stdin, process.stdout):
        with contextlib.suppress(OSError):
            if stream is not None:
                stream.close()


async def wait_any(*events: anyio.Event) -> None:
    """Return when any of ``events`` is set."""
    async with anyio.create_task_group() as group:

        async def wait(event: anyio.Event) -> None:
            await event.wait()
            group.cancel_scope.cancel()

        for event in events:
            group.start_soon(wait, event)


def roots_answer(roots: RootSet) -> dict[str, Any]:
    """The answer to a child's roots/list: the effective roots it is confined to."""
    entries: list[dict[str, Any]] = []
    for root in roots:
        entry: dict[str, Any] = {"uri": root.uri}
        if root.name:
            entry["name"] = root.name
        entries.append(entry)
    return {"roots": entries}
