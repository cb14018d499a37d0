"""Safe by construction (issue 12): mistakes a user can make with RootsGuard on `mcp` 2.x no longer leak.

Decorator order, a forgotten install(), guard.roots(ctx) on 2026-07-28 without @guard.paths (MCPServer and
low-level Server), the ceiling checked before asking the client, OS errors as one readable line, `~` and
file:// arguments, file: resources, the audit and strict mode. Real SDK, in-memory transport, both eras,
asyncio and trio; every refusal test has a naive control that shows the leak it prevents.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.server import MCPServer, Server
from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPError

from mcp_roots import RootsGuard, path_to_uri

from .serverkit import RootsCallback, Tree, lowlevel_server, text_of

pytestmark = pytest.mark.anyio

ERAS = ["legacy", "auto"]  # "auto" negotiates 2026-07-28 in memory


@pytest.fixture
def tree(tmp_path: Path) -> Tree:
    return Tree(tmp_path)


def order_server(guard: RootsGuard | None, order: str, *, install: bool = True) -> MCPServer:
    """One read tool, with @guard.paths below (`"below"`) or above (`"above"`) @server.tool(), or no guard
    at all (`"naive"`)."""
    server = MCPServer(f"order-{order}")
    if guard is not None and install:
        guard.install(server)
    if order == "below":
        assert guard is not None

        @server.tool()
        @guard.paths("path")
        async def read_text(path: str) -> str:
            return Path(path).read_text()  # noqa: ASYNC240

    elif order == "above":
        assert guard is not None

        @guard.paths("path")
        @server.tool()
        async def read_text(path: str) -> str:
            return Path(path).read_text()  # noqa: ASYNC240

    else:

        @server.tool()
        async def read_text(path: str) -> str:
            return Path(path).read_text()  # noqa: ASYNC240

    return server


async def call(server: MCPServer | Server[Any], mode: str, callback: Any, tool: str, **args: Any) -> Any:
    kwargs = {"list_roots_callback": callback} if callback is not None else {}
    async with Client(server, mode=mode, **kwargs) as client:  # type: ignore[arg-type]
        return await client.call_tool(tool, args)


# --- decorator order --------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ERAS)
async def test_naive_server_leaks_the_outside_file(tree: Tree, mode: str) -> None:
    """The control: without a guard the tool reads what lies outside the client's roots."""
    result = await call(
        order_server(None, "naive"),
        mode,
        RootsCallback(tree.project),
        "read_text",
        path=str(tree.outside / "secret.txt"),
    )
    assert text_of(result) == "TOP SECRET"


@pytest.mark.parametrize("order", ["below", "above"])
@pytest.mark.parametrize("mode", ERAS)
async def test_outside_read_is_refused_whichever_side_the_decorator_stands(
    tree: Tree, mode: str, order: str
) -> None:
    guard = RootsGuard([tree.fallback])
    server = order_server(guard, order)
    callback = RootsCallback(tree.project)
    for outside in (tree.outside / "secret.txt", tree.project / "escape" / "secret.txt"):
        refused = await call(server, mode, callback, "read_text", path=str(outside))
        assert refused.is_error
        assert "outside the allowed roots" in text_of(refused)
        assert "TOP SECRET" not in text_of(refused)
    allowed = await call(server, mode, callback, "read_text", path=str(tree.project / "hello.txt"))
    assert not allowed.is_error
    assert text_of(allowed) == "hello from project"


@pytest.mark.parametrize("order", ["below", "above"])
@pytest.mark.parametrize("mode", ERAS)
async def test_input_schema_is_the_tools_own_in_either_order(tree: Tree, mode: str, order: str) -> None:
    server = order_server(RootsGuard([tree.fallback]), order)
    async with Client(server, mode=mode) as client:
        (tool,) = (await client.list_tools()).tools
    assert tool.input_schema["properties"].keys() == {"path"}
    assert tool.input_schema["required"] == ["path"]


