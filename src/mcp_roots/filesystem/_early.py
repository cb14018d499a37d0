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

import contextlib
import hashlib
import importlib
import importlib.util
import json
import logging
import os
import select
import sys
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeGuard

from ._stdio import StdinLines, StdoutWriter, write_all

__all__ = ["LISTS", "Handover", "Recorder", "SdkLoader", "StartupFile", "answer_early"]

logger = logging.getLogger("mcp_roots")

_FORMAT = 1
_MAX_FILE_BYTES = 4 * 1024 * 1024
_MAX_VERSIONS = 8
_MAX_FILES = 32
#: The messages a recording looks at before it gives up (a host sends initialize and tools/list first).
_RECORD_MESSAGES = 16
#: The distributions whose installed version and files the answers depend on.
_SDK_PACKAGES = ("mcp", "mcp_types", "pydantic", "pydantic_core")
#: The modules the SDK side of serve needs, imported by ``SdkLoader`` while the early answers are given.
_SDK_MODULES = ("mcp_roots.filesystem._server", "mcp.server.stdio")
_READ_CHUNK = 64 * 1024
#: The longest line looked into (serve's tools/list answer is about 13 KB): longer ones pass untouched.
_MAX_PARSE = 1024 * 1024
#: The requests without parameters whose answers are recorded beside ``initialize``: what hosts ask at start
#: (Claude Desktop asks the first three at once), none of which a call can change on serve.
LISTS = ("tools/list", "prompts/list", "resources/list", "resources/templates/list")
_KNOWN = frozenset(("initialize", *LISTS))


def _is_id(value: object) -> TypeGuard[int | str]:
    return isinstance(value, (int, str)) and not isinstance(value, bool)


class StartupFile:
    """The file that holds one serve command line's recorded answers, named by their digest."""

    def __init__(self, path: Path, key: str) -> None:
        self.path = path
        self.key = key

    @classmethod
    def for_command(cls, options: Mapping[str, Any], base: str | None = None) -> StartupFile:
        """The file for a serve run with these ``options`` (the parsed command line)."""
        if base is None:
            cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
            base = os.path.join(cache, "mcp-roots", "serve")
        digest = hashlib.sha256()
        shown = sorted((name, repr(value)) for name, value in options.items())
        digest.update(json.dumps([sys.version, sys.executable, shown]).encode("utf-8", "surrogateescape"))
        for item in _fingerprints():
            digest.update(item.encode("utf-8", "surrogateescape") + b"\0")
        key = digest.hexdigest()
        return cls(Path(base) / f"{key[:32]}.json", key)

    def load(self) -> dict[str, dict[str, Any]]:
        """The recorded answers by the protocol version the client asked for; empty when there are none or
        the file is not trusted (a reason at debug level)."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
        except OSError:
            return {}
        try:
            info = os.fstat(fd)
            if not (
                (info.st_mode & 0o170000) == 0o100000
                and info.st_uid == os.geteuid()
                and not info.st_mode & 0o022
                and info.st_size <= _MAX_FILE_BYTES
            ):
                logger.debug("serve: not using %s: not a regular file only this user can write", self.path)
                return {}
            data = os.read(fd, _MAX_FILE_BYTES + 1)
        except OSError:
            return {}
        finally:
            os.close(fd)
        try:
            stored = json.loads(data)
            answers = stored["answers"]
            if stored["format"] != _FORMAT or stored["key"] != self.key or not isinstance(answers, dict):
                raise ValueError("another format or key")
            for version, recorded in answers.items():
                if not (
                    isinstance(version, str)
                    and isinstance(recorded, dict)
                    and isinstance(recorded.get("initialize"), dict)
                    and isinstance(recorded.get("tools/list"), dict)
                    and all(m in _KNOWN and isinstance(r, dict) for m, r in recorded.items())
                ):
                    raise ValueError(f"answers for {version!r} incomplete")
        except (ValueError, KeyError, TypeError) as exc:
            logger.debug("serve: not using %s: %s", self.path, exc)
            return {}
        return answers

    def save(self, answers: Mapping[str, Mapping[str, Any]]) -> None:
        """Write ``answers`` (merged over what the file holds, request by request), 0600, by rename; keep the
        folder to the newest files. Best effort: a folder that cannot be written (a confined server) only
        costs speed."""
        merged = self.load()
        for version, recorded in answers.items():
            merged[version] = {**merged.get(version, {}), **recorded}
        if len(merged) > _MAX_VERSIONS:
            return
        text = json.dumps({"format": _FORMAT, "key": self.key, "answers": merged}, ensure_ascii=False)
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        try:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW
            fd = os.open(temporary, flags, 0o600)
            try:
                write_all(fd, text.encode("utf-8", "surrogateescape"))
            finally:
                os.close(fd)
            os.replace(temporary, self.path)
            _prune(self.path.parent)
        except OSError as exc:
            logger.debug("serve: start-up answers not kept in %s: %s", self.path, exc)
            with contextlib.suppress(OSError):
                os.unlink(temporary)

    def discard(self) -> None:
        with contextlib.suppress(OSError):
            os.unlink(self.path)


def _fingerprints() -> Iterable[str]:
    """What the answers depend on besides the command line: the stat of every file of mcp-roots, and each
    SDK distribution's installed version and record (a new install rewrites its RECORD)."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    folders = [here]
    while folders:
        with os.scandir(folders.pop()) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False) and entry.name != "__pycache__":
                    folders.append(entry.path)
                elif entry.name.endswith(".py"):
                    info = entry.stat()
                    yield f"{entry.path}:{info.st_mtime_ns}:{info.st_size}"
    listed: dict[str, list[str]] = {}
    for name in _SDK_PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.origin:
            yield f"{name}:absent"
            continue
        parent = os.path.dirname(os.path.dirname(spec.origin))
        if parent not in listed:
            try:
                listed[parent] = sorted(n for n in os.listdir(parent) if n.endswith(".dist-info"))
            except OSError:
                listed[parent] = []
        prefix = name.replace("_", "-").lower() + "-"
        for dist in listed[parent]:
            if dist.replace("_", "-").lower().startswith(prefix) and dist[len(prefix)].isdigit():
                try:
                    info = os.stat(os.path.join(parent, dist, "RECORD"))
                except OSError:
                    yield f"{name}:{dist}:no record"
                else:
                    yield f"{name}:{dist}:{info.st_mtime_ns}:{info.st_size}:{info.st_ino}"
        yield f"{name}:{spec.origin}"


