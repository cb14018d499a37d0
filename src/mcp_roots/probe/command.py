"""``mcp-roots probe``: parse its options, start (or reach) the server, run the probe, print the table or
JSON, exit 1 on a finding. Ctrl-C cancels the run: the servers' process groups and the scratch tree go.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import socket
import sys
import time
import typing
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import anyio

from ..paths._text import for_reader
from ..sandbox import tree_command
from ._procs import descends_from, kill_groups, listeners
from ._report import Report
from ._runner import Options, innermost, run_probe
from ._session import LEGACY, MODERN, Connection, Session
from ._techniques import TECHNIQUES

__all__ = ["main"]

PROG = "mcp-roots probe"
EXIT_OK, EXIT_FOUND, EXIT_ERROR, EXIT_UNREACHED, EXIT_INTERRUPTED = 0, 1, 2, 3, 130

_DESCRIPTION = """\
Try every known way out of a root through every path in an MCP server's tools' input schemas (arguments,
fields of objects, elements of arrays, up to 8 steps deep), and resources/read of file: URIs and resource
templates: '..', a sibling with a shared prefix, symlinks out (final, in the middle, chained, dangling),
'..' after a symlink, /proc magic links, percent-encoded, unicode-folded and NFC/NFD twin names, control
characters, over-long names, a FIFO, a directory swapped for a link out during the call, root URIs decoded
twice, '..' in resource template parameters. The server gets a scratch tree: '{root}' in COMMAND's
arguments is replaced by its root, and the probe declares it as the client's root where it declares roots.
Outcomes are judged by effects only: a planted canary's content or name in a result, a file created or
changed outside the root, no answer before the deadline."""

_EPILOG = f"""\
examples:
  mcp-roots probe -- mcp-roots serve {{root}}
  mcp-roots probe -- npx -y @modelcontextprotocol/server-filesystem {{root}}
  mcp-roots probe --tool fetch_doc:location -- python my_server.py --dir {{root}}
  mcp-roots probe --tool write_job:job.path -- python my_server.py {{root}}
  mcp-roots probe --http http://127.0.0.1:{{port}}/mcp -- mcp-roots serve --http {{port}} {{root}}

The probe touches only its scratch tree (a new temporary directory, removed on exit) and starts the server
there (arguments of COMMAND that name an existing file or directory here are made absolute first). A
server that must be given other paths (a config file, a database) is run at your own risk: a server that
escapes its roots may touch what it can reach.

techniques: {", ".join(t.name for t in TECHNIQUES)}

exit codes: 0 nothing got out; 1 an escape, a hang or a crash was found; 2 usage error, or the server could
not be started or reached (on any of the connections tried); 3 nothing found, but a tool that handles
files (by its name or description) was not reached, or showed no effect the probe can see (--allow-unreached
TOOL accepts that); 130 interrupted."""


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr (and exit 2), not the usage block."""

    def error(self, message: str) -> typing.NoReturn:
        _say(sys.stderr, f"mcp-roots: error: {message} (see '{PROG} --help')")
        raise SystemExit(EXIT_ERROR)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG,
        description=_DESCRIPTION,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--http", metavar="URL", help="reach the server by streamable HTTP at URL ({port}: a free port)"
    )
    parser.add_argument(
        "--http-header",
        action="append",
        default=[],
        metavar="'NAME: VALUE'",
        help="with --http: send this header on every request (repeatable)",
    )
    parser.add_argument(
        "--http-token-file",
        metavar="FILE",
        help="with --http: send 'Authorization: Bearer TOKEN', TOKEN the first line of FILE "
        "(mcp-roots serve --http's --token-file)",
    )
    parser.add_argument(
        "--tool",
        action="append",
        default=[],
        metavar="NAME:LOCATOR",
        help="probe this place only: an argument (read_file:path) or a place inside one, in the guard's "
        "locator syntax (write_job:job.path, save_all:items[].file_path); NAME alone: every path the probe "
        "finds in that tool (repeatable)",
    )
    parser.add_argument(
        "--allow-unreached",
        action="append",
        default=[],
        metavar="TOOL",
        help="a file tool the probe may fail to reach without failing the run (repeatable)",
    )
    parser.add_argument(
        "--technique", action="append", metavar="NAME", help="use only this technique (repeatable)"
    )
    parser.add_argument(
        "--era", choices=["legacy", "modern", "both"], default="both", help="protocol era(s) to ask for"
    )
    parser.add_argument(
        "--client-roots",
        choices=["declared", "none", "both"],
        help="connect declaring the scratch root as the client's root, without roots, or both (the default; "
        "'declared' for --http without a command: the probe did not give that server its roots)",
    )
    parser.add_argument(
        "--deadline", type=float, default=3.0, metavar="S", help="seconds before a call is a hang (3)"
    )
    parser.add_argument(
        "--race-attempts", type=int, default=16, metavar="N", help="calls per swap-race variant (16)"
    )
    parser.add_argument(
        "--max-calls", type=int, default=10_000, metavar="N", help="stop after N calls (10000)"
    )
    parser.add_argument(
        "--time-limit", type=float, default=600.0, metavar="S", help="stop after S seconds (600)"
    )
    parser.add_argument(
        "--scratch-dir", metavar="DIR", help="make the scratch tree in DIR (default: the temp dir)"
    )
    parser.add_argument("--findings-only", action="store_true", help="print only the rows with a finding")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- COMMAND [ARG...]")
    return parser


