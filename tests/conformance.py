"""The adapter conformance table: every behaviour of the guarded call, written once, run on every framework
entry through a :class:`Harness` (as anyio runs its tests on every backend through ``anyio_backend``).

tests/adapters/test_conformance.py runs the table for mcp 2.x ``MCPServer``, low-level ``Server`` and fastmcp
4.x; tests/mcp1/test_conformance_mcp1.py for mcp 1.x ``FastMCP`` (in .venv-mcp1). No MCP SDK is imported
here. A harness that lacks a method cannot be built (``Harness`` is abstract), and every row runs on every
harness: a row missing on one adapter is a failing test.

The transport is the table's other dimension: every row runs in memory; the rows that a transport could
break (the boundary, the roots lifecycle, isolation between connections) name ``EVERY_TRANSPORT`` and run
over stdio and streamable HTTP too. Those are real transports carrying the in-process server the row built:
the SDK's stdio transport over two OS pipes (:func:`over_pipes`), and the server's streamable HTTP app under
uvicorn on 127.0.0.1 (:func:`http_url`), with the SDK's own client on the other end.
"""

from __future__ import annotations

import abc
import copy
import functools
import inspect
import logging
import os
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import IO, Annotated, Any, Optional, overload

import anyio
import anyio.lowlevel
import pytest
import uvicorn
from pydantic import BaseModel, Field, ValidationError

from mcp_roots import RootsGuard, path_to_uri

from .kit import Tree

__all__ = ["EVERY_TRANSPORT", "ROWS", "TRANSPORTS", "Harness", "Session", "http_url", "over_pipes"]

MEMORY, STDIO, HTTP = "memory", "stdio", "http"
EVERY_TRANSPORT = (MEMORY, STDIO, HTTP)

OUTSIDE_DEFAULT = "/etc/passwd"
"""An absolute default outside every root of the tests (a default the guard must check too)."""


class Session(abc.ABC):
    """One client connection: tool calls and resource reads as (is_error, text), and how many roots/list
    requests the client answered."""

    roots_requests: int = 0
    paths: list[Path]
    """The client's roots: change them, then call :meth:`roots_changed`."""

    @abc.abstractmethod
    async def call(self, tool: str, **arguments: Any) -> tuple[bool, str]: ...

    @abc.abstractmethod
    async def prompt(self, name: str, **arguments: str) -> tuple[bool, str]:
        """A prompts/get: (False, the first message's text), or (True, the error's message)."""

    @abc.abstractmethod
    async def roots_changed(self) -> None:
        """Send notifications/roots/list_changed."""

    @abc.abstractmethod
    async def input_schema(self, tool: str) -> dict[str, Any]: ...

    @abc.abstractmethod
    async def read(self, uri: str) -> tuple[bool, str]:
        """A resources/read; a JSON-RPC or framework error is (True, its message)."""


class Harness(abc.ABC):
    """One framework entry: how to build a server, register a tool or resource template (with
    ``@guard.paths`` below or above the framework's decorator), and connect a client in an era."""

    name: str
    context_type: Any
    """The type a tool annotates its context parameter with (what it passes to ``guard.roots(ctx)``)."""
    eras: tuple[str, ...] = ("legacy", "modern")
    registry: bool = True
    """False where the server keeps no registry of functions (a low-level server): no audit, no strict."""
    template_above_runs: bool = True
    """False where @guard.paths above the resource decorator cannot be put in place (fastmcp 4 keeps its own
    wrapper of the bare function): the read is refused, naming the fix."""

    @abc.abstractmethod
    def server(self, guard: RootsGuard | None, *, install: bool = True) -> Any: ...

    @abc.abstractmethod
    def register(self, server: Any, fn: Callable[..., Any]) -> Any:
        """Register ``fn`` as a tool with the framework's decorator; return what the decorator returned."""

    @abc.abstractmethod
    def register_template(self, server: Any, uri_template: str, fn: Callable[..., Any]) -> Any:
        """Register ``fn`` as a resource template (``text://{name}``)."""

    @abc.abstractmethod
    def register_prompt(self, server: Any, fn: Callable[..., Any]) -> Any:
        """Register ``fn`` as a prompt with the framework's decorator."""

    @abc.abstractmethod
    def register_file_resources(self, server: Any, paths: list[Path]) -> None:
        """Serve each of ``paths`` as a ``file:`` resource that reads it (unguarded: the guard checks the
        URI)."""

    transport: str = MEMORY
    """What :meth:`session` connects over when not told: the test sets it with :meth:`over`."""

    @abc.abstractmethod
    def session(
        self,
        server: Any,
        era: str,
        roots: list[Path] | None,
        *,
        failing: bool = False,
        transport: str | None = None,
    ) -> AbstractAsyncContextManager[Session]:
        """A connected client in ``era`` with ``roots`` (None: no roots capability) over ``transport``
        (``MEMORY``, ``STDIO`` or ``HTTP``; None: :attr:`transport`); ``failing``: it declares roots but
        answers every roots/list with an error (roots switched off in the host)."""

    def over(self, transport: str) -> Harness:
        """This harness, its sessions connecting over ``transport``."""
        harness = copy.copy(self)
        harness.transport = transport
        return harness

    def tool(
        self, server: Any, guard: RootsGuard | None, fn: Callable[..., Any], *names: str, order: str = "below"
    ) -> None:
        """Register ``fn`` guarded by ``guard.paths(*names)`` below or above the tool decorator (unguarded
        when ``guard`` is None)."""
        if guard is None:
            self.register(server, fn)
        elif order == "below":
            self.register(server, guard.paths(*names)(fn))
        else:
            guard.paths(*names)(self.register(server, fn))

    def template(
        self, server: Any, guard: RootsGuard, fn: Callable[..., Any], *names: str, order: str = "below"
    ) -> None:
        if order == "below":
            self.register_template(server, "text://{name}", guard.paths(*names)(fn))
        else:
            guard.paths(*names)(self.register_template(server, "text://{name}", fn))


