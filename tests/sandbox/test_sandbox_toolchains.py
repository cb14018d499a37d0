"""The toolchains people shell out to run confined, read-only and read-write: node (under ``mcp-roots run``
too: it reads OpenSSL's configuration at start), npx of a real package, pip and uv making and filling a venv
in a root; git, a C compiler, ripgrep. Their metadata calls (npm's lock, a linker's chmod) need no opt-in."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mcp_roots import RootSet
from mcp_roots.sandbox import mount_namespace, support
from tests.kit import REPO

KERNEL = support()
pytestmark = pytest.mark.skipif(not KERNEL.complete, reason="needs Landlock and the seccomp filter")

NODE = shutil.which("node")


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_ROOTS")}
    return subprocess.run(
        [sys.executable, "-m", "mcp_roots.cli", "run", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=env,
        cwd=cwd,
    )


@pytest.mark.skipif(NODE is None, reason="node is not installed")
@pytest.mark.parametrize("write", [False, True])
def test_node_starts_under_run(tmp_path: Path, write: bool) -> None:
    script = tmp_path / "hash.js"
    script.write_text(
        "const fs = require('fs');\n"
        "console.log(require('crypto').createHash('sha256').update('x').digest('hex'));\n"
        f"if ({'true' if write else 'false'}) fs.writeFileSync({str(tmp_path / 'out.txt')!r}, 'written');\n"
    )
    done = run("--roots", str(tmp_path), *(["--write"] if write else []), "--", "node", str(script))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881")
    assert (tmp_path / "out.txt").exists() == write


# --- in-process: RootSet.run, read-only and read-write --------------------------------------------------

needs_namespaces = pytest.mark.skipif(
    mount_namespace() is not None, reason=f"a root of the child's own needs namespaces: {mount_namespace()}"
)


def _env(root: Path) -> dict[str, str]:
    """A toolchain's environment kept inside the root: its home, its caches, its temporary folder."""
    (root / "tmp").mkdir(exist_ok=True)
    return {
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": str(root),
        "TMPDIR": str(root / "tmp"),
        "LANG": "C.UTF-8",
        "npm_config_cache": str(root / ".npm"),
        "npm_config_update_notifier": "false",
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "PIP_NO_CACHE_DIR": "1",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
    }


def _run(
    root: Path,
    argv: list[str],
    *,
    write: bool,
    network: bool = False,
    env: dict[str, str] | None = None,
    extra_read: tuple[str, ...] = (),
) -> subprocess.CompletedProcess[str]:
    return RootSet.from_paths([root]).run(
        argv,
        write=write,
        network=network,
        capture_output=True,
        text=True,
        cwd=str(root),
        env=env or _env(root),
        timeout=600,
        extra_read=extra_read,
    )


@pytest.fixture
def root(tmp_path: Path) -> Path:
    made = tmp_path / "project"
    made.mkdir()
    return made.resolve()


