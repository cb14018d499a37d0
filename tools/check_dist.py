"""Check what `make dist` built in dist/: the sdist and the wheel a user would install.

Their file lists (the package, py.typed, the license; no tests, venvs or caches in the wheel), the wheel's
metadata and entry points, then the wheel installed into a clean venv (its dependencies from the registry,
at the versions of requirements/runtime.txt), where the command runs and the README's guarded server answers
the README's client from outside the clone. Prints one line per check; exits 1 on the first that fails.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

import tomllib

REPO = Path(__file__).resolve().parent.parent
DIST = REPO / "dist"


def _fail(message: str) -> None:
    sys.stderr.write(f"check_dist: FAILED: {message}\n")
    raise SystemExit(1)


def _ok(message: str) -> None:
    sys.stdout.write(f"check_dist: ok: {message}\n")
    sys.stdout.flush()


def _one(pattern: str) -> Path:
    found = sorted(DIST.glob(pattern))
    if len(found) != 1:
        _fail(f"want one {pattern} in {DIST}, found {[p.name for p in found]}")
    return found[0]


def check_wheel(wheel: Path, version: str) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    info = f"mcp_roots-{version}.dist-info"
    sources = {p.relative_to(REPO / "src").as_posix() for p in (REPO / "src" / "mcp_roots").rglob("*.py")}
    missing = sorted(sources - set(names))
    if missing:
        _fail(f"{wheel.name} lacks {missing[:5]}")
    for needed in (
        "mcp_roots/py.typed",
        f"{info}/licenses/LICENSE",
        f"{info}/METADATA",
        f"{info}/entry_points.txt",
    ):
        if needed not in names:
            _fail(f"{wheel.name} lacks {needed}")
    stray = [n for n in names if not (n.startswith(("mcp_roots/", f"{info}/"))) or "__pycache__" in n]
    if stray:
        _fail(f"{wheel.name} holds files outside the package: {stray[:5]}")
    with zipfile.ZipFile(wheel) as archive:
        metadata = archive.read(f"{info}/METADATA").decode()
        entry_points = archive.read(f"{info}/entry_points.txt").decode()
    if f"\nVersion: {version}\n" not in metadata or "License-Expression: MIT" not in metadata:
        _fail(f"{wheel.name}: METADATA names another version or no MIT license")
    if (
        "mcp-roots = mcp_roots.cli:main" not in entry_points
        or "mcp_roots = mcp_roots.testing" not in entry_points
    ):
        _fail(f"{wheel.name}: entry points lack the command or the pytest plugin:\n{entry_points}")
    _ok(f"{wheel.name}: {len(names)} files, every module, py.typed, LICENSE, the command and the plugin")


def check_sdist(sdist: Path, version: str) -> None:
    top = f"mcp_roots-{version}"
    with tarfile.open(sdist) as archive:
        names = {n.split("/", 1)[1] for n in archive.getnames() if "/" in n}
    for needed in ("LICENSE", "README.md", "CHANGELOG.md", "pyproject.toml", "src/mcp_roots/py.typed"):
        if needed not in names:
            _fail(f"{sdist.name} lacks {top}/{needed}")
    stray = [n for n in names if re.match(r"(\.venv|site/|dist/|tests/interop/node_modules|\.ci/)", n)]
    if stray:
        _fail(f"{sdist.name} holds build or environment files: {stray[:5]}")
    _ok(f"{sdist.name}: {len(names)} files, the sources, LICENSE, README, CHANGELOG; no venv or build output")


def _readme_file(name: str) -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    for match in re.finditer(r"```python\n(.*?)```", text, re.S):
        if match.group(1).startswith(f"# {name}"):
            return match.group(1)
    _fail(f"README.md has no {name} block")
    return ""


def _readme_installs(wheel: Path) -> tuple[list[list[str]], list[list[str]]]:
    """README.md's ``pip install`` lines: those from the clone, and the one of the built wheel."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    lines = [shlex.split(line, comments=True) for line in re.findall(r"^pip install .*$", text, re.M)]
    clone = [argv for argv in lines if not any(a.startswith("dist/") for a in argv)]
    wheels = [argv for argv in lines if argv not in clone]
    if not clone or len(wheels) != 1 or not wheels[0][-1].startswith(f"dist/{wheel.name}"):
        _fail(f"README.md's install lines are not the clone's and {wheel.name}'s: {lines}")
    return clone, wheels


def check_install(wheel: Path, version: str) -> None:
    with tempfile.TemporaryDirectory(prefix="check-dist-") as tmp:
        work = Path(tmp)
        venv = work / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        python = venv / "bin" / "python"
        clone, wheel_lines = _readme_installs(wheel)
        for argv in clone:  # from the clone: resolved as written (pip --dry-run), in the repository
            done = subprocess.run(
                [str(python), "-m", *argv, "--dry-run", "--quiet"], cwd=REPO, capture_output=True, text=True
            )
            if done.returncode != 0:
                _fail(f"README.md's {' '.join(argv)!r} fails: {done.stderr[-2000:]}")
        _ok(f"README.md's {len(clone)} install lines from the clone resolve (pip install --dry-run)")
        _ok("installing the wheel as README.md says, into a clean venv (pip, about a minute)")
        for argv in wheel_lines:  # pinned to the versions the suite ran with
            constraint = [
                "-c",
                str(REPO / "requirements" / "runtime.txt"),
                "--quiet",
                "--disable-pip-version-check",
            ]
            subprocess.run([str(python), "-m", *argv, *constraint], cwd=REPO, check=True)
        said = subprocess.run([str(venv / "bin" / "mcp-roots"), "--version"], capture_output=True, text=True)
        if said.stdout.strip() != f"mcp-roots {version}":
            _fail(f"the installed command says {said.stdout.strip() or said.stderr.strip()!r}")
        (work / "project").mkdir()
        (work / "project" / "notes.txt").write_text("hello")
        checked = subprocess.run(
            [str(venv / "bin" / "mcp-roots"), "check", "--roots", str(work / "project"), "/etc/passwd"],
            capture_output=True,
            text=True,
            cwd=work,
        )
        if checked.returncode != 1 or "outside" not in checked.stdout:
            _fail(f"mcp-roots check answered {checked.returncode}: {checked.stdout}{checked.stderr}")
        _ok(f"the installed command runs: {said.stdout.strip()}; check refuses /etc/passwd")
        for name in ("server.py", "client.py"):
            (work / name).write_text(_readme_file(name), encoding="utf-8")
        where = subprocess.run(
            [str(python), "-c", "import mcp_roots; print(mcp_roots.__file__)"],
            capture_output=True,
            text=True,
            cwd=work,
        )
        if not where.stdout.startswith(str(venv)):
            _fail(f"mcp_roots imports from {where.stdout.strip()}, not the clean venv")
        ran = subprocess.run(
            [str(python), "client.py", "server.py", str(work / "project")],
            capture_output=True,
            text=True,
            cwd=work,
            timeout=300,
        )
        want = [
            f"{work / 'project' / 'notes.txt'} -> hello",
            f"/etc/passwd -> Access denied: '/etc/passwd' is outside the allowed roots ({work / 'project'})",
        ]
        if ran.returncode != 0 or ran.stdout.splitlines() != want:
            _fail(f"the README's guarded server from the wheel answered:\n{ran.stdout}{ran.stderr[-2000:]}")
        _ok("the README's guarded server, installed from the wheel, reads inside and refuses outside")


def main() -> None:
    version = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    check_wheel(_one("*.whl"), version)
    check_sdist(_one("*.tar.gz"), version)
    check_install(_one("*.whl"), version)


if __name__ == "__main__":
    main()
