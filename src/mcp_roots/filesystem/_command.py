"""``mcp-roots serve``: its options and its run (build the filesystem server from them, then serve stdio or
streamable HTTP). Imports no SDK until it runs, so that the rest of the command works without one.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import logging
import math
import os
import sys
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from .. import RootsError, RootsGuard, fallback_roots
from ..errors import ConfigError
from ..roots import ENV_VAR

if TYPE_CHECKING:
    from mcp.server import MCPServer
    from mcp.server.auth.provider import TokenVerifier

    from ._common import Settings
    from ._early import Handover, StartupFile
    from ._http_setup import HttpSetup
    from ._stdio import StdinLines

__all__ = ["add_serve_command", "serve"]

PROG = "mcp-roots"
EXIT_OK = 0
EXIT_ERROR = 2
EXIT_INTERRUPTED = 130


def add_serve_command(command: Any) -> None:
    """Add ``serve`` through the command-line's ``command(name, summary, description)`` factory."""
    serve = command(
        "serve",
        "run the filesystem MCP server (a drop-in for @modelcontextprotocol/server-filesystem)",
        "Run an MCP server with the official filesystem server's 14 tools over stdio (or streamable HTTP "
        "on 127.0.0.1 with --http). The directories given (DIR... or --roots) are both the fallback roots "
        "for clients that send none and the ceiling: client roots can narrow them, never widen them. "
        "--ceiling sets a different ceiling. "
        "With --ask, a client that sends no roots is asked (by elicitation: its user picks a folder and "
        "read or read and write, for this session) when a call names a path inside --ceiling under no "
        "folder granted; DIR... and --roots are then granted up front. Logs go to stderr. "
        "Over --http every request needs 'Authorization: Bearer TOKEN' with a token from --token-file "
        "(created with a random token, mode 0600, if missing); GET /ready answers a health check "
        "without one. "
        "Errors before serving (a bad or taken port, a bad option) are one line on stderr, exit 2.",
    )
    serve.add_argument("dirs", nargs="*", metavar="DIR", help="directories to serve (like --roots)")
    serve.add_argument(
        "--ceiling", action="append", metavar="A,B", help="directories client roots may not leave"
    )
    serve.add_argument(
        "--ask",
        action="store_true",
        help="folders by the user's consent: a client without roots that declared elicitation is asked "
        "for a folder inside --ceiling (required) when a call names a path in no folder granted",
    )
    serve.add_argument(
        "--ask-timeout",
        type=float,
        metavar="SECONDS",
        help="with --ask: how long a question waits for the user's answer (default 120)",
    )
    serve.add_argument("--http", type=int, metavar="PORT", help="serve streamable HTTP on 127.0.0.1:PORT/mcp")
    _add_http_options(serve)
    serve.add_argument("--read-only", action="store_true", help="leave out the tools that write")
    serve.add_argument(
        "--protect",
        action="store_true",
        help="the writing tools refuse .git/config, .git/hooks, .mcp.json, .vscode and the rest of the "
        "protected set ('mcp-roots doctor' lists it), as a confined command's writes do",
    )
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


def _add_http_options(serve: Any) -> None:
    http = serve.add_argument_group("with --http")
    http.add_argument(
        "--token-file",
        metavar="FILE",
        help="bearer tokens clients must send, one per line, re-read when the file changes; created with a "
        "random token (mode 0600) if missing; one other users can read is refused "
        "(default ~/.config/mcp-roots/http-token)",
    )
    http.add_argument(
        "--allow-unauthenticated",
        action="store_true",
        help="serve without a token: every local user (and every container on the host network) can then "
        "use the files with this server's rights",
    )
    http.add_argument(
        "--max-connections", type=int, metavar="N", help="open connections at once (default 1000)"
    )
    http.add_argument(
        "--max-sessions", type=int, metavar="N", help="legacy-era sessions open at once (default 1000)"
    )
    http.add_argument(
        "--max-sessions-per-token",
        type=int,
        metavar="N",
        help="legacy-era sessions one token of the token file may hold open (default: --max-sessions); with "
        "a token per client, one client cannot fill the table for the others",
    )
    http.add_argument(
        "--session-idle-timeout",
        type=float,
        metavar="SECONDS",
        help="a legacy-era session idle this long is closed (default 600)",
    )
    http.add_argument(
        "--header-timeout",
        type=float,
        metavar="SECONDS",
        help="a request's headers must be in within this time of its first byte (default 10)",
    )
    http.add_argument(
        "--body-timeout",
        type=float,
        metavar="SECONDS",
        help="a request's body must be in within this time of its headers (default 30)",
    )
    http.add_argument(
        "--max-answer-bytes",
        type=int,
        metavar="N",
        help="bytes of answers in flight in this process, all clients together (default 268435456)",
    )
    http.add_argument(
        "--max-session-answer-bytes",
        type=int,
        metavar="N",
        help="bytes of answers in flight for one session, or one connection without a session "
        "(default 41943040)",
    )


