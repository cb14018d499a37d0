"""The fastmcp 4.x adapter against the real fastmcp 4.1 server and client, on both protocol eras.

One table of cases runs through both eras (``legacy``: 2025-11-25 with a handshake and a roots cache per
connection; ``modern``: 2026-07-28, roots by multi-round-trip on each call) over fastmcp's in-memory
transport (the real SDK session on both sides), and the core cases over stdio and streamable HTTP. On asyncio
only: fastmcp 4 itself is (its client and server call ``asyncio.create_task``, ``asyncio.Lock``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import mcp_types
import pytest
from fastmcp import Client, Context, FastMCP
from fastmcp.client.transports import StdioTransport

from mcp_roots import RootsGuard, path_to_uri

from .subprocs import http_server
from .tree import Tree

pytestmark = pytest.mark.anyio

FILE_OF = {"project": "hello.txt", "other": "other.txt"}
ERAS = {"legacy": "legacy", "modern": "auto"}
HERE = Path(__file__).resolve().parent


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # fastmcp 4 runs on asyncio only (see the module docstring)


@pytest.fixture
def tree(tmp_path: Path) -> Tree:
    return Tree(tmp_path)


@pytest.fixture(params=sorted(ERAS))
def era(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def make_guard(tree: Tree, **options: Any) -> RootsGuard:
    # environ={} and an empty user config directory: only what the test configures is a fallback source.
    options.setdefault("environ", {})
    options.setdefault("user_config_dir", tree.base / "no-config")
    options.setdefault("first_answer_timeout", 0.3)
    return RootsGuard(**options)


def make_server(guard: RootsGuard, *, order: str = "below", install: bool = True) -> FastMCP:
    """A fastmcp server with one guarded tool (``read_text``) and its unguarded twin (``plain_read``)."""
    server: FastMCP = FastMCP("guarded")
    if install:
        guard.install(server)
    if order == "below":

        @server.tool
        @guard.paths("path")
        async def read_text(path: str, ctx: Context) -> str:
            roots = await guard.roots(ctx)
            return roots.read_text(path)

    else:

        @guard.paths("path")
        @server.tool
        async def read_text(path: str, ctx: Context) -> str:
            roots = await guard.roots(ctx)
            return roots.read_text(path)

    @server.tool
    async def plain_read(path: str, ctx: Context) -> str:
        return await anyio.Path(path).read_text()

    return server


class Roots:
    """A client roots handler whose answer the test can change, and that counts the requests."""

    def __init__(self, *paths: Path, answer: Callable[[], Any] | None = None) -> None:
        self.paths = list(paths)
        self.calls = 0
        self._answer = answer

    async def __call__(self, context: Any) -> list[mcp_types.Root]:
        self.calls += 1
        if self._answer is not None:
            await self._answer()
        return [mcp_types.Root(uri=path_to_uri(p), name=p.name) for p in self.paths]


def client(server: Any, era: str, roots: Roots | None) -> Client[Any]:
    return Client(server, roots=roots, mode=ERAS[era])  # type: ignore[arg-type]


async def read(c: Client[Any], path: Path | str) -> tuple[bool, str]:
    result = await c.call_tool("read_text", {"path": str(path)}, raise_on_error=False)
    text = "".join(getattr(block, "text", "") for block in result.content)
    return result.is_error, text


async def test_allowed_read(tree: Tree, era: str) -> None:
    server = make_server(make_guard(tree))
    async with client(server, era, Roots(tree.project)) as c:
        assert await read(c, tree.project / "hello.txt") == (False, "hello from project")
        assert await read(c, "sub/deep.txt") == (False, "deep")  # relative to the first root


async def test_refused_read(tree: Tree, era: str) -> None:
    server = make_server(make_guard(tree))
    async with client(server, era, Roots(tree.project)) as c:
        is_error, text = await read(c, tree.outside / "secret.txt")
        assert is_error
        assert "outside the allowed roots" in text
        assert "TOP SECRET" not in text
        is_error, text = await read(c, tree.project / ".." / "outside" / "secret.txt")
        assert is_error
        assert "TOP SECRET" not in text


async def test_refused_symlink_escape(tree: Tree, era: str) -> None:
    server = make_server(make_guard(tree))
    async with client(server, era, Roots(tree.project)) as c:
        # The control: the unguarded twin reads through the link, so the link does lead outside.
        unguarded = await c.call_tool("plain_read", {"path": str(tree.project / "escape" / "secret.txt")})
        assert "TOP SECRET" in "".join(getattr(b, "text", "") for b in unguarded.content)
        is_error, text = await read(c, tree.project / "escape" / "secret.txt")
        assert is_error
        assert "outside the allowed roots" in text
        assert "TOP SECRET" not in text


async def test_roots_change_is_visible_on_the_next_call(tree: Tree, era: str) -> None:
    server = make_server(make_guard(tree))
    roots = Roots(tree.project)
    async with client(server, era, roots) as c:
        assert await read(c, tree.project / "hello.txt") == (False, "hello from project")
        roots.paths = [tree.other]
        await c.send_roots_list_changed()
        is_error, _ = await read(c, tree.project / "hello.txt")
        assert is_error
        assert await read(c, tree.other / "other.txt") == (False, "hello from other")


async def test_client_without_roots_gets_the_configured_fallback(tree: Tree, era: str) -> None:
    server = make_server(make_guard(tree, roots=[str(tree.fallback)]))
    async with client(server, era, None) as c:
        assert await read(c, tree.fallback / "fb.txt") == (False, "hello from fallback")
        is_error, _ = await read(c, tree.project / "hello.txt")
        assert is_error


async def test_client_without_roots_and_no_fallback_is_refused(tree: Tree, era: str) -> None:
    server = make_server(make_guard(tree))
    async with client(server, era, None) as c:
        is_error, text = await read(c, tree.project / "hello.txt")
        assert is_error
        assert "hello from project" not in text


async def test_silent_client_is_refused_not_given_the_fallback(tree: Tree) -> None:
    # DESIGN.md "fail closed": a client that declared roots never gets fallback roots; before its
    # first answer, calls wait first_answer_timeout and are refused with RootsUnavailable.
    server = make_server(make_guard(tree, roots=[str(tree.fallback)]))
    silent = Roots(tree.project, answer=anyio.sleep_forever)
    async with client(server, "legacy", silent) as c:
        is_error, text = await read(c, tree.fallback / "fb.txt")
        assert is_error
        assert "hello from fallback" not in text
        assert "has not sent its roots yet" in text


async def test_ceiling_narrows_client_roots(tree: Tree, era: str) -> None:
    server = make_server(make_guard(tree, ceiling=str(tree.project / "sub")))
    async with client(server, era, Roots(tree.base)) as c:
        assert await read(c, tree.project / "sub" / "deep.txt") == (False, "deep")
        is_error, text = await read(c, tree.project / "hello.txt")
        assert is_error
        assert "hello from project" not in text


async def test_modern_era_costs_one_round_trip_and_none_outside_the_ceiling(tree: Tree) -> None:
    server = make_server(make_guard(tree, ceiling=str(tree.project)))
    roots = Roots(tree.project)
    async with client(server, "modern", roots) as c:
        assert await read(c, tree.project / "hello.txt") == (False, "hello from project")
        assert roots.calls == 1  # the one roots/list input request the protocol requires
        is_error, _ = await read(c, tree.outside / "secret.txt")
        assert is_error
        assert roots.calls == 1  # outside the ceiling: refused without asking the client


async def test_two_concurrent_connections_are_isolated(tree: Tree, era: str) -> None:
    server = make_server(make_guard(tree))
    outcomes: dict[str, list[tuple[bool, str]]] = {}

    async def session(name: str, mine: Path, theirs: Path) -> None:
        async with client(server, era, Roots(mine)) as c:
            results = []
            for _ in range(3):
                results.append(await read(c, mine / FILE_OF[mine.name]))
                results.append(await read(c, theirs / FILE_OF[theirs.name]))
                await anyio.lowlevel.checkpoint()
            outcomes[name] = results

    async with anyio.create_task_group() as tg:
        tg.start_soon(session, "project", tree.project, tree.other)
        tg.start_soon(session, "other", tree.other, tree.project)
    for name, results in outcomes.items():
        own, foreign = results[0::2], results[1::2]
        assert all(not is_error for is_error, _ in own), (name, own)
        assert all(is_error for is_error, _ in foreign), (name, foreign)


@pytest.mark.parametrize("order", ["below", "above"])
async def test_decorator_in_either_order(tree: Tree, era: str, order: str) -> None:
    server = make_server(make_guard(tree), order=order)
    async with client(server, era, Roots(tree.project)) as c:
        assert await read(c, tree.project / "hello.txt") == (False, "hello from project")
        is_error, text = await read(c, tree.outside / "secret.txt")
        assert is_error
        assert "TOP SECRET" not in text


async def test_install_forgotten_refuses_every_call(tree: Tree, era: str) -> None:
    server = make_server(make_guard(tree), install=False)
    async with client(server, era, Roots(tree.project)) as c:
        for path in (tree.project / "hello.txt", tree.outside / "secret.txt"):
            is_error, text = await read(c, path)
            assert is_error
            assert "guard.install(server) was not called" in text


async def test_input_schema_is_the_tools_own(tree: Tree, era: str) -> None:
    server = make_server(make_guard(tree))
    async with client(server, era, Roots(tree.project)) as c:
        tools = {tool.name: tool for tool in await c.list_tools()}
    guarded, twin = tools["read_text"].input_schema, tools["plain_read"].input_schema
    assert guarded == twin
    assert set(guarded["properties"]) == {"path"}


async def test_os_error_is_one_readable_line(tree: Tree, era: str) -> None:
    server = make_server(make_guard(tree))
    async with client(server, era, Roots(tree.project)) as c:
        is_error, text = await read(c, tree.project / "missing.txt")
        assert is_error
        assert "No such file" in text
        assert "missing.txt" in text
        assert "\n" not in text
        assert "Traceback" not in text
        assert "Error calling tool" not in text


async def test_over_stdio(tree: Tree) -> None:
    """The same server as a subprocess over stdio (legacy era, the client's roots, a refusal)."""
    transport = StdioTransport(sys.executable, [str(HERE / "fastmcp4_server.py")])
    async with Client(transport, roots=Roots(tree.project), mode="legacy") as c:  # type: ignore[arg-type]
        assert await read(c, tree.project / "hello.txt") == (False, "hello from project")
        is_error, text = await read(c, tree.project / "escape" / "secret.txt")
        assert is_error
        assert "TOP SECRET" not in text


async def test_over_streamable_http(tree: Tree, era: str) -> None:
    """The same server as a subprocess on streamable HTTP: the roots/list of a legacy connection rides the
    waiting call's response stream; on 2026-07-28 the roots come with the retried call."""
    command = [sys.executable, str(HERE / "fastmcp4_server.py")]
    async with (
        http_server(command, tree.base / "server.log") as url,
        Client(url, roots=Roots(tree.project), mode=ERAS[era]) as c,  # type: ignore[arg-type]
    ):
        assert await read(c, tree.project / "hello.txt") == (False, "hello from project")
        is_error, text = await read(c, tree.project / "escape" / "secret.txt")
        assert is_error
        assert "TOP SECRET" not in text


async def test_guard_roots_outside_a_guarded_call(tree: Tree, era: str) -> None:
    guard = make_guard(tree)
    server = make_server(guard)

    @server.tool
    async def where(ctx: Context) -> str:
        return ",".join(str(root.path) for root in await guard.roots(ctx))

    async with client(server, era, Roots(tree.project)) as c:
        result = await c.call_tool("where", {}, raise_on_error=False)
    text = "".join(getattr(block, "text", "") for block in result.content)
    if era == "legacy":
        assert (result.is_error, text) == (False, str(tree.project))
    else:
        # On 2026-07-28 only a guarded call can ask for the roots: the error says how to get them.
        assert result.is_error
        assert "@guard.paths" in text


def test_install_checks_the_private_corner_it_relies_on(tree: Tree) -> None:
    from mcp_roots import SDKChanged

    server: FastMCP = FastMCP("moved")
    server.middleware = tuple(server.middleware)  # type: ignore[assignment]  # as if fastmcp changed it
    with pytest.raises(SDKChanged, match=r"FastMCP\.middleware"):
        make_guard(tree).install(server)


def test_install_names_the_supported_frameworks(tree: Tree) -> None:
    with pytest.raises(TypeError, match=r"fastmcp 4\.x FastMCP.*mcp 1\.x FastMCP"):
        make_guard(tree).install(object())


async def test_audit_warns_of_an_unguarded_path_parameter_and_strict_refuses_it(
    tree: Tree, era: str, caplog: pytest.LogCaptureFixture
) -> None:
    guard = make_guard(tree)
    server = make_server(guard)
    rows = {row.name: row.status for row in guard.audit(server)}
    assert rows == {"read_text": "guarded", "plain_read": "UNGUARDED: path"}
    with caplog.at_level("WARNING", logger="mcp_roots"):
        async with client(server, era, Roots(tree.project)) as c:
            await c.list_tools()
    warnings = [r.getMessage() for r in caplog.records if "plain_read" in r.getMessage()]
    assert len(warnings) == 1
    assert "path-like parameters that mcp-roots does not check: path" in warnings[0]

    strict = make_server(make_guard(tree, strict=True))
    async with client(strict, era, Roots(tree.project)) as c:
        plain = await c.call_tool(
            "plain_read", {"path": str(tree.project / "hello.txt")}, raise_on_error=False
        )
        assert plain.is_error
        assert "strict=True" in "".join(getattr(b, "text", "") for b in plain.content)
        assert await read(c, tree.project / "hello.txt") == (False, "hello from project")


async def test_tilde_and_file_uri_arguments_are_refused_with_a_hint(tree: Tree, era: str) -> None:
    server = make_server(make_guard(tree))
    async with client(server, era, Roots(tree.project)) as c:
        for written in ("~/hello.txt", path_to_uri(tree.project / "hello.txt")):
            is_error, text = await read(c, written)
            assert is_error, written
            assert "hello from project" not in text


# --- resources/read ----------------------------------------------------------------------------------


def make_resource_server(guard: RootsGuard, tree: Tree, *, install: bool = True) -> FastMCP:
    """``file:`` resources (one inside the project, one outside, one through the symlink out), a guarded
    ``notes://`` template and its unguarded twin; the paths are relative to the first root."""
    server: FastMCP = FastMCP("resources")
    if install:
        guard.install(server)
    for path in (
        tree.project / "hello.txt",
        tree.outside / "secret.txt",
        tree.project / "escape" / "secret.txt",
    ):

        def make_reader(target: Path) -> Callable[[], str]:
            return lambda: target.read_text()

        server.resource(path_to_uri(path))(make_reader(path))

    @server.resource("notes://{path*}")
    @guard.paths("path")
    def note(path: str) -> str:
        return Path(path).read_text()

    @server.resource("plain://{path*}")
    def plain_note(path: str) -> str:
        return (tree.project / path).read_text()

    return server


async def read_resource(c: Client[Any], uri: str) -> tuple[bool, str]:
    """(refused, text) of reading ``uri``: the text of the contents, or the error's message."""
    try:
        contents = await c.read_resource(uri)
    except Exception as exc:
        return True, str(exc)
    return False, "".join(getattr(block, "text", "") for block in contents)


async def test_resources_file_uri_inside_is_read_outside_is_refused(tree: Tree) -> None:
    guard = make_guard(tree)
    for server, guarded in (
        (make_resource_server(guard, tree, install=False), False),
        (make_resource_server(make_guard(tree), tree), True),
    ):
        async with client(server, "legacy", Roots(tree.project)) as c:
            assert await read_resource(c, path_to_uri(tree.project / "hello.txt")) == (
                False,
                "hello from project",
            )
            for outside in (tree.outside / "secret.txt", tree.project / "escape" / "secret.txt"):
                refused, text = await read_resource(c, path_to_uri(outside))
                if not guarded:  # the control: the unguarded server leaks both
                    assert (refused, text) == (False, "TOP SECRET")
                    continue
                assert refused
                assert "outside the allowed roots" in text
                assert "TOP SECRET" not in text
                assert "Traceback" not in text


async def test_resources_guarded_template_checks_its_path_parameter(tree: Tree) -> None:
    server = make_resource_server(make_guard(tree), tree)
    async with client(server, "legacy", Roots(tree.project)) as c:
        assert await read_resource(c, "notes://hello.txt") == (False, "hello from project")
        assert await read_resource(c, "notes://sub/deep.txt") == (False, "deep")
        # The control: the unguarded twin follows the symlink out.
        assert await read_resource(c, "plain://escape/secret.txt") == (False, "TOP SECRET")
        refused, text = await read_resource(c, "notes://escape/secret.txt")
        assert refused
        assert "outside the allowed roots" in text
        assert "TOP SECRET" not in text


async def test_resources_guarded_template_above_the_decorator_refuses(tree: Tree) -> None:
    guard = make_guard(tree)
    server: FastMCP = FastMCP("resources")
    guard.install(server)

    # fastmcp registers the bare function here: its relative path would be read from the server's working
    # directory, unchecked; the guard refuses instead, naming the fix.
    @guard.paths("path")
    @server.resource("notes://{path*}")
    def note(path: str) -> str:
        return Path(path).read_text()

    async with client(server, "legacy", Roots(tree.project)) as c:
        refused, text = await read_resource(c, "notes://hello.txt")
        assert refused
        assert "put @guard.paths below the resource decorator" in text


async def test_resources_on_2026_07_28_are_refused_not_guessed(tree: Tree) -> None:
    # Not built yet on this era: a read of a file: URI (or a guarded template) fails closed.
    server = make_resource_server(make_guard(tree), tree)
    async with client(server, "modern", Roots(tree.project)) as c:
        for uri in (path_to_uri(tree.project / "hello.txt"), path_to_uri(tree.outside / "secret.txt")):
            refused, text = await read_resource(c, uri)
            assert refused
            assert "2026-07-28" in text
            assert "TOP SECRET" not in text
        assert await read_resource(c, "plain://hello.txt") == (False, "hello from project")
