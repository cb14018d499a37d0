"""The probe's run: for each connection setting, list the tools, find the path arguments, and try every
technique through every one of them (and resources/read of file: URIs), judging each call by its effects
on the scratch tree alone. Bounded in calls, time per call and time in all.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import logging
import os
import re
import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import anyio

from ._discover import (
    PathArgument,
    fill_arguments,
    looks_like_file_tool,
    not_reached,
    opaque_places,
    parse_override,
    path_arguments,
    takes_arguments,
)
from ._procs import kill_groups, kill_strays
from ._race import can_swap, swapping
from ._report import (
    CRASHED,
    ESCAPED,
    HANG,
    HELD,
    NO_EFFECT,
    NOT_REACHED,
    NOTED,
    UNTESTED,
    Report,
    Row,
    worst,
)
from ._scratch import HostileTree, Scratch
from ._session import LEGACY, MODERN, Connection, Session, Target
from ._techniques import LINK, TECHNIQUES, Technique, Variant, expand_template, file_uri

__all__ = ["Options", "UsageError", "innermost", "run_probe"]

logger = logging.getLogger("mcp_roots")

#: The technique name of a finding made by an inside control call.
INSIDE_CONTROL = "inside-control"
_BASE64 = re.compile(r"^[A-Za-z0-9+/=\s]{16,}$")


@dataclass
class Options:
    """How far the probe goes. Every bound is finite."""

    deadline: float = 3.0  # seconds a call may take before it counts as a hang
    race_attempts: int = 16  # calls per variant while the scratch tree swaps a directory for a link out
    max_calls: int = 10_000
    time_limit: float = 600.0
    tools: list[str] = field(default_factory=list)  # --tool NAME:LOCATOR overrides: only these places
    allow_unreached: list[str] = field(default_factory=list)  # file tools that may go unreached
    techniques: list[str] | None = None  # None: all
    connections: list[Connection] | None = None  # None: every era of the target, without and with roots
    scratch_parent: str | None = None
    progress: Callable[[str], None] | None = None


class _Budget(Exception):
    """The call or time bound was reached."""


class UsageError(ValueError):
    """An option names a tool or argument the server does not have."""


@dataclass
class _Run:
    scratch: Scratch
    options: Options
    report: Report
    started: float = field(default_factory=time.monotonic)
    write_token: str = field(default_factory=lambda: "probe-wrote-" + secrets.token_hex(6))
    fresh: int = 0
    cwd_is_scratch: bool = False
    declared: bool = False  # the connection now probed declares the probe's roots (all three count as inside)
    tools: dict[str, dict[str, Any]] = field(default_factory=dict)  # the tools probed (or to be), by name
    reached: set[str] = field(default_factory=set)  # "tool.locator" whose controls reached the tool's code
    unreached: dict[str, str] = field(default_factory=dict)  # "tool.locator" (or "tool") -> why not
    observed: set[str] = field(default_factory=set)  # "tool.locator" whose controls showed an effect
    unobserved: dict[str, str] = field(default_factory=dict)  # reached, but no effect canaries can see

    def fresh_name(self) -> str:
        self.fresh += 1
        return f"{self.scratch.root}/probe-new-{self.fresh}.txt"

    def charge(self) -> None:
        self.report.calls += 1
        if self.report.calls > self.options.max_calls:
            raise _Budget(f"stopped after {self.options.max_calls} calls (--max-calls)")
        if time.monotonic() - self.started > self.options.time_limit:
            raise _Budget(f"stopped after {self.options.time_limit:g} s (--time-limit)")


def connections_for(target: Target) -> list[Connection]:
    return [Connection(era, roots) for era in target.eras for roots in (False, True)]


async def run_probe(target: Target, options: Options | None = None) -> Report:
    """Probe ``target``; the scratch tree is removed whatever happens (cancellation included)."""
    options = options or Options()
    scratch = Scratch.create(options.scratch_parent)
    report = Report(target.describe())
    run = _Run(scratch, options, report, cwd_is_scratch=target.cwd_is_scratch)
    try:
        await _probe_all(target, run)
    except _Budget as exc:
        report.notes.append(str(exc))
    except HostileTree as exc:
        report.failures.append(f"the server keeps changing the scratch tree under the probe: {exc}")
    finally:
        _account_unreached(run)
        report.seconds = time.monotonic() - run.started
        scratch.unblock_fifos()
        # Every process the server started is gone before the tree goes (one that left its group too).
        kill_groups(set(getattr(target, "groups", set())))
        for _ in range(3):  # again: a child forked while its parent was being killed
            if not kill_strays(str(scratch.top)):
                break
        scratch.remove()
    return report


def _account_unreached(run: _Run) -> None:
    """The places never reached on any connection, and the file tools with none reached at all."""
    report = run.report
    report.unreached = {k: v for k, v in run.unreached.items() if k not in run.reached}
    report.unobserved = {k: v for k, v in run.unobserved.items() if k not in run.observed}
    reached_tools = {k.partition(".")[0] for k in run.reached}
    observed_tools = {k.partition(".")[0] for k in run.observed}
    report.unobserved_file_tools = [
        name
        for name, tool in run.tools.items()
        if name in reached_tools
        and name not in observed_tools
        and looks_like_file_tool(tool)
        and name not in run.options.allow_unreached
    ]
    report.unreached_file_tools = [
        name
        for name, tool in run.tools.items()
        if name not in reached_tools
        and takes_arguments(tool)
        and looks_like_file_tool(tool)
        and name not in run.options.allow_unreached
    ]


async def _probe_all(target: Target, run: _Run) -> None:
    options, report, scratch = run.options, run.report, run.scratch
    techniques = [t for t in TECHNIQUES if options.techniques is None or t.name in options.techniques]
    once_done = False
    for connection in options.connections or connections_for(target):
        if connection.era not in target.eras:
            report.notes.append(f"{connection.label}: this client cannot ask for that era; not tried")
            continue
        roots = [file_uri(str(r)) for r in (scratch.root, scratch.percent_root, scratch.twin_root)]
        errlog = str(scratch.work / "server.stderr")
        if options.progress:
            options.progress(f"connecting ({connection.label})")
        # One scope over the whole connection: a short deadline while connecting, the run's time limit after.
        scope = anyio.CancelScope(deadline=anyio.current_time() + max(options.deadline * 4, 20.0))
        connected = False
        try:
            with scope:
                async with target.connect(
                    connection, roots, str(scratch.root), str(scratch.base), errlog
                ) as session:
                    connected = True
                    scope.deadline = anyio.current_time() + max(
                        options.time_limit - (time.monotonic() - run.started), 0.0
                    )
                    once_done = await _connection(session, connection, techniques, run, once_done)
        except Exception as exc:  # a client's task group may wrap what the body raised in a group
            leaf = innermost(exc)
            if isinstance(leaf, (_Budget, UsageError)):
                raise leaf from None
            if not connected and isinstance(leaf, (FileNotFoundError, PermissionError)):
                raise UsageError(f"cannot start the server: {leaf}") from None
            if isinstance(leaf, _Crashed):
                report.rows.append(leaf.row)
                report.failures.append(f"{connection.label}: the server went away; the rest was not tried")
            else:  # the server could not be started, or broke the protocol: say so, go on
                what = "the connection failed" if connected else "could not connect"
                report.failures.append(f"{connection.label}: {what}: {_describe(leaf)}{_stderr_tail(errlog)}")
        finally:
            scratch.unblock_fifos()
        if scope.cancelled_caught:
            if not connected:
                report.failures.append(f"{connection.label}: no connection within the deadline")
            else:
                raise _Budget(f"stopped after {options.time_limit:g} s (--time-limit)")


async def _connection(
    session: Session, connection: Connection, techniques: list[Technique], run: _Run, once_done: bool
) -> bool:
    version = session.protocol_version
    twin = Connection(LEGACY, connection.declare_roots).label
    if connection.era == MODERN and run.report.connections.get(twin) == version:
        run.report.notes.append(f"{connection.label}: the server negotiated {version} again; not repeated")
        return once_done
    run.report.connections[connection.label] = version
    return await _probe_connection(session, connection, techniques, run, once_done)


async def _probe_connection(
    session: Session, connection: Connection, techniques: list[Technique], run: _Run, once_done: bool
) -> bool:
    options, report, scratch = run.options, run.report, run.scratch
    run.declared = connection.declare_roots
    with anyio.fail_after(max(options.deadline * 4, 20.0)):
        tools = await session.list_tools()
    if options.tools:
        arguments = []
        for spec in options.tools:
            try:
                found = (
                    [parse_override(spec, tools)]
                    if ":" in spec
                    else [a for t in tools if t.get("name") == spec for a in path_arguments(t)]
                )
            except ValueError as exc:
                raise UsageError(str(exc)) from None
            if not found:
                raise UsageError(
                    f"tool {spec!r}: no such tool, or no argument of it takes a path (name one as {spec}:ARG)"
                )
            arguments += found
    else:
        arguments = [a for tool in tools for a in path_arguments(tool)]
    by_name = {t["name"]: t for t in tools if isinstance(t.get("name"), str)}
    named = {spec.partition(":")[0] for spec in options.tools}
    for name, tool in by_name.items():
        if not named or name in named:
            run.tools.setdefault(name, tool)
            if not any(a.tool == name for a in arguments):
                why = (
                    "no path found in its input schema" if takes_arguments(tool) else "it takes no arguments"
                )
                run.unreached.setdefault(name, why)
            for place in opaque_places(tool):
                run.unreached.setdefault(f"{name}.{place}", "nested too deep or recursive: not followed")
    for a in arguments:
        if f"{a.tool}.{a.name}" not in report.arguments:
            report.arguments.append(f"{a.tool}.{a.name}")
    resources = await session.list_resources() if session.has_resources else ([], [])
    offers_resources = bool(resources[0] or resources[1])
    if not arguments and not offers_resources:
        report.notes.append(f"{connection.label}: no tool takes a path (name one with --tool NAME:LOCATOR)")
    controls = {a: await _controls(session, connection, by_name[a.tool], a, run) for a in arguments}
    kinds = {a: k for a, k in controls.items() if k is not None}
    arguments = list(kinds)
    reachable = any("untested" not in k for k in kinds.values())
    run_once = not once_done and reachable
    for technique in techniques:
        if (technique.once and not run_once) or (technique.needs_roots and not connection.declare_roots):
            continue
        if options.progress:
            options.progress(f"{connection.label}: {technique.name}")
        for a in arguments:
            tool = by_name[a.tool]
            variants = _variants(technique, a, kinds[a], run)
            if variants:
                report.rows.append(
                    await _try(session, connection, tool, a, technique, variants, kinds[a], run)
                )
        if offers_resources:
            uris = [
                Variant(file_uri(v.value), v.kind)
                for v in technique.paths(scratch)
                if v.value.startswith("/") and (run.cwd_is_scratch or not _cwd_relative(v.value))
            ]
            uris += technique.uris(scratch) if technique.uris else []
            uri_arg = PathArgument("resources/read", "uri", uri=True)
            uris = [v for v in uris if v.kind != "new"]
            if uris:
                report.rows.append(
                    await _try(session, connection, None, uri_arg, technique, uris, {"file"}, run)
                )
            if technique.parameters and resources[1]:
                filled = [
                    Variant(expand_template(template, v.value), v.kind)
                    for template in resources[1][:8]
                    for v in technique.parameters(scratch)
                ]
                arg = PathArgument("resources/read", "{template}")
                report.rows.append(
                    await _try(session, connection, None, arg, technique, filled, {"file"}, run)
                )
    return once_done or run_once


async def _controls(
    session: Session, connection: Connection, tool: dict[str, Any], arg: PathArgument, run: _Run
) -> set[str] | None:
    """What kinds of inside path the argument takes: an existing file, a directory, a new name (each answered
    without an error). None (and a 'not reached' row) when no control got past input validation or the
    protocol to the tool's code; all three and 'untested' when the tool refused every inside control (the
    place counts as not reached: no row of it can be 'held'); 'unobserved' added when no control's answer
    showed the inside tree and none changed it (a working folder, a command: canaries cannot see its effect).
    The controls are judged too: a listing of the root that follows a link out is a way out."""
    kinds: set[str] = set()
    reasons: list[str] = []
    refusals: list[str] = []
    seen = False
    scratch = run.scratch
    root = str(scratch.root)
    for kind, value in (
        ("file", f"{root}/{scratch.n('benign.txt')}"),
        ("dir", root),
        ("new", run.fresh_name()),
    ):
        outcome, evidence, result = await _judged(session, tool, arg, _as_arg(arg, value), run, False)
        if outcome != HELD:
            row = Row(connection.label, arg.tool, arg.name, INSIDE_CONTROL, outcome, evidence, value, 1, LINK)
            if outcome == CRASHED:
                raise _Crashed(row)
            run.report.rows.append(row)
        reason = not_reached(result)
        if reason is not None:
            reasons.append(reason)
        elif result is not None and not result.get("isError"):
            kinds.add(kind)
            seen = seen or scratch.inside_changed() or scratch.shows_inside(_strings(result), value)
        elif result is not None:
            refusals.append(_first_text(result))
        scratch.restore()
    key = f"{arg.tool}.{arg.name}"
    if len(reasons) == 3:
        run.unreached.setdefault(key, reasons[0])
        run.report.rows.append(
            Row(connection.label, arg.tool, arg.name, INSIDE_CONTROL, NOT_REACHED, reasons[:1], root, 3, LINK)
        )
        return None
    if not kinds:
        said = f": {refusals[-1]}" if refusals else ""
        run.unreached.setdefault(key, f"the tool refused every inside path the probe gave it{said}")
        return {"file", "dir", "new", "untested"}
    run.reached.add(key)
    if seen:
        run.observed.add(key)
        return kinds
    run.unobserved.setdefault(
        key, "the tool answered, but showed nothing of the root's files and changed none: no canary can tell"
    )
    return kinds | {"unobserved"}


def _first_text(result: dict[str, Any]) -> str:
    for block in result.get("content") or []:
        if isinstance(block, dict) and isinstance(block.get("text"), str):
            return str(block["text"])[:200]
    return "an error"


def _as_arg(arg: PathArgument, value: str) -> str:
    if arg.uri and not value.startswith("file:"):
        return file_uri(value) if value.startswith("/") else value
    return value


def _cwd_relative(value: str) -> bool:
    """Whether ``value`` is resolved against the server's working directory (relative, or /proc/self/cwd)."""
    return not value.startswith("/") or value.startswith("/proc/self/cwd")


