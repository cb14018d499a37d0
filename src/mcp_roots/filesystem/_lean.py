"""serve's lean stdio session: the 14 tools answered on the raw JSON-RPC level, with no SDK or pydantic.
At the first message it does not own, the session goes to the SDK, replayed as ``_early`` replays it.
"""

# What the lean session owns, on the legacy era: ``initialize`` (for a protocol version recorded) and
# ``notifications/initialized``, ``ping``, the lists recorded (``_early.LISTS``), a list of a capability the
# recorded ``initialize`` does not declare (-32601, as the SDK answers it), ``tools/call`` of a tool the
# recorded ``tools/list`` names, the client's answers to its own ``roots/list`` requests,
# ``notifications/roots/list_changed`` and ``notifications/cancelled``. Anything else (another method, a
# notification it does not know, an answer it did not ask for, a second ``initialize``, a message it cannot
# read, anything before ``initialize``) is the SDK's: the session stops taking messages there, lets its
# calls in flight finish (still taking the client's answers to its ``roots/list``), and hands the SDK that
# message and everything after it, behind the client's ``initialize`` and ``initialized`` replayed.
#
# A call is checked exactly as on the SDK path: the arguments against the recorded input schema
# (``argument_error``), the roots by the guard's one decision table and its guarded call (``tool_call``,
# ``@guard.paths``), the work by the same cores (``_cores``); only the wire differs.

from __future__ import annotations

import contextlib
import contextvars
import inspect
import itertools
import json
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio

from .. import RootsError, RootSet, RootsGuard
from ..guard import current_roots, tool_call
from ..roots import JsonRpcPort, NeedRoots
from . import _cores
from ._arguments import argument_error
from ._common import WRITE_TOOLS, Lane, Result, Settings, UnknownMethods, failure
from ._early import LISTS, Handover, is_id, parse
from ._stdio import StdinLines, StdoutWriter

__all__ = ["LEAN_ID_PREFIX", "serve_lean"]

logger = logging.getLogger("mcp_roots")

METHOD_NOT_FOUND = -32601
#: The lists of a capability serve may leave out, by the capability: asked for while the recorded initialize
#: does not declare it, the lean session answers as the SDK does (-32601) instead of handing over.
_UNDECLARED = {
    "prompts/list": "prompts",
    "resources/list": "resources",
    "resources/templates/list": "resources",
}

#: The ids of the lean session's own requests to the client (``roots/list``); the SDK never sees answers
#: to them, even ones that come after the hand-over.
LEAN_ID_PREFIX = "mcp-roots-lean-"
#: Calls in flight at once; the next request waits for one to end (the pipe holds what the client sends).
MAX_IN_FLIGHT = 64
#: Lines read ahead (parked) while the calls in flight are at the bound, at most.
MAX_PARKED = 256
#: A session this long quiet (nothing in flight) has the SDK check the answers it gave from the file: a
#: host is quiet most of the time, and a client that keeps calling is not slowed by the import.
IDLE_SECONDS = 5.0
_TOOL = "tool"  # roots._facts.TOOL, as the port names a tools/call's kind

_MESSAGE: contextvars.ContextVar[Mapping[str, Any]] = contextvars.ContextVar("mcp_roots_lean_message")


class _Port(JsonRpcPort):
    """The raw port as the guarded call (``tool_call``) uses an SDK's: a refusal is the tool's result."""

    framework_errors: tuple[type[BaseException], ...] = ()
    need_roots: type[NeedRoots] = NeedRoots

    def refuse(self, facts: Any, message: str, in_body: bool = False) -> dict[str, Any]:
        return failure(message)


@dataclass
class _Tool:
    """A lean tool: the guarded function (as the SDK path registers it) and its parameters."""

    fn: Callable[..., Awaitable[Result]]
    params: frozenset[str]