def _prune(folder: Path) -> None:
    files = sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime_ns, reverse=True)
    for old in files[_MAX_FILES:]:
        with contextlib.suppress(OSError):
            old.unlink()


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
                message = _parse(pending[0])
                method = message.get("method")
                ident = message.get("id")
                params = message.get("params")
                if version is None and method == "initialize" and _is_id(ident) and isinstance(params, dict):
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
                    and _is_id(ident)
                    and params in (None, {})
                ):
                    if not _answer(wire_out, ident, answers[version][method]):
                        return _stop(lines, handover, pending)
                    pending.pop(0)
                    continue
                else:
                    return _stop(lines, handover, pending)
                handover.replay.append(pending.pop(0))
            if lines.at_eof:
                return _stop(lines, handover, [])
    finally:
        sys.setswitchinterval(switch)


def _parse(line: str) -> dict[str, Any]:
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
    and drop the SDK's answer to an ``initialize`` already given early."""

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
        self._asked: dict[int | str, str] = {}
        self._version: str | None = None
        self._got: dict[str, Any] = {}

    def __aiter__(self) -> Recorder:
        return self

    async def __anext__(self) -> str:
        line = await self._stdin.__anext__()
        if self._seen < _RECORD_MESSAGES:
            self._seen += 1
            self._look_in(_parse(line))
        return line

    def _look_in(self, message: dict[str, Any]) -> None:
        ident = message.get("id")
        method = message.get("method")
        params = message.get("params")
        if not _is_id(ident):
            return
        if method == "initialize" and isinstance(params, dict) and self._version is None:
            requested = params.get("protocolVersion")
            if isinstance(requested, str) and len(requested) <= 32:
                self._version = requested
                if "initialize" not in self._recorded.get(requested, {}):
                    self._asked[ident] = "initialize"
        elif (
            method in LISTS
            and params in (None, {})
            and self._version is not None
            and method not in self._recorded.get(self._version, {})
        ):
            self._asked[ident] = method

    async def write(self, text: str) -> int:
        if self._handover is not None and self._handover.initialize_id is not None:
            message = _parse(text)
            if message.get("id") == self._handover.initialize_id and "method" not in message:
                self._drop(message)
                return len(text)
        if self._asked:
            self._look_out(_parse(text))
        return await self._stdout.write(text)

    def _drop(self, message: dict[str, Any]) -> None:
        assert self._handover is not None
        if message.get("result") != self._handover.given:
            logger.warning(
                "serve: the SDK's answer to initialize differs from the one recorded in %s, which was "
                "given; the file is removed and the next start records it again",
                None if self._file is None else self._file.path,
            )
            if self._file is not None:
                self._file.discard()
        self._handover.initialize_id = None

    def _look_out(self, message: dict[str, Any]) -> None:
        ident = message.get("id")
        # A request of the server's own (roots/list) may carry the id of one of the client's.
        method = self._asked.pop(ident, None) if _is_id(ident) and "method" not in message else None
        result = message.get("result")
        if method is None or self._version is None or not isinstance(result, dict):
            return
        self._got[method] = result
        whole = {**self._recorded.get(self._version, {}), **self._got}
        if self._file is not None and "initialize" in whole and "tools/list" in whole:
            self._file.save({self._version: self._got})

    async def flush(self) -> None:
        await self._stdout.flush()
