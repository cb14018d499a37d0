"""The pytest plugin's ``assert_confined`` against real servers in memory: guarded servers of the mcp 2.x
adapter (MCPServer, low-level Server) and of fastmcp 4.x pass; an unguarded server and each deliberately
broken server (tests/broken_servers) fail, caught by the technique made for its bug. A stdio command too.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest
from fastmcp import Context as FastContext
from fastmcp import FastMCP
from mcp.server import MCPServer, Server
from mcp.server.context import ServerRequestContext
from mcp_types import (
    ListResourcesResult,
    ReadResourceRequestParams,
    ReadResourceResult,
    Resource,
    TextResourceContents,
)

from mcp_roots import RootsGuard
from mcp_roots.testing import assert_confined
from tests.broken_servers.broken_server import BUGS
from tests.broken_servers.broken_server import build as build_broken
from tests.kit import load_file_server, lowlevel_server

pytestmark = pytest.mark.anyio

BROKEN = Path(__file__).resolve().parents[1] / "broken_servers" / "broken_server.py"
#: Each bug, and the technique made to catch it.
MADE_FOR = {
    "prefix": "sibling-prefix",
    "parent-realpath": "symlink-final",
    "normalize-dotdot": "dotdot-after-symlink",
    "swap": "swap-race",
    "double-decode": "percent-root",
    "write-follows": "dangling-symlink",
    "nfc": "unicode-twin",
    "template": "template-dotdot",
}
#: Enough to cover every technique's kind quickly: the control, one per bug family.
QUICK = [
    "absolute-outside",
    "dotdot",
    "symlink-final",
    "dotdot-after-symlink",
    "percent-encoded",
    "magic-link",
]


def guard_for(root: Path) -> RootsGuard:
    return RootsGuard([str(root)], ceiling=[str(root)], environ={}, user_config_dir=root / "no-config")


def test_every_bug_has_its_technique() -> None:
    assert set(MADE_FOR) == set(BUGS)


ASYNCIO_ONLY = pytest.mark.parametrize("anyio_backend", ["asyncio"])  # the runner's trio run: the mcp2 tests


@ASYNCIO_ONLY
@pytest.mark.parametrize("bug", BUGS)
async def test_each_broken_server_is_caught_by_the_technique_made_for_it(bug: str) -> None:
    technique = MADE_FOR[bug]
    # The race needs the server in a process of its own (in this one, the GIL spaces out the swaps).
    server: Any = [sys.executable, str(BROKEN), bug, "{root}"] if bug == "swap" else None
    with pytest.raises(AssertionError) as caught:
        await assert_confined(
            server or (lambda root: build_broken(bug, str(root))),
            techniques=["absolute-outside", technique],
            eras=["legacy"],
            declare_roots=[True],
            race_attempts=200,  # the run stops at the first escape: a few calls, usually
        )
    message = str(caught.value)
    assert f": {technique} ESCAPED" in message, message
    # The control: the broken server does refuse a plain outside path, so the escape is its bug's.
    assert "absolute-outside" not in message, message


async def test_an_unguarded_server_fails_and_the_report_names_the_way_out() -> None:
    server = MCPServer("naive")

    @server.tool()
    def read_file(path: str) -> str:
        with open(path) as f:
            return f.read()

    with pytest.raises(AssertionError, match=r"read_file path: absolute-outside ESCAPED"):
        await assert_confined(server, tool="read_file", arg="path", techniques=["absolute-outside"])


async def test_the_mcp2_mcpserver_guarded_by_mcp_roots_is_confined(anyio_backend: str) -> None:
    example = load_file_server()
    report = await assert_confined(
        lambda root: example.build_server(guard_for(root)), tool="read_text", arg="path", race_attempts=8
    )
    assert set(report.connections) == {"legacy", "legacy+roots", "modern", "modern+roots"}
    assert not report.findings
    assert {r.technique for r in report.rows} >= {"swap-race", "fifo", "magic-link", "percent-root"}
    # Every row means something: the tool read the inside file (its control) on every connection.
    assert {r.outcome for r in report.rows if r.tool == "read_text"} == {"held", "noted"}
    # It offers no resources (the capability, but nothing listed): no resources/read row claims it held.
    assert not any(r.tool == "resources/read" for r in report.rows)


async def test_the_mcp2_lowlevel_server_guarded_by_mcp_roots_is_confined() -> None:
    report = await assert_confined(
        lambda root: lowlevel_server(guard_for(root)), tool="read_text", techniques=QUICK
    )
    assert report.rows
    assert not report.findings


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # fastmcp 4 runs on asyncio only
async def test_the_fastmcp4_server_guarded_by_mcp_roots_is_confined() -> None:
    def build(root: Path) -> FastMCP[Any]:
        server: FastMCP[Any] = FastMCP("files")
        guard = guard_for(root)
        guard.install(server)

        @server.tool
        @guard.paths("path")
        async def read_text(path: str, ctx: FastContext) -> str:
            roots = await guard.roots(ctx)
            return roots.read_text(path)

        return server

    report = await assert_confined(build, tool="read_text", arg="path", techniques=QUICK)
    assert {r.connection for r in report.rows} == {"legacy", "legacy+roots", "modern", "modern+roots"}
    assert not report.findings


@ASYNCIO_ONLY
async def test_a_stdio_command_is_probed_in_the_scratch_tree() -> None:
    command = [sys.executable, str(BROKEN), "prefix", "{root}"]
    with pytest.raises(AssertionError, match="sibling-prefix ESCAPED"):
        await assert_confined(
            command, tool="read_file", techniques=["sibling-prefix"], eras=["legacy"], declare_roots=[False]
        )


async def test_a_listing_of_the_root_that_follows_a_link_out_is_caught_by_the_controls() -> None:
    """No technique's path is needed: listing the root itself, following symlinks, shows what is outside."""
    server = MCPServer("follows-links")

    @server.tool()
    def tree(path: str) -> list[str]:
        """A directory tree. path: the directory."""
        names: list[str] = []
        for top, dirs, files in os.walk(path, followlinks=True):
            if top.count(os.sep) - path.count(os.sep) >= 1:
                dirs[:] = []  # one level below the root is enough to show the leak (and not walk /proc)
            names += files
        return names[:2000]

    with pytest.raises(AssertionError, match=r"tree path: inside-control ESCAPED"):
        await assert_confined(server, techniques=["absolute-outside"], eras=["legacy"])


