"""The host pages (docs/host-*.md): every configuration on them started as that host starts it (the
command found on PATH, the arguments as written, the host's variables and the page's folders replaced by a
scratch project), asked as that host asks (with the roots it sends, or none), and its refusal compared with
the one the page shows.

The pages' ``npx -y @modelcontextprotocol/server-filesystem`` runs from the pinned local install
(tests/interop, offline: no network reaches the tests), readable by the wrapped server through ``--read``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from .kit import INTEROP, REPO, blocks, connected

pytestmark = pytest.mark.anyio

#: page -> (the folders its configurations name, whether that host sends roots).
PAGES: dict[str, tuple[tuple[str, ...], bool]] = {
    "host-vscode.md": (("${workspaceFolder}",), True),
    "host-claude-code.md": (("/home/me/project",), False),
    "host-claude-desktop.md": (("/Users/me/projects", "/home/me/projects"), False),  # macOS and Linux
    "host-cursor.md": (("/home/me/project",), False),
}
NPX = ["npx", "-y", "@modelcontextprotocol/server-filesystem"]


def _configs() -> list[Any]:
    found = []
    for page, (folders, sends_roots) in PAGES.items():
        path = REPO / "docs" / page
        for block in blocks(path):
            if block.info != "json":
                continue
            value = json.loads(block.text)
            for name, server in value.get("servers", value.get("mcpServers", {})).items():
                found.append(pytest.param(page, folders, sends_roots, server, id=f"{block.where}:{name}"))
    return found


CONFIGS = _configs()


def test_every_host_has_a_page_with_a_serve_and_a_wrap_configuration() -> None:
    for page in PAGES:
        kinds = sorted(server["args"][0] for p, *_, server in (c.values for c in CONFIGS) if p == page)
        assert kinds == ["serve", "wrap"], page


def _argv(server: dict[str, Any], folders: tuple[str, ...], project: Path) -> list[str]:
    """The command line the host runs: ``mcp-roots`` is this environment's, the npx server the local one."""
    command = server["command"]
    assert Path(command).name == "mcp-roots", command
    script = Path(sys.executable).parent / "mcp-roots"
    args = [str(project) if a in folders else a for a in server["args"]]
    if args[0] == "wrap":
        at = next(i for i in range(len(args)) if args[i : i + 3] == NPX)
        npx = shutil.which("npx")
        if npx is None:
            pytest.fail("npx is not installed; it comes with Node's npm")
        local = [npx, "--prefix", str(INTEROP), "--no-install", "--offline", "mcp-server-filesystem"]
        args = ["wrap", "--read", str(INTEROP), *args[1:at], *local, *args[at + 3 :]]
    return [str(script), *args]


def _shown_refusal(page: str, project: Path) -> str:
    """The refusal the page shows (its ``text`` block), for the scratch project."""
    (block,) = [b for b in blocks(REPO / "docs" / page) if b.info == "text"]
    shown = block.text.strip()
    placeholder = re.search(r"\((/(?:home|Users)/me/[^)]+)\)", shown)
    assert placeholder, shown
    return shown.replace(placeholder.group(1), str(project))


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # the servers are processes: one loop is enough
@pytest.mark.parametrize(("page", "folders", "sends_roots", "server"), CONFIGS)
async def test_a_host_config_starts_a_server_that_reads_inside_and_refuses_as_the_page_shows(
    anyio_backend: str,
    tmp_path: Path,
    page: str,
    folders: tuple[str, ...],
    sends_roots: bool,
    server: dict[str, Any],
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "notes.txt").write_text("hello")
    argv = _argv(server, folders, project)
    env = {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    async with connected(argv, [str(project)] if sends_roots else None, **env) as host:
        await host.initialize(roots=sends_roots)
        assert await host.text("read_text_file", {"path": str(project / "notes.txt")}) == "hello"
        answer = await host.call("read_text_file", {"path": "/etc/passwd"})
    assert answer["result"]["isError"] is True
    text = answer["result"]["content"][0]["text"]
    assert text == _shown_refusal(page, project)