class LowLevelHarness(Harness):
    """An entry for a framework's low-level server, whose user writes the dispatch: the server's
    ``handlers`` (tools, templates, prompts and files by name) are what its handlers dispatch to, and
    ``@guard.paths`` goes on the functions it calls (no framework decorator to stand above or below)."""

    registry = False

    def register(self, server: Any, fn: Callable[..., Any]) -> Any:
        server.handlers.tools[fn.__name__] = fn
        return fn

    def register_template(self, server: Any, uri_template: str, fn: Callable[..., Any]) -> Any:
        server.handlers.templates[uri_template] = fn
        return fn

    def register_prompt(self, server: Any, fn: Callable[..., Any]) -> Any:
        server.handlers.prompts[fn.__name__] = fn
        return fn

    def tool(
        self, server: Any, guard: RootsGuard | None, fn: Callable[..., Any], *names: str, order: str = "below"
    ) -> None:
        # Both orders register the guarded function: there is no decorator to order it against.
        self.register(server, fn if guard is None else guard.paths(*names)(fn))

    def template(
        self, server: Any, guard: RootsGuard, fn: Callable[..., Any], *names: str, order: str = "below"
    ) -> None:
        self.register_template(server, "text://{name}", guard.paths(*names)(fn))

    def register_file_resources(self, server: Any, paths: list[Path]) -> None:
        for path in paths:
            server.handlers.files[path_to_uri(path)] = path


def make_guard(tree: Tree, **options: Any) -> RootsGuard:
    """A guard whose only fallback source is what the row configures."""
    options.setdefault("environ", {})
    options.setdefault("user_config_dir", tree.base / "no-config")
    options.setdefault("first_answer_timeout", 30)
    return RootsGuard(**options)


Row = Callable[[Harness, Tree, pytest.LogCaptureFixture], Awaitable[None]]
ROWS: dict[str, Row] = {}
TRANSPORTS: dict[str, tuple[str, ...]] = {}
"""The transports each row runs over (in memory unless it names more)."""


@overload
def row(fn: Row) -> Row: ...
@overload
def row(*, transports: tuple[str, ...]) -> Callable[[Row], Row]: ...
def row(fn: Row | None = None, *, transports: tuple[str, ...] = (MEMORY,)) -> Any:
    """Add ``fn`` to the table (``@row``, or ``@row(transports=EVERY_TRANSPORT)``)."""

    def add(fn: Row) -> Row:
        ROWS[fn.__name__] = fn
        TRANSPORTS[fn.__name__] = transports
        return fn

    return add if fn is None else add(fn)


# --- the transports: real pipes and a real socket, the in-process server on the other end -----------------

SHUTDOWN = 10.0
"""Seconds a transport may take to close (a bound, not a timing check)."""


def _pipe_files() -> list[IO[str]]:
    """The server's stdin and stdout, the client's stdin and stdout: two OS pipes, crossed."""
    to_server, to_client = os.pipe(), os.pipe()
    return [
        open(to_server[0], encoding="utf-8"),
        open(to_client[1], "w", encoding="utf-8"),
        open(to_client[0], encoding="utf-8"),
        open(to_server[1], "w", encoding="utf-8"),
    ]


@asynccontextmanager
async def over_pipes(
    serve: Callable[[anyio.AsyncFile[str], anyio.AsyncFile[str]], Awaitable[None]],
) -> AsyncIterator[tuple[anyio.AsyncFile[str], anyio.AsyncFile[str]]]:
    """Two OS pipes, as a stdio server and its client see them: runs ``serve(stdin, stdout)`` (the SDK's
    stdio transport over them) and yields the client's (stdin, stdout). On exit the client's stdout closes,
    so the server reads EOF and ends as a stdio server does; its stdout then closes, the client's EOF."""
    files = _pipe_files()
    server_in, server_out, client_in, client_out = (anyio.wrap_file(f) for f in files)
    try:
        with anyio.CancelScope() as bound:
            async with anyio.create_task_group() as tg:

                async def run_server() -> None:
                    try:
                        await serve(server_in, server_out)
                    finally:
                        with anyio.CancelScope(shield=True):
                            await server_out.aclose()

                tg.start_soon(run_server)
                try:
                    yield client_in, client_out
                finally:
                    with anyio.CancelScope(shield=True):
                        await client_out.aclose()
                    bound.deadline = anyio.current_time() + SHUTDOWN
        assert not bound.cancelled_caught, "the stdio server did not end on EOF"
    finally:
        for file in files:
            file.close()


@asynccontextmanager
async def client_end(
    stdin: anyio.AsyncFile[str],
    stdout: anyio.AsyncFile[str],
    parse: Callable[[str], Any],
    dump: Callable[[Any], str],
) -> AsyncIterator[tuple[Any, Any]]:
    """The client's end of the pipes (an SDK transport's read and write streams): one JSON-RPC message a
    line each way, framed as the SDK's stdio client frames a subprocess's. ``parse(line)`` gives the SDK's
    ``SessionMessage`` (a line it refuses raises pydantic's ``ValidationError``, handed to the session as the
    SDK's transport hands it); ``dump(session_message)`` its line. On exit its stdout closes: the server's
    EOF."""
    to_session, read = anyio.create_memory_object_stream[Any](0)
    write, from_session = anyio.create_memory_object_stream[Any](0)

    async def reader() -> None:
        async with to_session:
            async for line in stdin:
                try:
                    message = parse(line)
                except ValidationError as exc:
                    await to_session.send(exc)
                    continue
                await to_session.send(message)

    async def writer() -> None:
        async with from_session:
            async for message in from_session:
                await stdout.write(dump(message) + "\n")
                await stdout.flush()

    async with anyio.create_task_group() as tg:
        tg.start_soon(reader)
        tg.start_soon(writer)
        try:
            yield read, write
        finally:
            with anyio.CancelScope(shield=True):
                await stdout.aclose()
            tg.cancel_scope.cancel()  # the reader's blocking read returns at the server's EOF


