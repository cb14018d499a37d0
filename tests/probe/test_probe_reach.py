"""The probe reaches every path a tool's input schema holds (a model's field, an array of objects, two objects
deep, a file: URI), each shown first leaking past the old top-level-only discovery; what it cannot reach it
names, and a file tool it cannot reach fails the run (exit 3) and the plugin."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp.server import MCPServer
from pydantic import BaseModel

from mcp_roots.probe import _runner
from mcp_roots.probe._discover import PathArgument
from mcp_roots.testing import assert_confined
from tests.broken_servers.shapes_server import SHAPES
from tests.broken_servers.shapes_server import build as build_shape

pytestmark = pytest.mark.anyio
ASYNCIO_ONLY = pytest.mark.parametrize("anyio_backend", ["asyncio"])
SHAPES_SERVER = Path(__file__).resolve().parents[1] / "broken_servers" / "shapes_server.py"
MCP_ROOTS = [sys.executable, "-m", "mcp_roots.cli"]


def top_level_only(tool: dict[str, Any]) -> list[PathArgument]:
    """The probe's discovery before this change: top-level string properties judged by name only."""
    names = ("path", "file", "uri", "dir")
    return [
        PathArgument(tool["name"], name, uri=name == "uri")
        for name, prop in ((tool.get("inputSchema") or {}).get("properties") or {}).items()
        if isinstance(prop, dict) and prop.get("type") == "string" and any(n in name for n in names)
    ]


@ASYNCIO_ONLY
@pytest.mark.parametrize("shape", list(SHAPES))
async def test_each_shape_leaks_past_top_level_discovery_and_is_found(
    shape: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    tool, locator, technique = SHAPES[shape]

    def server(root: Path) -> MCPServer:
        return build_shape(shape, str(root))

    options: dict[str, Any] = {
        "techniques": ["absolute-outside", technique],
        "eras": ["legacy"],
        "declare_roots": [False],
    }
    # The control: the old discovery finds no path in the tool, and the run says nothing got out.
    with monkeypatch.context() as patch:
        patch.setattr(_runner, "path_arguments", top_level_only)
        blind = await assert_confined(server, allow_unreached=[tool], **options)
    assert blind.escapes == []
    assert blind.arguments == []
    # The schema walk reaches the path, builds a whole valid argument around it, and the escape shows.
    with pytest.raises(AssertionError) as caught:
        await assert_confined(server, **options)
    message = str(caught.value)
    assert f"{tool} {locator}: {technique} ESCAPED" in message, message
    assert "absolute-outside" not in message, message  # the server does refuse a plain outside path


@ASYNCIO_ONLY
async def test_a_locator_names_a_place_inside_an_argument() -> None:
    with pytest.raises(AssertionError, match=r"write_job job.path: sibling-prefix ESCAPED"):
        await assert_confined(
            lambda root: build_shape("model", str(root)),
            tool="write_job",
            arg="job.path",
            techniques=["sibling-prefix"],
            eras=["legacy"],
            declare_roots=[False],
        )


class Ticket(BaseModel):
    ident: int


class Tree(BaseModel):
    label: str
    children: list[Tree] = []


async def test_a_recursive_argument_is_listed_as_not_followed() -> None:
    server = MCPServer("trees")

    @server.tool()
    def count(tree: Tree) -> int:
        return 1 + sum(count(c) for c in tree.children)

    report = await assert_confined(server, techniques=["dotdot"], eras=["legacy"])
    assert report.unreached == {
        "count": "no path found in its input schema",
        "count.tree.children[]...": "nested too deep or recursive: not followed",
    }


def unreachable_server(root: Path) -> MCPServer:
    """A file tool whose schema holds no path the probe can find: it cannot be probed."""
    server = MCPServer("opaque-files")

    @server.tool()
    def read_file(ticket: Ticket) -> str:
        """Read the file a ticket stands for."""
        return f"ticket {ticket.ident}"

    @server.tool()
    def add(a: int, b: int) -> int:
        return a + b

    return server


@ASYNCIO_ONLY
async def test_a_file_tool_that_cannot_be_reached_fails_the_plugin() -> None:
    options: dict[str, Any] = {
        "techniques": ["absolute-outside"],
        "eras": ["legacy"],
        "declare_roots": [False],
    }
    with pytest.raises(AssertionError) as caught:
        await assert_confined(unreachable_server, **options)
    message = str(caught.value)
    assert "file tool 'read_file' was not reached (read_file: no path found in its input schema)" in message
    assert "'add'" not in message  # not a file tool: listed in the report, not a failure
    report = await assert_confined(unreachable_server, allow_unreached=["read_file"], **options)
    assert report.unreached == {
        "read_file": "no path found in its input schema",
        "add": "no path found in its input schema",
    }


def validation_server(root: Path) -> MCPServer:
    """A path the schema shows as a string, but the tool's input validation refuses every string."""
    server = MCPServer("picky")

    @server.tool()
    def read_file(path: str, size: int) -> str:
        """Read a file."""
        return "never"

    return server


@ASYNCIO_ONLY
async def test_a_call_refused_by_input_validation_is_not_reached_never_held(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Every call the probe builds is refused by the server's validation (a required field it cannot fill).
    from mcp_roots.probe import _discover

    real = _discover.fill_arguments

    def without_size(*args: Any, **kwargs: Any) -> dict[str, Any]:
        return {k: v for k, v in real(*args, **kwargs).items() if k != "size"}

    monkeypatch.setattr(_runner, "fill_arguments", without_size)
    with pytest.raises(
        AssertionError, match=r"file tool 'read_file' was not reached \(read_file.path: refused"
    ):
        await assert_confined(
            validation_server, techniques=["dotdot"], eras=["legacy"], declare_roots=[False]
        )
    report = await assert_confined(
        validation_server,
        techniques=["dotdot"],
        eras=["legacy"],
        declare_roots=[False],
        allow_unreached=["read_file"],
    )
    assert {r.outcome for r in report.rows} == {"not reached"}
    assert report.unreached["read_file.path"].startswith("refused by input validation")


def probe(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*MCP_ROOTS, "probe", *args], capture_output=True, text=True, timeout=240)


def test_the_cli_finds_a_nested_path_and_names_its_class(tmp_path: Path) -> None:
    done = probe(
        "--json", "--era", "legacy", "--client-roots", "none", "--technique", "sibling-prefix",
        "--scratch-dir", str(tmp_path), "--", sys.executable, str(SHAPES_SERVER), "array", "{root}",
    )  # fmt: skip
    assert done.returncode == 1, done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert report["arguments"] == ["save_all.items[].file_path"]
    assert [r["outcome"] for r in report["rows"] if r["technique"] == "sibling-prefix"] == ["ESCAPED"]
    assert report["classes"] == ["CVE-2025-53110 sibling prefix (CWE-22)"]  # what a CI gates on
    assert {r["weakness"] for r in report["rows"] if r["technique"] == "sibling-prefix"} == {
        "CVE-2025-53110 sibling prefix (CWE-22)"
    }
    assert list(tmp_path.iterdir()) == []


def test_an_unreached_file_tool_exits_3_unless_allowed(tmp_path: Path) -> None:
    code = (
        "from mcp.server import MCPServer\n"
        "s = MCPServer('x')\n"
        "@s.tool()\n"
        "def read_file(ident: int) -> str:\n"
        "    '''Read a file by number.'''\n"
        "    return 'x'\n"
        "s.run('stdio')\n"
    )
    server = tmp_path / "server.py"
    server.write_text(code)
    base = ("--era", "legacy", "--client-roots", "none", "--technique", "dotdot")
    done = probe(*base, "--", sys.executable, str(server), "{root}")
    assert done.returncode == 3, done.stdout + done.stderr[-2000:]
    assert "FAILED: file tool 'read_file' was not reached" in done.stdout
    assert "1 place(s) not reached" in done.stdout
    done = probe(*base, "--allow-unreached", "read_file", "--", sys.executable, str(server), "{root}")
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("--tool", "nosuch:path"), "the server has no tool named 'nosuch'"),
        (("--tool", "write_job:job"), "no string at 'job'"),
    ],
)
def test_a_bad_tool_is_one_line_and_exit_2(args: tuple[str, ...], expected: str) -> None:
    done = probe(
        "--era", "legacy", "--client-roots", "none", *args,
        "--", sys.executable, str(SHAPES_SERVER), "model", "{root}",
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert expected in done.stderr
    assert len(done.stderr.strip().splitlines()) <= 2  # the line, and at most the {root} warning
    assert "Traceback" not in done.stderr


def test_a_missing_command_is_one_line_and_exit_2() -> None:
    done = probe("--", "/nonexistent/mcp-server-nope", "{root}")
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if "error" in line]
    assert len(lines) == 1, done.stderr
    assert "/nonexistent/mcp-server-nope" in lines[0]


