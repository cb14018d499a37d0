"""How long a full `mcp-roots probe` takes: `mcp-roots serve` and the official filesystem server (pinned in
tests/interop, when its node_modules are installed), each over stdio with every era, with and without client
roots, every technique. Prints one line per server side by side: wall time, calls, findings.

    .venv/bin/python benchmarks/bench_probe.py [--race-attempts 16]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OFFICIAL = REPO / "tests/interop/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--race-attempts", default="16")
    args = parser.parse_args()
    servers = {"mcp-roots serve": [sys.executable, "-m", "mcp_roots.cli", "serve", "{root}"]}
    if OFFICIAL.exists() and shutil.which("node"):
        version = json.loads((OFFICIAL.parent.parent / "package.json").read_text())["version"]
        servers[f"official server-filesystem {version}"] = ["node", str(OFFICIAL), "{root}"]
    print(f"{'server':40} {'wall s':>7} {'calls':>6} {'args':>5} {'escapes':>8} {'findings':>9}  connections")
    for name, command in servers.items():
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "mcp_roots.cli", "probe", "--json", "--race-attempts", args.race_attempts,
             "--", *command],
            capture_output=True, text=True, timeout=900,
        )  # fmt: skip
        wall = time.monotonic() - started
        report = json.loads(done.stdout)
        connections = ", ".join(f"{k} {v}" for k, v in report["connections"].items())
        print(
            f"{name:40} {wall:7.1f} {report['calls']:6d} {len(report['arguments']):5d} "
            f"{report['escapes']:8d} {report['findings']:9d}  {connections}"
        )


if __name__ == "__main__":
    main()