def _variants(technique: Technique, arg: PathArgument, kinds: set[str], run: _Run) -> list[Variant]:
    scratch = run.scratch
    variants = [v for v in technique.paths(scratch) if v.kind in kinds]
    if not run.cwd_is_scratch:  # a relative path would be resolved in a directory the probe does not own
        variants = [v for v in variants if not _cwd_relative(v.value)]
    if arg.uri:
        variants = [Variant(_as_arg(arg, v.value), v.kind) for v in variants if v.value.startswith("/")]
        variants += [v for v in (technique.uris(scratch) if technique.uris else []) if v.kind in kinds]
    return variants


async def _call(
    session: Session, tool: dict[str, Any] | None, arg: PathArgument, value: str, run: _Run
) -> dict[str, Any] | None:
    """One call, bounded by the deadline; None when it did not answer in time."""
    run.charge()
    if tool is None:
        call = session.read_resource(value)
    else:
        arguments = fill_arguments(
            tool,
            arg,
            value,
            benign_file=f"{run.scratch.root}/{run.scratch.n('benign.txt')}",
            fresh_name=run.fresh_name(),
            write_token=run.write_token,
            old_text=run.scratch.marker,
        )
        call = session.call_tool(tool["name"], arguments)
    with anyio.move_on_after(run.options.deadline):
        return await call
    return None