class _Hosted:
    """One server object's HTTP server while sessions use it (two concurrent sessions share it)."""

    def __init__(self) -> None:
        self.url = ""
        self.users = 1
        self.ready = anyio.Event()
        self.idle = anyio.Event()


_HOSTED: dict[int, _Hosted] = {}


@asynccontextmanager
async def http_url(server: object, app: Callable[[], Any], path: str = "/mcp") -> AsyncIterator[str]:
    """The URL of ``server``'s streamable HTTP endpoint: ``app()`` (its ASGI app) under uvicorn on
    127.0.0.1, on this event loop (asyncio: uvicorn's only one). Sessions open while it runs share it, as
    the clients of one HTTP server do; the last one out stops it."""
    hosted = _HOSTED.get(id(server))
    if hosted is not None:
        hosted.users += 1
        try:
            with anyio.fail_after(SHUTDOWN):
                await hosted.ready.wait()
            yield hosted.url
        finally:
            hosted.users -= 1
            if not hosted.users:
                hosted.idle.set()
        return
    hosted = _HOSTED[id(server)] = _Hosted()
    try:
        async with _uvicorn(app()) as base:
            hosted.url = base + path
            hosted.ready.set()
            try:
                yield hosted.url
            finally:
                hosted.users -= 1
                if hosted.users:
                    await hosted.idle.wait()
    finally:
        del _HOSTED[id(server)]


@asynccontextmanager
async def _uvicorn(app: Any) -> AsyncIterator[str]:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    port = listener.getsockname()[1]
    config = uvicorn.Config(
        app,
        lifespan="on",
        log_level="warning",
        limit_concurrency=32,
        timeout_graceful_shutdown=2,
        timeout_keep_alive=1,
    )
    server = uvicorn.Server(config)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.serve, [listener])
            with anyio.fail_after(SHUTDOWN):
                while not server.started:  # noqa: ASYNC110 (uvicorn sets a flag, no event)
                    await anyio.sleep(0.005)
            try:
                yield f"http://127.0.0.1:{port}"
            finally:
                server.should_exit = True
    finally:
        listener.close()


async def read_text(path: str) -> str:
    return Path(path).read_text()  # noqa: ASYNC240


class Job(BaseModel):
    """A tool argument with a path inside it (a locator's field)."""

    path: str
    label: str = ""


def _job(job: Any) -> Job:
    return job if isinstance(job, Job) else Job.model_validate(job)  # a low-level handler gets the JSON


# --- the rows ----------------------------------------------------------------------------------------------


@row(transports=EVERY_TRANSPORT)
async def inside_read_outside_refused(h: Harness, tree: Tree, caplog: pytest.LogCaptureFixture) -> None:
    """The control first: the unguarded twin leaks. Then each way out is refused, on each era."""
    naive = h.server(None)
    h.tool(naive, None, read_text)
    for era in h.eras:
        async with h.session(naive, era, [tree.project]) as s:
            assert await s.call("read_text", path=str(tree.outside / "secret.txt")) == (False, "TOP SECRET")
    guard = make_guard(tree, roots=[tree.fallback])
    server = h.server(guard)
    h.tool(server, guard, read_text, "path")
    for era in h.eras:
        async with h.session(server, era, [tree.project]) as s:
            assert await s.call("read_text", path=str(tree.project / "hello.txt")) == (
                False,
                "hello from project",
            )
            assert await s.call("read_text", path="sub/deep.txt") == (False, "deep")
            for way_out in (
                "outside/secret.txt",
                "project/../outside/secret.txt",
                "project/escape/secret.txt",
                "project/../../../../../../../etc/passwd",
                "fallback/fb.txt",  # the fallback does not apply: the client sent roots
                "other/other.txt",
            ):
                refused, text = await s.call("read_text", path=str(tree.base / way_out))
                assert refused, (era, way_out, text)
                assert "outside the allowed roots" in text
                assert str(tree.project) in text  # the refusal names the roots
                assert "TOP SECRET" not in text
                assert "hello from" not in text


async def write_text(path: str, content: str) -> str:
    Path(path).write_text(content)  # noqa: ASYNC240
    return "wrote " + Path(path).name


@row(transports=EVERY_TRANSPORT)
async def writes_land_inside_and_are_refused_outside(
    h: Harness, tree: Tree, caplog: pytest.LogCaptureFixture
) -> None:
    """The control first: the unguarded twin writes outside. Guarded, a write inside lands and one outside
    (directly or through the symlink out) leaves no file."""
    naive = h.server(None)
    h.tool(naive, None, write_text)
    async with h.session(naive, h.eras[0], [tree.project]) as s:
        assert await s.call("write_text", path=str(tree.outside / "control.txt"), content="x") == (
            False,
            "wrote control.txt",
        )
    assert (tree.outside / "control.txt").read_text() == "x"
    guard = make_guard(tree, roots=[tree.fallback])
    server = h.server(guard)
    h.tool(server, guard, write_text, "path")
    for era in h.eras:
        async with h.session(server, era, [tree.project]) as s:
            name = f"new-{era}.txt"
            assert await s.call("write_text", path=name, content=era) == (False, f"wrote {name}")
            assert (tree.project / name).read_text() == era
            for way_out in (tree.outside / "pwned.txt", tree.project / "escape" / "pwned.txt"):
                refused, text = await s.call("write_text", path=str(way_out), content="x")
                assert refused, (era, way_out, text)
                assert "outside the allowed roots" in text
                assert not (tree.outside / "pwned.txt").exists()


