"""Launcher lines as host configurations write them, under wrap: ``npx -y PKG@VERSION``, ``uvx PKG@VERSION``
from an empty cache (the package fetched by a confined step of its own, from the registry) and again warm
(started from the cache, without the launcher), each against a control that leaks bare; a package that does
not exist is a clear error at once.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import pytest

from mcp_roots.sandbox import support
from mcp_roots.wrap._launch import launch_of
from tests.kit import PYTHON, REPO, Host, connected, official_command, wrap_argv

pytestmark = pytest.mark.skipif(not support().complete, reason="needs Landlock and the seccomp filter")
LAUNCHERS = REPO / ".venv-launchers" / "bin"
GIT_SERVER = REPO / ".venv-git-server" / "bin" / "mcp-server-git"
FILESYSTEM = "@modelcontextprotocol/server-filesystem@2026.8.31"
GIT = "mcp-server-git@2026.10.19"
SECRET = "LAUNCHED SECRET 8b2e"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # wrap, the fetch step and the servers run in processes of their own


def launcher_env(home: Path) -> dict[str, str]:
    if not (LAUNCHERS / "uvx").exists():
        pytest.fail("uv is not installed: make .venv-launchers/.installed (make test does)")
    return {"PATH": f"{LAUNCHERS}{os.pathsep}{os.environ['PATH']}", "HOME": str(home)}


def make_repo(folder: Path, text: str) -> None:
    folder.mkdir(parents=True)
    (folder / "notes.txt").write_text(text)
    for argv in (
        ["git", "init", "-q"],
        ["git", "add", "notes.txt"],
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "first"],
    ):
        subprocess.run(argv, cwd=folder, check=True, capture_output=True)


def snapshot(folder: Path, skip: Path) -> dict[str, float]:
    return {
        str(p): p.lstat().st_mtime
        for p in folder.rglob("*")
        if skip not in p.parents and p != skip and ".git" not in p.parts
    }


async def filesystem_session(host: Host, served: Path, elsewhere: Path) -> None:
    await host.initialize()
    (served / "inside.txt").write_text("inside")
    for _ in range(100):  # the server takes the client's roots in the background
        if str(served) in await host.text("list_allowed_directories"):
            break
        await anyio.sleep(0.05)
    assert await host.text("read_text_file", {"path": str(served / "inside.txt")}) == "inside"
    refused = await host.call("read_text_file", {"path": str(elsewhere / "secret.txt")})
    assert SECRET not in json.dumps(refused)
    assert refused["result"]["isError"] is True


async def git_session(host: Host, served: Path, elsewhere: Path) -> None:
    await host.initialize()
    mine = await host.text("git_show", {"repo_path": str(served), "revision": "HEAD"})
    assert "my notes" in mine
    refused = await host.call("git_show", {"repo_path": str(elsewhere), "revision": "HEAD"})
    assert SECRET not in json.dumps(refused)
    assert "is outside the allowed roots" in json.dumps(refused)


Case = tuple[list[str], Callable[[Path], list[str]], Callable[[Host, Path, Path], Awaitable[None]]]
CASES: dict[str, Case] = {
    "npx": (["npx", "-y", FILESYSTEM], lambda served: [str(served)], filesystem_session),
    "uvx": (["uvx", GIT], lambda served: [], git_session),
    "pipx run": (
        ["pipx", "run", "--spec", GIT.replace("@", "=="), "mcp-server-git"],
        lambda served: [],
        git_session,
    ),
}


@pytest.mark.anyio
@pytest.mark.parametrize("launcher", CASES)
async def test_a_launcher_line_works_as_written_from_an_empty_cache_and_again_warm(
    tmp_path: Path, launcher: str
) -> None:
    served, elsewhere = tmp_path / "work" / "served", tmp_path / "elsewhere"
    if launcher != "npx":
        make_repo(served, "my notes")
        make_repo(elsewhere, SECRET)
        control = [str(GIT_SERVER)]
        if not GIT_SERVER.exists():
            pytest.fail("make .venv-git-server/.installed (make test does)")
    else:
        for folder in (served, elsewhere):
            folder.mkdir(parents=True)
        (elsewhere / "secret.txt").write_text(SECRET)
        control = official_command(str(served))
    home, cache = tmp_path / "home", tmp_path / "cache"
    home.mkdir()
    env = launcher_env(home)
    line, args, session = CASES[launcher]
    # The control: bare, a client root outside the server's folder reaches the secret.
    async with connected(control, [str(elsewhere), str(served)]) as host:
        await host.initialize()
        if launcher != "npx":
            leaked = await host.text("git_show", {"repo_path": str(elsewhere), "revision": "HEAD"})
        else:
            for _ in range(100):
                if str(elsewhere) in await host.text("list_allowed_directories"):
                    break
                await anyio.sleep(0.05)
            leaked = await host.text("read_text_file", {"path": str(elsewhere / "secret.txt")})
        assert SECRET in leaked
    before = snapshot(tmp_path, cache)
    argv = wrap_argv([tmp_path / "work"], [*line, *args(served)], "--cache-dir", str(cache))
    for start in ("empty cache", "warm cache"):
        async with connected(argv, [str(elsewhere), str(served)], **env) as host:
            await session(host, served, elsewhere)
        assert list(home.iterdir()) == [], start  # the fetch step wrote nothing of the user's
    after = snapshot(tmp_path, cache)
    assert {p for p in after if p not in before and "inside.txt" not in p} == set()
    policy = subprocess.run(  # noqa: ASYNC221 - the host's sessions are over
        [
            *argv[:4],
            *argv[4 : -len(line) - len(args(served)) - 1],
            "--print-policy",
            "--",
            *line,
            *args(served),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        check=True,
    ).stdout
    assert "fetch step (done)" in policy
    assert "then the server, from the cache, without the launcher: " in policy
    command = next(row for row in policy.splitlines() if row.startswith("command: "))
    assert f"/{line[0]} " not in command  # the launcher is not run again


@pytest.mark.parametrize(
    "line", [["npx", "-y", "@modelcontextprotocol/no-such-server-3f9a@1.0.0"], ["uvx", "no-such-server-3f9a"]]
)
def test_a_package_that_cannot_be_fetched_is_a_clear_error_at_once(tmp_path: Path, line: list[str]) -> None:
    for folder in ("home", "work"):
        (tmp_path / folder).mkdir()
    env = {**os.environ, **launcher_env(tmp_path / "home")}
    argv = wrap_argv([tmp_path / "work"], line, "--cache-dir", str(tmp_path / "cache"))
    started = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120, input="")
    took = time.monotonic() - started
    assert done.returncode == 2
    assert f"wrap: {line[0]} could not fetch" in done.stderr
    assert "404" in done.stderr or "not found" in done.stderr
    assert "Traceback" not in done.stderr
    assert took < 10, f"took {took:.1f}s"


def test_launcher_lines_are_taken_apart_as_people_write_them(tmp_path: Path) -> None:
    npx = launch_of(["npx", "-y", "@scope/server@1.2.3", "/data", "--flag"], tmp_path)
    assert npx is not None
    assert (npx.launcher, npx.spec, npx.command, npx.args) == (
        "npx",
        "@scope/server@1.2.3",
        None,
        ("/data", "--flag"),
    )
    package = launch_of(["npx", "--yes", "--package", "tools@2", "tool-cli", "x"], tmp_path)
    assert package is not None
    assert (package.spec, package.command, package.args) == ("tools@2", "tool-cli", ("x",))
    uvx = launch_of(["uvx", "mcp-server-git@2026.10.19", "--repository", "."], tmp_path)
    assert uvx is not None
    assert (uvx.spec, uvx.args) == ("mcp-server-git==2026.10.19", ("--repository", "."))
    pipx = launch_of(["pipx", "run", "--spec", "mcp-server-fetch==1.0", "mcp-server-fetch"], tmp_path)
    assert pipx is not None
    assert (pipx.launcher, pipx.spec, pipx.command) == (
        "pipx run",
        "mcp-server-fetch==1.0",
        "mcp-server-fetch",
    )
    assert launch_of(["npx", "--unknown-flag", "x"], tmp_path) is None  # run as written
    assert launch_of(["node", "server.js"], tmp_path) is None
    assert launch_of([PYTHON, "-m", "server"], tmp_path) is None
    assert npx.folder.parent == tmp_path / "fetched"
    assert npx.folder != launch_of(["npx", "-y", "@scope/server@1.2.4"], tmp_path).folder  # type: ignore[union-attr]
