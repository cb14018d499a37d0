"""wrap around servers no one here wrote, each with a control that leaks bare: the official filesystem server
(pinned in tests/interop) lets a client root outside its command-line folder widen it; the official git
server (``mcp-server-git``, pinned in requirements/git-server.txt) started without ``--repository`` shows any
repository on the host. Under wrap neither reaches outside the ceiling, and both still work inside.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from mcp_roots.sandbox import support
from tests.kit import PYTHON, REPO, Host, RootsCallback, connected, official_command, text_of, wrap_argv

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not support().complete, reason="needs Landlock and the seccomp filter"),
]
GIT_SERVER = REPO / ".venv-git-server" / "bin" / "mcp-server-git"
INTEROP = REPO / "tests" / "interop"
SECRET = "OUTSIDE SECRET 51d0"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # every server here runs in a process of its own


async def roots_applied(host: Host, folder: Path) -> bool:
    """The official server applies client roots in the background after `initialized`: wait (bounded) until
    it says it has them."""
    for _ in range(100):
        if str(folder) in await host.text("list_allowed_directories"):
            return True
        await anyio.sleep(0.05)
    return False


def npx_command(*dirs: str) -> list[str]:
    """The official filesystem server as host configs start it, through npx: here from the pinned local
    install (``--prefix tests/interop``), offline, as no network reaches this machine's tests."""
    npx = shutil.which("npx")
    if npx is None:
        pytest.fail("npx is not installed; it comes with Node's npm")
    return [npx, "--prefix", str(INTEROP), "--no-install", "--offline", "mcp-server-filesystem", *dirs]


#: How the server is started: node on its script, or npx (which reads npm's files and starts node itself).
LAUNCHERS = {"node": (official_command, ()), "npx": (npx_command, ("--read", str(INTEROP)))}


@pytest.mark.parametrize("launcher", LAUNCHERS)
async def test_client_roots_widen_the_official_filesystem_server_bare_and_never_under_wrap(
    tmp_path: Path, launcher: str
) -> None:
    served, elsewhere = tmp_path / "served", tmp_path / "elsewhere"
    for folder in (served, elsewhere):
        folder.mkdir()
    (elsewhere / "secret.txt").write_text(SECRET)
    read = {"path": str(elsewhere / "secret.txt")}
    write = {"path": str(elsewhere / "planted.txt"), "content": "planted"}
    command, options = LAUNCHERS[launcher]
    async with connected(command(str(served)), [str(elsewhere)]) as host:  # the control
        await host.initialize()
        assert await roots_applied(host, elsewhere)
        assert await host.text("read_text_file", read) == SECRET
        await host.text("write_file", write)
    assert (elsewhere / "planted.txt").read_text() == "planted"
    (elsewhere / "planted.txt").unlink()
    argv = wrap_argv([served], command(str(served)), "--cache-dir", str(tmp_path / "cache"), *options)
    async with connected(argv, [str(elsewhere), str(served)]) as host:
        await host.initialize()
        assert await roots_applied(host, served)
        (served / "inside.txt").write_text("inside")
        assert await host.text("read_text_file", {"path": str(served / "inside.txt")}) == "inside"
        answer = await host.call("read_text_file", read)
        assert answer["result"]["isError"] is True
        assert SECRET not in json.dumps(answer)
        assert "is outside the allowed roots" in answer["result"]["content"][0]["text"]
        assert (await host.call("write_file", write))["result"]["isError"] is True
    assert not (elsewhere / "planted.txt").exists()


async def test_the_official_filesystem_server_works_under_wrap_as_it_does_bare(tmp_path: Path) -> None:
    served = tmp_path / "served"
    (served / "sub").mkdir(parents=True)
    (served / "hello.txt").write_text("hello served")

    async def session(argv: list[str]) -> list[object]:
        async with connected(argv, [str(served)]) as host:
            await host.initialize()
            assert await roots_applied(host, served)
            listed = await host.request("tools/list")
            return [
                listed["result"],
                await host.text("read_text_file", {"path": str(served / "hello.txt")}),
                await host.text("write_file", {"path": str(served / "sub" / "new.txt"), "content": "new"}),
                await host.text("list_directory", {"path": str(served)}),
                await host.text("read_text_file", {"path": "hello.txt"}),
            ]

    bare = await session(official_command(str(served)))
    (served / "sub" / "new.txt").unlink()
    wrapped = await session(
        wrap_argv([served], official_command(str(served)), "--cache-dir", str(tmp_path / "c"))
    )
    assert wrapped[:4] == bare[:4]
    assert (served / "sub" / "new.txt").read_text() == "new"


