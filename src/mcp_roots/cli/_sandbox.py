"""The kernel sandbox's commands: ``mcp-roots run`` (the child's exit code) and ``mcp-roots doctor``."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any

from .. import RootSet
from ..errors import ConfigError, SandboxUnavailable
from ..roots import CONFIG_FILENAME, ENV_VAR, SOURCE_UNCONFIGURED
from ._common import EXIT_OK, PROG, say

EXIT_SANDBOX_MISSING = 1  # 'doctor': no kernel confinement here
EXIT_CANNOT_RUN = 126  # 'run': the command exists but cannot be executed (as env(1) and timeout(1))
EXIT_NOT_FOUND = 127  # 'run': the command does not exist (as env(1) and timeout(1))


def add_sandbox_commands(command: Callable[[str, str, str], argparse.ArgumentParser]) -> None:
    run = command(
        "run",
        "run a command confined by the kernel to the roots (Landlock, seccomp); its exit code passes through",
        "Run COMMAND so that the kernel (Landlock) lets it, and every process it starts, read only beneath "
        "the roots (and write there with --write), plus read-only what a program needs to start "
        "(/usr, /lib*, the dynamic loader's files in /etc, locale and time zone data, /dev/null...); a "
        "seccomp filter refuses chmod/chown/utime/xattr by path and typing into the terminal (TIOCSTI), "
        "changing other processes' limits or priority, System V IPC, keyrings and inotify; it holds no "
        "capability, as root too. With --write the protected set (.git/config, .git/hooks, .mcp.json, "
        ".vscode, shell rc files, ...) stays read-only, through a mount namespace of its own. "
        "The command runs in a new session, without a controlling terminal; it gets this terminal's "
        "stdin, stdout and stderr, and the environment (only PATH, HOME, LANG, TERM and MCP_ROOTS_* with "
        "--clean-env). "
        "Exit code: the command's own (128+N if signal N ended it); 127 if it does not exist, 126 if it "
        "cannot be executed; 2 for a usage or configuration error, or no kernel confinement here (see "
        f"'{PROG} doctor') without --allow-unconfined.",
    )
    run.add_argument("--write", action="store_true", help="let the command write beneath the roots")
    run.add_argument(
        "--no-network",
        action="store_true",
        help="refuse every socket() and connect() (seccomp) and TCP bind/connect (Landlock ABI >= 4)",
    )
    run.add_argument(
        "--allow-path-metadata",
        action="store_true",
        help="with --write: let chmod/chown/utime/xattr by path through (builds: the linker's chmod +x), "
        "OUTSIDE the roots too, since Landlock has no right for them",
    )
    run.add_argument(
        "--protect",
        action="append",
        default=[],
        metavar="NAME",
        help="with --write: keep NAME (a path relative to a root, such as Makefile) read-only too, beside "
        f"the protected set ('{PROG} doctor' lists it: .git/config, .git/hooks, .mcp.json, .vscode, ...)",
    )
    run.add_argument(
        "--unprotect",
        action="append",
        default=[],
        metavar="NAME",
        help="with --write: let the command change NAME of the protected set (for example .git/config)",
    )
    run.add_argument(
        "--no-protect",
        action="store_true",
        help="with --write: no protected set (and no mount namespace): the command may change .git/config, "
        ".git/hooks, .mcp.json and the rest, which other programs run",
    )
    run.add_argument(
        "--strict-git",
        action="store_true",
        help="with --write: every .git folder read-only whole (git writes are refused), so that nothing the "
        "command writes changes what the next git there runs, a repository it creates and stages included",
    )
    run.add_argument(
        "--allow-unix",
        action="append",
        default=[],
        metavar="PATH",
        help="let the command connect to the unix socket PATH (repeatable); network on or off, no other "
        "unix socket of this machine's is there for it (by path or abstract name)",
    )
    run.add_argument(
        "--clean-env",
        action="store_true",
        help="pass only PATH, HOME, LANG, TERM and MCP_ROOTS_* to the command",
    )
    run.add_argument(
        "--sandbox",
        choices=("auto", "native", "srt"),
        default="auto",
        help="the confinement: native (Landlock, seccomp, namespaces), srt (Anthropic's sandbox runtime: "
        "macOS, or Linux without Landlock), auto (native where the kernel holds it all, else srt; default)",
    )
    run.add_argument(
        "--allow-domain",
        action="append",
        default=[],
        metavar="NAME",
        help="with --sandbox srt: let the command reach this host (repeatable) through srt's proxy; with "
        "srt, no other host is reachable",
    )
    run.add_argument(
        "--allow-unconfined",
        action="store_true",
        help="where the kernel cannot confine, run anyway (with a warning) instead of failing",
    )
    run.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- COMMAND [ARG...]")
    doctor = command(
        "doctor",
        "report whether the kernel can confine subprocesses, and prove each promise with a live attempt",
        "Report the Landlock ABI of this kernel (or why there is none), whether the seccomp filter, "
        "no_new_privs and a mount namespace are available, what a confined command is refused here, then "
        "attempt every promise for real (reading outside, writing .git/config, renaming .git, signals, "
        "limits and priority of this process, System V IPC, keyrings, inotify, capabilities...) with a "
        "confined child and say which mechanism held it; then the protected set and the read-only system "
        "paths. Exit code 0 when every layer is there and every attempt was held, 1 otherwise. With "
        "--sandbox srt: Anthropic's sandbox runtime found (or what to install) and its promises attempted.",
    )
    doctor.add_argument(
        "--sandbox",
        choices=("auto", "native", "srt"),
        default="native",
        help="the backend to prove: native (default), srt, or auto (the one run and wrap would use here)",
    )


def run_command(roots: RootSet, args: argparse.Namespace) -> int:
    argv = list(args.argv)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        raise ConfigError(f"'{PROG} run' needs a command after '--' (for example: {PROG} run -- ls)")
    if roots.source == SOURCE_UNCONFIGURED:
        # Confined to nothing, the command could not even read its arguments: say why before it starts.
        raise ConfigError(
            f"'{PROG} run' has no roots to confine the command to; give them on the command line, as in "
            f"'{PROG} run --roots DIR -- COMMAND' (several: --roots A,B; --project DIR for a project's own "
            f"{CONFIG_FILENAME}), or set the {ENV_VAR} environment variable"
        )
    if args.allow_path_metadata and not args.write:
        raise ConfigError(
            f"'{PROG} run --allow-path-metadata' needs --write (a read-only command changes no metadata)"
        )
    if (args.protect or args.unprotect or args.no_protect or args.strict_git) and not args.write:
        raise ConfigError(
            f"'{PROG} run --protect/--unprotect/--no-protect/--strict-git' need --write (nothing is written "
            "without)"
        )
    from .. import sandbox as _sandbox

    try:
        backend = _sandbox.choose(args.sandbox)
    except SandboxUnavailable as exc:
        raise ConfigError(f"'{PROG} run': {exc}") from None
    try:
        protect = _sandbox.protected_names(not args.no_protect, add=args.protect, remove=args.unprotect)
    except ValueError as exc:
        raise ConfigError(f"'{PROG} run': {exc}") from None
    try:
        # The terminal's stdio on purpose (stdin/stdout=None), but in a new session: the command has no
        # controlling terminal, so it cannot take over the user's shell's (TIOCSTI is also filtered).
        code = run_forwarding_signals(
            lambda: _sandbox.popen(
                roots.paths,
                argv,
                write=args.write,
                network=not args.no_network and (backend == "native" or bool(args.allow_domain)),
                allow_unconfined=args.allow_unconfined,
                path_metadata=args.allow_path_metadata,
                protect=protect,
                allow_unix=args.allow_unix,
                strict_git=args.strict_git,
                sandbox=backend,
                allow_domains=args.allow_domain,
                stdin=None,
                stdout=None,
                start_new_session=True,
                env=_sandbox.clean_env() if args.clean_env else None,
            )
        )
    except ValueError as exc:  # an --allow-unix PATH that is not a socket
        raise ConfigError(f"'{PROG} run --allow-unix': {exc}") from None
    except FileNotFoundError:
        say(sys.stderr, f"{PROG}: error: {argv[0]}: command not found")
        return EXIT_NOT_FOUND
    except PermissionError as exc:
        say(sys.stderr, f"{PROG}: error: {argv[0]}: cannot be executed ({exc.strerror})")
        return EXIT_CANNOT_RUN
    return 128 - code if code < 0 else code


def run_forwarding_signals(spawn: Callable[[], Any]) -> int:
    # In its own session the command no longer gets the terminal's Ctrl-C, quit or hangup: pass them on.
    # The handlers are in place before the command starts, so a signal that arrives while it is being
    # started is held and passed on as soon as it exists (none is lost to Python's default handler).
    import contextlib
    import signal

    started: list[Any] = []
    held: list[int] = []

    def forward(signum: int, frame: object) -> None:
        if not started:
            held.append(signum)
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(started[0].pid, signum)

    names = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
    previous = {signum: signal.signal(signum, forward) for signum in names}
    try:
        process = spawn()
        started.append(process)
        for signum in held:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signum)
        code: int = process.wait()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return code


def doctor_command(as_json: bool, backend: str = "native") -> tuple[str, int]:
    from .. import sandbox as _sandbox

    if backend != "native" and _sandbox.choose(backend) == "srt":
        text, complete = _sandbox.srt_report(as_json)
        return text, EXIT_OK if complete else EXIT_SANDBOX_MISSING
    text, complete = _sandbox.doctor_report(as_json, PROG)
    return text, EXIT_OK if complete else EXIT_SANDBOX_MISSING