def _options(args: argparse.Namespace) -> Options:
    eras = [LEGACY, MODERN] if args.era == "both" else [args.era]
    started_here = not args.http or any(a != "--" for a in args.argv)
    choice = args.client_roots or ("both" if started_here else "declared")
    roots = {"both": [False, True], "none": [False], "declared": [True]}[choice]
    names = {t.name for t in TECHNIQUES}
    unknown = [t for t in args.technique or [] if t not in names]
    if unknown:
        raise ValueError(f"unknown technique(s) {', '.join(unknown)}; known: {', '.join(sorted(names))}")
    for flag, value in (("--deadline", args.deadline), ("--time-limit", args.time_limit)):
        if not (value > 0 and value != float("inf")):
            raise ValueError(f"{flag} must be a positive number of seconds, not {value}")
    if args.race_attempts < 1 or args.max_calls < 1:
        raise ValueError("--race-attempts and --max-calls must be at least 1")
    return Options(
        deadline=args.deadline,
        race_attempts=args.race_attempts,
        max_calls=args.max_calls,
        time_limit=args.time_limit,
        tools=list(args.tool),
        allow_unreached=list(args.allow_unreached),
        techniques=args.technique,
        connections=[Connection(era, declared) for era in eras for declared in roots],
        scratch_parent=args.scratch_dir,
        progress=_progress(quiet=args.json),
    )


def _say(stream: Any, text: str, *, raw: bool = False) -> None:
    """One line (or a report: ``raw``, escaped already) to a stream; server-supplied text is escaped."""
    stream.write((text if raw else for_reader(text)) + "\n")
    stream.flush()


def _progress(*, quiet: bool) -> Callable[[str], None] | None:
    if quiet:
        return None
    started = time.monotonic()

    def say(text: str) -> None:
        _say(sys.stderr, f"{PROG}: {time.monotonic() - started:6.1f} s  {text}")

    return say


class _HttpCommand:
    """A server started once as ``argv`` (``{root}``, ``{port}`` replaced) and reached at ``url``."""

    cwd_is_scratch = True

    def __init__(self, url: str, argv: list[str]) -> None:
        from ._mcp2 import UrlTarget

        self.port = _free_port()
        self.url = url.replace("{port}", str(self.port))
        self.argv = argv
        self.eras = UrlTarget.eras
        self.groups: set[int] = set()
        self._process: Any = None

    def describe(self) -> str:
        return f"{' '.join(self.argv)} at {self.url}"

    @contextlib.asynccontextmanager
    async def connect(
        self, connection: Connection, roots: list[str], root: str, cwd: str, errlog: str
    ) -> AsyncIterator[Session]:
        from ._mcp2 import client_session, command_line

        if self._process is None:
            argv = command_line(self.argv, root, self.port)
            with open(errlog, "ab") as log:  # noqa: ASYNC230 - once, a local log file
                self._process = await anyio.open_process(
                    tree_command(argv),  # its whole tree ends with it
                    stdin=None,
                    stdout=log,
                    stderr=log,
                    cwd=cwd,
                    start_new_session=True,
                )
            self.groups.add(self._process.pid)
            while not await _listening(self.port, self._process.pid):
                if self._process.returncode is not None:
                    raise OSError(
                        f"{argv[0]} exited ({self._process.returncode}) before listening on {self.port}"
                    )
                await anyio.sleep(0.05)
        async with client_session(self.url, connection, roots) as session:
            yield session


async def _listening(port: int, pid: int) -> bool:
    """``pid``'s process group listens on ``port`` (another server that took the port meanwhile does not
    count: the probe would judge the wrong server)."""
    try:
        stream = await anyio.connect_tcp("127.0.0.1", port)
    except OSError:
        return False
    await stream.aclose()
    holders = listeners(port)
    return holders is None or any(descends_from(holder, pid) for holder in holders)