@row
async def omitted_argument_is_checked_as_its_default(
    h: Harness, tree: Tree, caplog: pytest.LogCaptureFixture
) -> None:
    """Observation 1: the body receives the default, so the default is what is checked."""
    guard = make_guard(tree, roots=[tree.fallback])
    server = h.server(guard)
    inside_default = str(tree.project / "hello.txt")

    async def leaky(path: str = OUTSIDE_DEFAULT) -> str:
        return "ran with " + path

    async def fine(path: str = inside_default) -> str:
        return Path(path).read_text()  # noqa: ASYNC240

    h.tool(server, guard, leaky, "path")
    h.tool(server, guard, fine, "path")
    for era in h.eras:
        async with h.session(server, era, [tree.project]) as s:
            refused, text = await s.call("leaky")
            assert refused, (era, text)
            assert "outside the allowed roots" in text, (era, text)
            assert "ran with" not in text, (era, text)
            assert await s.call("fine") == (False, "hello from project")


@row
async def lists_optional_annotated_and_path_values(
    h: Harness, tree: Tree, caplog: pytest.LogCaptureFixture
) -> None:
    guard = make_guard(tree, roots=[tree.fallback])
    server = h.server(guard)

    async def many(paths: list[str]) -> str:
        return "|".join(Path(p).read_text() for p in paths)  # noqa: ASYNC240

    async def maybe(path: Optional[str] = None) -> str:  # noqa: UP045 (the spelling a user writes)
        return "none" if path is None else Path(path).read_text()  # noqa: ASYNC240

    async def described(path: Annotated[str, Field(description="a file")]) -> str:
        return Path(path).read_text()  # noqa: ASYNC240

    async def typed(path: Path) -> str:
        assert isinstance(path, Path)
        assert path.is_absolute()
        return path.read_text()  # noqa: ASYNC240

    for fn in (many, maybe, described, typed):
        h.tool(server, guard, fn, "paths" if fn is many else "path")
    hello, deep, secret = (
        tree.project / "hello.txt",
        tree.project / "sub" / "deep.txt",
        tree.outside / "secret.txt",
    )
    for era in h.eras:
        async with h.session(server, era, [tree.project]) as s:
            assert await s.call("many", paths=[str(hello), "sub/deep.txt"]) == (
                False,
                "hello from project|deep",
            )
            refused, text = await s.call("many", paths=[str(deep), str(secret)])
            assert refused
            assert "outside the allowed roots" in text
            assert await s.call("maybe") == (False, "none")
            assert await s.call("maybe", path=str(hello)) == (False, "hello from project")
            assert (await s.call("maybe", path=str(secret)))[0]
            assert await s.call("described", path=str(hello)) == (False, "hello from project")
            assert (await s.call("described", path=str(secret)))[0]
            assert await s.call("typed", path="hello.txt") == (False, "hello from project")
            assert (await s.call("typed", path=str(secret)))[0]


@row
async def tilde_and_file_uri_arguments_are_refused_with_a_hint(
    h: Harness, tree: Tree, caplog: pytest.LogCaptureFixture
) -> None:
    guard = make_guard(tree, roots=[tree.fallback])
    server = h.server(guard)
    h.tool(server, guard, read_text, "path")
    for era in h.eras:
        async with h.session(server, era, [tree.project]) as s:
            refused, text = await s.call("read_text", path="~/hello.txt")
            assert refused, text
            assert "does not expand" in text, text
            assert "hello from project" not in text, text
            refused, text = await s.call("read_text", path=path_to_uri(tree.project / "hello.txt"))
            assert refused, text
            assert "file: URI" in text, text
            assert "hello from project" not in text, text


@row
async def expand_user_expands_tilde_and_file_uris(
    h: Harness, tree: Tree, caplog: pytest.LogCaptureFixture
) -> None:
    guard = make_guard(tree, roots=[tree.fallback], expand_user=True)
    server = h.server(guard)
    h.tool(server, guard, read_text, "path")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HOME", str(tree.project))
        for era in h.eras:
            async with h.session(server, era, [tree.project]) as s:
                assert await s.call("read_text", path="~/hello.txt") == (False, "hello from project")
                uri = path_to_uri(tree.project / "hello.txt")
                assert await s.call("read_text", path=uri) == (False, "hello from project")
                refused, text = await s.call("read_text", path=path_to_uri(tree.outside / "secret.txt"))
                assert refused
                assert "TOP SECRET" not in text


@row
async def outside_the_ceiling_costs_no_round_trip(
    h: Harness, tree: Tree, caplog: pytest.LogCaptureFixture
) -> None:
    """Observation 2: the ceiling precheck runs on every adapter and era, defaults included. On 2026-07-28
    the client is never asked; on the legacy era, a client whose roots/list fails gets the ceiling's
    refusal ("outside the allowed roots"), not the one for having sent no roots."""
    guard = make_guard(
        tree, roots=[tree.fallback], ceiling=[tree.project, tree.fallback], first_answer_timeout=30
    )
    server = h.server(guard)
    h.tool(server, guard, read_text, "path")

    async def leaky(path: str = OUTSIDE_DEFAULT) -> str:
        return "ran with " + path

    h.tool(server, guard, leaky, "path")
    for era in h.eras:
        async with h.session(server, era, [tree.project], failing=era == "legacy") as s:
            with anyio.fail_after(10):
                refused, text = await s.call("read_text", path=str(tree.outside / "secret.txt"))
                assert refused, (era, text)
                assert "outside the allowed roots" in text, (era, text)
                refused, text = await s.call("leaky")
                assert refused, (era, text)
                assert "outside the allowed roots" in text, (era, text)
            if era == "modern":
                assert s.roots_requests == 0
                assert await s.call("read_text", path="hello.txt") == (False, "hello from project")
                assert s.roots_requests == 1  # the one roots/list input request the protocol requires
                assert (await s.call("read_text", path=str(tree.outside / "secret.txt")))[0]
                assert s.roots_requests == 1