def _say(text: str) -> None:
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def serve(args: argparse.Namespace) -> int:
    """Run ``mcp-roots serve`` until the client goes away; errors before serving are one line, exit 2."""
    logging.basicConfig(
        level=getattr(logging, args.log_level),
        stream=sys.stderr,
        format=f"{PROG} serve: %(levelname)s %(message)s",
    )
    sock = None
    wire = None
    with contextlib.ExitStack() as stack:
        try:
            http = _http_setup(args) if args.http is not None else None
            stdio = http is None and _pipes()
            # Read before the guard exists: with --confine, the guard confines this process to the roots.
            startup = _startup_file(args) if stdio else None
            guard = _guard(args)
            max_message = _max_message_bytes(args)
            # --ask: the lean session sends no question (elicitation/create), so the SDK serves every call.
            if startup is not None and startup[1] and _lean_on() and not getattr(args, "ask", False):
                # Answers recorded: the lean path serves the tools, the SDK only what it does not own.
                wire_in, wire_out = stack.enter_context(_pipes_claimed())
                lean = functools.partial(_lean_then_sdk, args, guard, startup, wire_in, wire_out, max_message)
                anyio.run(lean)
                return EXIT_OK
            if startup is not None:
                wire = _answer_early(startup, max_message, stack)
            server = _build(args, guard, None if http is None else http.tokens)
            if http is not None:
                service = http.service(server)
                sock = http.bind()
        except ModuleNotFoundError as exc:
            if (exc.name or "").split(".")[0] not in ("mcp", "mcp_types", "pydantic", "starlette", "uvicorn"):
                raise
            _say(
                f"{PROG}: error: '{PROG} serve' needs the official mcp SDK, which is not installed here; "
                "install it with: pip install 'mcp-roots[mcp]' (or pipx install 'mcp-roots[mcp]')"
            )
            return EXIT_ERROR
        except (RootsError, OSError, ValueError) as exc:
            _say(f"{PROG}: error: {exc}")
            return EXIT_ERROR
        except KeyboardInterrupt:
            return EXIT_INTERRUPTED
        try:
            if sock is not None:
                import asyncio

                asyncio.run(service.serve(sock))
            else:
                from ._stdio import serve_stdio

                anyio.run(functools.partial(serve_stdio, server, max_line_bytes=max_message, wire=wire))
        except KeyboardInterrupt:
            return EXIT_INTERRUPTED
    return EXIT_OK


def _pipes() -> bool:
    from ._stdio import pipes_are_the_wire

    return pipes_are_the_wire()


def _startup_file(args: argparse.Namespace) -> tuple[StartupFile, dict[str, dict[str, Any]]] | None:
    """The file of this command line's recorded start-up answers, and what it holds (``_early``); None
    when it cannot be named (a cache only ever costs speed, never the start)."""
    from ._early import StartupFile

    options = {
        name: value
        for name, value in vars(args).items()
        if name != "log_level" and (value is None or isinstance(value, (str, int, float, bool, list)))
    }
    try:
        file = StartupFile.for_command(options)
    except OSError as exc:
        logging.getLogger("mcp_roots").debug("serve: no start-up answers: %s", exc)
        return None
    return file, file.load()


def _answer_early(
    startup: tuple[StartupFile, dict[str, dict[str, Any]]], max_message: int, stack: contextlib.ExitStack
) -> tuple[Any, Any]:
    """Claim the pipes; answer the host's first requests from the recorded answers while the SDK is
    imported (when there are any); give the (stdin, stdout) the SDK's server then uses, which records
    the answers the file lacks."""
    from . import _early
    from ._stdio import StdinLines, StdoutWriter, pipes_claimed

    file, answers = startup
    wire_in, wire_out = stack.enter_context(pipes_claimed())
    stdin = StdinLines(wire_in, max_message)
    handover = None
    if answers:
        loader = _early.SdkLoader()
        loader.start()
        try:
            handover = _early.answer_early(stdin, wire_in, wire_out, answers, loader.ready)
        finally:
            loader.join()
    recorder = _early.Recorder(stdin, StdoutWriter(wire_out), file, answers, handover)
    return recorder, recorder