async def _try(
    session: Session,
    connection: Connection,
    tool: dict[str, Any] | None,
    arg: PathArgument,
    technique: Technique,
    variants: list[Variant],
    kinds: set[str],
    run: _Run,
) -> Row:
    scratch = run.scratch
    outcome = UNTESTED if "untested" in kinds else NO_EFFECT if "unobserved" in kinds else HELD
    row = Row(connection.label, arg.tool, arg.name, technique.name, outcome, weakness=technique.weakness)
    if technique.race and not can_swap(scratch):
        row.outcome, row.evidence = UNTESTED, ["renameat2(RENAME_EXCHANGE) is not available here"]
        return row
    attempts = run.options.race_attempts if technique.race else 1
    outcomes: list[str] = []
    unreached: list[str] = []
    with swapping(scratch) if technique.race else contextlib.nullcontext():
        for variant in variants:
            for _ in range(attempts):
                row.calls += 1
                outcome, evidence, result = await _judged(
                    session, tool, arg, variant.value, run, not technique.race
                )
                reason = not_reached(result) if tool is not None else None
                if reason is not None and outcome == HELD:
                    unreached.append(reason)
                if outcome != HELD:
                    if technique.limit and outcome == ESCAPED:
                        outcome = NOTED
                    outcomes.append(outcome)
                    if worst([outcome, row.outcome]) == outcome:
                        row.outcome, row.evidence, row.value = outcome, evidence, variant.value
                    if outcome == CRASHED:
                        raise _Crashed(row)
                    if outcome in (ESCAPED, NOTED):
                        break
    scratch.restore()  # after a race: the swapping has stopped
    if not outcomes:
        row.value = variants[-1].value
        if unreached and len(unreached) == row.calls:  # refused before the tool ran, every time: no 'held'
            row.outcome, row.evidence = NOT_REACHED, unreached[:1]
    return row


