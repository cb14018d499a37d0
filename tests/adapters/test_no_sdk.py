"""`import mcp_roots`, the path guard, RootsGuard's construction and the CLI work where no MCP SDK can be
imported: a real interpreter in which a meta-path finder refuses `mcp`, `mcp_types` and `fastmcp` before
mcp_roots is imported (see docs/design.md, "The tiers", for why this is a faithful stand-in for a venv
without them)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BLOCKER = """
import importlib.abc, sys
BLOCKED = ("mcp", "mcp_types", "fastmcp")
class NoSDK(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r} (blocked: no SDK here)", name=name)
        return None
sys.meta_path.insert(0, NoSDK())
assert not any(m.split(".")[0] in BLOCKED for m in sys.modules), "an SDK was loaded before the blocker"
"""


def run_without_sdk(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # -I: no user site, no PYTHON* variables, no current directory on sys.path; -S is not used, so the
    # venv's site-packages (with mcp installed!) stay importable and only the blocker keeps the SDK out.
    return subprocess.run(
        [sys.executable, "-I", "-c", BLOCKER + code],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_blocker_really_keeps_the_sdk_out(tmp_path: Path) -> None:
    """The control: the SDK is installed in this venv, and the blocker is what makes it unimportable."""
    plain = subprocess.run(
        [sys.executable, "-I", "-c", "import mcp, mcp_types"], capture_output=True, timeout=60
    )
    assert plain.returncode == 0
    blocked = run_without_sdk("import mcp", tmp_path)
    assert blocked.returncode != 0
    assert "blocked: no SDK here" in blocked.stderr


def test_path_guard_guard_and_cli_work_without_any_sdk(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "a.txt").write_text("inside")
    (tmp_path / "secret.txt").write_text("outside")
    code = f"""
import io, json, sys, contextlib
import mcp_roots
from mcp_roots import RootSet, RootsGuard, PathOutsideRoots
from mcp_roots.cli import main
roots = RootSet.from_paths([{str(root)!r}])
out = {{"read": roots.read_text("a.txt")}}
try:
    roots.read_text({str(tmp_path / "secret.txt")!r})
except PathOutsideRoots:
    out["refused"] = True
guard = RootsGuard([{str(root)!r}])
out["fallback"] = [str(p) for p in guard.fallback.paths]
try:
    guard.install(object())
except TypeError as exc:
    out["install"] = str(exc)
buffer = io.StringIO()
with contextlib.redirect_stdout(buffer):
    out["check"] = main(["--roots", {str(root)!r}, "check", {str(root / "a.txt")!r}])
    out["audit"] = main(["audit", "json:loads"])
out["sdk_loaded"] = sorted(m for m in sys.modules if m.split(".")[0] in ("mcp", "mcp_types", "fastmcp"))
print(json.dumps(out))
"""
    result = run_without_sdk(code, tmp_path)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout.splitlines()[-1])
    assert out["read"] == "inside"
    assert out["refused"] is True
    assert out["fallback"] == [str(root.resolve())]
    assert "guard.install() supports: mcp 2.x MCPServer" in out["install"]
    assert out["check"] == 0
    assert out["audit"] == 2  # json.loads is no server: a usage error, said on stderr
    assert "no adapter for builtins.function" in result.stderr
    assert out["sdk_loaded"] == []


def test_serve_without_the_sdk_says_what_to_install(tmp_path: Path) -> None:
    (tmp_path / "root").mkdir()
    code = f"""
from mcp_roots.cli import main
raise SystemExit(main(["serve", {str(tmp_path / "root")!r}]))
"""
    result = run_without_sdk(code, tmp_path)
    assert result.returncode == 2, result.stderr
    assert "needs the official mcp SDK" in result.stderr
    assert "pip install 'mcp-roots[mcp]'" in result.stderr
    assert "Traceback" not in result.stderr