@row(transports=EVERY_TRANSPORT)
async def a_client_without_roots_gets_the_fallback_or_a_refusal(
    h: Harness, tree: Tree, caplog: pytest.LogCaptureFixture
) -> None:
    for configured in (True, False):
        guard = make_guard(tree, roots=[tree.fallback] if configured else None)
        server = h.server(guard)
        h.tool(server, guard, read_text, "path")
        for era in h.eras:
            async with h.session(server, era, None) as s:
                result = await s.call("read_text", path=str(tree.fallback / "fb.txt"))
                if configured:
                    assert result == (False, "hello from fallback")
                else:
                    assert result[0], result
                    # to the model: that this server has no folders for it, not the operator's setup
                    assert "This server has no folders for this client" in result[1], result
                    assert not any(w in result[1] for w in ("--roots", "MCP_ROOTS", "RootsGuard")), result
                refused, text = await s.call("read_text", path=str(tree.project / "hello.txt"))
                assert refused, (configured, era, text)
                assert "hello from project" not in text


@row(transports=EVERY_TRANSPORT)
async def not_installed_refuses_every_call(h: Harness, tree: Tree, caplog: pytest.LogCaptureFixture) -> None:
    """@guard.paths below the tool decorator on a server where install() never ran: every call is refused
    with the reason. (Above it, the framework holds the bare function: that is what ``mcp-roots audit``
    reports, "nothing guarded".)"""
    guard = make_guard(tree, roots=[tree.fallback])
    server = h.server(guard, install=False)
    h.tool(server, guard, read_text, "path")
    for era in h.eras:
        async with h.session(server, era, [tree.project]) as s:
            for path in (tree.project / "hello.txt", tree.outside / "secret.txt"):
                refused, text = await s.call("read_text", path=str(path))
                assert refused, (era, text)
                assert "guard.install(server) was not called" in text, (era, text)
                assert "TOP SECRET" not in text
                assert "hello" not in text


@row(transports=EVERY_TRANSPORT)
async def decorator_order_does_not_matter(h: Harness, tree: Tree, caplog: pytest.LogCaptureFixture) -> None:
    for order in ("below", "above"):
        guard = make_guard(tree, roots=[tree.fallback])
        server = h.server(guard)
        h.tool(server, guard, read_text, "path", order=order)

        async def missing(path: str) -> str:
            return Path(path).read_text()  # noqa: ASYNC240

        h.tool(server, guard, missing, "path", order=order)
        for era in h.eras:
            async with h.session(server, era, [tree.project]) as s:
                assert await s.call("read_text", path="hello.txt") == (False, "hello from project")
                assert (await s.call("read_text", path=str(tree.outside / "secret.txt")))[0]
                # The body's OS error is one readable line whichever side @guard.paths stands on.
                caplog.clear()
                with caplog.at_level(logging.INFO):
                    refused, text = await s.call("missing", path="nope.txt")
                assert refused, (order, text)
                assert text == f"No such file: '{tree.project / 'nope.txt'}'", (order, text)
                noisy = [r for r in caplog.records if r.name.split(".")[0] in ("mcp_roots", "mcp")]
                assert not [r for r in noisy if r.levelno >= logging.ERROR or r.exc_info], noisy
                assert "\n" not in text
                assert "Traceback" not in text
                assert "Error calling tool" not in text
                assert "Error executing tool" not in text


@row
async def strict_refuses_unguarded_until_guarded_or_exempt(
    h: Harness, tree: Tree, caplog: pytest.LogCaptureFixture
) -> None:
    guard = make_guard(tree, roots=[tree.fallback], strict=True)
    server = h.server(guard)
    h.tool(server, guard, read_text, "path")

    async def leaky_read(path: str) -> str:
        return Path(path).read_text()  # noqa: ASYNC240

    async def show_ref(ref_path: str) -> str:
        return ref_path

    async def add(a: int, b: int) -> int:
        return a + b

    h.tool(server, None, leaky_read)
    h.tool(server, None, guard.exempt("names a git ref, not a file")(show_ref))
    h.tool(server, None, add)
    for era in h.eras:
        async with h.session(server, era, [tree.project]) as s:
            refused, text = await s.call("leaky_read", path=str(tree.project / "hello.txt"))
            if not h.registry:
                # A low-level server's handlers are the user's own dispatch: nothing to audit, nothing
                # for strict to refuse (the README says so); the guarded function is still checked.
                assert (refused, text) == (False, "hello from project")
                assert guard.audit(server) == []
            else:
                assert refused
                assert "strict=True" in text
                assert "hello" not in text
            assert await s.call("show_ref", ref_path="refs/heads/main") == (False, "refs/heads/main")
            assert await s.call("add", a=1, b=2) == (False, "3")
            assert await s.call("read_text", path="hello.txt") == (False, "hello from project")


@row
async def resources_file_uris_and_guarded_templates(
    h: Harness, tree: Tree, caplog: pytest.LogCaptureFixture
) -> None:
    secret_uri = path_to_uri(tree.outside / "secret.txt")
    (tree.project / "escape.txt").symlink_to(tree.outside / "secret.txt")
    files = [tree.project / "hello.txt", tree.outside / "secret.txt", tree.project / "escape" / "secret.txt"]
    naive = h.server(None)
    h.register_file_resources(naive, files)
    for era in h.eras:
        async with h.session(naive, era, [tree.project]) as s:
            assert await s.read(secret_uri) == (False, "TOP SECRET")  # the control leaks
    for order in ("below", "above"):
        guard = make_guard(tree, roots=[tree.fallback])
        server = h.server(guard)
        h.register_file_resources(server, files)

        async def text(name: Path) -> str:
            assert isinstance(name, Path)
            assert name.is_absolute()
            return name.read_text()  # noqa: ASYNC240

        h.template(server, guard, text, "name", order=order)

        def text_sync(name: Path) -> str:  # a synchronous template: its roots are fetched before it runs
            return name.read_text()

        if h.registry and order == "below":
            h.register_template(server, "sync://{name}", guard.paths("name")(text_sync))

        async def plain(name: str) -> str:
            return (tree.project / name).read_text()

        h.register_template(server, "plain://{name}", plain)
        for era in h.eras:
            async with h.session(server, era, [tree.project]) as s:
                # The control: the unguarded template follows the symlink out; what the guard does not
                # serve is not touched (on every era).
                assert await s.read("plain://escape.txt") == (False, "TOP SECRET")
                assert await s.read(path_to_uri(tree.project / "hello.txt")) == (False, "hello from project")
                for uri in (secret_uri, path_to_uri(files[2])):
                    refused, message = await s.read(uri)
                    assert refused
                    assert "outside the allowed roots" in message
                    assert "TOP SECRET" not in message
                inside = await s.read("text://hello.txt")
                outside = await s.read("text://escape.txt")
                if order == "above" and not h.template_above_runs:
                    assert inside[0], inside
                    assert "below the resource decorator" in inside[1], inside
                    continue
                assert inside == (False, "hello from project"), (order, era, inside)
                if h.registry and order == "below":
                    assert await s.read("sync://hello.txt") == (False, "hello from project")
                    refused, message = await s.read("sync://escape.txt")
                    assert refused, message
                    assert "TOP SECRET" not in message
                assert outside[0], outside
                assert "TOP SECRET" not in outside[1], outside


