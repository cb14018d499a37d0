"""git's own redirections, judged by the user's next unconfined git: a confined child that writes inside a
repository must not change which program that git runs (here ``core.fsmonitor``, which ``git status`` runs).
The default mode keeps the redirections that exist read-only and git working; strict mode (``strict_git``)
keeps ``.git`` read-only whole. What stays open in the default mode is shown as the stated limit."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mcp_roots import RootSet
from mcp_roots.sandbox import mount_namespace, support
from tests.kit import GIT_ENV

KERNEL = support()
pytestmark = [
    pytest.mark.skipif(not KERNEL.complete, reason="needs Landlock and the seccomp filter"),
    pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed (make sandbox-tools)"),
    pytest.mark.skipif(mount_namespace() is not None, reason=f"no namespaces here: {mount_namespace()}"),
]

ENV = GIT_ENV


def git(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", *args], cwd=cwd, env={**ENV, "HOME": str(cwd)}, capture_output=True, text=True
    )


@pytest.fixture
def places(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A root holding a repository with one commit, a monitor script outside (it leaves a mark when run)."""
    root = (tmp_path / "root").resolve()
    repo = root / "repo"
    repo.mkdir(parents=True)
    git("init", "-q", "-b", "main", cwd=repo)
    (repo / "a.txt").write_text("a\n")
    git("add", "a.txt", cwd=repo)
    git("commit", "-qm", "first", cwd=repo)
    mark = tmp_path / "RAN"
    monitor = tmp_path / "monitor.sh"
    monitor.write_text(f"#!/bin/sh\ntouch {mark}\n")
    monitor.chmod(0o755)
    return repo, monitor, mark


def child(root: Path, script: str, **options: Any) -> subprocess.CompletedProcess[str]:
    """A confined shell in ``root`` (read-write), with git's environment."""
    return RootSet.from_paths([root]).run(
        ["sh", "-c", script],
        write=True,
        capture_output=True,
        text=True,
        cwd=str(root),
        env={**ENV, "HOME": str(root)},
        **options,
    )


def users_git_runs_the_monitor(repo: Path, mark: Path) -> bool:
    git("status", "--short", cwd=repo)
    return mark.exists()


COMMONDIR = (
    "git init -q --bare {root}/evil && git -C {root}/evil config core.fsmonitor {monitor} && "
    "echo {root}/evil > {repo}/.git/commondir"
)


def test_the_control_an_unconfined_commondir_redirects_the_users_git(places: tuple[Path, Path, Path]) -> None:
    repo, monitor, mark = places
    subprocess.run(
        ["sh", "-c", COMMONDIR.format(root=repo.parent, repo=repo, monitor=monitor)], check=True, env=ENV
    )
    assert users_git_runs_the_monitor(repo, mark)


def test_the_stated_limit_a_commondir_created_where_none_was_redirects_in_the_default_mode(
    places: tuple[Path, Path, Path],
) -> None:
    # The default mode binds what exists read-only and never creates a name in the user's tree: a
    # .git/commondir that did not exist can be made (git makes lock files beside it in normal work, so the
    # folder stays writable). Strict mode closes it (below).
    repo, monitor, mark = places
    done = child(repo.parent, COMMONDIR.format(root=repo.parent, repo=repo, monitor=monitor))
    assert done.returncode == 0, done.stderr
    assert users_git_runs_the_monitor(repo, mark)


def test_an_existing_commondir_stays_read_only_in_the_default_mode(places: tuple[Path, Path, Path]) -> None:
    repo, monitor, mark = places
    (repo / ".git" / "commondir").write_text(".\n")  # a commondir naming the repository itself
    done = child(repo.parent, COMMONDIR.format(root=repo.parent, repo=repo, monitor=monitor))
    assert done.returncode != 0
    assert "Read-only file system" in done.stderr
    assert (repo / ".git" / "commondir").read_text() == ".\n"
    assert not users_git_runs_the_monitor(repo, mark)


def test_strict_mode_refuses_commondir_and_the_users_git_runs_nothing(
    places: tuple[Path, Path, Path],
) -> None:
    repo, monitor, mark = places
    done = child(repo.parent, COMMONDIR.format(root=repo.parent, repo=repo, monitor=monitor), strict_git=True)
    assert done.returncode != 0
    assert "Read-only file system" in done.stderr
    assert not (repo / ".git" / "commondir").exists()
    assert not users_git_runs_the_monitor(repo, mark)
    # Strict: git's own writes are refused too (as Codex does).
    assert child(repo.parent, "cd repo && echo b > b.txt && git add b.txt", strict_git=True).returncode != 0


def test_a_linked_worktrees_redirections_stay_read_only_in_the_default_mode(
    places: tuple[Path, Path, Path],
) -> None:
    repo, monitor, mark = places
    git("worktree", "add", "-q", str(repo.parent / "wt"), cwd=repo)
    worktree_admin = repo / ".git" / "worktrees" / "wt"
    assert (worktree_admin / "commondir").exists()
    script = (
        f"git init -q --bare {repo.parent}/evil && "
        f"git -C {repo.parent}/evil config core.fsmonitor {monitor} && "
        f"echo {repo.parent}/evil > {worktree_admin}/commondir"
    )
    done = child(repo.parent, script)
    assert done.returncode != 0
    assert "Read-only file system" in done.stderr
    assert not users_git_runs_the_monitor(repo.parent / "wt", mark)
    # git itself still works confined there: add and commit in the main worktree.
    work = child(
        repo.parent,
        "cd repo && echo b > b.txt && git add b.txt && git commit -qm second && git log --oneline",
    )
    assert work.returncode == 0, work.stderr
    assert len(work.stdout.splitlines()) == 2


NESTED = (
    "cd repo && git init -q nested && git -C nested config core.fsmonitor {monitor} && echo n > nested/f && "
    "git -C nested add f && git -C nested commit -qm n && git add nested"
)


def test_the_stated_limit_a_repository_the_child_creates_and_stages_runs_its_monitor(
    places: tuple[Path, Path, Path],
) -> None:
    # Open by design in the default mode: the nested repository is the child's; staged into the parent
    # (only the parent's index is written), the user's next git status there runs its core.fsmonitor.
    repo, monitor, mark = places
    done = child(repo.parent, NESTED.format(monitor=monitor))
    assert done.returncode == 0, done.stderr
    assert users_git_runs_the_monitor(repo, mark)


def test_strict_mode_closes_the_nested_repository_path(places: tuple[Path, Path, Path]) -> None:
    repo, monitor, mark = places
    done = child(repo.parent, NESTED.format(monitor=monitor), strict_git=True)
    assert done.returncode != 0
    assert not users_git_runs_the_monitor(repo, mark)


def test_the_cli_strict_git_needs_write(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_ROOTS")}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mcp_roots.cli",
            "run",
            "--roots",
            str(tmp_path),
            "--strict-git",
            "--",
            "true",
        ],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert done.returncode == 2
    assert "--strict-git' need --write" in done.stderr
