"""The pytest plugin of mcp-roots, opt-in: it only adds a fixture and loads the probe on first use.
``await assert_confined(server, tool=..., arg=...)`` runs the probe's techniques against an MCP server, in
memory or as a stdio command, and fails the test with every escape, hang or crash it found.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pytest

if TYPE_CHECKING:
    from . import SupportedServer
    from .probe import Report

__all__ = ["assert_confined", "mcp_roots_probe"]


class _Factory:
    """A server built for the scratch root: ``build(root)`` is called once per connection."""

    def __init__(self, build: Callable[[Path], Any]) -> None:
        self.build = build
        self.cwd_is_scratch = False
        self.eras: tuple[str, ...] = ("legacy", "modern")
        self.name = getattr(build, "__name__", "factory")

    def describe(self) -> str:
        return f"server built by {self.name}(root)"

    def connect(self, connection: Any, roots: list[str], root: str, cwd: str, errlog: str) -> Any:
        from .probe import target_for

        target = target_for(self.build(Path(root)))
        self.eras = target.eras
        return target.connect(connection, roots, root, cwd, errlog)


async def assert_confined(
    server: str | Sequence[str] | SupportedServer | Callable[[Path], SupportedServer],
    *,
    tool: str | None = None,
    arg: str | None = None,
    techniques: Sequence[str] | None = None,
    eras: Sequence[str] = ("legacy", "modern"),
    declare_roots: Sequence[bool] | None = None,
    deadline: float = 3.0,
    race_attempts: int = 16,
    allow_unreached: Sequence[str] = (),
) -> Report:
    """Probe a server and fail (AssertionError with the findings) if any technique got out of the root.

    A server object built beforehand knows no scratch root, so it is probed with declared client roots
    only. A tool that handles files (by its name or description) and was not reached, or showed no effect
    the probe can see, fails the test too.
    Returns the report when nothing got out and every file tool was reached.

    Args:
        server: An argv list or string with ``{root}`` (run over stdio in the scratch tree); an in-memory
            server object (mcp 2.x ``MCPServer``/``Server``, fastmcp 4.x ``FastMCP``, mcp 1.x
            ``FastMCP``/``Server``); or a function ``build(root: Path)`` that returns one for the scratch
            root.
        tool: Probe this tool only (default: every path in every tool's input schema).
        arg: The locator of the path in ``tool``'s arguments: ``path``, ``job.path``, ``items[].file_path``.
        techniques: The probe's techniques to run (default: all).
        eras: The protocol eras to probe: ``"legacy"``, ``"modern"``.
        declare_roots: Whether the client declares roots, per run (default: both where a root is known).
        deadline: Seconds each call may take before it counts as a hang.
        race_attempts: Tries of each race technique.
        allow_unreached: File tools that may stay unreached (or unobserved) without failing the test.
    """
    __tracebackhide__ = True
    # Loaded here, not when pytest loads the plugin: a project that never probes loads none of it.
    from .probe import Connection, Options, run_probe, target_for

    factory = inspect.isfunction(server) or inspect.ismethod(server)
    build = cast("Callable[[Path], SupportedServer]", server)  # a function: the factory form
    target: Any = _Factory(build) if factory else target_for(server)
    stdio = isinstance(server, (str, list, tuple))
    if declare_roots is None:
        declare_roots = (False, True) if (factory or stdio) else (True,)
    if arg is not None and tool is None:
        raise ValueError("assert_confined: arg= needs tool=")
    options = Options(
        deadline=deadline,
        race_attempts=race_attempts,
        tools=[f"{tool}:{arg}" if arg else tool] if tool else [],
        allow_unreached=list(allow_unreached),
        techniques=list(techniques) if techniques is not None else None,
        connections=[Connection(e, d) for e in eras for d in declare_roots],
    )
    report = await run_probe(target, options)
    if report.failures:
        raise AssertionError(f"the probe could not finish with {report.target}: {'; '.join(report.failures)}")
    message = failure_message(report)
    if message:
        raise AssertionError(message)
    return report


def failure_message(report: Report) -> str:
    """The missing checks that explain the findings, the findings grouped by technique (one line per tool and
    place, the connections that showed it), then the file tools not reached and why; "" when there is nothing
    to fail for."""
    from .paths._text import for_reader

    groups: dict[str, dict[tuple[str, str], list[Any]]] = {}
    for row in report.findings:
        groups.setdefault(row.technique, {}).setdefault((row.tool, row.argument), []).append(row)
    parts: list[str] = []
    if groups:
        parts.append(f"{len(report.findings)} way(s) out of the root in {report.target}:")
        for cause in report.causes():  # one missing check first, with what follows from it
            follows = f"; {cause.following} other finding(s) follow from it" if cause.following else ""
            parts.append(f"  cause: {cause.cause} ({cause.technique}) in {', '.join(cause.places)}{follows}")
        for technique, places in groups.items():
            parts.append(f"  {technique}:")
            for (tool, argument), rows in places.items():
                first = rows[0]
                connections = ", ".join(dict.fromkeys(r.connection for r in rows))
                parts.append(
                    f"    {tool} {argument}: {technique} {first.outcome} [{connections}] "
                    f"{'; '.join(first.evidence[:2])} (via {first.value!r})"
                )
    for name in report.unreached_file_tools:
        why = [
            f"{place}: {reason}" for place, reason in report.unreached.items() if place.split(".")[0] == name
        ]
        parts.append(
            f"file tool {name!r} was not reached ({'; '.join(why) or 'no place reached'}); name its path "
            f"with tool=/arg=, or allow_unreached=[{name!r}]"
        )
    for name in report.unobserved_file_tools:
        parts.append(
            f"file tool {name!r} ran, but no place of it had an effect the probe can see (a working folder, "
            f"a command): no verdict of it is earned; allow_unreached=[{name!r}] accepts that"
        )
    return "\n".join(for_reader(part) for part in parts)


@pytest.fixture
def mcp_roots_probe() -> Callable[..., Awaitable[Report]]:
    """The ``assert_confined`` coroutine function, as a fixture (``await mcp_roots_probe(server, ...)``)."""
    return assert_confined
