"""The mcp-roots command: show the fallback roots a server would use, check paths against them, and print
them as environment variables for subprocesses. Errors are one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import functools
import io
import json
import logging
import math
import os
import shlex
import sys
from collections.abc import Callable, Sequence
from typing import Any

from . import __version__
from ._errors import ConfigError, InvalidPath, PathOutsideRoots, RootsError
from ._rootset import RootSet
from ._sources import (
    CONFIG_DIR_ENV_VAR,
    CONFIG_FILE_ENV_VAR,
    CONFIG_FILENAME,
    ENV_VAR,
    SOURCE_UNCONFIGURED,
    default_user_config_dir,
    fallback_roots,
    how_to_configure,
)

__all__ = ["build_parser", "main"]

PROG = "mcp-roots"

EXIT_OK = 0
EXIT_OUTSIDE = 1
EXIT_ERROR = 2
EXIT_INTERRUPTED = 130

_DESCRIPTION = """\
See and check the fallback roots of an MCP server built with mcp-roots: the folders its tools may
touch when the client does not send roots of its own."""


def _epilog() -> str:
    try:
        config_dir = str(default_user_config_dir())
    except Exception:  # pragma: no cover - platformdirs cannot name a directory here
        config_dir = "the user config directory"
    return f"""\
where the roots come from (the first source that is set wins; lower ones are not consulted):
  1. --roots A,B        comma-separated paths or file: URIs; relative paths start at the project root
  2. {ENV_VAR}=A{os.pathsep}B   separated by '{os.pathsep}'; relative paths start at the project root
  3. {CONFIG_FILENAME} in the --project directory (only when --project is given), then in
     {config_dir}
     (set {CONFIG_DIR_ENV_VAR} to use another directory, or {CONFIG_FILE_ENV_VAR} to name the file), e.g.:
       {{"roots": [{{"path": "./data", "name": "Data"}}, {{"uri": "file:///srv/media"}}]}}
     relative paths start at the directory the file is in
  4. the --project directory itself
  nothing set: no fallback roots, every path is refused (the current directory is never used implicitly)
  '/', your home directory and its ancestors are refused as roots unless --allow-home is given

exit codes:
  0  success; for 'check': every path is inside the roots
  1  'check' only: at least one path is outside the roots (or not a usable path)
  2  usage or configuration error: unknown option, a --roots or {ENV_VAR} entry that does not exist,
     a config file that is not valid JSON or not the expected shape