#: ``0``: serve's lean path is off (every message goes to the SDK, as on a first start).
LEAN_ENV_VAR = "MCP_ROOTS_SERVE_LEAN"


def _lean_on() -> bool:
    """Whether serve's lean path may serve (``MCP_ROOTS_SERVE_LEAN=0``: every call goes to the SDK)."""
    return os.environ.get(LEAN_ENV_VAR, "1") != "0"


def _pipes_claimed() -> contextlib.AbstractContextManager[tuple[int, int]]:
    from ._stdio import pipes_claimed

    return pipes_claimed()


async def _lean_then_sdk(
    args: argparse.Namespace,
    guard: RootsGuard,
    startup: tuple[StartupFile, dict[str, dict[str, Any]]],
    wire_in: int,
    wire_out: int,
    max_message: int,
) -> None:
    """Serve on the lean path (``_lean``) and, at the first message it does not own, load the SDK and
    serve the rest of the session with it, the client's initialize and initialized replayed first."""
    from . import _early, _lean
    from ._stdio import StdinLines, StdoutWriter, serve_stdio

    file, answers = startup
    stdin = StdinLines(wire_in, max_message)
    stdout = StdoutWriter(wire_out)
    done: list[Handover] = []

    async def check(given: Handover) -> None:
        # The session is quiet: the SDK, imported in a thread, answers the client's initialize and the
        # lists given from the file off the wire; a file whose answers differ is removed (_early.Recorder).
        switch = sys.getswitchinterval()
        sys.setswitchinterval(0.0005)  # the import holds the interpreter: the loop takes it back soon
        try:
            await anyio.to_thread.run_sync(_import_sdk, abandon_on_cancel=True)
            await _check_given(args, guard, file, answers, given, max_message)
            done.append(given)
        except Exception:  # a check that fails leaves the file unchecked, never the session broken
            logging.getLogger("mcp_roots").exception("serve: the recorded answers could not be checked")
        finally:
            sys.setswitchinterval(switch)

    handover = await _lean.serve_lean(stdin, stdout, answers, guard, _settings(args), check)
    if handover.client_left:
        if handover.initialize_id is not None and not done:
            await _check_given(args, guard, file, answers, handover, max_message)
        return
    try:
        server = _build(args, guard)
    except ModuleNotFoundError as exc:
        _say(f"{PROG}: error: '{PROG} serve' cannot load the mcp SDK for a request: {exc}")
        return
    recorder = _early.Recorder(stdin, stdout, file, answers, handover)
    await serve_stdio(server, max_line_bytes=max_message, wire=(recorder, recorder))


def _import_sdk() -> None:
    import mcp.server.stdio  # noqa: F401

    from . import _server  # noqa: F401


async def _check_given(
    args: argparse.Namespace,
    guard: RootsGuard,
    file: StartupFile,
    answers: dict[str, dict[str, Any]],
    given: Handover,
    max_message: int,
) -> None:
    """The SDK's answers to the client's initialize and to the lists given from the file, compared off
    the wire (its answers go to the null device)."""
    from . import _early
    from ._stdio import StdoutWriter, serve_stdio

    try:
        server = _build(args, guard)
    except ModuleNotFoundError as exc:
        logging.getLogger("mcp_roots").debug("serve: the recorded answers are not checked: %s", exc)
        return
    out = StdoutWriter(_null_out())
    recorder = _early.Recorder(_replayed_only(given.replay), out, file, answers, given)
    await serve_stdio(server, max_line_bytes=max_message, wire=(recorder, recorder))


def _replayed_only(lines: list[str]) -> StdinLines:
    """Lines that give ``lines`` and then end."""
    from ._stdio import StdinLines

    read, write = os.pipe()
    os.close(write)
    given = StdinLines(read)
    given.put_back(lines)
    return given


def _null_out() -> int:
    return os.open(os.devnull, os.O_WRONLY)


def _max_message_bytes(args: argparse.Namespace) -> int:
    from ._stdio import DEFAULT_MAX_LINE_BYTES

    if args.max_message_bytes is None:
        return DEFAULT_MAX_LINE_BYTES
    if args.max_message_bytes < 1:
        raise ConfigError(f"--max-message-bytes must be at least 1, not {args.max_message_bytes}")
    return int(args.max_message_bytes)


