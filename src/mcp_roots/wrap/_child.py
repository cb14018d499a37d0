"""One wrapped server process: spawned confined to a set of roots (``mcp_roots.sandbox``), its pipes framed
as JSON-RPC lines (its input through a bounded queue that nothing waits on), the requests wrap forwarded to
it and the ones wrap asked itself; ended with its whole tree (``end_tree``) at every retirement.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import subprocess
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import anyio.lowlevel
import anyio.to_thread

from .. import RootSet, guard
from ..errors import SandboxUnavailable
from ._plan import Plan, end_tree_now, spawn
from ._wire import Lines, Message, encode, request

if TYPE_CHECKING:
    from ..guard import PathSlot

__all__ = [
    "INPUT_STALL",
    "SCHEMA_BUDGET",
    "Child",
    "ChildFailed",
    "Clock",
    "Forwarded",
    "LoopClock",
    "Told",
    "end_tree",
    "end_tree_now",
    "roots_answer",
    "tool_slots_of",
    "wait_any",
]

logger = logging.getLogger("mcp_roots.wrap")

_MAX_TOOL_PAGES = 20
#: Seconds a child's input may stay full (it reads nothing) with a message waiting, before it is failed.
INPUT_STALL = 5.0
#: Seconds of CPU the schema walk of one tool list may take (on a worker thread); tools past it are checked
#: by path names only.
SCHEMA_BUDGET = 0.5
#: Messages waiting for a child's input at once; past it, a message to the child is refused.
_OUTBOX = 256
#: Resource subscriptions a replacement child is told again, at most.
MAX_SUBSCRIPTIONS = 1000


class Clock(Protocol):
    """Where a child's input watch reads the time and waits: the event loop's clock, or a test's."""

    def now(self) -> float: ...

    async def wait_until(self, event: anyio.Event, deadline: float) -> None: ...


class LoopClock:
    """The event loop's clock."""

    def now(self) -> float:
        return anyio.current_time()

    async def wait_until(self, event: anyio.Event, deadline: float) -> None:
        with anyio.move_on_after(deadline - anyio.current_time()):
            await event.wait()


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
        self,
        process: subprocess.Popen[bytes],
        roots: RootSet,
        generation: int,
        max_bytes: int,
        *,
        stall: float = INPUT_STALL,
        clock: Clock | None = None,
    ) -> None:
        assert process.stdin is not None
        assert process.stdout is not None
        self.process = process
        self.roots = roots
        self.generation = generation
        self.lines = Lines(process.stdout.fileno(), f"the wrapped server (child #{generation})", max_bytes)
        self._in_fd = process.stdin.fileno()
        os.set_blocking(self._in_fd, False)
        self._outbox: deque[bytes] = deque()
        self._queued = anyio.Event()
        self._stall = stall
        self._clock: Clock = clock if clock is not None else LoopClock()
        self.input_closed = False
        self.ended = False
        self.forwarded: dict[int, Forwarded] = {}  # wrap's id on this child -> the host request
        self._own: dict[int, tuple[anyio.Event, list[Message]]] = {}
        self.gone = anyio.Event()
        self.exit_note = ""
        self.init_result: dict[str, Any] | None = None
        self._tools: dict[str, list[PathSlot]] | None = None
        self.read_only_tools: frozenset[str] = frozenset()  # tools/list's readOnlyHint: true
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
            # A root granted read only (consent's read grant) is read only in the child's sandbox too.
            paths = [str(root.path) for root in roots if root.writable]
            read = [str(root.path) for root in roots if not root.writable]
            start = functools.partial(spawn, plan, paths, write=write, network=network, read_roots=read)
            try:
                with anyio.CancelScope(shield=True):  # a process started is never lost to a cancel
                    process = await anyio.to_thread.run_sync(start)
            except (OSError, SandboxUnavailable) as exc:
                raise ChildFailed(f"the wrapped server could not be started: {exc}") from None
        assert process is not None
        logger.info("started child #%d (pid %d) confined to %s", generation, process.pid, roots.describe())
        return cls(process, roots, generation, max_bytes)

    @property
    def alive(self) -> bool:
        return not self.gone.is_set()

    def post(self, message: Message | bytes) -> bool:
        """Queue ``message`` for the child's input (``pump`` writes it); False when the child is gone, its
        input closed, or too much is waiting already. Never waits: nothing the child does holds the caller."""
        if self.input_closed or not self.alive or len(self._outbox) >= _OUTBOX:
            return False
        self._outbox.append(message if isinstance(message, bytes) else encode(message))
        self._queued.set()
        return True

    def tell(self, message: Message) -> None:
        """``post``, with a log line when the message cannot be queued (the child's reader says why)."""
        if not self.post(message):
            logger.warning("a message for child #%d was dropped: it is gone or not reading", self.generation)

    async def send(self, message: Message | bytes) -> None:
        if not self.post(message):
            why = (
                "has closed its input" if self.input_closed or not self.alive else "is not reading its input"
            )
            raise ChildFailed(f"the wrapped server {why}")

    async def pump(self) -> None:
        """Write the queued messages to the child's input until it is gone. A child whose input stays full
        for ``stall`` seconds while a message waits is failed: its whole tree is ended."""
        while self.alive and not self.input_closed:
            if not self._outbox:
                self._queued = anyio.Event()
                await wait_any(self._queued, self.gone)
                continue
            data = memoryview(self._outbox[0])
            while data:
                if self.input_closed:  # ended meanwhile: its descriptor may be closed (or another's now)
                    return
                try:
                    data = data[os.write(self._in_fd, data) :]
                except BlockingIOError:
                    if not await self._writable_within(self._stall) and not self.input_closed:
                        await self._fail_stalled()
                        return
                except OSError:  # the child closed its input: its reader sees the end
                    self.input_closed = True
                    return
            self._outbox.popleft()

    async def _writable_within(self, seconds: float) -> bool:
        writable = anyio.Event()

        async def watch() -> None:
            with contextlib.suppress(OSError, anyio.ClosedResourceError):
                await anyio.wait_writable(self._in_fd)
            writable.set()  # writable, or closed (the pump then sees input_closed)

        async with anyio.create_task_group() as group:
            group.start_soon(watch)
            await self._clock.wait_until(writable, self._clock.now() + seconds)
            group.cancel_scope.cancel()
        return writable.is_set()

    async def _fail_stalled(self) -> None:
        logger.warning(
            "the wrapped server (child #%d) read none of its input for %gs: stopped with its whole tree",
            self.generation,
            self._stall,
        )
        self.exit_note = f"it stopped reading its input for {self._stall:g}s"
        self.input_closed = True
        await self.kill()
        self.gone.set()

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

    @staticmethod
    def release(held: tuple[Child, int] | None) -> bool:
        """Take a call off the child it was routed to; False when something else answered it already."""
        return held is None or held[0].take_answer({"id": held[1]}) is not None

    async def drained(self) -> None:
        """Return when no forwarded call is left (or the child is gone)."""
        if self.forwarded and self.alive:
            self._idle = anyio.Event()
            await wait_any(self._idle, self.gone)

    async def tool_slots(self, name: str, next_id: Any, limit: float) -> list[PathSlot] | None:
        """Where the paths are in tool ``name``'s arguments, from the child's tools/list (asked once, again
        after a list_changed), walked on a worker thread within ``SCHEMA_BUDGET`` for the whole list; None
        when the child does not list that tool, or it was past the budget (its path names still count)."""
        async with self._tools_lock:
            if self._tools is None:
                schemas: dict[str, Mapping[str, Any]] = {}
                read_only: set[str] = set()
                cursor: object = None
                for _ in range(_MAX_TOOL_PAGES):
                    answer = await self.ask(
                        next_id(), "tools/list", {"cursor": cursor} if cursor else {}, limit
                    )
                    listed = answer.get("result")
                    if not isinstance(listed, dict):
                        break
                    tools = listed.get("tools")
                    for tool in tools if isinstance(tools, list) else ():
                        if isinstance(tool, dict) and isinstance(tool.get("name"), str):
                            schema = tool.get("inputSchema")
                            schemas[tool["name"]] = schema if isinstance(schema, dict) else {}
                            hints = tool.get("annotations")
                            if isinstance(hints, dict) and hints.get("readOnlyHint") is True:
                                read_only.add(tool["name"])
                    cursor = listed.get("nextCursor")
                    if not cursor:
                        break
                self.read_only_tools = frozenset(read_only)
                walk = functools.partial(tool_slots_of, schemas, SCHEMA_BUDGET, self.generation)
                self._tools = await anyio.to_thread.run_sync(walk)
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
        if not self.exit_note:  # a stalled input said why already
            self.exit_note = f"it exited (status {code})" if code is not None else "it closed its output"
        self.gone.set()

    async def kill(self) -> None:
        """End the child's whole tree, reap it, close its pipes (once)."""
        if self.ended:
            return
        self.ended = True
        self.input_closed = True
        await end_tree(self.process)