@row
async def refusals_are_logged_once_per_streak(
    h: Harness, tree: Tree, caplog: pytest.LogCaptureFixture
) -> None:
    """Observation 2: one policy for every adapter: a model retrying a refused call logs it at INFO once,
    then at DEBUG until a call passes."""
    guard = make_guard(tree, roots=[tree.fallback])
    server = h.server(guard)
    h.tool(server, guard, read_text, "path")
    secret = str(tree.outside / "secret.txt")
    era = h.eras[0]
    async with h.session(server, era, [tree.project]) as s:
        await s.call("read_text", path="hello.txt")  # the roots are known
        with caplog.at_level(logging.DEBUG, logger="mcp_roots"):
            caplog.clear()
            for _ in range(3):
                assert (await s.call("read_text", path=secret))[0]
            assert await s.call("read_text", path="hello.txt") == (False, "hello from project")
            assert (await s.call("read_text", path=secret))[0]
    refusals = [
        r for r in caplog.records if r.name == "mcp_roots" and "refused read_text()" in r.getMessage()
    ]
    assert [r.levelno for r in refusals] == [logging.INFO, logging.DEBUG, logging.DEBUG, logging.INFO]


@row(transports=EVERY_TRANSPORT)
async def roots_change_is_visible_on_the_next_call(
    h: Harness, tree: Tree, caplog: pytest.LogCaptureFixture
) -> None:
    guard = make_guard(tree)
    server = h.server(guard)
    h.tool(server, guard, read_text, "path")
    for era in h.eras:
        async with h.session(server, era, [tree.project]) as s:
            assert await s.call("read_text", path=str(tree.project / "hello.txt")) == (
                False,
                "hello from project",
            )
            s.paths[:] = [tree.other]
            await s.roots_changed()
            assert (await s.call("read_text", path=str(tree.project / "hello.txt")))[0]
            assert await s.call("read_text", path=str(tree.other / "other.txt")) == (
                False,
                "hello from other",
            )


@row(transports=EVERY_TRANSPORT)
async def a_client_whose_roots_fail_is_refused_not_given_the_fallback(
    h: Harness, tree: Tree, caplog: pytest.LogCaptureFixture
) -> None:
    """A client that declared roots is the only authority: when its roots/list fails (switched off in the
    host), its calls are refused, even where fallback roots are configured."""
    guard = make_guard(tree, roots=[tree.fallback], first_answer_timeout=5)
    server = h.server(guard)
    h.tool(server, guard, read_text, "path")
    async with h.session(server, "legacy", [tree.project], failing=True) as s:
        with anyio.fail_after(10):
            refused, text = await s.call("read_text", path=str(tree.fallback / "fb.txt"))
        assert refused, text
        assert "hello from fallback" not in text, text
        assert "has not sent its roots yet" in text, text


@row(transports=EVERY_TRANSPORT)
async def the_ceiling_narrows_client_roots(h: Harness, tree: Tree, caplog: pytest.LogCaptureFixture) -> None:
    guard = make_guard(tree, ceiling=tree.project / "sub")
    server = h.server(guard)
    h.tool(server, guard, read_text, "path")
    for era in h.eras:
        async with h.session(server, era, [tree.project]) as s:
            assert await s.call("read_text", path=str(tree.project / "sub" / "deep.txt")) == (False, "deep")
            assert (await s.call("read_text", path=str(tree.project / "hello.txt")))[0]


@row(transports=EVERY_TRANSPORT)
async def two_concurrent_connections_are_isolated(
    h: Harness, tree: Tree, caplog: pytest.LogCaptureFixture
) -> None:
    guard = make_guard(tree)
    server = h.server(guard)
    h.tool(server, guard, read_text, "path")
    file_of = {"project": "hello.txt", "other": "other.txt"}
    for era in h.eras:
        outcomes: dict[str, list[tuple[bool, str]]] = {}

        async def connection(
            mine: Path, theirs: Path, era: str = era, outcomes: dict[str, list[tuple[bool, str]]] = outcomes
        ) -> None:
            async with h.session(server, era, [mine]) as s:
                results = []
                for _ in range(3):
                    results.append(await s.call("read_text", path=str(mine / file_of[mine.name])))
                    results.append(await s.call("read_text", path=str(theirs / file_of[theirs.name])))
                    await anyio.lowlevel.checkpoint()
                outcomes[mine.name] = results

        async with anyio.create_task_group() as tg:
            tg.start_soon(connection, tree.project, tree.other)
            tg.start_soon(connection, tree.other, tree.project)
        for name, results in outcomes.items():
            assert all(not refused for refused, _ in results[0::2]), (era, name, results)
            assert all(refused for refused, _ in results[1::2]), (era, name, results)


