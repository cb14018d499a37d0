"""The protected set inside a writable root: the files that make other programs run code stay read-only for a
confined child (a mount namespace of its own, read-only binds), directly, through a symlink and after a
rename of their folder, while the rest of the root, ``.git/objects`` included, stays writable and
``git add`` + ``git commit`` work. Each attack first works with ``protect=False`` (the control)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import pytest

from mcp_roots import RootSet
from mcp_roots.cli import main
from mcp_roots.sandbox import PROTECTED, find_protected, protected_names, support

KERNEL = support()
pytestmark = pytest.mark.skipif(
    not KERNEL.complete,
    reason=f"needs Landlock and the seccomp filter: {KERNEL.reason or KERNEL.filter_reason}",
)
GIT = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
    "PATH": os.environ["PATH"],
}
ORIGINAL = "original\n"

# Every protected path of the fixture, as (path relative to the root, the folder a rename would move).
FILES = [
    ".git/config",
    ".git/hooks/pre-commit",
    ".gitmodules",
    ".gitconfig",
    ".bashrc",
    ".bash_profile",
    ".profile",
    ".zshrc",
    ".zprofile",
    ".envrc",
    ".husky/pre-commit",
    ".pre-commit-config.yaml",
    ".mcp.json",
    ".vscode/settings.json",
    ".idea/workspace.xml",
    ".claude/settings.json",
    "sub/.git",  # a gitdir: redirect (a file), one folder down
    "proj/.git/config",  # a repository one folder down
    "proj/.mcp.json",
]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    env = {**GIT, "HOME": str(tmp_path)}
    for where in (root, root / "proj"):
        where.mkdir(exist_ok=True)
        subprocess.run(["git", "init", "-q", str(where)], check=True, env=env)
    for name in FILES:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if name.endswith(".git/config"):
            with path.open("a") as f:
                f.write(f"# {ORIGINAL}")
        else:
            path.write_text(ORIGINAL)
    (root / "src").mkdir()
    (root / "src" / "main.py").write_text("print('hi')\n")
    return root.resolve()


def content(root: Path) -> dict[str, str]:
    return {name: (root / name).read_text() for name in FILES}


def attack(name: str) -> str:
    """A shell script that tries to change ``name``: directly, through a symlink, by renaming its folder
    and writing the renamed copy, and by replacing the name itself."""
    folder = os.path.dirname(name)
    script = [
        f"echo evil >> {name}",
        f"ln -s $PWD/{name} link-{abs(hash(name))} && echo evil >> link-{abs(hash(name))}",
    ]
    if folder:
        script.append(f"mv {folder} {folder}.moved && echo evil >> {folder}.moved/{os.path.basename(name)}")
    script += [f"mv {name} {name}.bak && echo evil > {name}", f"rm -rf {name}"]
    return "; ".join(script) + "; true"


def run_in(
    root: Path, script: str, *, protect: bool | Iterable[str] = True
) -> subprocess.CompletedProcess[str]:
    result: subprocess.CompletedProcess[str] = RootSet.from_paths([root]).run(
        ["sh", "-c", script],
        write=True,
        capture_output=True,
        text=True,
        cwd=root,
        env={**GIT, "HOME": str(root)},
        protect=protect,
    )
    return result


@pytest.mark.parametrize("name", FILES)
def test_every_protected_path_is_refused_directly_through_a_symlink_and_after_a_rename(
    repo: Path, name: str
) -> None:
    before = content(repo)
    held = run_in(repo, attack(name))
    assert content(repo) == before, held.stderr
    assert "Read-only file system" in held.stderr or "Device or resource busy" in held.stderr
    # The control: the same attack with the protected set turned off changes the file.
    run_in(repo, attack(name), protect=False)
    changed = repo / name
    assert not changed.exists() or changed.read_text() != before[name] or not (repo / name).is_file()


def test_the_rest_of_the_root_and_git_objects_stay_writable_and_git_commits(repo: Path) -> None:
    script = (
        "echo new > src/new.py && touch .git/objects/probe && rm .git/objects/probe"
        " && git add src/new.py && git commit -qm 'from the sandbox' && git log --format=%s -1"
        " && cd proj && echo x > f && git add f && git commit -qm inner && echo inner-ok"
    )
    result = run_in(repo, script)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["from", "the", "sandbox", "inner-ok"]
    assert (repo / "src" / "new.py").read_text() == "new\n"


def test_no_placeholder_is_created_and_a_missing_name_is_not_enforced(tmp_path: Path) -> None:
    root = tmp_path / "plain"
    (root / ".git").mkdir(parents=True)
    (root / ".git" / "config").write_text(ORIGINAL)
    listing = sorted(str(p.relative_to(root)) for p in root.rglob("*"))
    result = run_in(
        root,
        "echo evil >> .git/config; echo created > .envrc; mkdir .git/hooks && echo x > .git/hooks/pre-commit",
    )
    assert (root / ".git" / "config").read_text() == ORIGINAL, result.stderr
    # Not enforced (docs/sandbox.md): a protected name that did not exist can be created.
    assert (root / ".envrc").read_text() == "created\n"
    assert (root / ".git" / "hooks" / "pre-commit").exists()
    assert sorted(str(p.relative_to(root)) for p in root.rglob("*")) == sorted(
        [*listing, ".envrc", ".git/hooks", ".git/hooks/pre-commit"]
    )


def test_protect_opt_outs(repo: Path) -> None:
    run_in(
        repo, "echo one >> .mcp.json; echo one >> .git/config", protect=protected_names(remove=[".mcp.json"])
    )
    assert (repo / ".mcp.json").read_text() == ORIGINAL + "one\n"
    assert "one" not in (repo / ".git" / "config").read_text()
    run_in(repo, "echo two >> src/main.py; echo two >> .mcp.json", protect=["src/main.py"])
    assert "two" not in (repo / "src" / "main.py").read_text()
    assert (repo / ".mcp.json").read_text().endswith("two\n")
    run_in(repo, "echo three >> .git/config", protect=False)
    assert (repo / ".git" / "config").read_text().endswith("three\n")


def test_write_false_needs_no_namespace_and_the_table_is_one_table(repo: Path) -> None:
    from mcp_roots.sandbox._plan import plan

    read_only = plan([str(repo)], write=False)
    assert read_only is not None
    assert read_only.binds == ()
    found = dict(find_protected([str(repo)], protected_names()).mounts)
    assert found[str(repo / ".git")] is False  # pinned (rename: EBUSY), writable
    assert found[str(repo / ".git" / "config")] is True
    assert found[str(repo / "proj")] is False
    assert found[str(repo / "proj" / ".git" / "config")] is True
    assert str(repo / ".git" / "objects") not in found
    assert {entry.name for entry in PROTECTED} >= {
        ".git/config",
        ".git/hooks",
        ".mcp.json",
        ".vscode",
        ".claude",
    }
    with pytest.raises(ValueError, match="relative path"):
        protected_names(add=["../escape"])


def test_where_the_kernel_refuses_a_mount_namespace_write_refuses_naming_the_opt_out(repo: Path) -> None:
    # A process under Landlock (even a ruleset that grants everything) gets EPERM from mount(2): the real
    # kernel refusing, as a container's seccomp profile or AppArmor's user-namespace rule would.
    script = f"""