class LeanSession:
    """One client's session over ``lines`` and ``out`` (see the module comment)."""

    def __init__(
        self,
        lines: StdinLines,
        out: StdoutWriter,
        answers: Mapping[str, Mapping[str, Any]],
        guard: RootsGuard,
        settings: Settings,
        on_idle: Callable[[Handover], Coroutine[Any, Any, None]] | None = None,
    ) -> None:
        self._lines = lines
        self._on_idle = on_idle
        self._out = out
        self._answers = answers
        self._write_lock = anyio.Lock()
        # The guard's own policy (its one decision table and its connections' roots), as its adapters use it.
        self.port = _Port(guard._policy, self._ask_roots, "roots")
        self._tools = _lean_tools(guard, settings, self.port)
        self._schemas: dict[str, Mapping[str, Any]] = {}
        self.handover = Handover()
        self.unknown = UnknownMethods()
        self._version: str | None = None
        self._initialized = False
        self._ids = itertools.count(1)
        self._asked: dict[str, tuple[anyio.Event, list[dict[str, Any]]]] = {}
        self._in_flight: dict[str, anyio.CancelScope] = {}
        self._slot = anyio.Event()
        self._draining: anyio.CancelScope | None = None
        self._kept: list[str] = []
        self._parked: list[str] = []  # read while the calls in flight were at the bound
        self._last = time.monotonic()  # when the session last read a message or ended a call

    # -- the session --

    async def run(self) -> Handover:
        """Serve until the client leaves (``client_left``) or a message the SDK must answer (the hand-over,
        whose lines are back in ``lines``, the replayed ones first)."""
        async with anyio.create_task_group() as group:
            self._group = group
            first = await self._serve()
            if first is None:  # the client left: as the SDK's dispatcher, cancel what is in flight
                group.cancel_scope.cancel()
            else:
                method = parse(first).get("method")
                logger.debug("serve: lean path: handed to the SDK at %.80r", method)
                self._kept += [first, *self._parked]
                self._parked.clear()
                with anyio.CancelScope() as draining:
                    self._draining = draining
                    if self._in_flight:
                        await self._read_aside()
                group.cancel_scope.cancel()  # the connection's roots task
        with anyio.CancelScope(shield=True):
            await self.port.connection_closed(self.port.host)
        if first is None:
            self.handover.client_left = True
            return self.handover
        self.handover.drop = set(self._asked)
        self._lines.put_back(self.handover.replay + self._kept)
        return self.handover

    async def _serve(self) -> str | None:
        while True:
            try:
                line = self._parked.pop(0) if self._parked else await self._lines.__anext__()
            except StopAsyncIteration:
                return None
            self._last = time.monotonic()
            try:
                taken = await self._take(line)
            except Exception:
                logger.exception("serve: the lean session failed on a message; the SDK takes it")
                taken = False
            if not taken:
                return line

    async def _read_aside(self) -> None:
        """While the calls in flight finish: take the client's answers to this session's requests, keep
        everything else for the SDK (cancelled when the last call ends)."""
        while True:
            try:
                line = await self._lines.__anext__()
            except StopAsyncIteration:
                for scope in self._in_flight.values():  # the client left: as the SDK does at EOF
                    scope.cancel()
                await anyio.sleep_forever()
            message = parse(line) if self._kept_ids_pending(line) else {}
            if not (message and self._answered(message)):
                self._kept.append(line)

    async def _read_while_full(self) -> None:
        """While the calls in flight are at the bound: take the client's answers to this session's requests
        (the calls may wait for them) and park the other lines, up to ``MAX_PARKED`` (then the pipe holds
        the rest)."""
        while len(self._parked) < MAX_PARKED:
            try:
                line = await self._lines.__anext__()
            except StopAsyncIteration:
                return
            message = parse(line) if self._kept_ids_pending(line) else {}
            if not (message and self._answered(message)):
                self._parked.append(line)

    def _kept_ids_pending(self, line: str) -> bool:
        return bool(self._asked) and LEAN_ID_PREFIX in line

    # -- one message --

    async def _take(self, line: str) -> bool:
        """Handle the message of ``line`` if this session owns it."""
        message = parse(line)
        method = message.get("method")
        if not message:
            return False
        if method is None:
            return self._answered(message)
        if not isinstance(method, str):
            return False
        if "id" not in message:
            return self._notification(line, method, message)
        ident, params = message["id"], message.get("params")
        if not is_id(ident):
            return False
        if self._version is None:
            return await self._initialize(line, ident, method, params)
        if not self._initialized:
            return False
        if method == "ping" and params in (None, {}):
            await self._send(ident, {})
            return True
        if method in LISTS and params in (None, {}) and method in self._answers[self._version]:
            given = self._answers[self._version][method]
            await self._send(ident, given)
            self.handover.lists[method] = given
            return True
        if method == "tools/call":
            return await self._tools_call(message, ident, params)
        if method in _UNDECLARED and not self._declared(_UNDECLARED[method]):
            # A list of a capability the recorded initialize does not declare (a host asks for prompts
            # and resources at start): the SDK's own answer, so the session need not wait for it.
            error = {"code": METHOD_NOT_FOUND, "message": "Method not found", "data": method}
            await self._write({"jsonrpc": "2.0", "id": ident, "error": error})
            self.unknown.note(method)
            return True
        return False

    def _declared(self, capability: str) -> bool:
        capabilities = self.handover.given.get("capabilities") if self.handover.given else None
        return not isinstance(capabilities, dict) or capability in capabilities

    async def _initialize(self, line: str, ident: int | str, method: str, params: object) -> bool:
        if method != "initialize" or not isinstance(params, dict):
            return False
        requested = params.get("protocolVersion")
        if not isinstance(requested, str) or requested not in self._answers:
            return False
        recorded = self._answers[requested]
        listed = recorded.get("tools/list")
        if not isinstance(listed, dict) or not isinstance(listed.get("tools"), list):
            return False
        given = dict(recorded["initialize"])
        await self._send(ident, given)
        self._version = requested
        self.handover.initialize_id, self.handover.given = ident, given
        self.handover.replay.append(line)
        self._schemas = {
            tool["name"]: tool["inputSchema"]
            for tool in listed["tools"]
            if isinstance(tool, dict) and isinstance(tool.get("inputSchema"), dict)
        }
        self.port.open(params)
        logger.debug("serve: lean path: serving %s without the SDK", requested)
        return True

    def _notification(self, line: str, method: str, message: dict[str, Any]) -> bool:
        if method == "notifications/initialized" and self._version is not None and not self._initialized:
            self._initialized = True
            self.handover.replay.append(line)
            self._group.start_soon(self._keep_roots)
            self._group.start_soon(self._watch_quiet)
            return True
        if not self._initialized:
            return False
        if method == "notifications/roots/list_changed":
            self.port.roots_changed(self.port.host)
            return True
        if method == "notifications/cancelled":
            params = message.get("params")
            target = params.get("requestId") if isinstance(params, dict) else None
            scope = self._in_flight.get(json.dumps(target)) if is_id(target) else None
            if scope is not None:
                scope.cancel()
            return True  # a request not in flight: nothing to cancel (the SDK ignores it too)
        return False

    async def _watch_quiet(self) -> None:
        """Once the session has been quiet (nothing read, nothing in flight) for ``IDLE_SECONDS``: the SDK
        checks the answers given from the file, off the wire (``on_idle``)."""
        while self._on_idle is not None:
            quiet = time.monotonic() - self._last
            if quiet >= IDLE_SECONDS and not self._in_flight:
                check, self._on_idle = self._on_idle, None
                self._group.start_soon(check, self.handover.snapshot())
                return
            await anyio.sleep(max(IDLE_SECONDS - quiet, 0.1))

    async def _keep_roots(self) -> None:
        """The connection's roots kept fresh while the session lasts (as the SDK path's guard does)."""
        await self.port.initialized(self.port.host, cannot_ask=None, send_now=True)

    def _answered(self, message: dict[str, Any]) -> bool:
        """The client's answer to a request of this session's."""
        ident = message.get("id")
        waiting = self._asked.pop(ident, None) if isinstance(ident, str) else None
        if waiting is None:
            return False
        event, slot = waiting
        slot.append(message)
        event.set()
        return True

    async def _tools_call(self, message: dict[str, Any], ident: int | str, params: object) -> bool:
        if not isinstance(params, dict) or not set(params) <= {"name", "arguments", "_meta"}:
            return False
        name, arguments = params.get("name"), params.get("arguments", {})
        meta = params.get("_meta", {})
        if not isinstance(name, str) or name not in self._tools or name not in self._schemas:
            return False
        if not isinstance(arguments, dict) or not isinstance(meta, dict):
            return False
        key = json.dumps(ident)
        if key in self._in_flight:
            return False
        while len(self._in_flight) >= MAX_IN_FLIGHT:
            self._slot = anyio.Event()
            async with anyio.create_task_group() as waiting:
                waiting.start_soon(self._read_while_full)
                await self._slot.wait()
                waiting.cancel_scope.cancel()
        scope = anyio.CancelScope()
        self._in_flight[key] = scope
        self._group.start_soon(self._call, message, scope, key, name, arguments)
        return True

    async def _call(
        self,
        message: dict[str, Any],
        scope: anyio.CancelScope,
        key: str,
        name: str,
        arguments: dict[str, Any],
    ) -> None:
        answer: Result | None = None
        try:
            with scope:
                answer = await self._answer(message, name, arguments)
            if answer is not None and not scope.cancel_called:
                await self._send(message["id"], answer)
        finally:
            del self._in_flight[key]
            self._last = time.monotonic()
            self._slot.set()
            if not self._in_flight and self._draining is not None:
                self._draining.cancel()

    async def _answer(self, message: dict[str, Any], name: str, arguments: dict[str, Any]) -> Result:
        error = argument_error(name, self._schemas[name], arguments)
        if error is not None:  # the SDK path answers it from its middleware, which adds the result type
            return {**failure(error), "resultType": "complete"}
        tool = self._tools[name]
        given = {key: value for key, value in arguments.items() if key in tool.params}
        facts = self.port.facts(message, _TOOL)
        token = _MESSAGE.set(message)
        try:
            component = _Component(tool.fn)
            answer: Result = await tool_call(
                self.port,  # type: ignore[arg-type]  # the raw port, as the guarded call uses a port
                facts,
                name=name,
                component=component,
                arguments=given,
                run=lambda: tool.fn(**given),
            )
            return answer
        except RootsError as exc:  # from an exempt tool's body: its one line, as on the SDK path
            return failure(" ".join(str(exc).splitlines()))
        except Exception:  # a bug: logged, and the client reads what the SDK's tool runner says
            logger.exception("Tool %r raised an unexpected exception", name)
            return failure(f"Error executing tool {name}")
        finally:
            _MESSAGE.reset(token)

    # -- the wire --

    async def _ask_roots(self) -> object:
        ident = f"{LEAN_ID_PREFIX}{next(self._ids)}"
        event = anyio.Event()
        slot: list[dict[str, Any]] = []
        self._asked[ident] = (event, slot)
        await self._write({"jsonrpc": "2.0", "id": ident, "method": "roots/list"})
        await event.wait()
        answer = slot[0]
        if "result" not in answer:
            problem = answer.get("error")
            said = problem.get("message", problem) if isinstance(problem, dict) else "no result"
            raise RootsError(f"roots/list failed: {str(said)[:500]}")
        return answer["result"]

    async def _send(self, ident: int | str, result: Mapping[str, Any]) -> None:
        await self._write({"jsonrpc": "2.0", "id": ident, "result": result})

    async def _write(self, message: Mapping[str, Any]) -> None:
        text = json.dumps(message, ensure_ascii=False, separators=(",", ":")) + "\n"
        async with self._write_lock:
            await self._out.write(text)
            with contextlib.suppress(OSError):  # the client closed its end: it reads no more answers
                await self._out.flush()