@pytest.mark.parametrize("mode", ERAS)
async def test_guarded_tool_without_install_refuses_every_call(tree: Tree, mode: str) -> None:
    server = order_server(RootsGuard([tree.fallback]), "below", install=False)
    for path in (tree.outside / "secret.txt", tree.fallback / "fb.txt"):
        result = await call(server, mode, RootsCallback(tree.project), "read_text", path=str(path))
        assert result.is_error
        assert "guard.install(server) was not called" in text_of(result)
        assert "TOP SECRET" not in text_of(result)
        assert "hello" not in text_of(result)


# --- 2026-07-28: guard.roots(ctx) without @guard.paths, low-level handlers, the ceiling ---------------


async def test_modern_roots_without_the_decorator_come_by_one_round_trip(tree: Tree) -> None:
    guard = RootsGuard([tree.fallback])
    server = MCPServer("plain")
    guard.install(server)

    @server.tool()
    async def list_roots(ctx: Context) -> str:
        roots = await guard.roots(ctx)
        return ",".join(str(p) for p in roots.paths)

    callback = RootsCallback(tree.project, tree.other)
    async with Client(server, list_roots_callback=callback) as client:
        assert client.session.protocol_version == "2026-07-28"  # type: ignore[union-attr]
        for n in (1, 2):
            result = await client.call_tool("list_roots", {})
            assert not result.is_error, text_of(result)
            assert text_of(result) == f"{tree.project},{tree.other}"
            assert callback.calls == n  # one input request per call, nothing cached across requests


async def test_modern_lowlevel_handler_gets_the_roots_by_multi_round_trip(tree: Tree) -> None:
    guard = RootsGuard([tree.fallback])
    callback = RootsCallback(tree.project)
    async with Client(lowlevel_server(guard), list_roots_callback=callback) as client:
        ok = await client.call_tool("read_text", {"path": str(tree.project / "hello.txt")})
        assert (ok.is_error, text_of(ok)) == (False, "hello from project")
        refused = await client.call_tool("read_text", {"path": str(tree.fallback / "fb.txt")})
        assert refused.is_error  # the client's roots, not the fallback
        assert callback.calls == 2


@pytest.mark.parametrize("mode", ERAS)
async def test_path_outside_the_ceiling_is_refused_without_asking_the_client(tree: Tree, mode: str) -> None:
    guard = RootsGuard(ceiling=tree.base / "project")
    server = order_server(guard, "below")
    callback = RootsCallback(tree.project)
    async with Client(server, mode=mode, list_roots_callback=callback) as client:
        asked_at_start = callback.calls  # the legacy era fetches once after initialized
        refused = await client.call_tool("read_text", {"path": str(tree.outside / "secret.txt")})
        assert refused.is_error
        assert "TOP SECRET" not in text_of(refused)
        if mode == "auto":
            assert callback.calls == asked_at_start == 0  # no round trip at all
        ok = await client.call_tool("read_text", {"path": str(tree.project / "hello.txt")})
        assert text_of(ok) == "hello from project"


async def test_modern_roots_sent_unasked_on_a_legacy_connection_are_ignored(tree: Tree) -> None:
    """Only an answer to the guard's own input request counts: a client cannot widen its roots by adding
    `inputResponses` to a legacy call."""
    guard = RootsGuard([tree.fallback])
    server = order_server(guard, "below")
    async with Client(server, mode="legacy") as client:  # no roots capability: the fallback applies
        forged = {"mcp_roots.roots": {"roots": [{"uri": path_to_uri(tree.outside)}]}}
        result = await client.session.call_tool(  # type: ignore[union-attr]
            "read_text", {"path": str(tree.outside / "secret.txt")}, input_responses=forged
        )
        assert result.is_error
        assert "TOP SECRET" not in text_of(result)


# --- errors and paths as models write them ------------------------------------------------------------


