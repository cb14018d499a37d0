"""Fail closed: who decides the roots of a connection, through the reference server and the SDK's
own Client, in memory and as a stdio subprocess, on asyncio and trio.

Each test is a situation in which main used to widen to the fallback roots (or the working directory):
slow consent, roots switched off and on, a silent client, nothing configured, a project file naming '/',
an expensive hostile answer. Nothing of the SDK is mocked; the roots are real directories.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.context import ClientRequestContext
from mcp.client.stdio import StdioServerParameters
from mcp_types import METHOD_NOT_FOUND, ErrorData, ListRootsResult, Root, RootsListChangedNotification
from pydantic import FileUrl

from mcp_roots import RootSet, RootsGuard, path_to_uri
from tests import forkserver
from tests.kit import FILE_SERVER, RootsCallback, Tree, load_file_server, text_of

file_server = load_file_server()

pytestmark = pytest.mark.anyio

TIMEOUT = 0.3  # the server's roots timeout in these tests
TRANSPORTS = ["memory", "stdio"]


@pytest.fixture
def tree(tmp_path: Path) -> Tree:
    return Tree(tmp_path)


def clean_env(**extra: str) -> dict[str, str]:
    """The environment of a server subprocess: none of the developer's MCP_ROOTS* settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_ROOTS")}
    env.update(extra)
    return env


