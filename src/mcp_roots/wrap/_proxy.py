"""The proxy: host <-> wrap <-> child as raw JSON-RPC.
Wrap is a server to the host and a client to a confined child.
"""

# Wrap records the host's ``initialize``, asks its roots (with --ask, its user for folders: ``_ask``) and
# follows ``list_changed`` through RootsCache; it replaces the child when the effective roots change, checks
# path arguments before forwarding, answers the child's roots/list itself, passes the rest on, ids apart.

from __future__ import annotations

import functools
import itertools
import logging
import math
import subprocess
from typing import Any

import anyio
from anyio.abc import TaskGroup

from .. import RootSet
from ..errors import RootsError
from ..roots import JsonRpcPort
from . import _ask as ask
from . import _checks as checks
from . import _modern as modern
from ._child import Child, ChildFailed, Forwarded, Told, end_tree, roots_answer
from ._options import Options
from ._wire import (
    INVALID_REQUEST,
    Lines,
    Message,
    Unparsed,
    Writer,
    error,
    invalid,
    invalid_reply,
    request,
    result,
    valid_id,
)

__all__ = ["Options", "Proxy"]

logger = logging.getLogger("mcp_roots.wrap")

INTERNAL = -32603
INVALID_PARAMS = -32602
NOT_INITIALIZED = -32002
METHOD_NOT_FOUND = -32601
HOST_ID_PREFIX = "mcp-roots-wrap-"  # the ids of wrap's own requests to the host
BUSY = -32000
#: Requests that read or write files on the host's behalf: they wait for the roots in force (a refresh a
#: list_changed triggered) and their paths are checked first.
NEEDS_ROOTS = frozenset({"tools/call", "resources/read", "resources/subscribe"})