import sys
from mcp_roots._sys import landlock
from mcp_roots import RootSet, SandboxUnavailable
rights = landlock.fs_rights_for(landlock.abi_version())
landlock.restrict_thread([("/", rights)], handled_fs=rights)
roots = RootSet.from_paths([{str(repo)!r}])
try:
    roots.run(["true"], write=True)
except SandboxUnavailable as exc:
    print("refused:", exc)
opted = roots.run(["sh", "-c", "echo x >> .mcp.json"], write=True, protect=False, cwd={str(repo)!r})
print("opted out:", opted.returncode)
print("allow_unconfined:", roots.run(["true"], write=True, allow_unconfined=True).returncode)
print("read-only:", roots.run(["true"]).returncode)
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("refused: the protected set")
    assert "mount namespace" in lines[0]
    assert "protect=False (mcp-roots run --no-protect)" in lines[0]
    assert lines[1:] == ["opted out: 0", "allow_unconfined: 0", "read-only: 0"]
    assert "WITHOUT THE PROTECTED SET" in out.stderr  # the one warning of allow_unconfined
    assert (repo / ".mcp.json").read_text().endswith("x\n")


def test_cli_run_protect_unprotect_and_no_protect(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(repo)
    base = ["--roots", str(repo), "run", "--write"]
    assert main([*base, "--", "sh", "-c", "echo a >> .mcp.json"]) != 0
    assert main([*base, "--unprotect", ".mcp.json", "--", "sh", "-c", "echo a >> .mcp.json"]) == 0
    assert main([*base, "--protect", "src/main.py", "--", "sh", "-c", "echo a >> src/main.py"]) != 0
    assert main([*base, "--no-protect", "--", "sh", "-c", "echo a >> .git/config"]) == 0
    assert (repo / ".mcp.json").read_text() == ORIGINAL + "a\n"
    assert (repo / "src" / "main.py").read_text() == "print('hi')\n"
    assert (repo / ".git" / "config").read_text().endswith("a\n")
