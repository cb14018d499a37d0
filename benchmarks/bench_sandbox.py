"""What the kernel confinement costs: a spawn (`true`) and two realistic commands (`grep -r` over a tree of
10,000 files, `git status` in it as a repository), bare, under bubblewrap with a comparable confinement (the
anchor) and under ours, side by side in one run.

Usage: python benchmarks/bench_sandbox.py [--spawns 200] [--files 10000] [--greps 15]
Rows: `subprocess.run` (the baseline); with a `preexec_fn` (one fork of this Python process), `popen_tree`
(the PID namespace's three processes, unconfined) and the same three with only unshare and posix_spawn
between the forks: the floor of ours, in parts; `bwrap` (a PID
namespace, --die-with-parent, a new session, no capability, only the system paths and the root bound
read-only, its own /proc and /dev: what ours holds), alone and with our seccomp filter (`--seccomp`: the
comparable anchor, since bubblewrap carries a filter but cannot carry Landlock, which forbids its mounts);
`RootSet.run` (the forked child makes a PID and a mount namespace, a root of its own holding only the
grant, then Landlock and the seccomp filter, and execs), `RootSet.run_async`, and `write=True` where the root
holds a `.git` (the protected set bound read-only too) beside `protect=False`; "Landlock off (measured only)"
rows price the second layer's checks (ruleset built, not applied). Each round runs every row once
in turn, so a load spike on a shared machine hits all rows alike; the table gives the median and the
minimum of the wall-clock time per run, the children's CPU time (user + system; this process is their
subreaper, so bubblewrap's first process, which bubblewrap leaves unreaped, is counted too) and this
process's own (the spawn's work in the caller: the plan, the Landlock ruleset, the fork's page copies).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import anyio.from_thread

from mcp_roots import RootSet
from mcp_roots._sys import landlock, privileges, seccomp
from mcp_roots.sandbox import SYSTEM_DEVICE_PATHS, SYSTEM_READ_PATHS, mount_namespace, popen_tree, support


class Filter:
    """Our seccomp filter for bubblewrap's ``--seccomp FD`` (a memfd, read from its start by each run)."""

    def __init__(self, write: bool) -> None:
        self.fd = os.memfd_create("filter", 0)
        os.write(self.fd, seccomp.program(network=True, write=write, path_metadata=write))

    def rewound(self) -> tuple[int]:
        """The descriptor to pass (``pass_fds``), read from its start again."""
        os.lseek(self.fd, 0, os.SEEK_SET)
        return (self.fd,)