@row
async def the_input_schema_and_signature_are_the_tools_own(
    h: Harness, tree: Tree, caplog: pytest.LogCaptureFixture
) -> None:
    for order in ("below", "above"):
        guard = make_guard(tree, roots=[tree.fallback])
        plain, guarded = h.server(None), h.server(guard)

        async def described(path: Annotated[str, Field(description="a file")], limit: int = 3) -> str:
            return path

        h.tool(plain, None, described)
        h.tool(guarded, guard, described, "path", order=order)
        own, seen = inspect.signature(described), inspect.signature(guard.paths("path")(described))
        assert [(p.name, p.default) for p in seen.parameters.values()] == [
            (p.name, p.default) for p in own.parameters.values()
        ]
        async with h.session(plain, h.eras[0], [tree.project]) as s:
            expected = await s.input_schema("described")
        async with h.session(guarded, h.eras[0], [tree.project]) as s:
            assert await s.input_schema("described") == expected, order
        if h.registry:
            assert set(expected["properties"]) == {"path", "limit"}


@row
async def guard_roots_in_the_body_is_the_set_the_arguments_were_checked_against(
    h: Harness, tree: Tree, caplog: pytest.LogCaptureFixture
) -> None:
    guard = make_guard(tree, roots=[tree.fallback])
    server = h.server(guard)

    async def where(path: str, ctx: Any) -> str:
        roots = await guard.roots(ctx)
        return roots.read_text(path) + " in " + ",".join(p.name for p in roots.paths)

    where.__annotations__["ctx"] = h.context_type  # the framework injects its context by this type
    h.tool(server, guard, where, "path")
    for era in h.eras:
        async with h.session(server, era, [tree.project]) as s:
            assert await s.call("where", path="hello.txt") == (False, "hello from project in project"), era


@row
async def an_unguarded_path_parameter_is_warned_once_at_startup(
    h: Harness, tree: Tree, caplog: pytest.LogCaptureFixture
) -> None:
    guard = make_guard(tree, roots=[tree.fallback])
    server = h.server(guard)
    h.tool(server, guard, read_text, "path")

    async def leaky_read(path: str) -> str:
        return Path(path).read_text()  # noqa: ASYNC240

    h.tool(server, None, leaky_read)
    with caplog.at_level(logging.WARNING, logger="mcp_roots"):
        for _ in range(2):
            async with h.session(server, h.eras[0], [tree.project]) as s:
                await s.call("read_text", path="hello.txt")
    warned = [r for r in caplog.records if "leaky_read" in r.getMessage() and r.levelno == logging.WARNING]
    if h.registry:
        assert len(warned) == 1
        assert "path-like parameters that mcp-roots does not check: path" in warned[0].getMessage()
        rows = {row.name: row.status for row in guard.audit(server)}
        assert rows["read_text"] == "guarded"
        assert rows["leaky_read"] == "UNGUARDED: path"
    else:
        assert warned == []
        assert guard.audit(server) == []


@row
async def an_aliased_argument_is_checked_as_the_body_receives_it(
    h: Harness, tree: Tree, caplog: pytest.LogCaptureFixture
) -> None:
    """The client writes the alias (``file_path``); the framework hands the body ``path``.
    The guard checks what the body receives, so no spelling of the argument gets past it."""
    guard = make_guard(tree, roots=[tree.fallback])
    server = h.server(guard)

    async def aliased(path: Annotated[str, Field(validation_alias="file_path")]) -> str:
        return "ran with " + path

    h.tool(server, guard, aliased, "path")
    secret = str(tree.outside / "secret.txt")
    for era in h.eras:
        async with h.session(server, era, [tree.project]) as s:
            # A low-level handler passes the client's names through: there the alias is the name itself.
            key = "file_path" if h.registry else "path"
            refused, text = await s.call("aliased", **{key: secret})
            assert refused, (era, text)
            assert "ran with" not in text
            assert await s.call("aliased", **{key: "hello.txt"}) == (
                False,
                f"ran with {tree.project / 'hello.txt'}",
            )