@ASYNCIO_ONLY
async def test_a_server_in_this_process_is_never_sent_a_path_relative_to_its_working_directory() -> None:
    """In memory the server's working directory is the test's: a relative path (or /proc/self/cwd) could
    lead a broken write tool there, outside the scratch tree. The probe sends none."""
    seen: list[str] = []
    server = MCPServer("records")

    @server.tool()
    def write_file(path: str, content: str) -> str:
        seen.append(path)
        return "ok"

    # The stub writes nothing, so no verdict of it is earned (it would fail the run): only the paths it is
    # sent are looked at here.
    report = await assert_confined(server, race_attempts=2, allow_unreached=["write_file"])
    assert list(report.unobserved) == ["write_file.path"]
    assert len(seen) > 40
    assert [p for p in seen if not p.startswith("/") or p.startswith("/proc/self/cwd")] == []


async def test_resources_read_of_file_uris_is_probed() -> None:
    """A server whose resources/read opens any file: URI it is given is caught, with no tool at all."""

    async def read(
        ctx: ServerRequestContext[Any, Any], params: ReadResourceRequestParams
    ) -> ReadResourceResult:
        path = unquote(urlsplit(str(params.uri)).path)
        with open(path) as f:  # noqa: ASYNC230 - the naive server under test
            return ReadResourceResult(contents=[TextResourceContents(uri=params.uri, text=f.read())])

    async def listing(ctx: ServerRequestContext[Any, Any], params: Any) -> ListResourcesResult:
        return ListResourcesResult(resources=[Resource(uri="file:///srv/docs/readme.txt", name="readme")])

    server: Server[Any] = Server("naive-resources", on_read_resource=read, on_list_resources=listing)
    with pytest.raises(AssertionError, match=r"resources/read uri: absolute-outside ESCAPED"):
        await assert_confined(server, techniques=["absolute-outside"], eras=["legacy"])


async def test_a_connection_that_fails_fails_the_assertion() -> None:
    def build(root: Path) -> MCPServer:
        raise RuntimeError("this server cannot be built")

    with pytest.raises(AssertionError, match=r"could not finish.*this server cannot be built"):
        await assert_confined(build, techniques=["absolute-outside"], eras=["legacy"], declare_roots=[True])


async def test_a_tool_the_server_lacks_is_a_usage_error() -> None:
    with pytest.raises(ValueError, match="no tool named 'nope'"):
        await assert_confined(lambda root: build_broken("prefix", str(root)), tool="nope", arg="path")


def test_the_plugin_is_registered_and_only_adds_a_fixture(tmp_path: Path) -> None:
    """Registered by entry point: a project's test gets the fixture without importing anything; with the
    plugin disabled the fixture is gone (so the entry point is what brings it)."""
    (tmp_path / "test_it.py").write_text(
        "def test_fixture(mcp_roots_probe):\n    assert mcp_roots_probe.__name__ == 'assert_confined'\n"
    )
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_it.py"]
    with_plugin = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert with_plugin.returncode == 0, with_plugin.stdout + with_plugin.stderr
    without = subprocess.run(
        [*argv, "-p", "no:mcp_roots"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert "fixture 'mcp_roots_probe' not found" in without.stdout


def test_a_failing_probe_shows_the_findings_grouped_not_the_plugins_source(tmp_path: Path) -> None:
    """The failure a user reads: one block per technique, one line per tool and place with every connection
    that showed it; the plugin's own frames hidden (no line of testing.py in the traceback)."""
    (tmp_path / "test_it.py").write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(BROKEN.parent)!r})\n"
        "import pytest\n"
        "from broken_server import build\n"
        "from mcp_roots.testing import assert_confined\n\n"
        "@pytest.mark.anyio\n"
        "@pytest.mark.parametrize('anyio_backend', ['asyncio'])\n"
        "async def test_it(anyio_backend):\n"
        "    await assert_confined(lambda root: build('prefix', str(root)), tool='read_file', arg='path',\n"
        "                          techniques=['sibling-prefix'], eras=['legacy', 'modern'])\n"
    )
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_it.py"]
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=240)
    assert done.returncode == 1, done.stdout + done.stderr
    out = done.stdout
    assert "  sibling-prefix:\n" in out, out
    # the failure's own message (pytest's short summary may repeat it, depending on the terminal's width)
    failure = out.split("short test summary info", 1)[0]
    lines = [line for line in failure.splitlines() if "read_file path: sibling-prefix ESCAPED" in line]
    assert len(lines) == 1, out  # once, with its connections, not once per connection
    assert "[legacy, legacy+roots, modern, modern+roots]" in lines[0], lines[0]
    assert "testing.py" not in out, out  # __tracebackhide__: the plugin's source is not shown
