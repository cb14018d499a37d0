"""Per-call cost of RootSet.contains() with 1, 100 and 10,000 roots, beside a bare os.path.realpath().

One run prints a table and the two ratios the goals are stated in (issue 21): 10,000 roots within 1.1x of
1 root, and contains() within 0.1x of realpath(), beside the floor (the one system call contains() makes). A
naive linear scan over the roots (realpath, then a component
prefix test against every root) is shown beside the 10,000-root row. Sizes are configurable:

    python benchmarks/bench_contains.py [--roots 1,100,10000] [--number 1000] [--repeat 15] [--timer cpu|wall]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import timeit
from collections.abc import Callable
from pathlib import Path

from mcp_roots import RootSet
from mcp_roots._sys import linux


def best_per_call(
    fns: dict[str, tuple[Callable[[], object], int]], repeat: int, timer: Callable[[], float]
) -> dict[str, float]:
    """Seconds per call of each function: the best of ``repeat`` rounds (timeit's advice: the minimum).
    Each round times every function once, so a load spike on a shared machine hits them all alike."""
    best = {name: float("inf") for name in fns}
    for _ in range(repeat):
        for name, (fn, number) in fns.items():
            best[name] = min(best[name], timeit.timeit(fn, number=number, timer=timer) / number)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--roots", default="1,100,10000", help="root counts, comma-separated")
    parser.add_argument("--number", type=int, default=1000, help="calls per measurement")
    parser.add_argument("--repeat", type=int, default=15, help="rounds of measurement; the best is kept")
    parser.add_argument(
        "--timer",
        choices=("cpu", "wall"),
        default="cpu",
        help="process CPU time (default: not the time spent waiting for a CPU others held) or the wall clock",
    )
    args = parser.parse_args()
    counts = [int(n) for n in args.roots.split(",")]
    biggest = max(counts)

    with tempfile.TemporaryDirectory() as tmp:
        base = Path(os.path.realpath(tmp))
        project = base / "project"
        target = project / "a" / "b" / "c" / "d" / "file.txt"  # 5 levels below the root
        target.parent.mkdir(parents=True)
        target.write_text("x")
        others = base / "others"
        others.mkdir()
        # Sibling roots: each a real directory; the project is the last root, so a scan finds it last.
        for i in range(biggest - 1):
            (others / f"r{i:05d}").mkdir()
        path = str(target)

        fns: dict[str, tuple[Callable[[], object], int]] = {
            "realpath": (lambda: os.path.realpath(path), args.number)
        }
        if linux.OPENAT2 is not None:  # the floor: the one system call contains() makes, through ctypes
            fns["floor"] = (lambda o=linux.OPENAT2: o.no_symlinks(path), args.number)  # type: ignore[misc]
        for n in counts:
            dirs = [others / f"r{i:05d}" for i in range(n - 1)] + [project]
            roots = RootSet.from_paths(dirs)
            assert len(roots) == n
            assert roots.contains(path)
            fns[f"contains{n}"] = (lambda r=roots: r.contains(path), args.number)  # type: ignore[misc]
        scan_roots = (
            [str(project)] if biggest == 1 else [str(others / f"r{i:05d}") for i in range(biggest - 1)]
        )
        scan_roots.append(str(project))

        def linear_scan() -> bool:
            # What a naive server does: canonicalize, then test every root by component prefix.
            canonical = os.path.realpath(path)
            return any(canonical == r or canonical.startswith(r + "/") for r in scan_roots)

        assert linear_scan()
        fns["scan"] = (linear_scan, max(1, args.number // 50))
        timer = time.process_time if args.timer == "cpu" else time.perf_counter
        best = best_per_call(fns, args.repeat, timer)

    realpath = best["realpath"]
    rows = [("os.path.realpath (no roots)", realpath)]
    for n in counts:
        rows.append((f"RootSet.contains, {n:,} root{'s' if n > 1 else ''}", best[f"contains{n}"]))
    if "floor" in best:
        rows.append(("floor: openat2 RESOLVE_NO_SYMLINKS (ctypes) + close", best["floor"]))
    rows.append((f"linear scan over {biggest:,} roots (realpath + prefix test)", best["scan"]))
    width = max(len(name) for name, _ in rows)
    print(f"{'operation':<{width}}  per call")
    for name, seconds in rows:
        print(f"{name:<{width}}  {seconds * 1e6:8.2f} us")
    print()
    smallest = min(counts)
    many, one = best[f"contains{biggest}"], best[f"contains{smallest}"]
    floor = f"; floor {best['floor'] / realpath:.3f}x" if "floor" in best else ""
    print(f"{biggest:,} roots / {smallest} root: {many / one:.2f}x (goal <= 1.1x)")
    print(f"contains, {smallest} root / realpath: {one / realpath:.3f}x (goal <= 0.1x{floor})")
    print(f"contains, {biggest:,} roots / realpath: {many / realpath:.3f}x (goal <= 0.1x{floor})")
    print(f"linear scan / contains, {biggest:,} roots: {best['scan'] / many:.0f}x")


if __name__ == "__main__":
    main()