class Proxy:
    """One host connection (this process's stdio) and the children serving it."""

    def __init__(
        self, options: Options, host_in: int, host_out: int, first: subprocess.Popen[bytes] | None = None
    ) -> None:
        self.options = options
        # The server started before the event loop, confined to no roots (command.main): the first child
        # wanted with no roots is this process, already under way.
        self._first = first
        self.host = Lines(host_in, "the host", options.max_message_bytes)
        self.host_writer = Writer(host_out)
        self._ids = itertools.count(1)
        self._host_ids = itertools.count(1)
        self._to_host: dict[str, tuple[Child | None, object, anyio.Event | None, list[Message]]] = {}
        self.init_params: dict[str, Any] | None = None
        self.current: Child | None = None
        self.children: list[Child] = []
        self._start_lock = anyio.Lock()
        self._last_start = -math.inf
        self._in_flight = 0
        self._scopes: dict[Any, anyio.CancelScope] = {}  # host id -> a request still being routed
        self.era: str | None = None  # "legacy" after initialize, modern.MODERN after a 2026-07-28 request
        self.pool = modern.Pool()
        self.told = Told()
        # The roots: the roots layer's decision table, through its raw JSON-RPC port (wrap's rules are its
        # children and the wire).
        self.port = JsonRpcPort.serving(
            fallback=options.fallback,
            ceiling=options.ceiling,
            timeout=options.roots_timeout,
            ask_host=self._ask_host_roots,
            input_key=modern.ROOTS_KEY,
            consent_timeout=options.ask_timeout,
        )
        self._group: TaskGroup | None = None
        self._roots_known = False  # some roots have been in force: later requests wait for a refresh

    # -- running --

    async def run(self) -> None:
        try:
            async with anyio.create_task_group() as group:
                self._group = group
                try:
                    while True:
                        message = await self.host.receive()
                        if message is None:
                            break
                        await self._take_from_host(message)
                finally:
                    group.cancel_scope.cancel()
        finally:  # every task is done: no child is still being started
            with anyio.CancelScope(shield=True):
                for child in list(self.children):
                    await self._drop(child)
                if self._first is not None:
                    await end_tree(self._first, output=True)

    async def _take_from_host(self, message: Message | Unparsed) -> None:
        """One message from the host: answered, forwarded, or dropped with a log line; wrap goes on."""
        if isinstance(message, Unparsed):
            logger.warning("refused from the host: %s", message.refusal())
            if message.id is not None and not str(message.id).startswith(HOST_ID_PREFIX):  # not wrap's
                await self._host_error(message.id, INVALID_REQUEST, message.refusal())
            return
        why = invalid(message)
        if why is not None:
            logger.warning("the host sent a message that is not MCP's JSON-RPC (%s): refused", why)
            if (reply := invalid_reply(message, why)) is not None:
                await self._to_host_send(reply)
            return
        try:
            await self._from_host(message)
        except Exception:  # a bug: this message fails, the connection stays up
            logger.exception("wrap: unexpected error on a message from the host")
            if "method" in message and "id" in message:
                await self._host_error(message["id"], INTERNAL, "wrap: internal error")

    def _want(self) -> RootSet:
        """The roots a child should have now: the effective roots, or none before they are known."""
        roots = self.port.in_force()
        return roots if roots is not None else RootSet.empty(source="not known yet")

    def _roots_changed(self, old: RootSet | None, new: RootSet | None) -> None:
        self._roots_known = self._roots_known or new is not None
        logger.info("effective roots now: %s", new.describe() if new is not None else "none")
        if self._group is not None and self.init_params is not None:
            self._group.start_soon(self._replace_quietly)

    async def _replace_quietly(self) -> None:
        try:
            await self.child_now()
        except ChildFailed as exc:
            logger.warning("%s", exc)

    # -- children --

    async def child_now(self) -> Child:
        """The child confined to the roots wanted now, started when needed. A child confined to other
        roots is retired at once (its drain starts now), whatever the new one's start takes."""
        while True:
            child = self.current
            if child is not None and child.alive and child.roots == self._want():
                return child
            self._retire_current()
            async with self._start_lock:
                child = self.current
                want = self._want()
                if child is not None and child.alive and child.roots == want:
                    return child
                self._retire_current()
                wait = self._last_start + self.options.restart_interval - anyio.current_time()
                if wait > 0:
                    await anyio.sleep(wait)
                    want = self._want()
                self._last_start = anyio.current_time()
                new = await self._start(want)
                self._retire_current()
                self.current = new
            if new.roots == self._want():
                return new

    def _retire_current(self) -> None:
        old = self.current
        if old is not None and (not old.alive or old.roots != self._want()):
            self.current = None
            assert self._group is not None
            self._group.start_soon(self._retire, old)

    async def _start(self, roots: RootSet) -> Child:
        assert self.init_params is not None
        assert self._group is not None
        options = self.options
        first = None
        if self._first is not None and not roots.paths:
            first, self._first = self._first, None
        child = await Child.spawn(
            options.plan,
            roots,
            next(self._ids),
            write=options.write,
            network=options.network,
            max_bytes=options.max_message_bytes,
            process=first,
        )
        self.children.append(child)
        self._group.start_soon(self._read_child, child)
        self._group.start_soon(child.pump)
        params = dict(self.init_params)
        capabilities = dict(params.get("capabilities") or {})
        capabilities["roots"] = {"listChanged": True}  # wrap answers the child's roots/list itself
        params["capabilities"] = capabilities
        try:
            answer = await child.ask(next(self._ids), "initialize", params, options.start_timeout)
            if "result" not in answer:
                raise ChildFailed(f"the wrapped server refused initialize: {_error_text(answer)}")
            child.init_result = answer["result"]
            await child.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            await self.told.replay(child, self._next_id, options.start_timeout)
        except ChildFailed:
            await self._drop(child)
            raise
        return child

    async def _retire(self, child: Child) -> None:
        """Let an old child finish its calls (at most the drain), then kill it and answer what is left."""
        with anyio.move_on_after(self.options.drain):
            await child.drained()
        lost = dict(child.forwarded)
        child.forwarded.clear()
        await self._drop(child)
        for call in lost.values():
            self._in_flight -= 1
            await self._host_error(
                call.host_id,
                INTERNAL,
                f"the roots changed and {call.method} did not finish within the drain "
                f"({self.options.drain:g}s); the server confined to the old roots was stopped",
            )

    async def _drop(self, child: Child) -> None:
        await child.kill()  # the whole tree: end_tree
        if child in self.children:
            self.children.remove(child)
        if self.current is child:
            self.current = None
        for host_id, pending in list(self._to_host.items()):
            if pending[0] is child:  # its requests to the host: a late answer has nowhere to go
                del self._to_host[host_id]

    def _next_id(self) -> int:
        return next(self._ids)

    async def _read_child(self, child: Child) -> None:
        while True:
            message = await child.lines.receive()
            if message is None:
                break
            try:
                await self._take_from_child(child, message)
            except Exception:  # a bug: this message is lost, the connection stays up
                logger.exception("wrap: unexpected error on a message from child #%d", child.generation)
        if child.process.stdout is not None:
            child.process.stdout.close()
        await child.note_exit()
        lost = dict(child.forwarded)
        child.forwarded.clear()
        for call in lost.values():
            self._in_flight -= 1
            await self._host_error(call.host_id, INTERNAL, f"the wrapped server failed: {child.exit_note}")
        if self.current is child:
            logger.warning(
                "the wrapped server (child #%d) stopped: %s; the next call starts it again",
                child.generation,
                child.exit_note,
            )

    # -- from the child --

    async def _take_from_child(self, child: Child, message: Message | Unparsed) -> None:
        """One message from a child: answered, forwarded, or dropped with a log line."""
        if isinstance(message, Unparsed):
            await self._unparsed_from_child(child, message)
            return
        why = invalid(message)
        if why is not None:
            logger.warning("child #%d sent a message that is not MCP's JSON-RPC (%s)", child.generation, why)
            if (reply := invalid_reply(message, why)) is not None:
                child.tell(reply)
            return
        await self._from_child(child, message)

    async def _unparsed_from_child(self, child: Child, message: Unparsed) -> None:
        """An answer too costly to parse: passed on as it came (its id replaced) when it answers a call
        forwarded on the legacy era; else the call gets an error; anything else is dropped."""
        call = child.take_answer({"id": message.id}) if isinstance(message.id, int) else None
        if call is None:
            logger.warning("dropped from child #%d: %s", child.generation, message.refusal())
            return
        self._in_flight -= 1
        if self.era != modern.MODERN and message.balanced and message.id_span is not None:
            await self.host_writer.send(message.with_id(call.host_id))
            return
        await self._host_error(call.host_id, INTERNAL, f"the wrapped server's answer: {message.refusal()}")

    async def _from_child(self, child: Child, message: Message) -> None:
        method = message.get("method")
        if method is None:
            call = child.take_answer(message)
            if call is not None:
                self._in_flight -= 1
                answer = {k: v for k, v in message.items() if k != "id"}
                if self.era == modern.MODERN:
                    answer = modern.complete(answer, call.method)
                await self._to_host_send({"id": call.host_id, **answer})
            return
        if "id" in message:  # a request from the child
            if method == "roots/list":
                child.tell(result(message["id"], roots_answer(child.roots)))
            elif method == "ping":
                child.tell(result(message["id"], {}))
            elif self.era == modern.MODERN:
                # No back-channel on 2026-07-28 outside a call's round trip; wrap does not carry these.
                child.tell(error(message["id"], METHOD_NOT_FOUND, f"{method}: not available (2026-07-28)"))
            elif len(self._to_host) >= self.options.max_in_flight:
                child.tell(error(message["id"], BUSY, "too many requests to the client in flight"))
            else:
                host_id = f"{HOST_ID_PREFIX}{next(self._host_ids)}"
                self._to_host[host_id] = (child, message["id"], None, [])
                await self._to_host_send({**message, "id": host_id})
            return
        if method == "notifications/cancelled":
            params = message.get("params")
            if isinstance(params, dict):
                for host_id, (owner, child_id, _, _) in list(self._to_host.items()):
                    if owner is child and child_id == params.get("requestId"):
                        self._to_host.pop(host_id, None)
                        await self._to_host_send({**message, "params": {**params, "requestId": host_id}})
                        return
            return
        if method == "notifications/tools/list_changed":
            child.tools_changed()
        if child is self.current or method in ("notifications/progress", "notifications/message"):
            await self._to_host_send(message)

    # -- from the host --

    async def _from_host(self, message: Message) -> None:
        method = message.get("method")
        if method is None:
            pending = (
                self._to_host.pop(str(message.get("id")), None)
                if isinstance(message.get("id"), str)
                else None
            )
            if pending is None:
                return
            child, child_id, event, slot = pending
            if event is not None:
                slot.append(message)
                event.set()
            elif child is not None and child.alive:
                child.tell({**{k: v for k, v in message.items() if k != "id"}, "id": child_id})
            return
        if "id" not in message:
            await self._host_notification(method, message)
            return
        if method == "initialize":
            await self._initialize(message)
            return
        if self._in_flight >= self.options.max_in_flight:
            await self._host_error(
                message["id"], BUSY, f"too many requests in flight (at most {self.options.max_in_flight})"
            )
            return
        self._in_flight += 1
        assert self._group is not None
        self._group.start_soon(self._forward, message)

    async def _host_notification(self, method: str, message: Message) -> None:
        if method == "notifications/initialized":
            # The connection's roots kept fresh for as long as wrap runs (the child was initialized already).
            if self._group is not None and not self.port.initialized_seen_before(self.port.host):
                serve = functools.partial(
                    self.port.initialized, self.port.host, cannot_ask=None, send_now=True
                )
                self._group.start_soon(serve)
        elif method == "notifications/roots/list_changed":
            self.port.roots_changed(self.port.host)
        elif method == "notifications/cancelled":
            params = message.get("params")
            target = params.get("requestId") if isinstance(params, dict) else None
            if not valid_id(target):
                logger.warning("the host cancelled a request by an id that is not one: ignored")
                return
            scope = self._scopes.get(target)
            if scope is not None:
                scope.cancel()
                return
            for child in self.children:
                for child_id, call in list(child.forwarded.items()):
                    if call.host_id == target and isinstance(params, dict):
                        # A cancelled request is answered by no one: it stops counting now, and a late
                        # answer from the child is dropped.
                        child.take_answer({"id": child_id})
                        self._in_flight -= 1
                        cancel = {**message, "params": {**params, "requestId": child_id}}
                        child.tell(modern.to_legacy(cancel) if self.era == modern.MODERN else cancel)
                        return
        elif self.current is not None and self.current.alive:
            self.current.tell(modern.to_legacy(message) if self.era == modern.MODERN else message)

    async def _initialize(self, message: Message) -> None:
        params = message.get("params")
        if self.init_params is not None or not isinstance(params, dict):
            await self._host_error(
                message["id"], INVALID_PARAMS, "initialize: already initialized, or no params"
            )
            return
        self.init_params = params
        self.era = "legacy"
        self.port.open(params)
        self.port.watch(self._roots_changed)
        try:
            child = await self.child_now()
        except ChildFailed as exc:
            await self._host_error(message["id"], INTERNAL, str(exc))
            return
        await self._to_host_send(result(message["id"], child.init_result))

    async def _forward(self, message: Message) -> None:
        host_id, method = message["id"], str(message["method"])
        owned = True  # this task answers the call, and counts it out of the in-flight
        held: tuple[Child, int] | None = None
        try:
            with anyio.CancelScope() as scope:
                self._scopes[host_id] = scope
                try:
                    routed = await self._route(message)
                    if routed is None:
                        return
                    child, message = routed
                    # Counted on the child from here: its drain waits for this call too.
                    held = (child, next(self._ids))
                    child.forwarded[held[1]] = Forwarded(host_id, method)
                    refusal = await checks.refusal(child, message, self._next_id, self.options.start_timeout)
                except ChildFailed as exc:
                    if owned := Child.release(held):
                        await self._host_error(host_id, INTERNAL, str(exc))
                    return
                except Exception:  # a bug: one request fails, the connection stays up
                    logger.exception("wrap: unexpected error while routing %s", method)
                    if owned := Child.release(held):
                        await self._host_error(
                            host_id, INTERNAL, f"wrap: internal error while routing {method}"
                        )
                    return
                if held[1] not in child.forwarded:
                    owned = False  # the drain ended first: the call was answered for
                    return
                if refusal is not None:
                    Child.release(held)
                    await self._refuse(message, refusal)
                    return
                if not child.post({**message, "id": held[1]}):
                    owned = Child.release(held)
                    if owned:
                        await self._host_error(host_id, INTERNAL, "the wrapped server is gone or not reading")
                    return
                owned = False  # the child's answer (or its end) answers it now
                self.told.remember(method, message.get("params"))
        finally:
            self._scopes.pop(host_id, None)
            if owned:
                Child.release(held)
                self._in_flight -= 1

    async def _route(self, message: Message) -> tuple[Child, Message] | None:
        """The child that serves a host request (and the request as it gets it), or None when wrap answered
        it already (a refusal, an error, a 2026-07-28 roots round trip)."""
        host_id, method = message["id"], message["method"]
        if self.init_params is None and modern.is_modern(message):
            self.era = modern.MODERN
            self.port.modern = True
            self.init_params = modern.init_params(message)
        if self.init_params is None:
            await self._host_error(host_id, NOT_INITIALIZED, "wrap: initialize first (no session)")
            return None
        if self.era == modern.MODERN:
            return await self._route_modern(message)
        if method in NEEDS_ROOTS:
            decided = await self.port.decide(message)
            if not isinstance(decided, RootSet):
                await self._answer(message, decided)
                return None
        elif self._roots_known and self.port.refresh_due():
            # Any request after a list_changed waits for its refresh too (a prompt may read files): the
            # child confined to the revoked roots serves nothing that arrived after the change.
            await self.port.settle(message)
        child = await self.child_now()
        if method in ask.ASKED and self.options.ask_timeout is not None:  # --ask: a question first?
            paths = await checks.path_values(child, message, self._next_id, self.options.start_timeout)
            call = ask.call_of(child, message)
            why = await ask.settle(self.port, message, call, paths, self._ask_host, write=self.options.write)
            if why is not None:
                assert self._group is not None
                self._group.start_soon(self._replace_quietly)  # a declined re-ask may withdraw a grant
                await self._refuse(message, why)
                return None
            child = await self.child_now()  # confined to the folders granted now
        return child, message

    async def _route_modern(self, message: Message) -> tuple[Child, Message] | None:
        """2026-07-28: no session, so a file request's roots come with it, by one round trip; other
        requests go to the child confined to no roots."""
        host_id, method = message["id"], message["method"]
        if method == "server/discover":
            await self._to_host_send(result(host_id, modern.discover_result(await self.child_now())))
            return None
        if method not in NEEDS_ROOTS:
            return await self.child_now(), modern.to_legacy(message)
        decided = await self.port.decide(message)  # the client's roots, asked for, the fallback or refused
        if not isinstance(decided, RootSet):
            await self._answer(message, decided)
            return None
        child = await self._pool_child(decided)
        if method in ask.ASKED and self.options.ask_timeout is not None:  # --ask: a question first?
            paths = await checks.path_values(child, message, self._next_id, self.options.start_timeout)
            call, write = ask.call_of(child, message), self.options.write
            outcome = ask.settle_modern(self.port, message, call, paths, decided, write=write)
            if isinstance(outcome, dict):
                await self._answer(message, outcome)
                return None
            child = child if outcome is None else await self._pool_child(outcome)
        return child, modern.to_legacy(modern.without_round_trip(message))

    async def _pool_child(self, roots: RootSet) -> Child:
        async with self._start_lock:
            child = self.pool.get(roots)
            if child is not None:
                return child
            wait = self._last_start + self.options.restart_interval - anyio.current_time()
            if wait > 0:
                await anyio.sleep(wait)
            self._last_start = anyio.current_time()
            child = await self._start(roots)
            for old in self.pool.put(child):
                assert self._group is not None
                self._group.start_soon(self._retire, old)
            return child

    async def _refuse(self, message: Message, text: str) -> None:
        await self._answer(message, self.port.refusal(message, text))

    async def _answer(self, message: Message, answer: Message) -> None:
        """Answer the host's request ``message`` with ``answer`` (a result or an error, without the id)."""
        reply = {"id": message["id"], **answer}
        await self._to_host_send(
            modern.complete(reply, message["method"]) if self.era == modern.MODERN else reply
        )

    # -- to the host --

    async def _ask_host(self, method: str, params: object = None) -> Message:
        """Send wrap's own request to the host; its answer (a result or an error). A request given up
        (cancelled: its bound passed) is withdrawn, and the host told."""
        host_id = f"{HOST_ID_PREFIX}{next(self._host_ids)}"
        event = anyio.Event()
        slot: list[Message] = []
        self._to_host[host_id] = (None, None, event, slot)
        try:
            await self._to_host_send(request(host_id, method, params))
            await event.wait()
        finally:
            if self._to_host.pop(host_id, None) is not None:
                with anyio.move_on_after(1, shield=True):  # a host that reads nothing holds no one
                    cancel = {"requestId": host_id, "reason": "no answer within wrap's bound"}
                    await self._to_host_send({"method": "notifications/cancelled", "params": cancel})
        return slot[0]

    async def _ask_host_roots(self) -> object:
        answer = await self._ask_host("roots/list")
        if "result" not in answer:
            raise RootsError(f"roots/list failed: {_error_text(answer)}")
        return answer["result"]

    async def _host_error(self, host_id: object, code: int, text: str) -> None:
        await self._to_host_send(error(host_id, code, text))

    async def _to_host_send(self, message: Message) -> None:
        await self.host_writer.send({"jsonrpc": "2.0", **message})


def _error_text(answer: Message) -> str:
    problem = answer.get("error")
    if isinstance(problem, dict):
        return str(problem.get("message", problem))[:500]
    return "no result"