@contextlib.asynccontextmanager
async def connect(
    transport: str,
    guard_kwargs: dict[str, Any],
    args: list[str],
    callback: Any = None,
    *,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> AsyncIterator[Client]:
    """A legacy-era SDK Client to the reference server: in memory (a RootsGuard built from
    ``guard_kwargs``) or as a stdio subprocess (started with ``args``)."""
    kwargs: dict[str, Any] = {"list_roots_callback": callback} if callback is not None else {}
    if transport == "memory":
        server = file_server.build_server(RootsGuard(**guard_kwargs))
        async with Client(server, mode="legacy", **kwargs) as client:
            yield client
    else:
        command = forkserver.command(str(FILE_SERVER), *args)  # a real process, forked warm
        params = StdioServerParameters(
            command=command[0],
            args=command[1:],
            env=env if env is not None else clean_env(),
            cwd=str(cwd) if cwd is not None else None,
        )
        async with Client(params, mode="legacy", **kwargs) as client:
            yield client


def configured(tree: Tree) -> tuple[dict[str, Any], list[str]]:
    """A server with fallback roots (tree.fallback) and the short roots timeout."""
    return (
        {"roots": [tree.fallback], "timeout": TIMEOUT},
        ["--roots", str(tree.fallback), "--timeout", str(TIMEOUT)],
    )


async def read(client: Client, path: Path | str) -> tuple[bool, str]:
    result = await client.call_tool("read_text", {"path": str(path)})
    return bool(result.is_error), text_of(result)


async def until_readable(client: Client, path: Path) -> None:
    # Bounded only so a failing test cannot hang; no assertion depends on how long it takes.
    with anyio.fail_after(20):
        while (await read(client, path))[0]:  # noqa: ASYNC110 - polls what a client can observe
            await anyio.sleep(0.02)


class ConsentCallback:
    """A host that asks its user before answering roots/list: it answers when the test says the user did."""

    def __init__(self, *paths: Path) -> None:
        self.paths = list(paths)
        self.decided = anyio.Event()
        self.calls = 0
        self.cancelled = 0

    async def __call__(self, context: ClientRequestContext) -> ListRootsResult:
        self.calls += 1
        try:
            await self.decided.wait()
        except anyio.get_cancelled_exc_class():
            self.cancelled += 1
            raise
        return ListRootsResult(roots=[Root(uri=FileUrl(path_to_uri(p)), name=p.name) for p in self.paths])


class SwitchableCallback:
    """A host whose roots can be switched off (it then answers -32601, as the SDK does without a callback)."""

    def __init__(self, *paths: Path) -> None:
        self.paths = list(paths)
        self.enabled = True

    async def __call__(self, context: ClientRequestContext) -> ListRootsResult | ErrorData:
        if not self.enabled:
            return ErrorData(code=METHOD_NOT_FOUND, message="Method not found")
        return ListRootsResult(roots=[Root(uri=FileUrl(path_to_uri(p)), name=p.name) for p in self.paths])


# --- slow consent never widens -----------------------------------------------------------------------------


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_consent_answered_after_three_timeouts_applies_and_nothing_was_readable_meanwhile(
    transport: str, tree: Tree
) -> None:
    guard_kwargs, args = configured(tree)
    consent = ConsentCallback(tree.project)
    async with connect(transport, guard_kwargs, args, consent) as client:
        paths = (tree.outside / "secret.txt", tree.fallback / "fb.txt", tree.project / "hello.txt")
        with anyio.move_on_after(3 * TIMEOUT):
            while True:  # the user is still deciding: every call meanwhile is refused, none widens
                for path in paths:
                    refused, text = await read(client, path)
                    assert refused is True, f"{path} was readable before the user answered: {text}"
                    assert "TOP SECRET" not in text
                    assert "hello from" not in text
        assert consent.calls == 1  # one prompt: the request was never re-sent...
        assert consent.cancelled == 0  # ...nor cancelled
        consent.decided.set()
        await until_readable(client, tree.project / "hello.txt")
        assert (await read(client, tree.outside / "secret.txt"))[0] is True
        assert (await read(client, tree.fallback / "fb.txt"))[0] is True
    assert consent.calls == 1


# --- switched off and on -----------------------------------------------------------------------------------


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_roots_enabled_disabled_enabled_never_widen_and_the_last_answer_applies(
    transport: str, tree: Tree
) -> None:
    guard_kwargs, args = configured(tree)
    host = SwitchableCallback(tree.project)
    async with connect(transport, guard_kwargs, args, host) as client:
        assert await read(client, tree.project / "hello.txt") == (False, "hello from project")
        host.enabled = False
        await client.session.send_notification(RootsListChangedNotification())
        # Switched off (-32601): the last valid roots stay; the fallback never applies.
        assert await read(client, tree.project / "hello.txt") == (False, "hello from project")
        assert (await read(client, tree.fallback / "fb.txt"))[0] is True
        host.enabled = True
        host.paths = [tree.other]
        await client.session.send_notification(RootsListChangedNotification())
        assert await read(client, tree.other / "other.txt") == (False, "hello from other")
        assert (await read(client, tree.project / "hello.txt"))[0] is True
        assert (await read(client, tree.fallback / "fb.txt"))[0] is True


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_roots_switched_off_from_the_start_are_refused_then_switching_on_applies(
    transport: str, tree: Tree
) -> None:
    guard_kwargs, args = configured(tree)
    host = SwitchableCallback(tree.project)
    host.enabled = False
    async with connect(transport, guard_kwargs, args, host) as client:
        refused, text = await read(client, tree.fallback / "fb.txt")
        assert refused is True
        assert text.startswith("the client has not sent its roots yet")
        host.enabled = True
        await client.session.send_notification(RootsListChangedNotification())
        assert await read(client, tree.project / "hello.txt") == (False, "hello from project")


# --- nothing configured ------------------------------------------------------------------------------------


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_no_configuration_started_from_a_fake_home_refuses_and_says_how_to_configure(
    transport: str, tree: Tree, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    home = tree.base / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY")
    config = tree.base / "xdg"
    env = clean_env(HOME=str(home), XDG_CONFIG_HOME=str(config))
    monkeypatch.chdir(home)
    caplog.set_level(logging.WARNING, logger="mcp_roots")
    guard_kwargs = {"environ": {"HOME": str(home)}, "user_config_dir": config / "mcp-roots"}
    # A client without the roots capability: on main it got the working directory, here '~'.
    async with connect(transport, guard_kwargs, [], None, env=env, cwd=home) as client:
        refused, text = await read(client, home / ".ssh" / "id_ed25519")
        assert refused is True
        assert "PRIVATE KEY" not in text
        # The refusal goes to the model: short, and nothing of the server's configuration or home.
        assert text.endswith(
            "This server has no folders for this client: it sends no roots, and none are set up for it."
        )
        assert len(text) <= 200
        for operator_detail in ("--roots", "MCP_ROOTS", "RootsGuard", str(home), str(config)):
            assert operator_detail not in text
        assert (await read(client, "id_ed25519"))[0] is True
    if transport == "memory":
        said = [
            r.getMessage() for r in caplog.records if "no fallback roots are configured" in r.getMessage()
        ]
        assert len(said) == 1  # once, at startup, in the server's log, naming what a library server uses
        assert "RootsGuard(roots=[...])" in said[0]
        assert "MCP_ROOTS" in said[0]
        assert "--roots" not in said[0]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_project_file_naming_the_filesystem_root_grants_nothing(transport: str, tree: Tree) -> None:
    (tree.project / "mcp-roots.json").write_text('{"roots": [{"path": "/"}]}')
    env = clean_env(XDG_CONFIG_HOME=str(tree.base / "xdg"))
    guard_kwargs = {"project_root": tree.project, "user_config_dir": tree.base / "xdg" / "mcp-roots"}
    async with connect(transport, guard_kwargs, ["--project", str(tree.project)], None, env=env) as client:
        for path in ("/etc/passwd", tree.outside / "secret.txt", tree.project / "hello.txt"):
            refused, text = await read(client, path)
            assert refused is True, text
            assert "root:" not in text
            assert "TOP SECRET" not in text


@pytest.mark.parametrize("option", ["--roots", "--ceiling"])
def test_the_example_servers_empty_roots_and_ceiling_are_errors(option: str, tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(FILE_SERVER), option, ""],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=clean_env(),
        stdin=subprocess.DEVNULL,
        cwd=tmp_path,
    )
    assert proc.returncode == 2
    assert f"argument {option}: '' names no path" in proc.stderr
    assert "Traceback" not in proc.stderr


# --- the log says what happened ----------------------------------------------------------------------------


async def test_an_empty_client_list_is_logged_as_no_roots_not_as_a_fallback(
    tree: Tree, caplog: pytest.LogCaptureFixture
) -> None:
    guard_kwargs, args = configured(tree)
    caplog.set_level(logging.DEBUG, logger="mcp_roots")

    async with connect("memory", guard_kwargs, args, RootsCallback()) as client:
        for _ in range(3):
            assert (await read(client, tree.fallback / "fb.txt"))[0] is True
    messages = [r.getMessage() for r in caplog.records if r.name == "mcp_roots"]
    assert any("the client granted no roots; every path is refused" in m for m in messages)
    assert not any("fallback roots from" in m for m in messages)
    refusals = [r for r in caplog.records if r.getMessage().startswith("refused read_text()")]
    assert [r.levelno for r in refusals] == [logging.INFO, logging.DEBUG, logging.DEBUG]


# --- an expensive hostile answer does not stall the event loop ------------------------------------------


def expensive_uris(base: Path, target: Path, count: int) -> list[str]:
    """``count`` distinct URIs of one directory, each through a chain of 40 symbolic links (distinct
    spellings by doubled slashes: creating thousands of links costs seconds here)."""
    previous = target
    for hop in range(39):
        link = base / f"hop-{hop}"
        link.symlink_to(previous)
        previous = link
    return [path_to_uri(str(previous.parent)) + "/" * (i + 1) + previous.name for i in range(count)]


class LagProbe:
    """Measures the event loop's lag: how late a 5 ms sleep wakes up, at worst (wall clock), and how much
    CPU the loop's own thread spent between two wake-ups, at worst (the time during which no other
    connection's message could be handled because the loop was busy, whatever the machine's load)."""

    def __init__(self) -> None:
        self.worst = 0.0
        self.worst_busy = 0.0
        self.samples = 0

    async def run(self) -> None:
        while True:
            started, cpu = anyio.current_time(), time.thread_time()
            await anyio.sleep(0.005)
            self.worst = max(self.worst, anyio.current_time() - started - 0.005)
            self.worst_busy = max(self.worst_busy, time.thread_time() - cpu)
            self.samples += 1


@pytest.mark.parametrize(("era", "count"), [("modern", 3000), ("modern", 1000), ("legacy", 1000)])
async def test_a_hostile_expensive_answer_never_stalls_another_connection(
    tree: Tree, era: str, count: int
) -> None:
    chains = tree.base / "chains"
    chains.mkdir()
    uris = expensive_uris(chains, tree.other, count)  # the attacker's own folder, the long way round
    server = file_server.build_server(RootsGuard([tree.fallback], timeout=5.0))

    # Built ahead: validating 3,000 URLs costs the attacker's *client* ~0.25 s, and in memory that client
    # shares the server's event loop; what is measured is the server's handling of the answer.
    answer = ListRootsResult(roots=[Root(uri=FileUrl(uri)) for uri in uris])

    hostile = RootsCallback(answer=lambda: answer)

    probe = LagProbe()
    latencies: list[float] = []
    hostile_result: list[tuple[bool, str]] = []
    mode = "auto" if era == "modern" else "legacy"
    async with (
        Client(server, mode="legacy", list_roots_callback=RootsCallback(tree.project)) as honest,
        Client(server, mode=mode, list_roots_callback=hostile) as attacker,
        anyio.create_task_group() as tg,
    ):
        assert (await read(honest, tree.project / "hello.txt"))[0] is False  # connected and warm
        async with Client(server, mode=mode, list_roots_callback=RootsCallback(tree.other)) as warm:
            # The same era's first call, honest: lazy imports and first-use costs are not the attacker's.
            assert (await read(warm, tree.other / "other.txt"))[0] is False
        # A full collection of this test process's heap (pytest, the SDK, pydantic) takes ~0.1 s here, at a
        # moment no server controls: take it now and freeze what exists, so the probe measures the server.
        gc.collect()
        gc.freeze()
        tg.start_soon(probe.run)

        async def attack() -> None:
            hostile_result.append(await read(attacker, tree.outside / "secret.txt"))

        async with anyio.create_task_group() as attack_group:
            attack_group.start_soon(attack)
            while not hostile_result:
                started = anyio.current_time()
                assert await read(honest, tree.project / "hello.txt") == (False, "hello from project")
                latencies.append(anyio.current_time() - started)
        tg.cancel_scope.cancel()
    gc.unfreeze()
    refused, text = hostile_result[0]
    assert refused is True
    assert "TOP SECRET" not in text
    if count > 1000:
        assert "malformed" in text
    assert probe.samples > 0
    # The bound: the loop never spent over 100 ms of its own CPU between two wake-ups (on main: 1.1-3.3 s).
    # The wall-clock lag also counts the time a loaded machine (8 test runs on 2 cores) did not schedule
    # this process at all, so it is held to a looser bound that still catches any real stall.
    lag = f"worst wall-clock lag {probe.worst:.3f}s, worst loop CPU between wake-ups {probe.worst_busy:.3f}s"
    assert probe.worst_busy < 0.1, lag
    assert probe.worst < 1.0, lag
    # The honest connection kept being served while the attack was handled. (Its calls' latency also
    # includes the in-memory attacker's own client-side work on this same loop, so the bound is on the lag.)
    assert latencies, "no honest call completed during the attack"


async def test_the_lag_probe_sees_roots_resolved_on_the_event_loop(tree: Tree) -> None:
    # The control: what main did (the same 1,000 expensive entries resolved on the event loop) is a stall
    # the probe reports, so the bound above can fail.
    chains = tree.base / "chains"
    chains.mkdir()
    uris = expensive_uris(chains, tree.other, 1000)
    probe = LagProbe()
    async with anyio.create_task_group() as tg:
        tg.start_soon(probe.run)
        await anyio.sleep(0.02)
        RootSet.from_uris(uris, strict=False, source="client")  # on the loop, as main did
        await anyio.sleep(0.02)
        tg.cancel_scope.cancel()
    assert probe.worst_busy >= 0.1, f"the probe missed a {probe.worst_busy:.3f}s stall"
