"""Answers to what a host waits for when it starts ``serve`` over stdio.
Given from serve's own earlier answers while a thread imports the SDK.
"""

# What a host waits for when it starts ``mcp-roots serve`` over stdio (``initialize``, then ``tools/list``
# and the other lists it asks for at start), answered from this server's own earlier answers while a thread
# imports the SDK.
#
# Importing the official SDK is most of serve's start-up (``import mcp.server``: about half a second; the
# rest of serve, about a tenth of that). So the first time a command line of serve answers those requests,
# ``Recorder`` keeps the SDK's answers in a file of the user's cache folder (``$XDG_CACHE_HOME/mcp-roots/
# serve``), named by a digest of everything they depend on: the command line, the Python, the stat of every
# file of mcp-roots and the installed SDK's distributions (``StartupFile``). On the next start with the same
# digest, ``answer_early`` gives them itself: it answers ``initialize`` (for a protocol version recorded) and,
# after ``notifications/initialized``, the lists recorded (``LISTS``: serve's tools, prompts and resources,
# which no call changes), while ``SdkLoader`` imports the SDK. When the SDK is in,
# or at the first message it has no recorded answer for, it steps aside: the SDK's server gets the client's
# ``initialize`` and ``initialized`` replayed first, and ``Recorder`` drops the SDK's answer to the replayed
# ``initialize`` (it was given already; a different one is logged and the file removed).
#
# Anything in doubt goes to the SDK: a message not exactly one of those, a version not recorded, a file that
# is not a regular file of this user that only this user can write, too large, or not as this module writes
# it. The file is a cache: deleting it costs one slow start.

from __future__ import annotations

import importlib
import json
import logging
import os
import secrets
import select
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeGuard

import anyio

from ._cachefile import StartupFile, is_answer_to
from ._stdio import StdinLines, StdoutWriter, write_all

__all__ = ["LISTS", "Handover", "Recorder", "SdkLoader", "StartupFile", "answer_early", "is_id", "parse"]

logger = logging.getLogger("mcp_roots")

#: The messages a recording looks at before it gives up (a host sends initialize and tools/list first).
_RECORD_MESSAGES = 16
#: How long a client that leaves at once keeps the SDK running to answer the checks of the lists given early.
_CHECK_SECONDS = 10.0
#: The modules the SDK side of serve needs, imported by ``SdkLoader`` while the early answers are given.
_SDK_MODULES = ("mcp_roots.filesystem._server", "mcp.server.stdio")
_READ_CHUNK = 64 * 1024
#: The longest line looked into (serve's tools/list answer is about 13 KB): longer ones pass untouched.
_MAX_PARSE = 1024 * 1024
#: The requests without parameters whose answers are recorded beside ``initialize``: what hosts ask at start
#: (Claude Desktop asks the first three at once), none of which a call can change on serve.
LISTS = ("tools/list", "prompts/list", "resources/list", "resources/templates/list")
_KNOWN = frozenset(("initialize", *LISTS))


def is_id(value: object) -> TypeGuard[int | str]:
    return isinstance(value, (int, str)) and not isinstance(value, bool)


class SdkLoader:
    """Imports the SDK side of serve in a thread; ``ready`` becomes readable when it is done."""

    def __init__(self) -> None:
        self.ready, self._done = os.pipe()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._load, name="mcp-roots-sdk-import", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _load(self) -> None:
        try:
            for module in _SDK_MODULES:
                importlib.import_module(module)
        except BaseException as exc:  # handed to the main thread, which reports it
            self.error = exc
        finally:
            os.write(self._done, b"\0")

    def join(self) -> None:
        """Wait for the import; raise what it raised."""
        self._thread.join()
        os.close(self.ready)
        os.close(self._done)
        if self.error is not None:
            raise self.error


@dataclass
class Handover:
    """What ``answer_early`` leaves the SDK: the client's lines to replay first, and the id of the
    ``initialize`` already answered (with the answer given)."""

    replay: list[str] = field(default_factory=list)
    initialize_id: int | str | None = None
    given: dict[str, Any] | None = None
    #: the list answers given early, by method: the SDK is asked each one again and must agree
    lists: dict[str, Any] = field(default_factory=dict)
    #: the ids of requests of the lean session's not answered yet: the client's answers to them are dropped
    drop: set[str] = field(default_factory=set)
    #: the client left while the lean session served it: the SDK only checks the answers given early
    client_left: bool = False

    def snapshot(self) -> Handover:
        """A copy of the lines to replay and the answers given so far."""
        return Handover(list(self.replay), self.initialize_id, self.given, dict(self.lists))