examples:
  mcp-roots show                          which roots, and where they came from
  mcp-roots show --roots docs,/srv/data   what a server started with --roots would use
  mcp-roots check src/app.py /etc/passwd  is each path inside? exit 1 if one is not
  eval "$(mcp-roots env)"                 export MCP_ROOTS_JSON, MCP_ROOTS_PATHS, MCP_ROOTS_COUNT"""


def _add_source_options(parser: argparse.ArgumentParser, *, in_subcommand: bool) -> None:
    # The options are accepted before and after the subcommand; in the subcommand they default to
    # SUPPRESS so that an option given before it is not overwritten.
    default: Any = argparse.SUPPRESS if in_subcommand else None
    parser.add_argument(
        "--roots",
        action="append",
        metavar="A,B",
        default=default,
        help="use these roots (comma-separated paths or file: URIs; may be repeated), "
        f"ignoring {ENV_VAR} and config files",
    )
    parser.add_argument(
        "--project",
        metavar="DIR",
        default=default,
        help=f"the project root: where {CONFIG_FILENAME} is looked for, what relative roots start "
        "from, and the last-resort root (default: none; the current directory is never used implicitly)",
    )
    parser.add_argument(
        "--allow-home",
        action="store_true",
        default=argparse.SUPPRESS if in_subcommand else False,
        help="allow '/', your home directory or one of its ancestors as a root (refused by default)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        default=argparse.SUPPRESS if in_subcommand else False,
        help="print JSON instead of text",
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the mcp-roots command."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description=_DESCRIPTION,
        epilog=_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    _add_source_options(parser, in_subcommand=False)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def command(name: str, summary: str, description: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(
            name,
            help=summary,
            description=description,
            epilog=f"exit codes: 0 success, 1 a path is outside (check only), 2 usage or configuration "
            f"error. Run '{PROG} --help' for where the roots come from.",
        )
        _add_source_options(sub, in_subcommand=True)
        return sub

    command(
        "show",
        "print the fallback roots and where they came from",
        "Print the fallback roots (canonical paths, with names where given) and the source they came "
        f"from: the --roots flag, the {ENV_VAR} environment variable, a {CONFIG_FILENAME} file, or the "
        "project root.",
    )
    check = command(
        "check",
        "tell whether each PATH is inside the roots (exit 1 if one is not)",
        "Tell whether each PATH is inside the fallback roots, and which root holds it. Symbolic links "
        "are followed, so a link inside a root that points outside is outside. Relative paths start at "
        "the current directory. Exit code 0 only if every PATH is inside.",
    )
    check.add_argument("paths", nargs="+", metavar="PATH", help="a file or directory (it need not exist)")
    _add_serve_command(command)
    command(
        "env",
        "print the roots as MCP_ROOTS_* variables (shell exports, or JSON)",
        "Print MCP_ROOTS_JSON (an array of {uri, name, path}), MCP_ROOTS_PATHS (one path per line) and "
        "MCP_ROOTS_COUNT, the variables a guarded server gives the subprocesses its tools start. As "
        "shell 'export' lines (use: eval \"$(mcp-roots env)\"), or as one JSON object with --json.",
    )
    _add_audit_command(commands)
    _add_sandbox_commands(command)
    commands.add_parser(
        "probe",
        help="try every known way out of a root against any MCP server (see 'mcp-roots probe --help')",
        add_help=False,
    )
    return parser


# --- Commands: each returns (stdout text, exit code) ---------------------------------------------------


def _roots_from(args: argparse.Namespace) -> RootSet:
    roots: list[str] | None = None
    if args.roots is not None:
        roots = [entry for value in args.roots for entry in value.split(",") if entry]
        if not roots:
            raise ConfigError(f"--roots {','.join(args.roots)!r} names no roots; give at least one path")
    return fallback_roots(roots, project_root=args.project, allow_home=args.allow_home)


def _root_text(path: object, name: str | None) -> str:
    return f"{path}  ({name})" if name else str(path)


def _show(roots: RootSet, as_json: bool) -> tuple[str, int]:
    if as_json:
        return json.dumps({"source": roots.source, "roots": [r.as_dict() for r in roots]}, indent=2), EXIT_OK
    if not roots and roots.source == SOURCE_UNCONFIGURED:
        return f"No roots: every path is refused; {how_to_configure()}.", EXIT_OK
    if not roots:
        return f"No roots from {roots.source}: every path is refused.", EXIT_OK
    lines = [f"Roots from {roots.source}:"]
    lines += [f"  {_root_text(r.path, r.name)}" for r in roots]
    return "\n".join(lines), EXIT_OK


def _check(roots: RootSet, paths: Sequence[str], as_json: bool) -> tuple[str, int]:
    results: list[dict[str, Any]] = []
    for given in paths:
        # Like every shell tool, relative paths start at the current directory (not at the first root, as
        # they do for a server's tools). Joined, not normalized: 'link/..' must be resolved physically.
        full = given if not given or os.path.isabs(given) else os.path.join(os.getcwd(), given)
        result: dict[str, Any] = {
            "path": given,
            "inside": False,
            "resolved": None,
            "root": None,
            "reason": None,
        }
        try:
            resolved = roots.resolve(full)
            root = roots.root_of(resolved)
            if root is None:  # pragma: no cover - resolve() succeeded, so a root holds it
                raise PathOutsideRoots(f"{given!r} is outside the allowed roots")
            result.update(inside=True, resolved=str(resolved), root=root.as_dict())
        except (PathOutsideRoots, InvalidPath) as exc:
            result["reason"] = str(exc)
        results.append(result)
    outside = [r for r in results if not r["inside"]]
    code = EXIT_OUTSIDE if outside else EXIT_OK
    if as_json:
        document = {
            "source": roots.source,
            "roots": [r.as_dict() for r in roots],
            "all_inside": not outside,
            "results": results,
        }
        return json.dumps(document, indent=2), code
    lines = []
    for r in results:
        if r["inside"]:
            root = r["root"]
            lines.append(
                f"inside   {r['path']}  ->  {r['resolved']}  (root: {_root_text(root['path'], root['name'])})"
            )
        else:
            lines.append(f"outside  {r['path']}")
    if outside and roots.source == SOURCE_UNCONFIGURED:
        lines.append(f"{len(outside)} of {len(results)} path(s) refused: {how_to_configure()}")
    elif outside:
        lines.append(
            f"{len(outside)} of {len(results)} path(s) outside the roots from {roots.source}: "
            f"{roots.describe()}"
        )
    return "\n".join(lines), code


def _env(roots: RootSet, as_json: bool) -> tuple[str, int]:
    variables = roots.as_env()
    if as_json:
        return json.dumps(variables, indent=2), EXIT_OK
    return "\n".join(f"export {key}={shlex.quote(value)}" for key, value in variables.items()), EXIT_OK


# --- Commands of the kernel sandbox: run (exit code of the child) and doctor -----------------------------

EXIT_SANDBOX_MISSING = 1  # 'doctor': no kernel confinement here
EXIT_CANNOT_RUN = 126  # 'run': the command exists but cannot be executed (as env(1) and timeout(1))
EXIT_NOT_FOUND = 127  # 'run': the command does not exist (as env(1) and timeout(1))


def _add_sandbox_commands(command: Callable[[str, str, str], argparse.ArgumentParser]) -> None:
    run = command(
        "run",
        "run a command confined by the kernel to the roots (Landlock); its exit code passes through",
        "Run COMMAND so that the kernel (Landlock) lets it, and every process it starts, read only beneath "
        "the roots (and write there with --write), plus read-only what a program needs to start "
        "(/usr, /lib*, the dynamic loader's files in /etc, locale and time zone data, /dev/null...). "
        "Exit code: the command's own (128+N if signal N ended it); 127 if it does not exist, 126 if it "
        "cannot be executed; 2 for a usage or configuration error, or no kernel confinement here (see "
        f"'{PROG} doctor') without --allow-unconfined.",
    )
    run.add_argument("--write", action="store_true", help="let the command write beneath the roots")
    run.add_argument(
        "--no-network", action="store_true", help="refuse TCP bind and connect (Landlock ABI >= 4)"
    )
    run.add_argument(
        "--allow-unconfined",
        action="store_true",
        help="where the kernel cannot confine, run anyway (with a warning) instead of failing",
    )
    run.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- COMMAND [ARG...]")
    command(
        "doctor",
        "report whether the kernel can confine subprocesses, and what is enforced",
        "Report the Landlock ABI of this kernel (or why there is none), what a confined command is "
        "refused at this ABI, and the read-only system paths it is given. Exit code 0 when the kernel can "
        "confine, 1 when it cannot.",
    )


def _run(roots: RootSet, args: argparse.Namespace) -> int:
    argv = list(args.argv)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        raise ConfigError(f"'{PROG} run' needs a command after '--' (for example: {PROG} run -- ls)")
    if roots.source == SOURCE_UNCONFIGURED:
        # Confined to nothing, the command could not even read its arguments: say why before it starts.
        raise ConfigError(f"'{PROG} run' has no roots to confine the command to; {how_to_configure()}")
    from . import _sandbox

    try:
        code = _sandbox.run(
            roots,
            argv,
            write=args.write,
            network=not args.no_network,
            allow_unconfined=args.allow_unconfined,
        ).returncode
    except FileNotFoundError:
        _say(sys.stderr, f"{PROG}: error: {argv[0]}: command not found")
        return EXIT_NOT_FOUND
    except PermissionError as exc:
        _say(sys.stderr, f"{PROG}: error: {argv[0]}: cannot be executed ({exc.strerror})")
        return EXIT_CANNOT_RUN
    return 128 - code if code < 0 else code


def _doctor(as_json: bool) -> tuple[str, int]:
    from . import _sandbox
    from ._sys import landlock

    kernel = _sandbox.support()
    features = kernel.enforced()
    paths = [(p, os.path.exists(p)) for p in (*_sandbox.SYSTEM_READ_PATHS, *_sandbox.SYSTEM_DEVICE_PATHS)]
    code = EXIT_OK if kernel.available else EXIT_SANDBOX_MISSING
    if as_json:
        document = {
            "platform": sys.platform,
            "kernel": os.uname().release,
            "landlock_abi": kernel.abi,
            "available": kernel.available,
            "reason": kernel.reason,
            "enforced": [{"what": what, "enforced": on, "needs": needs} for what, on, needs in features],
            "read_only_paths": [p for p in _sandbox.SYSTEM_READ_PATHS if os.path.exists(p)],
            "read_write_devices": [p for p in _sandbox.SYSTEM_DEVICE_PATHS if os.path.exists(p)],
            "threads": landlock.thread_count() if sys.platform == "linux" else None,
        }
        return json.dumps(document, indent=2), code
    lines = [f"kernel: {sys.platform} {os.uname().release}"]
    if kernel.available:
        lines.append(f"Landlock: ABI {kernel.abi}: '{PROG} run' and RootSet.run() confine subprocesses")
    else:
        lines.append(f"Landlock: unavailable: {kernel.reason}")
        lines.append("  RootSet.run() raises SandboxUnavailable; allow_unconfined=True runs UNCONFINED")
    lines.append("enforced for a confined command:")
    lines += [f"  [{'x' if on else ' '}] {what}  ({needs})" for what, on, needs in features]
    lines.append("read-only for every confined command (besides the roots and its own binary):")
    lines += [f"  {p}{'' if there else '  (absent here)'}" for p, there in paths]
    return "\n".join(lines), code


# --- serve: the filesystem MCP server (mcp_roots.filesystem) ------------------------------------------


def _add_serve_command(command: Any) -> None:
    serve = command(
        "serve",
        "run the filesystem MCP server (a drop-in for @modelcontextprotocol/server-filesystem)",
        "Run an MCP server with the official filesystem server's 14 tools over stdio (or streamable HTTP "
        "on 127.0.0.1 with --http). The directories given (DIR... or --roots) are both the fallback roots "
        "for clients that send none and the ceiling: client roots can narrow them, never widen them. "
        "--ceiling sets a different ceiling. Logs go to stderr.",
    )
    serve.add_argument("dirs", nargs="*", metavar="DIR", help="directories to serve (like --roots)")
    serve.add_argument(
        "--ceiling", action="append", metavar="A,B", help="directories client roots may not leave"
    )
    serve.add_argument("--http", type=int, metavar="PORT", help="serve streamable HTTP on 127.0.0.1:PORT/mcp")
    serve.add_argument("--read-only", action="store_true", help="leave out the tools that write")
    serve.add_argument(
        "--confine", action="store_true", help="also confine the server process to the roots with Landlock"
    )
    serve.add_argument(
        "--max-results",
        type=int,
        metavar="N",
        help="the most entries directory_tree, search_files and the listings return (default 100000)",
    )
    serve.add_argument(
        "--max-message-bytes",
        type=int,
        metavar="N",
        help="the longest message (one JSON line) taken from a stdio client; longer ones are dropped "
        "(default 33554432, 32 MiB)",
    )
    serve.add_argument(
        "--timeout",
        type=float,
        metavar="SECONDS",
        help="how long to wait for a client's answer to roots/list (default 5)",
    )
    serve.add_argument(
        "--state-key-file",
        metavar="FILE",
        help="with --http: a secret (at least 32 bytes) every replica behind a load balancer reads, so that "
        "any replica can finish a 2026-07-28 call another one started (default: a key of this process only)",
    )
    serve.add_argument(
        "--log-level",
        default="WARNING",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="default WARNING",
    )


def _serve(args: argparse.Namespace) -> int:
    """Run ``mcp-roots serve`` until the client goes away; errors before serving are one line, exit 2."""
    logging.basicConfig(
        level=getattr(logging, args.log_level),
        stream=sys.stderr,
        format=f"{PROG} serve: %(levelname)s %(message)s",
    )
    try:
        server = _build_filesystem_server(args)
        max_message = _max_message_bytes(args)
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in ("mcp", "mcp_types"):
            raise
        _say(
            sys.stderr,
            f"{PROG}: error: '{PROG} serve' needs the official mcp SDK, which is not installed here; "
            "install it with: pip install 'mcp-roots[mcp]' (or pipx install 'mcp-roots[mcp]')",
        )
        return EXIT_ERROR
    except (RootsError, OSError, ValueError) as exc:
        _say(sys.stderr, f"{PROG}: error: {exc}")
        return EXIT_ERROR
    try:
        if args.http is not None:
            server.run("streamable-http", host="127.0.0.1", port=args.http)
        else:
            import anyio

            from .adapters.mcp2_stdio import serve_stdio

            anyio.run(functools.partial(serve_stdio, server, max_line_bytes=max_message))
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    return EXIT_OK


def _max_message_bytes(args: argparse.Namespace) -> int:
    from .adapters.mcp2_stdio import DEFAULT_MAX_LINE_BYTES

    if args.max_message_bytes is None:
        return DEFAULT_MAX_LINE_BYTES
    if args.max_message_bytes < 1:
        raise ConfigError(f"--max-message-bytes must be at least 1, not {args.max_message_bytes}")
    return int(args.max_message_bytes)


def _build_filesystem_server(args: argparse.Namespace) -> Any:
    from . import RootsGuard
    from .filesystem import Limits, Settings, build_server, shared_request_state

    def split(values: list[str] | None, flag: str) -> list[str] | None:
        if values is None:
            return None
        entries = [entry for value in values for entry in value.split(",") if entry]
        if not entries:
            raise ConfigError(f"{flag} {','.join(values)!r} names no directories; give at least one path")
        return entries

    roots = (args.dirs or []) + (split(getattr(args, "roots", None), "--roots") or [])
    ceiling = split(args.ceiling, "--ceiling")
    if not roots and ceiling is None and ENV_VAR not in os.environ and getattr(args, "project", None) is None:
        raise ConfigError(
            "mcp-roots serve needs the directories it may serve: mcp-roots serve DIR..., --roots A,B, "
            f"{ENV_VAR}, or --ceiling (then only client roots inside it are served)"
        )
    # Finite: a client that never answers roots/list must not hold a request (and its memory) forever.
    if args.timeout is not None and not (math.isfinite(args.timeout) and args.timeout > 0):
        raise ConfigError(f"--timeout must be a positive number of seconds, not {args.timeout:g}")
    timeout = {} if args.timeout is None else {"timeout": args.timeout}
    fallback = fallback_roots(roots or None, project_root=getattr(args, "project", None))
    # The directories given are the ceiling unless one is named: client roots narrow them, never widen them.
    guard = RootsGuard(
        roots or None,
        project_root=getattr(args, "project", None),
        ceiling=ceiling if ceiling is not None else fallback,
        confine=args.confine,
        **timeout,
    )
    if args.max_results is not None and args.max_results < 1:
        raise ConfigError(f"--max-results must be at least 1, not {args.max_results}")
    limits = Limits() if args.max_results is None else Limits(max_results=args.max_results)
    security = shared_request_state(args.state_key_file) if args.state_key_file is not None else None
    return build_server(
        guard, Settings(read_only=args.read_only, walk=limits), request_state_security=security
    )


# --- Entry point -----------------------------------------------------------------------------------------


def _say(stream: Any, text: str) -> None:
    stream.write(text + "\n")
    stream.flush()


class _WarningFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return f"{PROG}: {record.levelname.lower()}: {record.getMessage()}"


def _setup_logging() -> logging.Handler:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_WarningFormatter())
    handler.setLevel(logging.WARNING)
    logger = logging.getLogger("mcp_roots")
    logger.addHandler(handler)
    if logger.level == logging.NOTSET or logger.level > logging.WARNING:
        logger.setLevel(logging.WARNING)
    return handler


def main(argv: Sequence[str] | None = None) -> int:
    """Run the mcp-roots command; return its exit code (see ``mcp-roots --help``)."""
    for stream in (sys.stdout, sys.stderr):
        # Paths are bytes on POSIX: print undecodable names as they are instead of failing.
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="surrogateescape")
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["probe"]:  # its own options and '-- COMMAND...': parsed by the probe itself
        from .probe import command

        return command.main(arguments[1:])
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help, --version, or a usage error argparse already reported
        return exc.code if isinstance(exc.code, int) else (EXIT_OK if exc.code is None else EXIT_ERROR)
    if args.command == "serve":
        return _serve(args)
    handler = _setup_logging()
    try:
        if args.command in ("audit", "doctor"):
            text, code = _audit(args.target) if args.command == "audit" else _doctor(args.json)
            _say(sys.stdout, text)
            return code
        roots = _roots_from(args)
        if args.command == "run":
            return _run(roots, args)
        if args.command == "show":
            text, code = _show(roots, args.json)
        elif args.command == "check":
            text, code = _check(roots, args.paths, args.json)
        else:
            text, code = _env(roots, args.json)
        _say(sys.stdout, text)
        return code
    except BrokenPipeError:
        # The reader went away (mcp-roots show | head -1): stop quietly, and keep the interpreter's
        # final flush from complaining about the closed pipe.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_ERROR
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except (RootsError, OSError) as exc:
        _say(sys.stderr, f"{PROG}: error: {exc}")
        return EXIT_ERROR
    except Exception as exc:  # no traceback ever reaches the user
        _say(sys.stderr, f"{PROG}: error: unexpected {type(exc).__name__}: {exc} (a bug; please report it)")
        return EXIT_ERROR
    finally:
        logging.getLogger("mcp_roots").removeHandler(handler)


# --- mcp-roots audit MODULE:SERVER ---------------------------------------------------------------------


def _add_audit_command(commands: Any) -> None:
    audit = commands.add_parser(
        "audit",
        help="list a server's tools with path-like parameters, guarded or not (exit 1 if one is not)",
        description="Import MODULE, take its SERVER object (an MCP server a RootsGuard is installed on), "
        "and print every tool and resource template with the parameters that look like paths, and "
        "whether mcp-roots checks them. Exit code 0 only if nothing is unguarded.",
        epilog="exit codes: 0 everything guarded or exempt, 1 something is unguarded, 2 usage error.",
    )
    audit.add_argument("target", metavar="MODULE:SERVER", help="e.g. my_server:server (dots for attributes)")


def _audit(target: str) -> tuple[str, int]:
    import importlib

    from ._guard import audit_server, format_audit

    module_name, _, attribute = target.partition(":")
    if not module_name or not attribute:
        raise ConfigError(f"audit: {target!r} is not MODULE:SERVER (e.g. my_server:server)")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # as `python -m` would: the module is usually the user's own file
    try:
        server: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"audit: cannot import {module_name!r}: {exc}") from None
    for part in attribute.split("."):
        if not hasattr(server, part):
            raise ConfigError(f"audit: {module_name!r} has no attribute {attribute!r}")
        server = getattr(server, part)
    try:
        rows = audit_server(server)
    except TypeError as exc:
        raise ConfigError(f"audit: {exc}") from None
    unguarded = [row for row in rows if row.unguarded]
    summary = (
        f"{len(unguarded)} of {len(rows)} handlers have unguarded path-like parameters"
        if unguarded
        else f"all {len(rows)} handlers are guarded, exempt or take no paths"
    )
    return f"{format_audit(rows)}\n\n{summary}", 1 if unguarded else EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