@pytest.mark.parametrize("order", ["below", "above"])
@pytest.mark.parametrize("mode", ERAS)
async def test_os_error_is_one_readable_line_without_a_traceback(
    tree: Tree, mode: str, order: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    server = order_server(RootsGuard([tree.fallback]), order)
    missing = tree.project / "missing.txt"
    result = await call(server, mode, RootsCallback(tree.project), "read_text", path=str(missing))
    assert result.is_error
    assert text_of(result) == f"No such file: '{missing}'"
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]


@pytest.mark.parametrize("mode", ERAS)
async def test_tilde_and_file_uri_arguments_are_refused_with_a_hint(tree: Tree, mode: str) -> None:
    server = order_server(RootsGuard([tree.fallback]), "below")
    (tree.project / "~").mkdir()
    (tree.project / "~" / "x.txt").write_text("a file under a directory named ~")
    callback = RootsCallback(tree.project)
    tilde = await call(server, mode, callback, "read_text", path="~/x.txt")
    assert tilde.is_error
    assert "does not expand" in text_of(tilde)
    uri = await call(server, mode, callback, "read_text", path=path_to_uri(tree.project / "hello.txt"))
    assert uri.is_error
    assert "file: URI" in text_of(uri)


@pytest.mark.parametrize("mode", ERAS)
async def test_expand_user_expands_tilde_and_file_uris(
    tree: Tree, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tree.project))
    server = order_server(RootsGuard([tree.fallback], expand_user=True), "below")
    callback = RootsCallback(tree.project)
    tilde = await call(server, mode, callback, "read_text", path="~/hello.txt")
    assert text_of(tilde) == "hello from project"
    uri = await call(server, mode, callback, "read_text", path=path_to_uri(tree.project / "hello.txt"))
    assert text_of(uri) == "hello from project"
    outside = await call(server, mode, callback, "read_text", path=path_to_uri(tree.outside / "secret.txt"))
    assert outside.is_error
    assert "TOP SECRET" not in text_of(outside)


# --- resources ------------------------------------------------------------------------------------------


def _reader(path: Path) -> Any:
    def read() -> str:
        return path.read_text()

    return read


def resource_server(guard: RootsGuard | None, tree: Tree) -> MCPServer:
    server = MCPServer("resources")
    if guard is not None:
        guard.install(server)
    for path in (tree.project / "hello.txt", tree.outside / "secret.txt"):
        server.resource(path_to_uri(path), name=path.name)(_reader(path))
    return server


@pytest.mark.parametrize("mode", ERAS)
async def test_file_resources_are_checked_against_the_same_roots(tree: Tree, mode: str) -> None:
    callback = RootsCallback(tree.project)
    secret_uri = path_to_uri(tree.outside / "secret.txt")
    async with Client(resource_server(None, tree), mode=mode, list_roots_callback=callback) as client:
        leaked = await client.read_resource(secret_uri)  # the control: an unguarded server serves it
        assert "TOP SECRET" in str(leaked.contents[0])
    async with Client(
        resource_server(RootsGuard([tree.fallback]), tree), mode=mode, list_roots_callback=callback
    ) as client:
        inside = await client.read_resource(path_to_uri(tree.project / "hello.txt"))
        assert "hello from project" in str(inside.contents[0])
        with pytest.raises(MCPError, match="outside the allowed roots"):
            await client.read_resource(secret_uri)


# --- the audit, strict mode, exempt ------------------------------------------------------------------------


def audited_server(guard: RootsGuard) -> MCPServer:
    server = MCPServer("audited")
    guard.install(server)

    @server.tool()
    @guard.paths("path")
    async def read_text(path: str) -> str:
        return Path(path).read_text()  # noqa: ASYNC240

    @server.tool()
    async def leaky_read(path: str) -> str:
        return Path(path).read_text()  # noqa: ASYNC240

    @server.tool()
    @guard.exempt("names a git ref, not a file")
    async def show_ref(ref_path: str) -> str:
        return ref_path

    @server.tool()
    async def add(a: int, b: int) -> int:
        return a + b

    return server