@needs_namespaces
@pytest.mark.skipif(NODE is None or shutil.which("npx") is None, reason="npx is not installed")
def test_npx_runs_a_real_package_from_the_registry_with_its_lock_and_cache_in_the_root(root: Path) -> None:
    # npm's lock calls utimes() by path on its own files: refused by the fallback filter, it works here.
    done = _run(root, ["npx", "-y", "semver@7.6.3", "1.2.3", "-r", ">=1"], write=True, network=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "1.2.3"
    assert (root / ".npm" / "_npx").is_dir()


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_node_reads_a_read_only_root(root: Path) -> None:
    (root / "data.json").write_text('{"n": 41}')
    done = _run(root, ["node", "-e", "console.log(require('./data.json').n + 1)"], write=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "42"


def _wheel(folder: Path) -> Path:
    """A minimal pure-Python wheel (installed offline: no index, no build)."""
    import zipfile

    wheel = folder / "tinypkg-1.0-py3-none-any.whl"
    files = {
        "tinypkg/__init__.py": "ANSWER = 42\n",
        "tinypkg-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: tinypkg\nVersion: 1.0\n",
        "tinypkg-1.0.dist-info/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    record = "".join(f"{name},,\n" for name in files) + "tinypkg-1.0.dist-info/RECORD,,\n"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, text in {**files, "tinypkg-1.0.dist-info/RECORD": record}.items():
            archive.writestr(name, text)
    return wheel


@needs_namespaces
def test_python_makes_a_venv_in_the_root_and_pip_installs_into_it(root: Path) -> None:
    wheel = _wheel(root)
    made = _run(root, [sys.executable, "-m", "venv", "--without-pip", str(root / "venv")], write=True)
    assert made.returncode == 0, made.stderr
    python = str(root / "venv" / "bin" / "python")
    pip = [sys.executable, "-m", "pip", "--python", python, "install", "--no-index", "--no-deps", str(wheel)]
    installed = _run(root, pip, write=True)
    assert installed.returncode == 0, installed.stderr[-2000:]
    used = _run(root, [python, "-c", "import tinypkg; print(tinypkg.ANSWER)"], write=False)
    assert used.returncode == 0, used.stderr
    assert used.stdout.strip() == "42"
    # Read-only, the same install is refused and nothing changes.
    again = _run(root, [*pip, "--force-reinstall"], write=False)
    assert again.returncode != 0


UV = REPO / ".venv-launchers" / "bin" / "uv"


@needs_namespaces
def test_uv_makes_a_venv_in_the_root_and_installs_a_local_wheel(root: Path) -> None:
    if not UV.exists():
        pytest.fail("uv is not installed: make .venv-launchers/.installed (make test does)")
    wheel = _wheel(root)
    env = {**_env(root), "UV_CACHE_DIR": str(root / ".uv-cache"), "UV_PYTHON_DOWNLOADS": "never"}
    interpreter = os.path.realpath(sys.executable)  # the base interpreter, read-only beside the root
    base = (sys.base_prefix,)
    venv = root / "venv"
    python = str(venv / "bin" / "python")
    install = [str(UV), "pip", "install", "--python", python, "--offline", "--no-index", str(wheel)]
    # Read-only: refused in words (the file system is read-only), nothing made.
    refused = _run(
        root, [str(UV), "venv", "--python", interpreter, str(venv)], write=False, env=env, extra_read=base
    )
    assert refused.returncode != 0
    assert "Read-only file system" in refused.stderr, refused.stderr
    assert not venv.exists()
    # Read-write: the venv, then the wheel installed into it (uv's cache, hard links and locks in the root).
    made = _run(
        root, [str(UV), "venv", "--python", interpreter, str(venv)], write=True, env=env, extra_read=base
    )
    assert made.returncode == 0, made.stderr
    installed = _run(root, install, write=True, env=env, extra_read=base)
    assert installed.returncode == 0, installed.stderr[-2000:]
    assert "+ tinypkg==1.0" in installed.stderr
    used = _run(root, [python, "-c", "import tinypkg; print(tinypkg.ANSWER)"], write=False)
    assert used.stdout.strip() == "42", used.stderr
    # Read-only again, without the cache (the install itself is what is refused): the venv is unchanged.
    before = sorted(str(path.relative_to(venv)) for path in venv.rglob("*"))
    again = _run(root, [*install, "--reinstall", "--no-cache"], write=False, env=env, extra_read=base)
    assert again.returncode != 0
    assert "Read-only file system" in again.stderr, again.stderr
    assert sorted(str(path.relative_to(venv)) for path in venv.rglob("*")) == before


GIT = shutil.which("git")


@needs_namespaces
@pytest.mark.skipif(GIT is None, reason="git is not installed")
def test_git_add_commit_branch_checkout_stash_and_fetch_work_confined(root: Path, tmp_path: Path) -> None:
    remote = root / "remote"
    subprocess.run(["git", "init", "-q", "-b", "main", str(remote)], check=True, env=_env(root))
    (remote / "a.txt").write_text("a\n")
    subprocess.run(["git", "-C", str(remote), "add", "."], check=True, env=_env(root))
    subprocess.run(["git", "-C", str(remote), "commit", "-qm", "first"], check=True, env=_env(root))
    work = root / "work"
    script = (
        f"set -e; git clone -q {remote} {work}; cd {work}; echo b > b.txt; git add b.txt; "
        "git commit -qm second; "
        "git branch side; git checkout -q side; echo c > c.txt; git stash -u -q; git stash pop -q; "
        "git checkout -q main; git fetch -q origin; git log --oneline | wc -l"
    )
    done = _run(root, ["sh", "-c", script], write=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-1] == "2"
    status = _run(root, ["git", "-C", str(work), "--no-optional-locks", "status", "--short"], write=False)
    assert status.returncode == 0, status.stderr
    assert status.stdout.strip() == "?? c.txt" or status.stdout.strip() == ""


GCC = shutil.which("gcc")


@needs_namespaces
@pytest.mark.skipif(GCC is None, reason="gcc is not installed")
def test_a_c_compiler_builds_and_links_an_executable_without_opt_in(root: Path) -> None:
    (root / "h.c").write_text('#include <stdio.h>\nint main(void) { puts("built"); return 0; }\n')
    checked = _run(root, ["gcc", "-fsyntax-only", "h.c"], write=False)
    assert checked.returncode == 0, checked.stderr
    built = _run(root, ["gcc", "-o", "h", "h.c"], write=True)  # the linker's chmod +x by path
    assert built.returncode == 0, built.stderr
    assert _run(root, ["./h"], write=False).stdout == "built\n"


RG = shutil.which("rg")


@pytest.mark.skipif(RG is None, reason="ripgrep is not installed")
@pytest.mark.parametrize("write", [False, True])
def test_ripgrep_searches_a_root(root: Path, write: bool) -> None:
    (root / "sub").mkdir()
    (root / "sub" / "f.txt").write_text("needle here\n")
    done = _run(root, ["rg", "--no-config", "-l", "needle", "sub"], write=write)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "sub/f.txt"