async def test_a_2026_07_28_client_through_wrap_to_the_official_filesystem_server(tmp_path: Path) -> None:
    # The official server speaks only the legacy era; through wrap a 2026-07-28 client (mcp 2.x, mode="auto")
    # still gets per-request roots held by the kernel, clipped to the ceiling.
    served, elsewhere = tmp_path / "served", tmp_path / "elsewhere"
    for folder in (served, elsewhere):
        folder.mkdir()
    (served / "hello.txt").write_text("hello served")
    (elsewhere / "secret.txt").write_text(SECRET)
    callback = RootsCallback(elsewhere, served)
    argv = wrap_argv([served], official_command(str(served)), "--cache-dir", str(tmp_path / "cache"))
    params = StdioServerParameters(command=argv[0], args=argv[1:])
    async with Client(params, mode="auto", list_roots_callback=callback) as client:
        assert client.protocol_version == "2026-07-28"
        hello = await client.call_tool("read_text_file", {"path": str(served / "hello.txt")})
        assert text_of(hello) == "hello served"
        secret = await client.call_tool("read_text_file", {"path": str(elsewhere / "secret.txt")})
        assert secret.is_error
        assert SECRET not in text_of(secret)


def make_repo(folder: Path, text: str) -> None:
    folder.mkdir(parents=True)
    (folder / "notes.txt").write_text(text)
    for argv in (
        ["git", "init", "-q"],
        ["git", "add", "notes.txt"],
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "first"],
    ):
        subprocess.run(argv, cwd=folder, check=True, capture_output=True)


@pytest.mark.skipif(not GIT_SERVER.exists(), reason="make .venv-git-server/.installed (make test does)")
async def test_the_official_git_server_shows_any_repository_bare_and_none_outside_under_wrap(
    tmp_path: Path,
) -> None:
    mine, other = tmp_path / "work" / "mine", tmp_path / "other"
    make_repo(mine, "my notes")
    make_repo(other, SECRET)
    show_other = {"repo_path": str(other), "revision": "HEAD"}
    async with connected([str(GIT_SERVER)], [str(mine)]) as host:  # the control: no --repository
        await host.initialize()
        assert SECRET in await host.text("git_show", show_other)
    argv = wrap_argv([tmp_path / "work"], [str(GIT_SERVER)], "--cache-dir", str(tmp_path / "cache"))
    async with connected(argv, [str(mine)]) as host:
        await host.initialize()
        assert "my notes" in await host.text("git_show", {"repo_path": str(mine), "revision": "HEAD"})
        refused = await host.call("git_show", show_other)
        assert SECRET not in json.dumps(refused)
        assert "is outside the allowed roots" in json.dumps(refused)
        # A path the check cannot see (a relative one, resolved by the server against its working folder)
        # still meets the kernel.
        sneaky = await host.call("git_show", {"repo_path": "../../other", "revision": "HEAD"})
        assert SECRET not in json.dumps(sneaky)


def probe(*argv: str) -> dict[str, Any]:
    base = [PYTHON, "-m", "mcp_roots", "probe", "--era", "legacy", "--client-roots", "declared", "--json"]
    done = subprocess.run([*base, *argv], capture_output=True, text=True, timeout=600, check=False)
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def test_the_probe_through_wrap_finds_no_escape_in_the_official_filesystem_server(tmp_path: Path) -> None:
    server = official_command("{root}")
    # The control: the official server checks a path, then opens it by name; a directory swapped for a link
    # out between the two lets the read (and the write) out.
    bare = probe("--technique", "swap-race", "--race-attempts", "64", "--", *server)
    assert bare["escapes"] > 0, bare["rows"]
    wrapped = probe("--", *wrap_argv([Path("{root}")], server, "--cache-dir", str(tmp_path / "cache")))
    assert wrapped["escapes"] == 0, [row for row in wrapped["rows"] if row["outcome"] == "ESCAPED"]
    assert {row["technique"] for row in wrapped["rows"]} >= {"swap-race", "symlink-final", "dotdot"}