class Told:
    """What a replacement child is told again: the host's logging level, its resource subscriptions."""

    def __init__(self) -> None:
        self.level: object = None
        self.subscriptions: dict[str, None] = {}

    def remember(self, method: str, params: object) -> None:
        """Note a host request forwarded (``logging/setLevel``, ``resources/(un)subscribe``)."""
        if not isinstance(params, dict):
            return
        if method == "logging/setLevel":
            self.level = params.get("level")
        elif method == "resources/subscribe" and isinstance(params.get("uri"), str):
            if len(self.subscriptions) < MAX_SUBSCRIPTIONS:
                self.subscriptions[params["uri"]] = None
        elif method == "resources/unsubscribe":
            self.subscriptions.pop(str(params.get("uri")), None)

    async def replay(self, child: Child, next_id: Callable[[], int], limit: float) -> None:
        """Tell a new ``child`` what the host told the ones before it."""
        if self.level is not None:
            await child.ask(next_id(), "logging/setLevel", {"level": self.level}, limit)
        for uri in list(self.subscriptions):
            await child.ask(next_id(), "resources/subscribe", {"uri": uri}, limit)


def tool_slots_of(
    schemas: Mapping[str, Mapping[str, Any]], budget: float, generation: int = 0
) -> dict[str, list[PathSlot]]:
    """Each tool's path slots, walked in order until ``budget`` seconds of this thread's CPU are spent; the
    tools past it are left out (the second net, path names, still checks their calls), said in the log."""
    slots: dict[str, list[PathSlot]] = {}
    start = time.thread_time()
    for name, schema in schemas.items():
        if time.thread_time() - start > budget:
            logger.warning(
                "the schema walk of child #%d's tool list passed its budget (%gs): %d of %d tools are "
                "checked by path names only",
                generation,
                budget,
                len(schemas) - len(slots),
                len(schemas),
            )
            break
        slots[name] = guard.path_slots(schema)
    return slots


async def end_tree(process: subprocess.Popen[bytes], *, output: bool = False) -> None:
    """``end_tree_now`` off the event loop, then the child's input closed (the pump waiting on it told),
    and its output too when ``output`` (no reader has it: the reader closes it at its end)."""
    await anyio.to_thread.run_sync(end_tree_now, process)
    for stream in (process.stdin, process.stdout if output else None):
        if stream is not None and not stream.closed:
            with contextlib.suppress(OSError, ValueError):
                anyio.notify_closing(stream.fileno())
            with contextlib.suppress(OSError):
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
