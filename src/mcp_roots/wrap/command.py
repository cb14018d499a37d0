"""``mcp-roots wrap``: its options, the checks before anything starts, and the run.
The first child starts before the proxy is imported.
"""

# ``mcp-roots wrap``: its options, the checks before anything starts, and the run (this process's stdio is
# the host's channel; the wrapped server is a confined child). The first child, confined to no roots, is
# started as soon as the checks have passed, before the proxy, the event loop and the roots cache are
# imported: the server comes up while wrap does.

from __future__ import annotations

import argparse
import contextlib
import logging
import math
import os
import subprocess
import sys
import typing
from collections.abc import Iterator, Sequence
from dataclasses import replace

from .. import RootSet, clip_to_ceiling, fallback_roots
from ..errors import ConfigError, RootsError, SandboxUnavailable
from ..sandbox import BACKENDS, SRT_INSTALL, Runtime, choose, find_srt, support
from ._launch import fetch, launch_of
from ._options import DEFAULT_MAX_MESSAGE_BYTES, Options
from ._plan import cache_base, end_tree_now, make_plan, prepare_cache, refuse_container, spawn

__all__ = ["build_parser", "main"]

PROG = "mcp-roots wrap"
EXIT_OK = 0
EXIT_ERROR = 2
logger = logging.getLogger("mcp_roots")


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr (and exit 2), not the usage block."""

    def error(self, message: str) -> typing.NoReturn:
        self.exit(EXIT_ERROR, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG,
        description="Run an MCP server over stdio, confined by the kernel to the client's roots clipped to "
        "the ceiling (before the client has sent them: to none). The host starts wrap in place of the "
        "server; wrap replaces the server when the roots change and checks every path argument first.",
        epilog="example: mcp-roots wrap --ceiling ~/code -- npx -y @modelcontextprotocol/server-filesystem "
        "~/code   (docs/wrap.md has the host configurations)",
    )
    parser.add_argument(
        "--ceiling",
        action="append",
        required=True,
        metavar="DIR",
        help="the most the client's roots may reach (required, repeatable)",
    )
    parser.add_argument(
        "--roots",
        action="append",
        metavar="DIR",
        help="roots for a client that sends none (clipped to the ceiling)",
    )
    parser.add_argument(
        "--read",
        action="append",
        default=[],
        metavar="DIR",
        help="also readable by the server (its runtime, data it needs)",
    )
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME",
        help="pass this environment variable through (the rest is cleared)",
    )
    parser.add_argument(
        "--ask",
        action="store_true",
        help="for a host that sends no roots but declared elicitation: a call naming a path inside the "
        "ceiling under no folder granted asks the user (which folder, read or read and write, for this "
        "session); a granted folder replaces the server with one confined to it as well",
    )
    parser.add_argument(
        "--ask-timeout",
        type=float,
        default=120.0,
        metavar="SECONDS",
        help="with --ask: how long a question waits for the user's answer (default 120)",
    )
    parser.add_argument("--read-only", action="store_true", help="the roots are read-only for the server")
    parser.add_argument(
        "--strict-git",
        action="store_true",
        help="every .git folder in the roots read-only whole: no git redirection a new file could make, "
        "and git writes (add, commit) refused",
    )
    parser.add_argument("--network", action="store_true", help="let the server open sockets (default: none)")
    parser.add_argument(
        "--sandbox",
        choices=BACKENDS,
        default="auto",
        help="the confinement: native (Landlock, seccomp, namespaces), srt (Anthropic's sandbox runtime: "
        "macOS, or Linux without Landlock), auto (native where the kernel holds it all, else srt; default)",
    )
    parser.add_argument(
        "--allow-domain",
        action="append",
        default=[],
        metavar="NAME",
        help="with --sandbox srt: let the server reach this host (repeatable; *.example.com allowed), "
        "through srt's proxy; implies --network",
    )
    parser.add_argument(
        "--allow-container",
        action="store_true",
        help="allow docker/podman run (then only the argument checks hold)",
    )
    parser.add_argument(
        "--drain",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="how long calls in flight may finish after the roots change (default 5)",
    )
    parser.add_argument(
        "--start-timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="how long a new server has to answer initialize (default 30)",
    )
    parser.add_argument(
        "--max-in-flight",
        type=int,
        default=64,
        metavar="N",
        help="requests from the host in flight at once (default 64)",
    )
    parser.add_argument(
        "--max-message-bytes",
        type=int,
        default=DEFAULT_MAX_MESSAGE_BYTES,
        metavar="N",
        help="the longest message either side may send (default 32 MiB)",
    )
    parser.add_argument(
        "--cache-dir",
        metavar="DIR",
        help="where the private cache folders live (default ~/.cache/mcp-roots/wrap)",
    )
    parser.add_argument(
        "--print-policy", action="store_true", help="print what the server may touch, and exit"
    )
    parser.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND [ARGS...]")
    return parser


def options_from(args: argparse.Namespace) -> tuple[Options, str]:
    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    if not args.allow_container:
        refuse_container(command)
    elif not command:
        raise ConfigError("wrap: no COMMAND after '--' (see 'mcp-roots wrap --help')")
    timeouts = (
        (args.drain, "--drain"),
        (args.start_timeout, "--start-timeout"),
        (args.ask_timeout, "--ask-timeout"),
    )
    for value, name in timeouts:
        if not (value > 0 and math.isfinite(value)):
            raise ConfigError(f"wrap: {name} must be a number of seconds > 0, not {value!r}")
    for count, name in (
        (args.max_in_flight, "--max-in-flight"),
        (args.max_message_bytes, "--max-message-bytes"),
    ):
        if count < 1:
            raise ConfigError(f"wrap: {name} must be at least 1, not {count}")
    # Relative folders are taken against the working folder the host started wrap in (its project).
    ceiling = fallback_roots(_folders(args.ceiling)).with_source("ceiling")
    fallback: RootSet | None = None
    if args.roots:
        fallback = clip_to_ceiling(fallback_roots(_folders(args.roots)), ceiling)
    network = args.network or bool(args.allow_domain)
    if args.strict_git and args.read_only:
        raise ConfigError(
            "wrap: --strict-git makes .git read-only inside writable roots; with --read-only every root is "
            "read-only already: drop one of the two"
        )
    launch = launch_of(command, cache_base(args.cache_dir))
    if launch is not None:
        if not launch.fetched and not args.print_policy:
            fetch(launch, os.environ, sandbox=args.sandbox, allow_domains=args.allow_domain)
        if launch.fetched:
            command = launch.server_argv()
    plan = make_plan(
        command,
        extra_read=args.read,
        env_names=args.env,
        cache_base=args.cache_dir,
        ceiling=[str(p) for p in ceiling.paths],
    )
    plan = replace(
        plan, sandbox=args.sandbox, allow_domains=tuple(args.allow_domain), strict_git=args.strict_git
    )
    options = Options(
        plan=plan,
        ceiling=ceiling,
        fallback=fallback,
        write=not args.read_only,
        network=network,
        drain=args.drain,
        start_timeout=args.start_timeout,
        max_in_flight=args.max_in_flight,
        max_message_bytes=args.max_message_bytes,
        ask_timeout=args.ask_timeout if args.ask else None,
    )
    policy = plan.describe([str(p) for p in ceiling.paths], options.write, options.network)
    if launch is not None:
        policy = launch.describe() + "\n" + policy
    if fallback is not None:
        policy += f"\nroots for a client that sends none: {fallback.describe()}"
    if options.ask_timeout is not None:
        policy += (
            "\nfolders by the user's consent (--ask): a host without roots that declared elicitation is "
            "asked for a folder in the ceiling, for this session"
        )
    return options, policy


def _with_backend(options: Options) -> Options:
    """``options`` with the backend resolved once (``auto`` picked), or ConfigError naming what is missing."""
    backend = choose(options.plan.sandbox)
    if backend == "native":
        kernel = support()
        if not kernel.complete:
            raise ConfigError(
                f"wrap: this kernel cannot confine the server: {kernel.reason or kernel.filter_reason}; "
                f"install srt ({SRT_INSTALL}) and pass --sandbox srt"
            )
    else:
        runtime = find_srt()
        if not isinstance(runtime, Runtime):
            raise ConfigError(f"wrap: {runtime}")
        if options.network and not options.plan.allow_domains:
            raise ConfigError(
                "wrap: with --sandbox srt the server reaches the network by host name only: "
                "name each host with --allow-domain NAME"
            )
    return replace(options, plan=replace(options.plan, sandbox=backend))


def _folders(values: Sequence[str]) -> list[str]:
    """``--ceiling a,b --ceiling c``: each folder, made absolute against the working folder."""
    folders = [os.path.abspath(part) for value in values for part in value.split(",") if part]
    if not folders:
        raise ConfigError("wrap: an empty folder list (--ceiling '' or --roots '')")
    return folders


@contextlib.contextmanager
def _claim_stdio() -> Iterator[tuple[int, int]]:
    """The host's channel on private descriptors; fd 0 reads /dev/null and fd 1 goes to stderr, so that
    nothing else in this process can read or corrupt it."""
    wire_in, wire_out = os.dup(0), os.dup(1)
    try:
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.dup2(2, 1)
        yield wire_in, wire_out
    finally:
        os.close(wire_in)
        os.close(wire_out)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else EXIT_OK
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("mcp-roots wrap: %(levelname)s: %(message)s"))
    logger.addHandler(handler)
    if logger.level == logging.NOTSET or logger.level > logging.WARNING:
        logger.setLevel(logging.WARNING)
    try:
        options, policy = options_from(args)
        if args.print_policy:
            sys.stdout.write(policy + "\n")
            return EXIT_OK
        options = _with_backend(options)
        prepare_cache(options.plan)
        with _claim_stdio() as (wire_in, wire_out):
            first = _start_first(options)
            try:
                _serve(options, wire_in, wire_out, first)
            finally:
                if first is not None:
                    _stop(first)
        return EXIT_OK
    except KeyboardInterrupt:
        return 130
    except (RootsError, OSError) as exc:
        sys.stderr.write(f"mcp-roots: error: {exc}\n")
        return EXIT_ERROR
    except Exception as exc:  # no traceback ever reaches the user
        sys.stderr.write(
            f"mcp-roots: error: unexpected {type(exc).__name__}: {exc} (a bug; please report it)\n"
        )
        return EXIT_ERROR
    finally:
        logger.removeHandler(handler)


def _start_first(options: Options) -> subprocess.Popen[bytes] | None:
    """The server confined to no roots (the child that answers initialize before the client's roots are
    known), started now so that it comes up while wrap imports the rest; None when it cannot start (the
    proxy's own start then reports why, to the host, as it would have)."""
    try:
        return spawn(options.plan, [], write=options.write, network=options.network)
    except (OSError, SandboxUnavailable):
        return None


def _serve(options: Options, wire_in: int, wire_out: int, first: subprocess.Popen[bytes] | None) -> None:
    # Imported here, after the first child has started: the event loop, the proxy and the roots cache are
    # most of wrap's start-up (the guard's schema walk waits for the first tool call).
    import anyio

    from ._proxy import Proxy

    async def serve() -> None:
        await Proxy(options, wire_in, wire_out, first).run()

    anyio.run(serve)


def _stop(process: subprocess.Popen[bytes]) -> None:
    """End the first child's tree unless the proxy has reaped it already (its number may then be another
    process's), and close its pipes."""
    end_tree_now(process)
    for stream in (process.stdin, process.stdout):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()
