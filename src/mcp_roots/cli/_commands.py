"""The mcp-roots command's own subcommands.
roots, check, env, serve, audit, run and doctor; errors are one line on stderr.
"""

# The mcp-roots command's own subcommands: show the fallback roots a server would use, check paths against
# them, print them as environment variables for subprocesses, serve, audit, run and doctor (probe and wrap are
# applications of their own, which the face dispatches to first). Errors are one line on stderr, never a
# traceback.

from __future__ import annotations

import argparse
import json
import logging
import os
import shlex
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from .. import RootSet, __version__
from ..errors import ConfigError, InvalidPath, PathOutsideRoots, RootsError
from ..filesystem._command import add_serve_command, serve
from ..roots import (
    CONFIG_DIR_ENV_VAR,
    CONFIG_FILE_ENV_VAR,
    CONFIG_FILENAME,
    ENV_VAR,
    SOURCE_UNCONFIGURED,
    default_user_config_dir,
    fallback_roots,
    how_to_configure,
)
from ._common import EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK, EXIT_OUTSIDE, PROG, SHELLS, say
from ._completion import script
from ._sandbox import add_sandbox_commands, doctor_command, run_command

__all__ = ["build_parser", "main"]


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


class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line on stderr, exit 2: the error and where the help
    is (argparse prints the whole usage first). The subcommands' parsers are of this class too."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_ERROR, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


#: Each subcommand's exit codes, in its own --help.
_EXIT_CODES = {
    "show": "0 success, 2 usage or configuration error",
    "check": "0 every PATH is inside the roots, 1 a PATH is outside (or not usable), 2 usage or "
    "configuration error",
    "env": "0 success, 2 usage or configuration error",
    "serve": "0 the client went away, 2 it cannot start (usage or configuration error), 130 interrupted",
    "run": "the command's own (128+N when signal N ended it), 126 it cannot be executed, 127 it does not "
    "exist, 2 usage or configuration error or no kernel confinement",
    "doctor": "0 every layer is there, 1 one is missing, 2 usage error",
}
#: Subcommands whose output is not a result to parse: no --json.
_NO_JSON = frozenset({"serve", "run"})