@dataclass
class _Component:
    """What the guarded call reads of a registered tool: the function the framework runs."""

    fn: Callable[..., Any]


def _lean_tools(guard: RootsGuard, settings: Settings, port: _Port) -> dict[str, _Tool]:
    """serve's tools as the lean path runs them: each guarded as on the SDK path, its work the same core."""
    walks = Lane(_cores.WALKS_AT_ONCE)

    def roots() -> RootSet:
        given = current_roots()
        assert given is not None  # a guarded function runs only with its call's roots
        return given

    async def asked() -> RootSet:  # guard.roots(ctx) of an exempt tool
        return await port.roots(_MESSAGE.get())

    async def writable(found: RootSet | None = None) -> RootSet:
        into = found if found is not None else roots()
        return into.protecting() if settings.protect else into

    async def read_text_file(path: str, tail: float = 0, head: float = 0) -> Result:
        return await _cores.read_text_file(roots(), settings, path, tail, head)

    async def read_media_file(path: str) -> Result:
        return await _cores.read_media_file(roots(), settings, path)

    async def read_multiple_files(paths: Sequence[str]) -> Result:
        if len(paths) > settings.max_paths:
            return failure(f"at most {settings.max_paths} paths per call; got {len(paths)}")
        return await _cores.read_multiple_files(await asked(), settings, paths)

    async def list_directory(path: str) -> Result:
        return await _cores.list_directory(roots(), settings, path)

    async def list_directory_with_sizes(path: str, sortBy: str = "name") -> Result:
        return await _cores.list_directory_with_sizes(roots(), settings, path, sortBy)

    async def directory_tree(path: str, excludePatterns: Sequence[str] = ()) -> Result:
        return await _cores.directory_tree(roots(), settings, path, excludePatterns, walks)

    async def search_files(path: str, pattern: str, excludePatterns: Sequence[str] = ()) -> Result:
        return await _cores.search_files(roots(), settings, path, pattern, excludePatterns, walks)

    async def get_file_info(path: str) -> Result:
        return await _cores.get_file_info(roots(), path)

    async def list_allowed_directories() -> Result:
        return _cores.list_allowed_directories(await asked())

    async def write_file(path: str, content: str) -> Result:
        return await _cores.write_file(await writable(), path, content)

    async def edit_file(path: str, edits: Sequence[Mapping[str, str]], dryRun: bool = False) -> Result:
        pairs = [(edit["oldText"], edit["newText"]) for edit in edits]
        return await _cores.edit_file(await writable(), settings, path, pairs, dryRun)

    async def create_directory(path: str) -> Result:
        return await _cores.create_directory(await writable(), path)

    async def move_file(source: str, destination: str) -> Result:
        return await _cores.move_file(await writable(await asked()), source, destination)

    paths = guard.paths("path")
    exempt = guard.exempt("the lean path's exempt tools are the SDK path's")
    tools: dict[str, Callable[..., Awaitable[Result]]] = {
        "read_file": paths(read_text_file),
        "read_text_file": paths(read_text_file),
        "read_media_file": paths(read_media_file),
        "read_multiple_files": exempt(read_multiple_files),
        "list_directory": paths(list_directory),
        "list_directory_with_sizes": paths(list_directory_with_sizes),
        "directory_tree": paths(directory_tree),
        "search_files": paths(search_files),
        "get_file_info": paths(get_file_info),
        "list_allowed_directories": guard.paths()(list_allowed_directories),
        "write_file": paths(write_file),
        "edit_file": paths(edit_file),
        "create_directory": paths(create_directory),
        "move_file": exempt(move_file),
    }
    return {
        name: _Tool(fn, frozenset(inspect.signature(fn).parameters))
        for name, fn in tools.items()
        if not (settings.read_only and name in WRITE_TOOLS)
    }


async def serve_lean(
    lines: StdinLines,
    out: StdoutWriter,
    answers: Mapping[str, Mapping[str, Any]],
    guard: RootsGuard,
    settings: Settings,
    on_idle: Callable[[Handover], Coroutine[Any, Any, None]] | None = None,
) -> Handover:
    """Serve the client on the lean path until it leaves (``client_left``) or the SDK must take over (the
    hand-over: replay its lines, drop the answers to ``drop``). ``on_idle`` runs, once, in a task of the
    session when it is first quiet, with a copy of what the hand-over would be at that point."""
    return await LeanSession(lines, out, answers, guard, settings, on_idle).run()
