"""git's redirections through the official filesystem server under wrap, the user's `git status` the judge:
its create_directory + write_file make a repository's `.git/commondir` point at a folder whose config names
a `core.fsmonitor`. Bare it redirects; `--strict-git` refuses it; the default mode holds what exists only."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcp_roots.sandbox import mount_namespace, support
from tests.kit import GIT_ENV, PYTHON, Host, connected, official_command, wrap_argv

pytestmark = [
    pytest.mark.skipif(not support().complete, reason="needs Landlock and the seccomp filter"),
    pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed (make sandbox-tools)"),
    pytest.mark.skipif(mount_namespace() is not None, reason=f"no namespaces here: {mount_namespace()}"),
]

ENV = GIT_ENV


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # wrap and the server run in processes of their own


def git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, env={**ENV, "HOME": str(cwd)}, check=True, capture_output=True)


def make_repo(folder: Path) -> Path:
    folder.mkdir(parents=True)
    git("init", "-q", "-b", "main", cwd=folder)
    (folder / "a.txt").write_text("a\n")
    git("add", "a.txt", cwd=folder)
    git("commit", "-qm", "first", cwd=folder)
    return folder


def monitor(tmp_path: Path, name: str) -> tuple[Path, Path]:
    """A monitor script outside the root, and the mark it leaves when run."""
    mark = tmp_path / f"RAN-{name}"
    script = tmp_path / f"monitor-{name}.sh"
    script.write_text(f"#!/bin/sh\ntouch {mark}\n")
    script.chmod(0o755)
    return script, mark


def users_git_runs_the_monitor(repo: Path, mark: Path) -> bool:
    """The user's own git, unconfined: `git status` runs the configured `core.fsmonitor`."""
    subprocess.run(
        ["git", "status", "--short"], cwd=repo, env={**ENV, "HOME": str(repo)}, capture_output=True
    )
    return mark.exists()


async def redirect(host: Host, repo: Path, script: Path) -> dict[str, Any]:
    """The attack with the server's own tools: a folder git takes for a common directory (objects/, refs/,
    a config naming the monitor), then `.git/commondir` pointing at it. The last answer is returned."""
    evil = repo.parent / f"evil-{repo.name}"
    for folder in ("objects", "refs"):
        await host.text("create_directory", {"path": str(evil / folder)})
    config = f"[core]\n\trepositoryformatversion = 0\n\tfsmonitor = {script}\n"
    await host.text("write_file", {"path": str(evil / "config"), "content": config})
    answer: dict[str, Any] = await host.call(
        "write_file", {"path": str(repo / ".git" / "commondir"), "content": str(evil)}
    )
    return answer


async def roots_applied(host: Host, folder: Path) -> bool:
    """The official server applies client roots in the background after `initialized`: wait (bounded)."""
    for _ in range(200):
        if str(folder) in await host.text("list_allowed_directories"):
            return True
        await anyio.sleep(0.05)
    return False


@pytest.mark.anyio
async def test_commondir_redirects_the_users_git_bare_and_never_under_wrap_strict_git(tmp_path: Path) -> None:
    root = (tmp_path / "root").resolve()
    bare_repo, wrapped_repo = make_repo(root / "bare"), make_repo(root / "wrapped")
    script, mark = monitor(tmp_path, "bare")
    async with connected(official_command(str(root)), [str(root)]) as host:  # the control
        await host.initialize()
        assert await roots_applied(host, root)
        assert not (await redirect(host, bare_repo, script))["result"].get("isError")
    assert users_git_runs_the_monitor(bare_repo, mark)

    script, mark = monitor(tmp_path, "strict")
    argv = wrap_argv([root], official_command(str(root)), "--strict-git", "--cache-dir", str(tmp_path / "c"))
    async with connected(argv, [str(root)]) as host:
        await host.initialize()
        assert await roots_applied(host, root)
        refused = await redirect(host, wrapped_repo, script)
        assert refused["result"]["isError"] is True
        # The server still writes in the root: only .git is read-only whole.
        await host.text("write_file", {"path": str(wrapped_repo / "b.txt"), "content": "b"})
    assert (wrapped_repo / "b.txt").read_text() == "b"
    assert not (wrapped_repo / ".git" / "commondir").exists()
    assert not users_git_runs_the_monitor(wrapped_repo, mark)


@pytest.mark.anyio
async def test_the_default_mode_holds_an_existing_commondir_and_states_a_new_one_as_its_limit(
    tmp_path: Path,
) -> None:
    root = (tmp_path / "root").resolve()
    existing, new = make_repo(root / "existing"), make_repo(root / "new")
    (existing / ".git" / "commondir").write_text(".\n")  # a commondir naming the repository itself
    held_script, held_mark = monitor(tmp_path, "existing")
    open_script, open_mark = monitor(tmp_path, "new")
    argv = wrap_argv([root], official_command(str(root)), "--cache-dir", str(tmp_path / "c"))
    async with connected(argv, [str(root)]) as host:
        await host.initialize()
        assert await roots_applied(host, root)
        held = await redirect(host, existing, held_script)
        assert held["result"]["isError"] is True
        # The stated limit (docs/sandbox.md): .git stays writable for git's lock files, so a commondir
        # where none was is made, and redirects the user's next git.
        made = await redirect(host, new, open_script)
        assert not made["result"].get("isError"), made
    assert (existing / ".git" / "commondir").read_text() == ".\n"
    assert not users_git_runs_the_monitor(existing, held_mark)
    assert users_git_runs_the_monitor(new, open_mark)


def test_strict_git_with_read_only_roots_is_refused_in_words(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            PYTHON,
            "-m",
            "mcp_roots",
            "wrap",
            "--ceiling",
            str(tmp_path),
            "--read-only",
            "--strict-git",
            "--",
            "true",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert "--strict-git" in done.stderr
    assert "--read-only" in done.stderr
    assert "Traceback" not in done.stderr