class _Crashed(Exception):
    def __init__(self, row: Row) -> None:
        self.row = row


async def _judged(
    session: Session, tool: dict[str, Any] | None, arg: PathArgument, value: str, run: _Run, restore: bool
) -> tuple[str, list[str], dict[str, Any] | None]:
    scratch = run.scratch
    try:
        result = await _call(session, tool, arg, value, run)
    except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream) as exc:
        return CRASHED, [f"the connection ended: {type(exc).__name__}"], None
    hung = result is None
    if hung:
        scratch.unblock_fifos()
    evidence = [
        f"listing ({rel})"
        if rel.startswith("name ")
        else f"size of {rel[5:]!r}"
        if rel.startswith("size ")
        else f"content of {rel!r}"
        for rel in scratch.evidence_in(list(_strings(result)))
    ]
    evidence += scratch.outside_changes(declared=run.declared)
    if restore:
        scratch.restore()
    if evidence:
        return ESCAPED, evidence, result
    if hung:
        return HANG, [f"no answer within {run.options.deadline:g} s"], result
    return HELD, [], result


def _stderr_tail(errlog: str) -> str:
    try:
        with open(errlog, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(f.tell() - 2000, 0))
            lines = f.read().decode("utf-8", "replace").strip().splitlines()[-1:]
    except OSError:
        return ""
    return f" (server stderr: {' | '.join(lines)})" if lines else ""


def innermost(exc: BaseException) -> BaseException:
    """The one exception inside (nested) exception groups of one member each (3.11+, or the backport)."""
    inner = getattr(exc, "exceptions", None)
    while isinstance(inner, tuple) and len(inner) == 1 and isinstance(inner[0], BaseException):
        exc = inner[0]
        inner = getattr(exc, "exceptions", None)
    return exc


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _strings(value: Any) -> Iterator[str]:
    """Every string in a result, and the decoded bytes of those that are base64 (media, blobs)."""
    if isinstance(value, str):
        yield value
        if _BASE64.match(value):
            with contextlib.suppress(binascii.Error, ValueError):
                yield base64.b64decode(value, validate=False).decode("utf-8", "replace")
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item)