def guarded_models(adapter: str, root: Path) -> Any:
    """The same three shapes, guarded by mcp-roots (``@guard.paths`` with locators), on one adapter."""
    from fastmcp import Context as FastContext
    from fastmcp import FastMCP
    from mcp.server.mcpserver import Context

    from mcp_roots import RootsGuard
    from tests.broken_servers.shapes_server import Export, Item, Job

    guard = RootsGuard([str(root)], ceiling=[str(root)], environ={}, user_config_dir=root / "no-config")
    server: Any = FastMCP("files") if adapter == "fastmcp4" else MCPServer("files")
    guard.install(server)
    tool = server.tool if adapter == "fastmcp4" else server.tool()
    ctx_type: Any = FastContext if adapter == "fastmcp4" else Context

    @guard.paths("job.path")
    async def write_job(job: Job, ctx: ctx_type) -> str:
        """Run a job: return what its file holds."""
        return (await guard.roots(ctx)).read_text(job.path)

    @guard.paths("items[].file_path")
    async def save_all(items: list[Item], ctx: ctx_type) -> str:
        """Return each item's file."""
        roots = await guard.roots(ctx)
        return "\n".join(roots.read_text(item.file_path) for item in items)

    @guard.paths("request.output.path")
    async def export(request: Export, ctx: ctx_type) -> str:
        """Return what the report's file holds."""
        return (await guard.roots(ctx)).read_text(request.output.path)

    for fn in (write_job, save_all, export):
        tool(fn)
    return server


@pytest.mark.parametrize(
    ("adapter", "anyio_backend"), [("mcp2", "asyncio"), ("mcp2", "trio"), ("fastmcp4", "asyncio")]
)
async def test_guarded_model_arguments_are_reached_and_hold(adapter: str) -> None:
    report = await assert_confined(
        lambda root: guarded_models(adapter, root),
        techniques=["absolute-outside", "dotdot", "sibling-prefix", "symlink-final", "percent-encoded"],
        eras=["legacy"],
    )
    assert sorted(report.arguments) == [
        "export.request.output.path",
        "save_all.items[].file_path",
        "write_job.job.path",
    ]
    assert report.unreached == {}
    assert not report.findings
    # Every row means something: each tool read the inside file, so 'held' is the tool's own refusal.
    assert {r.outcome for r in report.rows} == {"held"}
