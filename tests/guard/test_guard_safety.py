"""Safe by construction: mistakes a user can make with RootsGuard on `mcp` 2.x no longer leak.

Decorator order, a forgotten install(), guard.roots(ctx) on 2026-07-28 without @guard.paths (MCPServer and
low-level Server), the ceiling checked before asking the client, OS errors as one readable line, `~` and
file:// arguments, file: resources, the audit and strict mode. Real SDK, in-memory transport, both eras,
asyncio and trio; every refusal test has a naive control that shows the leak it prevents.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.server import MCPServer, Server
from mcp.server.mcpserver import Context
from pydantic import BaseModel
from typing_extensions import TypedDict

from mcp_roots import RootsGuard, path_to_uri
from mcp_roots.guard._audit import guarded_function_of
from tests.kit import RootsCallback, Tree, file_reader, lowlevel_server, text_of

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
    async with Client(server, mode=mode, **kwargs) as client:
        return await client.call_tool(tool, args)


# --- decorator order --------------------------------------------------------------------------------


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
        assert client.session.protocol_version == "2026-07-28"
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


async def test_modern_roots_sent_unasked_on_a_legacy_connection_are_ignored(tree: Tree) -> None:
    """Only an answer to the guard's own input request counts: a client cannot widen its roots by adding
    `inputResponses` to a legacy call."""
    guard = RootsGuard([tree.fallback])
    server = order_server(guard, "below")
    async with Client(server, mode="legacy") as client:  # no roots capability: the fallback applies
        forged: Any = {"mcp_roots.roots": {"roots": [{"uri": path_to_uri(tree.outside)}]}}  # raw, unvalidated
        result = await client.session.call_tool(
            "read_text", {"path": str(tree.outside / "secret.txt")}, input_responses=forged
        )
        assert result.is_error
        assert "TOP SECRET" not in text_of(result)


# --- errors and paths as models write them ------------------------------------------------------------


@pytest.mark.parametrize("mode", ERAS)
async def test_the_wrappers_by_name_step_answers_what_binding_answers(tree: Tree, mode: str) -> None:
    """A guard of one ``str`` parameter takes an absolute path passed by name in one step (no binding, one
    ``resolve_text``); a default on the parameter sends the same values through binding and ``spec.check``.
    Both tools must answer every value alike -- the file, or the same refusal -- and the unguarded control
    shows what each refusal keeps out."""
    guard = RootsGuard([tree.fallback], ceiling=str(tree.base))
    server = MCPServer("by-name")
    guard.install(server)

    @server.tool()
    @guard.paths("path")
    async def one_step(path: str) -> str:
        return Path(path).read_text()  # noqa: ASYNC240

    @server.tool()
    @guard.paths("path")
    async def bound(path: str = "unused") -> str:
        return Path(path).read_text()  # noqa: ASYNC240

    @server.tool()
    @guard.paths("path")
    def one_step_sync(path: str) -> str:
        return Path(path).read_text()

    @server.tool()
    @guard.paths("path")
    def bound_sync(path: str = "unused") -> str:
        return Path(path).read_text()

    @server.tool()
    async def naive(path: str) -> str:
        return Path(path).read_text()  # noqa: ASYNC240

    for tool in (one_step, one_step_sync):
        assert getattr(guarded_function_of(tool), "text_param", None) == "path"  # the one step
    for tool in (bound, bound_sync):
        assert getattr(guarded_function_of(tool), "text_param", "?") is None  # binding and spec.check
    values = [
        str(tree.project / "hello.txt"),
        str(tree.project / "sub" / ".." / "hello.txt"),
        str(tree.project) + "//sub/deep.txt",
        str(tree.project / "escape" / "secret.txt"),  # a symlink out
        str(tree.project / ".." / "outside" / "secret.txt"),
        str(tree.outside / "secret.txt"),  # outside the roots, inside the ceiling
        "/etc/hostname",  # outside the ceiling
        str(tree.project / "missing.txt"),
        "hello.txt",  # relative: the general path on both
        path_to_uri(tree.project / "hello.txt"),
        "~/hello.txt",
    ]
    callback = RootsCallback(tree.project)
    async with Client(server, mode=mode, list_roots_callback=callback) as client:
        for value in values:
            for suffix in ("", "_sync"):
                fast = await client.call_tool("one_step" + suffix, {"path": value})
                slow = await client.call_tool("bound" + suffix, {"path": value})
                assert (fast.is_error, text_of(fast)) == (slow.is_error, text_of(slow)), value
                assert "TOP SECRET" not in text_of(fast)
        assert text_of(await client.call_tool("one_step", {"path": values[0]})) == "hello from project"
        leaked = await client.call_tool("naive", {"path": values[3]})
        assert "TOP SECRET" in text_of(leaked)  # the control: unguarded, the symlink leads out


@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")  # list_changed
async def test_outside_the_ceiling_is_refused_without_waiting_for_a_refresh_that_is_due(tree: Tree) -> None:
    """Legacy era: after list_changed a guarded call waits for the refresh (no stale roots), but a path
    outside the operator's ceiling is refused at once: no answer can make it allowed. (The guard would
    wait up to its timeout, 60 s here; the ``fail_after`` only bounds a failing test.)"""
    guard = RootsGuard([tree.fallback], ceiling=str(tree.project), timeout=60)
    server = MCPServer("ceiling-while-due")
    guard.install(server)

    @server.tool()
    @guard.paths("path")
    async def read_text(path: str) -> str:
        return Path(path).read_text()  # noqa: ASYNC240

    gate = anyio.Event()
    asked: list[int] = []

    async def roots(context: Any) -> Any:
        asked.append(1)
        if len(asked) > 1:  # the refresh: answered once the test opens the gate
            await gate.wait()
        return RootsCallback.result(tree.project)

    hello = str(tree.project / "hello.txt")
    async with Client(server, mode="legacy", list_roots_callback=roots) as client:
        assert text_of(await client.call_tool("read_text", {"path": hello})) == "hello from project"
        await client.send_roots_list_changed()
        with anyio.fail_after(30):
            result = await client.call_tool("read_text", {"path": str(tree.outside / "secret.txt")})
        assert result.is_error
        assert "outside the allowed roots" in text_of(result)
        assert not gate.is_set()  # refused while the refresh was due
        seen: list[str] = []

        async def inside() -> None:
            seen.append(text_of(await client.call_tool("read_text", {"path": hello})))

        async with anyio.create_task_group() as tg:
            tg.start_soon(inside)
            gate.set()
        assert seen == ["hello from project"]
        assert len(asked) == 2


# --- resources ------------------------------------------------------------------------------------------


def resource_server(guard: RootsGuard | None, tree: Tree) -> MCPServer:
    server = MCPServer("resources")
    if guard is not None:
        guard.install(server)
    for path in (tree.project / "hello.txt", tree.outside / "secret.txt"):
        server.resource(path_to_uri(path), name=path.name)(file_reader(path))
    return server


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
    assert row.not_installed


@dataclass
class Checkout:
    workdir: str
    depth: int = 1


class Upload(TypedDict):
    file_name: str
    size: int


class Step(BaseModel):
    src: Path
    note: str = ""


def test_the_audit_and_strict_look_inside_parameters(tree: Tree) -> None:
    """Paths inside parameters beyond pydantic models: dataclasses, TypedDicts, lists and dicts of models;
    one name rule (short names such as ``fname`` included), each unguarded part listed by its locator."""
    guard = RootsGuard([tree.fallback], strict=True)
    server = MCPServer("nested")
    guard.install(server)

    @server.tool()
    def nested(co: Checkout, up: Upload, steps: list[Step], by_name: dict[str, Step], pathname: str) -> str:
        return ""

    @server.tool()
    @guard.paths("co", "up.file_name", "steps[].src", "by_name", "pathname")
    def guarded(co: Checkout, up: Upload, steps: list[Step], by_name: dict[str, Step], pathname: str) -> str:
        return ""

    @server.tool()
    def plain(co_depth: int, note: str, profile: str, file_size: int) -> str:
        return ""

    rows = {row.name: row for row in guard.audit(server)}
    places = ("co.workdir", "up.file_name", "steps[].src", "by_name{}.src", "pathname")
    assert rows["nested"].unguarded == places
    assert rows["guarded"].path_parameters == places
    assert rows["guarded"].status == "guarded"
    assert rows["plain"].status == "no path parameters"


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
        dispatcher: Any = client.session._dispatcher
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


@pytest.mark.parametrize("uri", ["file:///{path}", "FILE:///{path}", "File:///srv/{path}"])
def test_a_file_template_counts_as_checked_by_uri_as_its_reads_are_checked(uri: str) -> None:
    """The audit's "checked by URI" and the read check are one test (schemes compare without case), on
    every adapter: a case-sensitive copy of it (mcp 1.x's, before) called a FILE: template unguarded while
    its reads were checked."""
    from mcp_roots.guard._audit import Handler, audit_handlers
    from mcp_roots.paths._uri import is_file_uri

    async def read(path: str) -> str:
        return path

    handler = Handler("resource template", uri, read, {"path": str})
    assert is_file_uri(uri)
    assert handler.checked_by_uri
    assert uri[:5] != "file:" or uri == "file:///{path}"  # the old copy saw only the lower-case spelling
    [row] = audit_handlers([handler], ())
    assert row.path_parameters == ("path",), row  # a path-like parameter, unguarded by any decorator...
    assert not row.unguarded, row  # ...yet checked, as its reads are
    assert not Handler("tool", uri, read, {"path": str}).checked_by_uri
    assert not Handler("resource template", "text://{path}", read, {"path": str}).checked_by_uri