def test_audit_lists_every_tool_with_path_parameters(tree: Tree) -> None:
    guard = RootsGuard([tree.fallback])
    rows = {row.name: row for row in guard.audit(audited_server(guard))}
    assert rows["read_text"].status == "guarded"
    assert rows["leaky_read"].unguarded == ("path",)
    assert rows["show_ref"].status == "exempt: names a git ref, not a file"
    assert rows["add"].status == "no path parameters"


def test_audit_counts_nothing_guarded_when_install_was_forgotten(tree: Tree) -> None:
    guard = RootsGuard([tree.fallback])
    server = order_server(guard, "above", install=False)
    (row,) = guard.audit(server)
    assert row.unguarded == ("path",)


async def test_unguarded_tool_is_warned_once_at_startup(tree: Tree, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="mcp_roots")
    guard = RootsGuard([tree.fallback])
    server = audited_server(guard)
    for _ in range(2):
        async with Client(server, mode="legacy") as client:
            result = await client.call_tool("leaky_read", {"path": str(tree.fallback / "fb.txt")})
            assert not result.is_error  # not strict: only a warning
    warnings = [r.getMessage() for r in caplog.records if "does not check" in r.getMessage()]
    assert len(warnings) == 1
    assert "'leaky_read'" in warnings[0]


@pytest.mark.parametrize("mode", ERAS)
async def test_strict_guard_refuses_an_unguarded_tool_until_guarded_or_exempt(tree: Tree, mode: str) -> None:
    guard = RootsGuard([tree.fallback], strict=True)
    server = audited_server(guard)
    callback = RootsCallback(tree.project)
    async with Client(server, mode=mode, list_roots_callback=callback) as client:
        leaky = await client.call_tool("leaky_read", {"path": str(tree.outside / "secret.txt")})
        assert leaky.is_error
        assert "strict=True" in text_of(leaky)
        assert "TOP SECRET" not in text_of(leaky)
        exempt = await client.call_tool("show_ref", {"ref_path": "refs/heads/main"})
        assert text_of(exempt) == "refs/heads/main"
        guarded = await client.call_tool("read_text", {"path": str(tree.project / "hello.txt")})
        assert text_of(guarded) == "hello from project"
        plain = await client.call_tool("add", {"a": 1, "b": 2})
        assert text_of(plain) == "3"


SERVER_MODULE = """
from pathlib import Path
from mcp.server import MCPServer
from mcp_roots import RootsGuard

server = MCPServer("audited")
guard = RootsGuard(["{root}"])
guard.install(server)

@server.tool()
@guard.paths("path")
def read_text(path: str) -> str:
    return Path(path).read_text()
"""

LEAKY_TOOL = """
@server.tool()
def copy_file(src: str, dest_path: Path) -> str:
    return src
"""


@pytest.mark.parametrize(("leaky", "exit_code"), [(False, 0), (True, 1)])
def test_audit_command_prints_the_table_and_fails_on_unguarded(
    tree: Tree,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    leaky: bool,
    exit_code: int,
) -> None:
    from mcp_roots.cli import main

    name = f"audit_target_{'leaky' if leaky else 'clean'}_{tree.base.name}"
    source = SERVER_MODULE.format(root=tree.fallback) + (LEAKY_TOOL if leaky else "")
    (tree.base / f"{name}.py").write_text(source)
    monkeypatch.chdir(tree.base)
    monkeypatch.setattr("sys.path", list(__import__("sys").path))
    assert main(["audit", f"{name}:server"]) == exit_code
    out = capsys.readouterr().out
    assert "read_text" in out
    assert "guarded" in out
    if leaky:
        assert "UNGUARDED: src, dest_path" in out
        assert "1 of 2 handlers have unguarded path-like parameters" in out