def _add_source_options(
    parser: argparse.ArgumentParser, *, in_subcommand: bool, with_json: bool = True
) -> None:
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
    if with_json:
        parser.add_argument(
            "--json",
            action="store_true",
            default=argparse.SUPPRESS if in_subcommand else False,
            help="print JSON instead of text",
        )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the mcp-roots command."""
    parser = _Parser(
        prog=PROG,
        description=_DESCRIPTION,
        epilog=_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    _add_source_options(parser, in_subcommand=False)
    # Not required here: main() says so itself, after argparse has named an unknown option (--bogus).
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    def command(name: str, summary: str, description: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(
            name,
            help=summary,
            description=description,
            epilog=f"exit codes: {_EXIT_CODES.get(name, '0 success, 2 usage or configuration error')}. "
            f"Run '{PROG} --help' for where the roots come from.",
        )
        _add_source_options(sub, in_subcommand=True, with_json=name not in _NO_JSON)
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
    add_serve_command(command)  # mcp_roots.filesystem: the filesystem MCP server
    command(
        "env",
        "print the roots as MCP_ROOTS_* variables (shell exports, or JSON)",
        "Print MCP_ROOTS_JSON (an array of {uri, name, path, access}), MCP_ROOTS_PATHS (one path per line) "
        "and MCP_ROOTS_COUNT, the variables a guarded server gives the subprocesses its tools start. As "
        "shell 'export' lines (use: eval \"$(mcp-roots env)\"), or as one JSON object with --json.",
    )
    _add_audit_command(commands)
    add_sandbox_commands(command)
    commands.add_parser(
        "probe",
        help="try every known way out of a root against any MCP server (see 'mcp-roots probe --help')",
        add_help=False,
    )
    commands.add_parser(
        "wrap",
        help="run any stdio MCP server confined by the kernel to the client's roots (see 'mcp-roots wrap"
        " --help')",
        add_help=False,
    )
    completion = commands.add_parser(
        "completion",
        help="print a shell completion script (bash or zsh)",
        description="Print the completion script for SHELL, generated from this command's own options. "
        "Load it in the shell's start-up file: source <(mcp-roots completion bash) in ~/.bashrc, or "
        "source <(mcp-roots completion zsh) in ~/.zshrc after compinit.",
        epilog="exit codes: 0 success, 2 usage error.",
    )
    completion.add_argument("shell", choices=SHELLS, metavar="SHELL", help="bash or zsh")
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


# --- Entry point -----------------------------------------------------------------------------------------


class _WarningFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return f"{PROG}: {record.levelname.lower()}: {record.getMessage()}"


def _setup_logging() -> logging.Handler:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_WarningFormatter())
    handler.setLevel(logging.WARNING)
    logger = logging.getLogger("mcp_roots")
    logger.addHandler(handler)
    # Said once, by this handler: not again by a handler the user's server module (audit) or an SDK it
    # imports installed on the root logger.
    logger.propagate = False
    if logger.level == logging.NOTSET or logger.level > logging.WARNING:
        logger.setLevel(logging.WARNING)
    return handler


def main(argv: Sequence[str] | None = None) -> int:
    """Run one of the subcommands above (not probe or wrap); return its exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.command is None:
            parser.error(
                "a COMMAND is required (show, check, serve, env, audit, run, doctor, probe, wrap or "
                "completion)"
            )
    except SystemExit as exc:  # --help, --version, or a usage error argparse already reported
        return exc.code if isinstance(exc.code, int) else (EXIT_OK if exc.code is None else EXIT_ERROR)
    if args.command == "serve":
        return serve(args)
    handler = _setup_logging()
    try:
        if args.command == "completion":
            from ..probe import command as probe
            from ..wrap import command as wrap

            own = {"probe": probe.build_parser, "wrap": wrap.build_parser}  # they parse their own options
            say(sys.stdout, script(args.shell, parser, own).rstrip("\n"))
            return EXIT_OK
        if args.command in ("audit", "doctor"):
            text, code = (
                _audit(args.target, args.json)
                if args.command == "audit"
                else doctor_command(args.json, args.sandbox)
            )
            say(sys.stdout, text)
            return code
        roots = _roots_from(args)
        if args.command == "run":
            return run_command(roots, args)
        if args.command == "show":
            text, code = _show(roots, args.json)
        elif args.command == "check":
            text, code = _check(roots, args.paths, args.json)
        else:
            text, code = _env(roots, args.json)
        say(sys.stdout, text)
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
        say(sys.stderr, f"{PROG}: error: {exc}")
        return EXIT_ERROR
    except Exception as exc:  # no traceback ever reaches the user
        say(sys.stderr, f"{PROG}: error: unexpected {type(exc).__name__}: {exc} (a bug; please report it)")
        return EXIT_ERROR
    finally:
        logging.getLogger("mcp_roots").removeHandler(handler)
        logging.getLogger("mcp_roots").propagate = True


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
    audit.add_argument(
        "--json",
        action="store_true",
        default=argparse.SUPPRESS,
        help="print the rows as JSON (kind, name, path_parameters, unguarded, status) for a CI to read",
    )


def _audit(target: str, as_json: bool = False) -> tuple[str, int]:
    import importlib

    from .._rootsguard import audit_server, format_audit

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
    code = 1 if unguarded else EXIT_OK
    if as_json:
        fields = [
            {
                "kind": r.kind,
                "name": r.name,
                "path_parameters": list(r.path_parameters),
                "unguarded": list(r.unguarded),
                "status": r.status,
            }
            for r in rows
        ]
        return json.dumps(fields, indent=2), code
    summary = (
        f"{len(unguarded)} of {len(rows)} handlers have unguarded path-like parameters"
        if unguarded
        else f"all {len(rows)} handlers are guarded, exempt or take no paths"
    )
    return f"{format_audit(rows)}\n\n{summary}", code
