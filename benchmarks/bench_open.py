"""Per-call cost of RootSet.open (openat2 and the walk) beside the builtin open, realpath+check+open, and
of contains() beside os.path.realpath(), for files 1 and 9 components below a root, in a set of many roots.

Usage: python benchmarks/bench_open.py [--roots 10000] [--calls 5000] [--repeat 3]
Prints one markdown table (microseconds per call, best of --repeat runs of --calls calls) and the ratios
the goals are stated in.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import timeit
from collections.abc import Callable
from pathlib import Path

from mcp_roots import RootSet, _beneath


def per_call(fn: Callable[[], object], calls: int, repeat: int) -> float:
    return min(timeit.repeat(fn, number=calls, repeat=repeat)) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--roots", type=int, default=10_000)
    parser.add_argument("--calls", type=int, default=5_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if _beneath._syscall is None:
        sys.exit("openat2 is not available here (Linux x86_64/aarch64 only); nothing to compare")

    with tempfile.TemporaryDirectory() as tmp:
        base = Path(os.path.realpath(tmp))
        dirs = [base / f"root{i:05d}" for i in range(args.roots)]
        for d in dirs:
            d.mkdir()
        root = dirs[args.roots // 2]
        shallow = root / "f"
        shallow.write_bytes(b"x")
        deep_dir = root.joinpath(*(f"d{i}" for i in range(8)))
        deep_dir.mkdir(parents=True)
        deep = deep_dir / "f"
        deep.write_bytes(b"x")
        roots = RootSet.from_paths(dirs)
        n, r = args.calls, args.repeat

        def realpath_check_open(p: Path) -> None:
            real = os.path.realpath(p)
            if roots._lookup(real) is None:  # the same O(depth) index probe RootSet uses
                raise PermissionError(real)
            open(real, "rb").close()

        rows: list[tuple[str, float, float]] = []

        def measure(label: str, fn: Callable[[Path], object], strategy: str = "openat2") -> None:
            _beneath.use_openat2 = strategy == "openat2"
            try:
                rows.append((label, per_call(lambda: fn(shallow), n, r), per_call(lambda: fn(deep), n, r)))
            finally:
                _beneath.use_openat2 = True

        measure("builtin open(p, 'rb') + close", lambda p: open(p, "rb").close())
        measure("RootSet.open(p, 'rb') + close, openat2", lambda p: roots.open(p, "rb").close())
        measure("RootSet.open(p, 'rb') + close, walk", lambda p: roots.open(p, "rb").close(), "walk")
        measure("realpath + check + open + close", realpath_check_open)
        measure("os.open(p) + os.close", lambda p: os.close(os.open(p, os.O_RDONLY | os.O_CLOEXEC)))
        measure("RootSet.open_fd(p) + os.close, openat2", lambda p: os.close(roots.open_fd(p, os.O_RDONLY)))
        measure("Path(p).read_bytes()", lambda p: p.read_bytes())
        measure("RootSet.read_bytes(p), openat2", roots.read_bytes)
        measure("os.path.realpath(p)", os.path.realpath)
        measure("RootSet.contains(p), openat2", roots.contains)
        measure("RootSet.contains(p), name walk", roots.contains, "walk")
        roots.close()

    depth = len(root.parts) - 1
    print(f"{args.roots} roots; root {depth} components deep; best of {r} x {n} calls; microseconds per call")
    print()
    print("| operation | 1 deep | 9 deep |")
    print("|---|---:|---:|")
    for label, one, nine in rows:
        print(f"| {label} | {one:.2f} | {nine:.2f} |")
    table = {label: (one, nine) for label, one, nine in rows}

    def ratio(a: str, b: str, i: int) -> float:
        return table[a][i] / table[b][i]

    builtin, ours = "builtin open(p, 'rb') + close", "RootSet.open(p, 'rb') + close, openat2"
    naive = "realpath + check + open + close"
    fd_ours, fd_os = "RootSet.open_fd(p) + os.close, openat2", "os.open(p) + os.close"
    contains, realpath = "RootSet.contains(p), openat2", "os.path.realpath(p)"
    print()
    for i, where in ((0, "1 deep"), (1, "9 deep")):
        print(
            f"{where}: RootSet.open / builtin open = {ratio(ours, builtin, i):.2f}x (goal <= 1.5x); "
            f"realpath+check+open / RootSet.open = {ratio(naive, ours, i):.2f}x (goal >= 3x at 9 deep); "
            f"open_fd / os.open = {ratio(fd_ours, fd_os, i):.2f}x (goal <= 1.5x); "
            f"contains / realpath = {ratio(contains, realpath, i):.2f}x (goal <= 0.5x)"
        )


if __name__ == "__main__":
    main()