def _headers(args: argparse.Namespace) -> dict[str, str]:
    """--http-header and --http-token-file as the headers every HTTP request carries."""
    headers: dict[str, str] = {}
    for given in args.http_header:
        name, colon, value = given.partition(":")
        if not colon or not name.strip():
            raise ValueError(f"--http-header {given!r}: not 'NAME: VALUE'")
        headers[name.strip()] = value.strip()
    if args.http_token_file:
        try:
            lines = open(args.http_token_file, encoding="utf-8").read().split()  # noqa: SIM115
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(f"--http-token-file {args.http_token_file}: cannot read it: {exc}") from None
        if not lines:
            raise ValueError(f"--http-token-file {args.http_token_file}: holds no token")
        headers["Authorization"] = f"Bearer {lines[0]}"
    return headers


class _WithHeaders:
    """A target reached over HTTP whose requests carry headers: its URL, which the probe's client takes as
    it is, becomes a transport that sends them; the rest is the target's."""

    def __init__(self, target: Any, headers: dict[str, str]) -> None:
        self._description = str(target.describe())
        target.url = _HeaderedUrl(str(target.url), headers)
        self._target = target

    def describe(self) -> str:
        return self._description

    def __getattr__(self, name: str) -> Any:
        return getattr(self._target, name)


class _HeaderedUrl:
    """A target's URL as ``mcp.Client`` takes a transport: streamable HTTP to ``url``, each request
    carrying ``headers``. Each use (entered and left in one task) gets its own HTTP client."""

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        self.url = url
        self.headers = headers
        self._uses: dict[object, contextlib.AsyncExitStack] = {}

    def __str__(self) -> str:
        return self.url

    async def __aenter__(self) -> Any:
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        stack = contextlib.AsyncExitStack()
        self._uses[anyio.get_current_task().id] = stack
        http = await stack.enter_async_context(httpx2.AsyncClient(headers=self.headers, timeout=30.0))
        return await stack.enter_async_context(streamable_http_client(self.url, http_client=http))

    async def __aexit__(self, *exc: Any) -> bool | None:
        return await self._uses.pop(anyio.get_current_task().id).__aexit__(*exc)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _target(args: argparse.Namespace) -> Any:
    argv = list(args.argv)
    if argv[:1] == ["--"]:
        argv = argv[1:]
    from ._mcp2 import StdioTarget, UrlTarget

    if args.http:
        target = _HttpCommand(args.http, argv) if argv else UrlTarget(args.http)
        headers = _headers(args)
        return _WithHeaders(target, headers) if headers else target
    if not argv:
        raise ValueError(
            f"'{PROG}' needs a server command after '--' (for example: {PROG} -- mcp-roots serve {{root}}), "
            "or --http URL"
        )
    if not any("{root}" in a for a in argv):
        _say(
            sys.stderr,
            f"{PROG}: warning: no '{{root}}' in the command: the server gets the scratch root only as the "
            "client's declared root",
        )
    return StdioTarget(argv)


async def _run(target: Any, options: Options) -> tuple[Report | None, bool]:
    interrupted = False
    report: Report | None = None
    async with anyio.create_task_group() as group:

        async def watch() -> None:
            nonlocal interrupted
            with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                async for _ in signals:
                    interrupted = True
                    group.cancel_scope.cancel()
                    return

        group.start_soon(watch)
        report = await run_probe(target, options)
        group.cancel_scope.cancel()
    return report, interrupted


def main(argv: Sequence[str]) -> int:
    """Run ``mcp-roots probe ARGV``; the exit code."""
    try:
        args = build_parser().parse_args(list(argv))
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else EXIT_ERROR
    target: Any = None
    try:
        options = _options(args)
        target = _target(args)
        report, interrupted = anyio.run(_run, target, options)
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in ("mcp", "mcp_types", "pydantic", "httpx"):
            raise
        _say(
            sys.stderr,
            f"mcp-roots: error: '{PROG}' speaks MCP through the official mcp SDK, which is not installed "
            "here; install it with: pip install 'mcp-roots[mcp]'",
        )
        return EXIT_ERROR
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except Exception as exc:  # a task group wraps what the run raised: one line for a usage error
        leaf = innermost(exc)
        if not isinstance(leaf, (OSError, ValueError)):
            raise
        _say(sys.stderr, f"mcp-roots: error: {leaf}")
        return EXIT_ERROR
    finally:
        if target is not None:
            kill_groups(getattr(target, "groups", set()))
    if interrupted or report is None:
        _say(sys.stderr, f"{PROG}: interrupted; the server and the scratch tree are gone")
        return EXIT_INTERRUPTED
    if not report.connections:
        _say(
            sys.stderr,
            f"mcp-roots: error: could not connect to {report.target}: {'; '.join(report.failures)}",
        )
        return EXIT_ERROR
    _say(
        sys.stdout,
        report.to_json() if args.json else report.to_text(all_rows=not args.findings_only),
        raw=True,
    )
    if report.findings:
        return EXIT_FOUND
    if report.failures:
        return EXIT_ERROR  # nothing found, but not everything could be tried
    return EXIT_UNREACHED if report.unreached_file_tools or report.unobserved_file_tools else EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main(sys.argv[1:]))