class _Files:
    """Tools as methods of an object (bound-method tools)."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix

    async def read_method(self, path: str) -> str:
        return self.prefix + Path(path).read_text()  # noqa: ASYNC240


@row
async def bound_methods_stacked_guards_and_partials(
    h: Harness, tree: Tree, caplog: pytest.LogCaptureFixture
) -> None:
    """A bound method is guarded like a function; @guard.paths stacked twice checks
    both names; a functools.partial is guarded (or refused with a readable error), never a raw TypeError."""
    guard = make_guard(tree, roots=[tree.fallback])
    server = h.server(guard)
    files = _Files("> ")
    h.tool(server, guard, files.read_method, "path")

    async def copy(src: str, dest: str) -> str:
        return Path(src).read_text() + " -> " + Path(dest).name  # noqa: ASYNC240

    h.register(server, guard.paths("src")(guard.paths("dest")(copy)))

    async def read_with(path: str, suffix: str) -> str:
        return Path(path).read_text() + suffix  # noqa: ASYNC240

    partial = functools.partial(read_with, suffix="!")
    partial.__name__ = "read_partial"  # type: ignore[attr-defined]  # frameworks name a tool by __name__
    h.register(server, guard.paths("path")(partial))
    hello, secret = tree.project / "hello.txt", str(tree.outside / "secret.txt")
    for era in h.eras:
        async with h.session(server, era, [tree.project]) as s:
            assert await s.call("read_method", path=str(hello)) == (False, "> hello from project")
            refused, text = await s.call("read_method", path=secret)
            assert refused, text
            assert "outside the allowed roots" in text
            copied = await s.call("copy", src=str(hello), dest="new.txt")
            assert copied == (False, "hello from project -> new.txt")
            for arguments in ({"src": secret, "dest": "new.txt"}, {"src": str(hello), "dest": secret}):
                refused, text = await s.call("copy", **arguments)
                assert refused, (era, arguments, text)
                assert "outside the allowed roots" in text
                assert "guard.install" not in text
            assert await s.call("read_partial", path=str(hello)) == (False, "hello from project!")
            refused, text = await s.call("read_partial", path=secret)
            assert refused, text
            assert "outside the allowed roots" in text


@row
async def prompts_are_guarded_audited_and_strict(
    h: Harness, tree: Tree, caplog: pytest.LogCaptureFixture
) -> None:
    """A prompt's path arguments are guarded like a tool's; the audit lists prompts and
    strict refuses an unguarded one."""
    guard = make_guard(tree, roots=[tree.fallback], strict=True)
    server = h.server(guard)

    async def summarize(path: str) -> str:
        return "Summarize: " + Path(path).read_text()  # noqa: ASYNC240

    async def leaky_prompt(path: str) -> str:
        return "Summarize: " + Path(path).read_text()  # noqa: ASYNC240

    h.register_prompt(server, guard.paths("path")(summarize))
    h.register_prompt(server, leaky_prompt)
    hello, secret = str(tree.project / "hello.txt"), str(tree.outside / "secret.txt")
    for era in h.eras:
        async with h.session(server, era, [tree.project]) as s:
            assert await s.prompt("summarize", path=hello) == (False, "Summarize: hello from project")
            refused, text = await s.prompt("summarize", path=secret)
            assert refused, (era, text)
            assert "outside the allowed roots" in text
            assert "TOP SECRET" not in text
            refused, text = await s.prompt("leaky_prompt", path=hello)
            if h.registry:
                assert refused, (era, text)
                assert "strict=True" in text
            else:  # a hand-written handler: nothing registered to audit
                assert (refused, text) == (False, "Summarize: hello from project")
    if h.registry:
        rows = {(row.kind, row.name): row.status for row in guard.audit(server)}
        assert rows[("prompt", "summarize")] == "guarded"
        assert rows[("prompt", "leaky_prompt")] == "UNGUARDED: path"


@row
async def strict_and_the_audit_look_inside_models(
    h: Harness, tree: Tree, caplog: pytest.LogCaptureFixture
) -> None:
    """A path field inside a model parameter is a path parameter: strict refuses the
    unguarded tool, the audit lists it by locator, and ``@guard.paths("job.path")`` (or ``"job"``) checks the
    value the body receives. ``file_name``, ``pathname``, ``fname`` are path names."""
    guard = make_guard(tree, roots=[tree.fallback], strict=True)
    server = h.server(guard)

    async def leaky_job(job: Job) -> str:
        return Path(_job(job).path).read_text()  # noqa: ASYNC240

    async def job_path(job: Job) -> str:
        return "ran with " + _job(job).path

    async def whole_job(job: Job) -> str:
        return "ran with " + _job(job).path

    async def named(file_name: str, pathname: str = "", fname: str = "") -> str:
        return Path(file_name).read_text()  # noqa: ASYNC240

    h.tool(server, None, leaky_job)
    h.tool(server, guard, job_path, "job.path")
    h.tool(server, guard, whole_job, "job")
    h.tool(server, None, named)
    hello, secret = str(tree.project / "hello.txt"), str(tree.outside / "secret.txt")
    for era in h.eras:
        async with h.session(server, era, [tree.project]) as s:
            refused, text = await s.call("leaky_job", job={"path": secret})
            if h.registry:
                assert refused, (era, text)
                assert "strict=True" in text
                assert "job.path" in text
            else:  # a hand-written handler: nothing registered to audit or refuse
                assert (refused, text) == (False, "TOP SECRET")
            for tool in ("job_path", "whole_job"):
                refused, text = await s.call(tool, job={"path": secret, "label": "x"})
                assert refused, (era, tool, text)
                assert "outside the allowed roots" in text
                assert "ran with" not in text
                assert await s.call(tool, job={"path": "hello.txt"}) == (False, f"ran with {hello}"), tool
            refused, text = await s.call("named", file_name=secret)
            assert refused == h.registry, (era, text)
            assert ("TOP SECRET" in text) != h.registry
    if h.registry:
        rows = {row.name: row for row in guard.audit(server)}
        assert rows["leaky_job"].status == "UNGUARDED: job.path"
        assert rows["job_path"].status == "guarded"
        assert rows["whole_job"].status == "guarded"
        assert rows["named"].unguarded == ("file_name", "pathname", "fname")
    else:
        assert guard.audit(server) == []


@row
async def a_refusal_says_nothing_of_what_lies_outside(
    h: Harness, tree: Tree, caplog: pytest.LogCaptureFixture
) -> None:
    """The one '..' rule, at the guard: ``ROOT/../<probe>/../ROOT/hello.txt`` and a relative
    ``../outside/<probe>/x`` get one answer whether ``<probe>`` is missing, a directory, a file, a symlink
    or a FIFO, for a guarded argument and a guarded field (``job.path``), in every era."""
    guard = make_guard(tree, roots=[tree.fallback], ceiling=[tree.base])  # the precheck walks these too
    server = h.server(guard)

    async def job_path(job: Job) -> str:
        return "ran with " + _job(job).path

    h.tool(server, guard, read_text, "path")
    h.tool(server, guard, job_path, "job.path")
    (tree.outside / "probe_dir").mkdir()
    (tree.outside / "probe_file").write_text("outside")
    (tree.outside / "probe_symlink").symlink_to(tree.project)
    os.mkfifo(tree.outside / "probe_fifo")
    kinds = ("missing", "dir", "file", "symlink", "fifo")
    forms = [
        f"{tree.project}/../outside/{{probe}}/../../project/hello.txt",
        f"{tree.project}/../outside/{{probe}}/x",
        "../outside/{probe}/x",
    ]
    for era in h.eras:
        async with h.session(server, era, [tree.project]) as s:
            for form in forms:
                for tool in ("read_text", "job_path"):
                    answers = set()
                    for kind in kinds:
                        value = form.format(probe=f"probe_{kind}")
                        args: dict[str, Any] = (
                            {"path": value} if tool == "read_text" else {"job": {"path": value}}
                        )
                        refused, text = await s.call(tool, **args)
                        answers.add((refused, text.replace(f"probe_{kind}", "<probe>")))
                    assert len(answers) == 1, (era, tool, form, answers)
                    ((refused, text),) = answers
                    assert refused, (era, tool, text)
                    assert "is outside the allowed roots" in text, (era, tool, text)