def _split(values: list[str] | None, flag: str) -> list[str] | None:
    if values is None:
        return None
    entries = [entry for value in values for entry in value.split(",") if entry]
    if not entries:
        raise ConfigError(f"{flag} {','.join(values)!r} names no directories; give at least one path")
    return entries


def _http_setup(args: argparse.Namespace) -> HttpSetup:
    from ._http_setup import HttpSetup

    return HttpSetup.from_args(args, say=_say)


def _guard(args: argparse.Namespace) -> RootsGuard:
    """The guard of the directories and options given (no SDK needed: every configuration error is here)."""
    project = getattr(args, "project", None)
    roots = (args.dirs or []) + (_split(getattr(args, "roots", None), "--roots") or [])
    ceiling = _split(args.ceiling, "--ceiling")
    # A relative folder is the working folder's, as the official server takes it: resolved once, at start.
    roots = [os.path.abspath(os.path.expanduser(root)) for root in roots]
    ceiling = None if ceiling is None else [os.path.abspath(os.path.expanduser(root)) for root in ceiling]
    ask = _consent(args, ceiling)
    if not roots and ceiling is None and ENV_VAR not in os.environ and project is None:
        raise ConfigError(
            "mcp-roots serve needs the directories it may serve: mcp-roots serve DIR..., --roots A,B, "
            f"{ENV_VAR}, or --ceiling (then only client roots inside it are served)"
        )
    # Finite: a client that never answers roots/list must not hold a request (and its memory) forever.
    if args.timeout is not None and not (math.isfinite(args.timeout) and args.timeout > 0):
        raise ConfigError(f"--timeout must be a positive number of seconds, not {args.timeout:g}")
    timeout = {} if args.timeout is None else {"timeout": args.timeout}
    for directory in roots:
        if os.path.exists(directory) and not os.path.isdir(directory):
            raise ConfigError(f"{directory!r} is not a directory: mcp-roots serve serves directories")
    if args.max_results is not None and args.max_results < 1:
        raise ConfigError(f"--max-results must be at least 1, not {args.max_results}")
    allow_home = bool(getattr(args, "allow_home", False))
    # Worked out once, here: the fallback, and the ceiling (the directories given, unless one is named:
    # client roots narrow them, never widen them). expand_user: '~/notes.txt' (which models write) means
    # the home directory's, as in the official server; the expanded path is checked like any other.
    fallback = fallback_roots(roots or None, project_root=project, allow_home=allow_home)
    return RootsGuard(
        fallback,
        ceiling=ceiling if ceiling is not None else fallback,
        confine=args.confine,
        expand_user=True,
        fallback_until_roots=True,
        allow_home=allow_home,  # with --ask: the home folder may be offered (never /)
        **ask,
        **timeout,
    )


def _consent(args: argparse.Namespace, ceiling: list[str] | None) -> dict[str, Any]:
    """RootsGuard's consent options for --ask (none without it); a usage error says what --ask needs."""
    ask = bool(getattr(args, "ask", False))
    limit = getattr(args, "ask_timeout", None)
    if not ask:
        if limit is not None:
            raise ConfigError("--ask-timeout bounds --ask's questions; give --ask too")
        return {}
    if ceiling is None:
        raise ConfigError(
            "--ask needs --ceiling DIR: the folders the user may grant from (DIR... and --roots, when "
            "given, are granted up front)"
        )
    if limit is not None and not (math.isfinite(limit) and limit > 0):
        raise ConfigError(f"--ask-timeout must be a positive number of seconds, not {limit:g}")
    return {"consent": True} if limit is None else {"consent": True, "consent_timeout": limit}


def _settings(args: argparse.Namespace) -> Settings:
    from ._common import Settings
    from ._walk import Limits

    limits = Limits() if args.max_results is None else Limits(max_results=args.max_results)
    return Settings(read_only=args.read_only, walk=limits, protect=args.protect)


def _build(args: argparse.Namespace, guard: RootsGuard, tokens: TokenVerifier | None = None) -> MCPServer:
    from ._server import build_server
    from ._state import shared_request_state

    security = shared_request_state(args.state_key_file) if args.state_key_file is not None else None
    server = build_server(guard, _settings(args), request_state_security=security, token_verifier=tokens)
    if getattr(args, "ask", False):  # the grants listed and withdrawn: list_granted_folders, revoke_...
        guard.consent_tools(server)
    return server
