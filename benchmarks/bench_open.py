"""Per-call cost of RootSet.open (openat2 and the walk) beside the builtin open, realpath+check+open, and
of contains() beside os.path.realpath(), for files 1 and 9 components below a root, in a set of many roots;
with the floor of each: what the same system calls cost with no Python of ours around them.

Usage: python benchmarks/bench_open.py [--roots 10000] [--calls 2000] [--rounds 15] [--timer cpu|wall]
Prints one markdown table (microseconds per call: the best of --rounds rounds of --calls calls) and the
ratios the goals are stated in. Each round times every row once, so a load spike on a shared machine hits
all rows alike instead of skewing one ratio. The default timer is the process's CPU time (user + system,
so the system calls are counted): unlike the wall clock it does not count the time the process waited for
a CPU that other processes held; on an idle machine both give the same figures.
"""

from __future__ import annotations

import argparse
import io
import os
import stat
import sys
import tempfile
import time
import timeit
from collections.abc import Callable
from pathlib import Path

from mcp_roots import RootSet
from mcp_roots._sys import linux
from mcp_roots.paths import _beneath


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--roots", type=int, default=10_000)
    parser.add_argument("--calls", type=int, default=2_000)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--timer", choices=("cpu", "wall"), default="cpu")
    args = parser.parse_args()
    timer = time.process_time if args.timer == "cpu" else time.perf_counter
    if linux.OPENAT2 is None:
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

        root_fd = os.open(root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        openat2 = linux.OPENAT2
        rels = {shallow: b"f", deep: str(deep.relative_to(root)).encode()}

        def floor_open_fd(p: Path) -> None:
            # the system call the race-free open needs, through ctypes, with no routing around it
            os.close(openat2.beneath(root_fd, rels[p], os.O_RDONLY | os.O_CLOEXEC, 0))

        def floor_open(p: Path) -> None:
            # floor_open_fd plus what a file object costs: the file-type check (fstat), FileIO, a buffer
            fd = openat2.beneath(root_fd, rels[p], os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK, 0)
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise OSError(fd)
            io.BufferedReader(io.FileIO(fd, "r")).close()

        opened = {str(root): root_fd}  # the root descriptors by root path, as RootSet keeps them
        cut = len(str(root))  # every root path here has this one length (RootSet's common index)
        beneath, fstat, file_io, buffered = openat2.beneath, os.fstat, io.FileIO, io.BufferedReader
        read_flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK

        def least_python_open(p: Path) -> None:
            # floor_open plus the least Python any library needs between a path and that system call,
            # flat in one function: the text, the root by one slice and one dict probe, the rest encoded.
            # (Not sound: no check of the text at all -- NUL, '..', non-ASCII -- and no descriptor hold.)
            text = str(p)
            fd = beneath(opened[text[:cut]], text[cut + 1 :].encode(), read_flags, 0)
            if fstat(fd).st_mode & 0o170000 != stat.S_IFREG:
                raise OSError(fd)
            raw = file_io(fd, "r")
            raw.name = text
            buffered(raw).close()

        no_symlinks = openat2.no_symlinks

        def least_python_contains(p: Path) -> bool:
            # floor_contains plus the least Python between a path and its answer: the text, the lookup, the
            # root by one slice and one dict probe. (Not sound: no check of the text.)
            text = str(p)
            return no_symlinks(text) == 0 and text[:cut] in opened

        def floor_contains(p: Path) -> None:
            openat2.no_symlinks(str(p))  # one openat2(RESOLVE_NO_SYMLINKS) from '/' and its close

        def realpath_check_open(p: Path) -> None:
            real = os.path.realpath(p)
            if roots.root_above(real) is None:  # the same O(depth) index probe RootSet uses
                raise PermissionError(real)
            open(real, "rb").close()

        cases: list[tuple[str, Callable[[Path], object], str]] = [
            ("builtin open(p, 'rb') + close", lambda p: open(p, "rb").close(), "openat2"),
            ("RootSet.open(p, 'rb') + close, openat2", lambda p: roots.open(p, "rb").close(), "openat2"),
            ("floor: openat2 + fstat + FileIO + buffer + close", floor_open, "openat2"),
            ("floor + the least Python around it (not sound)", least_python_open, "openat2"),
            ("RootSet.open(p, 'rb') + close, walk", lambda p: roots.open(p, "rb").close(), "walk"),
            ("realpath + check + open + close", realpath_check_open, "openat2"),
            ("os.open(p) + os.close", lambda p: os.close(os.open(p, os.O_RDONLY | os.O_CLOEXEC)), "openat2"),
            (
                "RootSet.open_fd(p) + os.close, openat2",
                lambda p: os.close(roots.open_fd(p, os.O_RDONLY)),
                "openat2",
            ),
            ("floor: openat2 (ctypes) + os.close", floor_open_fd, "openat2"),
            ("Path(p).read_bytes()", lambda p: p.read_bytes(), "openat2"),
            ("RootSet.read_bytes(p), openat2", roots.read_bytes, "openat2"),
            ("os.path.realpath(p)", os.path.realpath, "openat2"),
            ("RootSet.contains(p), openat2", roots.contains, "openat2"),
            ("floor: openat2 RESOLVE_NO_SYMLINKS + close", floor_contains, "openat2"),
            ("floor + the least Python around it (not sound) ", least_python_contains, "openat2"),
            ("RootSet.contains(p), name walk", roots.contains, "walk"),
        ]
        best = {(label, i): float("inf") for label, _, _ in cases for i in (0, 1)}
        for _ in range(args.rounds):
            for label, fn, strategy in cases:
                # The documented test hook (MCP_ROOTS_RESOLVE chooses once per process otherwise).
                with _beneath.forced(strategy):
                    for i, p in enumerate((shallow, deep)):
                        call = lambda fn=fn, p=p: fn(p)  # noqa: E731
                        seconds = timeit.Timer(call, timer=timer).timeit(args.calls)
                        best[label, i] = min(best[label, i], seconds / args.calls * 1e6)
        rows = [(label, best[label, 0], best[label, 1]) for label, _, _ in cases]
        roots.close()
        os.close(root_fd)

    depth = len(root.parts) - 1
    print(
        f"{args.roots} roots; root {depth} components deep; best of {args.rounds} rounds of {args.calls} "
        f"calls; {args.timer} time; microseconds per call"
    )
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
    floors = {
        ours: "floor: openat2 + fstat + FileIO + buffer + close",
        fd_ours: "floor: openat2 (ctypes) + os.close",
        contains: "floor: openat2 RESOLVE_NO_SYMLINKS + close",
    }
    least = {
        ours: "floor + the least Python around it (not sound)",
        contains: "floor + the least Python around it (not sound) ",
    }
    print()
    for i, where in ((0, "1 deep"), (1, "9 deep")):
        print(
            f"{where}, the least Python around the floor: open {ratio(least[ours], builtin, i):.2f}x "
            f"the builtin, "
            f"contains {ratio(least[contains], realpath, i):.3f}x realpath"
        )
    for i, where in ((0, "1 deep"), (1, "9 deep")):
        print(
            f"{where}: RootSet.open / builtin open = {ratio(ours, builtin, i):.2f}x (goal <= 1.3x; floor "
            f"{ratio(floors[ours], builtin, i):.2f}x); open_fd / os.open = {ratio(fd_ours, fd_os, i):.2f}x "
            f"(goal <= 1.5x; floor {ratio(floors[fd_ours], fd_os, i):.2f}x); contains / realpath = "
            f"{ratio(contains, realpath, i):.3f}x (goal <= 0.1x; "
            f"floor {ratio(floors[contains], realpath, i):.3f}x); "
            f"realpath+check+open / RootSet.open = {ratio(naive, ours, i):.2f}x (goal >= 3x at 9 deep)"
        )


if __name__ == "__main__":
    main()