def answer_early(
    lines: StdinLines, wire_in: int, wire_out: int, answers: Mapping[str, Mapping[str, Any]], ready: int
) -> Handover:
    """Answer ``initialize`` and ``tools/list`` from ``answers`` until ``ready`` is readable or a message
    comes that has no recorded answer; that message and all after it stay in ``lines`` for the SDK."""
    handover = Handover()
    version: str | None = None
    initialized = False
    switch = sys.getswitchinterval()
    sys.setswitchinterval(0.0005)  # the import thread holds the interpreter: take it back soon
    poll = select.poll()
    poll.register(wire_in, select.POLLIN)
    poll.register(ready, select.POLLIN)
    try:
        while True:
            if any(fd == ready for fd, _ in poll.poll()):
                return _stop(lines, handover, [])
            lines.feed(os.read(wire_in, _READ_CHUNK))
            pending = lines.ready()
            while pending:
                message = parse(pending[0])
                method = message.get("method")
                ident = message.get("id")
                params = message.get("params")
                if version is None and method == "initialize" and is_id(ident) and isinstance(params, dict):
                    requested = params.get("protocolVersion")
                    if not isinstance(requested, str) or requested not in answers:
                        return _stop(lines, handover, pending)
                    given = dict(answers[requested]["initialize"])
                    if not _answer(wire_out, ident, given):
                        return _stop(lines, handover, pending)  # the SDK meets the closed pipe itself
                    version, handover.initialize_id, handover.given = requested, ident, given
                elif (
                    version is not None
                    and not initialized
                    and method == "notifications/initialized"
                    and "id" not in message
                ):
                    initialized = True
                elif (
                    initialized
                    and version is not None
                    and method in LISTS  # first: a method that is not a string is in no mapping
                    and method in answers[version]
                    and is_id(ident)
                    and params in (None, {})
                ):
                    if not _answer(wire_out, ident, answers[version][method]):
                        return _stop(lines, handover, pending)
                    handover.lists[method] = answers[version][method]
                    pending.pop(0)
                    continue
                else:
                    return _stop(lines, handover, pending)
                handover.replay.append(pending.pop(0))
            if lines.at_eof:
                return _stop(lines, handover, [])
    finally:
        sys.setswitchinterval(switch)


def parse(line: str) -> dict[str, Any]:
    """The JSON-RPC message of ``line``, or ``{}`` (what no rule here matches): for one that is not JSON,
    nests deeper than the parser goes, or is longer than any message recorded or answered early."""
    if len(line) > _MAX_PARSE:
        return {}
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        return {}
    return message if isinstance(message, dict) and message.get("jsonrpc") == "2.0" else {}


def _answer(wire_out: int, ident: int | str, result: Mapping[str, Any]) -> bool:
    """Write the answer; False when the client has closed its end."""
    message = {"jsonrpc": "2.0", "id": ident, "result": result}
    text = json.dumps(message, ensure_ascii=False, separators=(",", ":"))
    try:
        write_all(wire_out, (text + "\n").encode("utf-8", "surrogateescape"))
    except OSError:
        return False
    return True


def _stop(lines: StdinLines, handover: Handover, pending: list[str]) -> Handover:
    lines.put_back(handover.replay + pending)
    return handover