def bwrap_argv(root: Path, write: bool, syscall_filter: Filter | None = None) -> list[str] | None:
    """bubblewrap confining a command as ours does (None where it is not installed), with our seccomp filter
    where given."""
    program = shutil.which("bwrap")
    if program is None:
        return None
    argv = [program, "--unshare-pid", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    if syscall_filter is not None:
        argv += ["--seccomp", str(syscall_filter.fd)]
    for path in SYSTEM_READ_PATHS:
        if os.path.islink(path):
            argv += ["--symlink", os.readlink(path), path]
        elif os.path.exists(path):
            argv += ["--ro-bind", path, path]
    for path in SYSTEM_DEVICE_PATHS:
        argv += ["--dev-bind-try", path, path]
    argv += [
        "--proc",
        "/proc",
        "--bind" if write else "--ro-bind",
        str(root),
        str(root),
        "--chdir",
        str(root),
    ]
    return [*argv, "--"]


def _nothing() -> None:
    pass


TRUE = shutil.which("true") or "/bin/true"
USER_NAMESPACE = not privileges.has_capability(privileges.CAP_SYS_ADMIN)


def _bare_chain() -> None:
    # In subprocess's forked child: a PID namespace's three processes with nothing but unshare and
    # posix_spawn between the forks (no root of its own, no confinement): what a chain made in Python costs
    # before any step of ours.
    privileges.private_mounts(
        os.getuid(), os.getgid(), new_user_namespace=USER_NAMESPACE, new_pid_namespace=True
    )
    first = privileges.fork()
    if first == 0:
        os.waitpid(os.posix_spawn(TRUE, [TRUE], {}), 0)
        os._exit(0)
    os.waitpid(first, 0)
    os._exit(0)


def landlock_off(run: Callable[[], object]) -> Callable[[], object]:
    """``run`` with Landlock's ruleset built but not applied (no_new_privs only): what the second layer's
    per-open checks cost, which no bubblewrap row can carry. Measured here only: the library has no such
    switch."""

    def off() -> object:
        saved = landlock.restrict_with
        landlock.restrict_with = lambda ruleset: landlock.set_no_new_privs()
        try:
            return run()
        finally:
            landlock.restrict_with = saved

    return off


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def reap_orphans() -> None:
    # Processes a run left to us as their subreaper (bubblewrap's first process): their CPU counts too.
    with contextlib.suppress(ChildProcessError):
        while True:
            os.waitpid(-1, 0)


#: Per row: wall-clock times, the children's CPU, the caller's CPU, the children's minor page faults.
Times = dict[str, tuple[list[float], list[float], list[float], list[float]]]


def measure(rows: dict[str, Callable[[], object]], rounds: int) -> Times:
    times: Times = {name: ([], [], [], []) for name in rows}
    for run in rows.values():  # warm up: caches, the first ruleset, the filter program
        run()
        reap_orphans()
    for _ in range(rounds):
        for name, run in rows.items():
            cpu = children_cpu()
            faults = resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt
            own = time.process_time()
            start = time.perf_counter()
            run()
            reap_orphans()
            times[name][0].append(time.perf_counter() - start)
            times[name][1].append(children_cpu() - cpu)
            times[name][2].append(time.process_time() - own)
            times[name][3].append(resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt - faults)
    return times


LINE = "the quick brown fox jumps over the lazy dog 0123456789\n"
LINES = 20


def make_tree(base: Path, files: int) -> None:
    per_dir = 100
    line = LINE * LINES
    for i in range(files):
        directory = base / f"d{i // per_dir:04d}"
        if i % per_dir == 0:
            directory.mkdir()
        text = line + ("needle\n" if i % 97 == 0 else "")
        (directory / f"f{i:05d}.txt").write_text(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spawns", type=int, default=200, help="rounds of the spawn rows")
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--greps", type=int, default=15, help="rounds of the grep rows")
    args = parser.parse_args()
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER: orphans of the rows come back to be reaped
    load_before = os.getloadavg()
    kernel = support()
    if not kernel.complete:
        sys.exit(f"no Landlock or filter here ({kernel.reason or kernel.filter_reason}): nothing to measure")

    with tempfile.TemporaryDirectory() as tmp:
        base = Path(os.path.realpath(tmp))
        tree = base / "tree"
        tree.mkdir()
        (tree / ".git" / "hooks").mkdir(parents=True)
        (tree / ".git" / "config").write_text("[core]\n")
        roots = RootSet.from_paths([tree])
        devnull = subprocess.DEVNULL
        read_filter = Filter(write=False)
        bwrap = bwrap_argv(tree, write=False)
        bwrap_filtered = bwrap_argv(tree, write=False, syscall_filter=read_filter)
        anchor: dict[str, Callable[[], object]] = {}
        if bwrap is not None and bwrap_filtered is not None:
            anchor["bwrap true"] = lambda: subprocess.run([*bwrap, "true"], check=True)
            anchor["bwrap + our filter, true"] = lambda: subprocess.run(
                [*bwrap_filtered, "true"], check=True, pass_fds=read_filter.rewound()
            )
        with anyio.from_thread.start_blocking_portal() as portal:
            spawns = measure(
                {
                    "subprocess.run(['true'])": lambda: subprocess.run(["true"], check=True),
                    # The floor of ours, in parts: one fork of this process (a preexec_fn forces fork over
                    # vfork), and the PID namespace's three processes alone (unconfined, no root of its own).
                    "subprocess.run(['true'], preexec_fn=...), one Python fork": lambda: subprocess.run(
                        ["true"], check=True, preexec_fn=_nothing
                    ),
                    "popen_tree(['true']), the PID namespace alone": lambda: popen_tree(["true"]).wait(),
                    "three processes, only unshare and posix_spawn between the forks": lambda: subprocess.run(
                        [TRUE], check=True, preexec_fn=_bare_chain
                    ),
                    **anchor,
                    "RootSet.run(['true'])": lambda: roots.run(["true"], check=True),
                    "RootSet.run(['true']), Landlock off (measured only)": landlock_off(
                        lambda: roots.run(["true"], check=True)
                    ),
                    "RootSet.run_async(['true'])": lambda: portal.call(roots.run_async, ["true"]),
                    "RootSet.run(['true'], write=True), protected set": lambda: roots.run(
                        ["true"], write=True, check=True
                    ),
                    "RootSet.run(['true'], write=True, protect=False)": lambda: roots.run(
                        ["true"], write=True, protect=False, check=True
                    ),
                },
                args.spawns,
            )

        make_tree(tree, args.files)
        git_env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(tree)}
        repo = base / "repo"
        subprocess.run(["cp", "-r", str(tree), str(repo)], check=True)
        subprocess.run(["rm", "-rf", str(repo / ".git")], check=True)
        for git in (
            ["init", "-q"],
            ["add", "-A"],
            ["-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "t"],
        ):
            subprocess.run(["git", "-C", str(repo), *git], check=True, env=git_env)
        # Files as new as the index are "racily clean": every status would hash them all again (and
        # --no-optional-locks never writes the index that would settle it). Settle it once, a second on.
        time.sleep(1.1)
        subprocess.run(["git", "-C", str(repo), "status", "-s"], check=True, env=git_env, stdout=devnull)
        repo_roots = RootSet.from_paths([repo])
        repo_bwrap = bwrap_argv(repo, write=False)
        repo_filtered = bwrap_argv(repo, write=False, syscall_filter=read_filter)
        grep = ["grep", "-r", "-c", "needle", str(tree)]
        status = ["git", "-C", str(repo), "--no-optional-locks", "status", "--porcelain"]
        anchors: dict[str, Callable[[], object]] = {}
        if bwrap is not None and bwrap_filtered is not None and repo_bwrap and repo_filtered:
            anchors["grep -r, bwrap"] = lambda: subprocess.run([*bwrap, *grep], stdout=devnull, check=True)
            anchors["grep -r, bwrap + our filter"] = lambda: subprocess.run(
                [*bwrap_filtered, *grep], stdout=devnull, check=True, pass_fds=read_filter.rewound()
            )
            anchors["git status, bwrap"] = lambda: subprocess.run(
                [*repo_bwrap, *status], stdout=devnull, check=True, env=git_env
            )
            anchors["git status, bwrap + our filter"] = lambda: subprocess.run(
                [*repo_filtered, *status],
                stdout=devnull,
                check=True,
                env=git_env,
                pass_fds=read_filter.rewound(),
            )
        greps = measure(
            {
                "grep -r, unconfined": lambda: subprocess.run(grep, stdout=devnull, check=True),
                "git status, unconfined": lambda: subprocess.run(
                    status, stdout=devnull, check=True, env=git_env
                ),
                **anchors,
                "grep -r, RootSet.run": lambda: roots.run(grep, stdout=devnull, check=True),
                "grep -r, RootSet.run, Landlock off (measured only)": landlock_off(
                    lambda: roots.run(grep, stdout=devnull, check=True)
                ),
                "git status, RootSet.run": lambda: repo_roots.run(
                    status, stdout=devnull, check=True, env=git_env
                ),
                "git status, RootSet.run, Landlock off (measured only)": landlock_off(
                    lambda: repo_roots.run(status, stdout=devnull, check=True, env=git_env)
                ),
                "grep -r, RootSet.run(write=True), protected set": lambda: roots.run(
                    grep, write=True, stdout=devnull, check=True
                ),
            },
            args.greps,
        )

    namespaces = mount_namespace()
    print(f"namespaces: {'on (a PID namespace and a root of its own)' if namespaces is None else namespaces}")
    print(
        f"Landlock ABI {kernel.abi} + seccomp filter; {args.spawns} rounds of spawns, "
        f"{args.greps} of grep over {args.files}"
    )
    print(f"files of {len(LINE) * LINES + 7} bytes or less, read-only root")
    load_after = os.getloadavg()
    print(
        f"load average (1 min) {load_before[0]:.1f} before, {load_after[0]:.1f} after, "
        f"{os.cpu_count()} CPUs\n"
    )
    print(
        "| command | median | min | children CPU (median) | caller CPU (median) | CPU in all "
        "| children's minor faults (median) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for results in (spawns, greps):
        for name, (wall, cpu, own, faults) in results.items():
            total = statistics.median([a + b for a, b in zip(cpu, own, strict=True)])
            print(
                f"| {name} | {statistics.median(wall) * 1e3:.2f} ms | {min(wall) * 1e3:.2f} ms "
                f"| {statistics.median(cpu) * 1e3:.2f} ms | {statistics.median(own) * 1e3:.2f} ms "
                f"| {total * 1e3:.2f} ms | {statistics.median(faults):.0f} |"
            )
    base_spawn = statistics.median(spawns["subprocess.run(['true'])"][0])
    added = statistics.median(spawns["RootSet.run(['true'])"][0]) - base_spawn
    async_added = statistics.median(spawns["RootSet.run_async(['true'])"][0]) - base_spawn
    grep_ratio = statistics.median(greps["grep -r, RootSet.run"][0]) / statistics.median(
        greps["grep -r, unconfined"][0]
    )
    print(
        f"\nadded per spawn, RootSet.run: {added * 1e3:+.2f} ms (goal <= 25 ms); "
        f"grep -r ratio beside it: {grep_ratio:.3f}x"
    )
    print(f"added per spawn, RootSet.run_async: {async_added * 1e3:+.2f} ms (goal <= 25 ms)")
    protected_added = (
        statistics.median(spawns["RootSet.run(['true'], write=True), protected set"][0]) - base_spawn
    )
    print(
        f"added per spawn, write=True with the protected set: {protected_added * 1e3:+.2f} ms (goal <= 60 ms)"
    )
    protected_grep = statistics.median(greps["grep -r, RootSet.run(write=True), protected set"][0])
    protected_ratio = protected_grep / statistics.median(greps["grep -r, unconfined"][0])
    print(f"grep -r with the protected set / unconfined: {protected_ratio:.3f}x")
    cpu_ratio = statistics.median(greps["grep -r, RootSet.run"][1]) / statistics.median(
        greps["grep -r, unconfined"][1]
    )
    print(f"grep -r confined / unconfined: {grep_ratio:.3f}x ({(grep_ratio - 1) * 100:+.1f}%, goal <= +5%)")
    print(f"grep -r children CPU, confined / unconfined: {cpu_ratio:.3f}x (steadier on a loaded machine)")
    if bwrap is not None:
        for what, ours, key in (
            ("spawn", spawns["RootSet.run(['true'])"], "true"),
            ("grep -r", greps["grep -r, RootSet.run"], "grep -r"),
            ("git status", greps["git status, RootSet.run"], "git status"),
        ):
            rows = {**spawns, **greps}
            for anchor_name, theirs in (
                ("bubblewrap", rows[f"{key}, bwrap" if key != "true" else "bwrap true"]),
                (
                    "bubblewrap + our filter",
                    rows[f"{key}, bwrap + our filter" if key != "true" else "bwrap + our filter, true"],
                ),
            ):
                ratio = statistics.median(ours[0]) / statistics.median(theirs[0])
                cpu_ratio = statistics.median(
                    [a + b for a, b in zip(ours[1], ours[2], strict=True)]
                ) / statistics.median([a + b for a, b in zip(theirs[1], theirs[2], strict=True)])
                print(f"{what}: ours / {anchor_name} {ratio:.3f}x wall, {cpu_ratio:.3f}x CPU in all")
        rows = {**spawns, **greps}
        for what, key, anchor_key in (
            ("spawn", "RootSet.run(['true'])", "bwrap + our filter, true"),
            ("grep -r", "grep -r, RootSet.run", "grep -r, bwrap + our filter"),
            ("git status", "git status, RootSet.run", "git status, bwrap + our filter"),
        ):
            ours_off = rows[f"{key}, Landlock off (measured only)"]
            theirs = rows[anchor_key]
            cpu_ratio = statistics.median(
                [a + b for a, b in zip(ours_off[1], ours_off[2], strict=True)]
            ) / statistics.median([a + b for a, b in zip(theirs[1], theirs[2], strict=True)])
            print(f"{what}: like for like (ours, Landlock off / bubblewrap + filter) {cpu_ratio:.3f}x CPU")
    else:
        print("bubblewrap is not installed: no anchor (make bench-deps installs it)")


if __name__ == "__main__":
    main()