def test_audit_command_says_what_is_wrong_with_its_target(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from mcp_roots.cli import main

    assert main(["audit", "no_such_module_xyz:server"]) == 2
    assert "cannot import 'no_such_module_xyz'" in capsys.readouterr().err
    assert main(["audit", "json"]) == 2
    assert "is not MODULE:SERVER" in capsys.readouterr().err
    assert main(["audit", "json:loads"]) == 2
    err = capsys.readouterr().err
    assert "supports: mcp 2.x MCPServer" in err
    assert "Traceback" not in err


async def test_malformed_modern_roots_answer_is_a_refusal_not_a_crash(tree: Tree) -> None:
    guard = RootsGuard([tree.fallback])
    server = order_server(guard, "below")
    async with Client(server, list_roots_callback=RootsCallback(tree.project)) as client:
        # The SDK client validates what it sends; its dispatcher sends what a hostile client would.
        dispatcher: Any = client.session._dispatcher  # type: ignore[union-attr]
        params = {
            "name": "read_text",
            "arguments": {"path": str(tree.project / "hello.txt")},
            "inputResponses": {"mcp_roots.roots": {"roots": "not a list"}},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {"roots": {}},
            },
        }
        result = await dispatcher.send_raw_request("tools/call", params)
    assert result["isError"] is True
    # (The temporary directory's name holds the test's name: look at the message alone.)
    assert result["content"][0]["text"].startswith("the roots the client sent with this call are malformed")


def template_server(guard: RootsGuard, order: str) -> MCPServer:
    server = MCPServer("templates")
    guard.install(server)
    if order == "below":

        @server.resource("text://{name}")
        @guard.paths("name")
        def text(name: Path) -> str:
            assert isinstance(name, Path)
            assert name.is_absolute()  # the body gets the canonical path
            return name.read_text()

    else:

        @guard.paths("name")
        @server.resource("text://{name}")
        def text(name: Path) -> str:
            assert name.is_absolute()
            return name.read_text()

    return server


@pytest.mark.parametrize("order", ["below", "above"])
@pytest.mark.parametrize("mode", ERAS)
async def test_guarded_resource_template_reads_inside_and_refuses_outside(
    tree: Tree, mode: str, order: str
) -> None:
    (tree.project / "escape.txt").symlink_to(tree.outside / "secret.txt")
    server = template_server(RootsGuard([tree.fallback]), order)
    async with Client(server, mode=mode, list_roots_callback=RootsCallback(tree.project)) as client:
        inside = await client.read_resource("text://hello.txt")
        assert "hello from project" in str(inside.contents[0])
        with pytest.raises(MCPError, match="outside the allowed roots"):
            await client.read_resource("text://escape.txt")


def test_install_says_so_when_the_sdk_moved_a_private_corner(tree: Tree) -> None:
    from mcp_roots import SDKChanged

    server = MCPServer("moved")
    del server._tool_manager  # what a future MCPServer without the registry would look like
    with pytest.raises(SDKChanged, match="_tool_manager"):
        RootsGuard([tree.fallback]).install(server)


@pytest.mark.parametrize("install", [True, False])
async def test_guard_roots_without_install_refuses_instead_of_using_the_fallback(
    tree: Tree, install: bool
) -> None:
    guard = RootsGuard([tree.fallback])
    server = MCPServer("plain")
    if install:
        guard.install(server)

    @server.tool()
    async def list_roots(ctx: Context) -> str:
        return ",".join(str(p) for p in (await guard.roots(ctx)).paths)

    async with Client(server, mode="legacy", list_roots_callback=RootsCallback(tree.project)) as client:
        result = await client.call_tool("list_roots", {})
    if install:
        assert text_of(result) == str(tree.project)
    else:  # never the fallback: it is wider than what this client granted
        assert result.is_error
        assert "guard.install(server) was not called" in text_of(result)
        assert str(tree.fallback) not in text_of(result)