class Recorder:
    """The SDK's stdin and stdout for serve, as ``StdinLines`` and ``StdoutWriter`` are, that also record the
    answers to ``initialize`` and the ``LISTS`` that ``file`` lacks for the version the client asked for,
    and check every answer given early against the SDK's (a different one: logged, the file removed).

    An answer is recorded only when it is the SDK's answer to the very request recorded: a message it cannot
    read, an id that is not a plain integer or string, or an id sent again before its answer, and nothing
    more of this connection is recorded.
    """

    def __init__(
        self,
        stdin: StdinLines,
        stdout: StdoutWriter,
        file: StartupFile | None,
        recorded: Mapping[str, Mapping[str, Any]] | None = None,
        handover: Handover | None = None,
    ) -> None:
        self._stdin = stdin
        self._stdout = stdout
        self._file = file
        self._recorded = recorded or {}
        self._handover = handover
        self._seen = 0 if file is not None else _RECORD_MESSAGES
        #: the client's requests not answered yet (by their id's JSON), while anything is recorded
        self._open: set[str] = set()
        self._asked: dict[str, str] = {}
        self._version: str | None = None
        self._got: dict[str, Any] = {}
        # The requests that ask the SDK the lists given early, sent after the replayed lines, under ids no
        # client can know; their answers are compared and never reach the client.
        self._replay_left = 0 if handover is None else len(handover.replay)
        self._checks: dict[str, str] = {}
        self._check_lines: list[str] = []
        self._all_checked: anyio.Event | None = None
        for method in () if handover is None else handover.lists:
            ident = f"mcp-roots-check-{secrets.token_hex(16)}"
            self._checks[ident] = method
            self._check_lines.append(json.dumps({"jsonrpc": "2.0", "id": ident, "method": method}) + "\n")

    def __aiter__(self) -> Recorder:
        return self

    async def __anext__(self) -> str:
        if self._check_lines and not self._replay_left:
            return self._check_lines.pop(0)
        while True:
            try:
                line = await self._stdin.__anext__()
            except StopAsyncIteration:
                if self._checks:  # the client left at once: the SDK still answers the checks before it stops
                    with anyio.move_on_after(_CHECK_SECONDS):
                        await self._checked().wait()
                raise
            if not self._answers_lean(line):
                break
        if self._replay_left:
            self._replay_left -= 1
        if self._seen < _RECORD_MESSAGES or self._open:
            self._seen += 1
            self._look_in(parse(line))
        return line

    def _answers_lean(self, line: str) -> bool:
        """Whether ``line`` answers a request of the lean session's (not the SDK's to see)."""
        drop = None if self._handover is None else self._handover.drop
        if not drop:
            return False
        message = parse(line)
        ident = message.get("id")
        if "method" in message or not isinstance(ident, str) or ident not in drop:
            return False
        drop.discard(ident)
        return True

    def _checked(self) -> anyio.Event:
        if self._all_checked is None:
            self._all_checked = anyio.Event()
        return self._all_checked

    def _stop_recording(self) -> None:
        self._seen = _RECORD_MESSAGES
        self._asked.clear()
        self._open.clear()

    def _look_in(self, message: dict[str, Any]) -> None:
        if not message:  # not JSON-RPC as this module reads it: what the SDK makes of it is unknown
            self._stop_recording()
            return
        if "method" not in message or "id" not in message:
            return  # a notification, or the client's answer to a request of the server's
        ident = message["id"]
        key = json.dumps(ident)
        if not is_id(ident) or key in self._open:
            self._stop_recording()
            return
        method = message["method"]
        params = message.get("params")
        within = self._seen <= _RECORD_MESSAGES
        if within:
            self._open.add(key)
        if not within:
            return
        if method == "initialize" and isinstance(params, dict) and self._version is None:
            requested = params.get("protocolVersion")
            if isinstance(requested, str) and len(requested) <= 32:
                self._version = requested
                if "initialize" not in self._recorded.get(requested, {}):
                    self._asked[key] = "initialize"
        elif (
            method in LISTS
            and params in (None, {})
            and self._version is not None
            and method not in self._recorded.get(self._version, {})
        ):
            self._asked[key] = method

    async def write(self, text: str) -> int:
        if self._handover is not None and (self._handover.initialize_id is not None or self._checks):
            message = parse(text)
            if "method" not in message and message.get("id") is not None:
                if message["id"] == self._handover.initialize_id:
                    self._drop("initialize", message, self._handover.given)
                    self._handover.initialize_id = None
                    self._open.discard(json.dumps(message["id"]))
                    return len(text)
                method = self._checks.pop(message["id"], None) if isinstance(message["id"], str) else None
                if method is not None:
                    self._drop(method, message, self._handover.lists[method])
                    if not self._checks:
                        self._checked().set()
                    return len(text)
        if self._open:
            self._look_out(parse(text))
        return await self._stdout.write(text)

    def _drop(self, method: str, message: dict[str, Any], given: Any) -> None:
        """The SDK's answer to a request answered early: not sent again; a different one is logged and the
        file removed."""
        if message.get("result") != given:
            logger.warning(
                "serve: the SDK's answer to %s differs from the one recorded in %s, which was given; the "
                "file is removed and the next start records it again",
                method,
                None if self._file is None else self._file.path,
            )
            if self._file is not None:
                self._file.discard()

    def _look_out(self, message: dict[str, Any]) -> None:
        if "method" in message or "id" not in message:
            return  # a request of the server's own (roots/list) may carry the id of one of the client's
        key = json.dumps(message["id"])
        self._open.discard(key)
        method = self._asked.pop(key, None)
        result = message.get("result")
        if method is None or self._version is None or not is_answer_to(method, result):
            return
        self._got[method] = result
        whole = {**self._recorded.get(self._version, {}), **self._got}
        if self._file is not None and "initialize" in whole and "tools/list" in whole:
            self._file.save({self._version: self._got})

    async def flush(self) -> None:
        await self._stdout.flush()
