"""The mcp 1.x client of docs/client.md (``client_mcp1.py``, RootsProvider on a 1.x ``ClientSession``) run as
the page says against the README's ``server_mcp1.py``, and the provider's ``list_changed`` reaching a guarded
mcp 1.x server when the user adds a folder."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from mcp_roots import RootsProvider

from ..kit import README, REPO, blocks, command_lines

CLIENT_PAGE = REPO / "docs" / "client.md"


def _write(directory: Path) -> None:
    for block in [*blocks(README), *blocks(CLIENT_PAGE)]:
        if block.file_name in ("server_mcp1.py", "client_mcp1.py"):
            (directory / block.file_name).write_text(block.text, encoding="utf-8")


def test_the_documented_mcp1_client_answers_as_the_page_shows(tmp_path: Path) -> None:
    _write(tmp_path)
    project = tmp_path / "project"
    project.mkdir()
    (project / "notes.txt").write_text("hello")
    (console,) = [b for b in blocks(CLIENT_PAGE) if b.info == "console" and "client_mcp1.py" in b.text]
    (command,) = command_lines(console)
    shown = [line for line in console.text.splitlines() if line and not line.startswith("$ ")]
    argv = command.replace("/tmp/project", str(project)).split()
    assert argv[0] == "python"
    done = subprocess.run(
        [sys.executable, *argv[1:]], cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == [line.replace("/tmp/project", str(project)) for line in shown]
    assert "Traceback" not in done.stderr


@pytest.fixture
def errlog(tmp_path: Path) -> Iterator[TextIO]:
    with open(tmp_path / "stderr.log", "w") as file:
        yield file


@pytest.mark.anyio
async def test_a_folder_the_user_adds_reaches_an_mcp1_server_through_list_changed(
    tmp_path: Path, errlog: TextIO
) -> None:
    _write(tmp_path)
    first, second = tmp_path / "first", tmp_path / "second"
    for folder in (first, second):
        folder.mkdir()
        (folder / "notes.txt").write_text(folder.name)
    provider = RootsProvider([first], debounce=0.0)
    params = StdioServerParameters(command=sys.executable, args=[str(tmp_path / "server_mcp1.py")])
    async with (
        stdio_client(params, errlog=errlog) as (read, write),
        ClientSession(read, write, list_roots_callback=provider) as session,
    ):
        await session.initialize()
        attachment = provider.attach(session)
        async with attachment:
            before = await session.call_tool("read_text", {"path": str(second / "notes.txt")})
            assert before.isError
            assert provider.add(second) is not None
            # the notification is sent, the server asks again, and the new root applies: no fixed delay
            for _ in range(400):
                after = await session.call_tool("read_text", {"path": str(second / "notes.txt")})
                if not after.isError:
                    break
                await anyio.sleep(0.05)
        assert attachment.notifications_sent >= 1
    assert not after.isError, after.content
    assert after.content[0].text == "second"  # type: ignore[union-attr]
