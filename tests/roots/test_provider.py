"""RootsProvider against the real SDK: an in-memory MCPServer asks roots/list and records list_changed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import mcp_types
import pytest
from mcp import Client
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPError

from mcp_roots import ConsentRequest, RootsProvider, path_to_uri, uri_to_path
from tests.kit import ManualClock

pytestmark = pytest.mark.anyio

# The poller and the debounce wait on a manual clock (tests/kit.py) wherever a test attaches the
# provider: "20 polls later" or "after the debounce window" cost no wall-clock time and no margin.
FAST: dict[str, Any] = {"poll_interval": 0.02, "debounce": 0.05}


@dataclass
class Probe:
    """A real MCPServer whose tool asks the client for roots/list and whose notification handler counts
    notifications/roots/list_changed."""

    server: MCPServer = field(default_factory=lambda: MCPServer("probe-server"))
    list_changed: list[float] = field(default_factory=list)
    arrived: anyio.Event = field(default_factory=anyio.Event)

    def __post_init__(self) -> None:
        async def on_list_changed(ctx: Any, params: Any) -> None:
            self.list_changed.append(anyio.current_time())
            self.arrived.set()

        self.server._lowlevel_server.add_notification_handler(
            "notifications/roots/list_changed", mcp_types.NotificationParams, on_list_changed
        )

        @self.server.tool()
        async def ask_roots(ctx: Context) -> str:
            try:
                result = await ctx.session.send_request(
                    mcp_types.ListRootsRequest(), mcp_types.ListRootsResult
                )
            except MCPError as exc:
                return json.dumps({"error": exc.error.code, "message": exc.error.message})
            return json.dumps({"roots": [{"uri": str(r.uri), "name": r.name} for r in result.roots]})

    async def roots(self, client: Client) -> dict[str, Any]:
        result = await client.call_tool("ask_roots", {})
        block = result.content[0]
        assert isinstance(block, mcp_types.TextContent)
        answer: dict[str, Any] = json.loads(block.text)
        return answer

    async def wait_for_notifications(self, count: int, clock: ManualClock) -> None:
        """Move the manual clock on until ``count`` notifications have arrived. The poller examines the
        roots in a worker thread, which no clock steps: the real-time limit only bounds a failing test."""
        with anyio.fail_after(10):
            while len(self.list_changed) < count:
                await clock.advance(0.05)
                await anyio.sleep(0.001)  # let a worker thread finish


async def run_for(clock: ManualClock, seconds: float, step: float = FAST["poll_interval"]) -> None:
    """Move the manual clock on by ``seconds`` in poll-sized steps, giving a worker thread (the poller's
    examination) a moment of real time at each, so that what would happen in that time, happens."""
    for _ in range(round(seconds / step)):
        await clock.advance(step)
        await anyio.sleep(0.001)


def uris(answer: dict[str, Any]) -> list[str]:
    return [r["uri"] for r in answer["roots"]]


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    a, b = tmp_path / "alpha", tmp_path / "beta"
    a.mkdir()
    b.mkdir()
    return a, b


async def test_root_deleted_on_disk_disappears_and_triggers_one_list_changed(
    dirs: tuple[Path, Path], clock: ManualClock
) -> None:
    a, b = dirs
    probe = Probe()
    provider = RootsProvider([a, (b, "Beta")], **FAST, clock=clock)
    async with (
        Client(probe.server, mode="legacy", list_roots_callback=provider) as client,
        provider.attach(client),
    ):
        assert uris(await probe.roots(client)) == [path_to_uri(a), path_to_uri(b)]
        shutil.rmtree(b)
        await probe.wait_for_notifications(1, clock)
        await run_for(clock, 20 * FAST["poll_interval"])  # many more polls: still one notification
        assert len(probe.list_changed) == 1
        assert uris(await probe.roots(client)) == [path_to_uri(a)]
    assert "does not exist" in provider.refused[str(b)]


async def test_deleted_root_is_gone_from_an_answer_even_before_the_poller_sees_it(
    dirs: tuple[Path, Path], clock: ManualClock
) -> None:
    a, b = dirs
    probe = Probe()
    provider = RootsProvider([a, b], poll_interval=3600, clock=clock)  # the poller never runs here
    async with (
        Client(probe.server, mode="legacy", list_roots_callback=provider) as client,
        provider.attach(client),
    ):
        assert len(uris(await probe.roots(client))) == 2
        b.rmdir()
        assert uris(await probe.roots(client)) == [path_to_uri(a)]
        await run_for(clock, 0.2)  # four debounce windows
        assert probe.list_changed == []  # the server already has the new list: nothing to announce


async def test_consent_denied_exposes_no_roots(dirs: tuple[Path, Path]) -> None:
    asked: list[ConsentRequest] = []

    def deny(request: ConsentRequest) -> bool:
        asked.append(request)
        return False

    probe = Probe()
    provider = RootsProvider(dirs, consent=deny, **FAST)
    async with Client(probe.server, mode="legacy", list_roots_callback=provider) as client:
        assert await probe.roots(client) == {"roots": []}
        assert await probe.roots(client) == {"roots": []}
    assert len(asked) == 1, "a denial is remembered for the connection, not asked again"
    assert asked[0].server is not None
    assert asked[0].server.name == "probe-server"
    assert [r.path for r in asked[0].roots] == [p.resolve() for p in dirs]


async def test_concurrent_roots_requests_share_one_consent_prompt(
    dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    prompts: list[ConsentRequest] = []
    answer = anyio.Event()

    async def slow_yes(request: ConsentRequest) -> bool:
        prompts.append(request)
        await answer.wait()  # the user is still deciding
        return True

    probe = Probe()
    provider = RootsProvider(dirs, consent=slow_yes, **FAST)
    # A spy on the consent step (it delegates unchanged) tells when all five requests have reached it.
    deciding: list[object] = []
    real_approved_roots = provider.approved_roots

    async def approved_roots(session: Any) -> Any:
        deciding.append(session)
        return await real_approved_roots(session)

    monkeypatch.setattr(provider, "approved_roots", approved_roots)
    answers: list[dict[str, Any]] = []
    async with Client(probe.server, mode="legacy", list_roots_callback=provider) as client:

        async def ask() -> None:
            answers.append(await probe.roots(client))

        async with anyio.create_task_group() as tg:
            for _ in range(5):
                tg.start_soon(ask)
            with anyio.fail_after(10):  # the roots are examined in worker threads first
                while len(deciding) < 5:  # noqa: ASYNC110
                    await anyio.sleep(0.001)
            await anyio.wait_all_tasks_blocked()  # the first on the prompt, the other four behind it
            assert len(prompts) == 1
            answer.set()
    assert len(prompts) == 1
    assert all(len(uris(a)) == 2 for a in answers)
    assert len(answers) == 5


async def test_reset_consent_asks_again_and_announces_it(dirs: tuple[Path, Path], clock: ManualClock) -> None:
    answers = [False, True]

    def decide(request: ConsentRequest) -> bool:
        return answers.pop(0)

    probe = Probe()
    provider = RootsProvider(dirs, consent=decide, **FAST, clock=clock)
    async with (
        Client(probe.server, mode="legacy", list_roots_callback=provider) as client,
        provider.attach(client),
    ):
        assert await probe.roots(client) == {"roots": []}
        provider.reset_consent()
        await probe.wait_for_notifications(1, clock)
        assert len(uris(await probe.roots(client))) == 2
    assert answers == []


async def test_consent_for_a_subset_exposes_only_that_subset(dirs: tuple[Path, Path]) -> None:
    a, _ = dirs

    async def approve_alpha(request: ConsentRequest) -> list[str]:
        await anyio.lowlevel.checkpoint()
        return [str(a)]

    probe = Probe()
    provider = RootsProvider(dirs, consent=approve_alpha, **FAST)
    async with Client(probe.server, mode="legacy", list_roots_callback=provider) as client:
        assert uris(await probe.roots(client)) == [path_to_uri(a)]


async def test_consent_callback_that_raises_is_a_refusal(dirs: tuple[Path, Path]) -> None:
    def broken(request: ConsentRequest) -> bool:
        raise RuntimeError("dialog crashed")

    probe = Probe()
    provider = RootsProvider(dirs, consent=broken, **FAST)
    async with Client(probe.server, mode="legacy", list_roots_callback=provider) as client:
        assert await probe.roots(client) == {"roots": []}


async def test_a_root_added_later_is_announced_and_asked_about_alone(
    tmp_path: Path, clock: ManualClock
) -> None:
    first, later = tmp_path / "first", tmp_path / "later"
    first.mkdir()
    later.mkdir()
    offered: list[list[Path]] = []

    def approve(request: ConsentRequest) -> bool:
        offered.append([r.path for r in request.roots])
        return True

    probe = Probe()
    provider = RootsProvider([first], consent=approve, **FAST, clock=clock)
    async with (
        Client(probe.server, mode="legacy", list_roots_callback=provider) as client,
        provider.attach(client),
    ):
        assert uris(await probe.roots(client)) == [path_to_uri(first)]
        root = provider.add(later, "Later")
        assert root is not None
        assert root.name == "Later"
        await probe.wait_for_notifications(1, clock)
        answer = await probe.roots(client)
        assert uris(answer) == [path_to_uri(first), path_to_uri(later)]
        assert answer["roots"][1]["name"] == "Later"
        assert provider.remove(later)
        await probe.wait_for_notifications(2, clock)
        assert uris(await probe.roots(client)) == [path_to_uri(first)]
    assert offered == [[first.resolve()], [later.resolve()]]


async def test_a_root_replaced_by_a_file_is_refused_and_announced(
    dirs: tuple[Path, Path], clock: ManualClock
) -> None:
    a, b = dirs
    probe = Probe()
    provider = RootsProvider([a, b], **FAST, clock=clock)
    async with (
        Client(probe.server, mode="legacy", list_roots_callback=provider) as client,
        provider.attach(client),
    ):
        await probe.roots(client)
        b.rmdir()
        b.write_text("not a directory any more")
        await probe.wait_for_notifications(1, clock)
        assert uris(await probe.roots(client)) == [path_to_uri(a)]
    assert provider.refused == {str(b): f"root {str(b)!r} is not a directory"}


async def test_disabled_provider_answers_method_not_found(dirs: tuple[Path, Path]) -> None:
    probe = Probe()
    provider = RootsProvider(dirs, enabled=False, **FAST)
    async with Client(probe.server, mode="legacy", list_roots_callback=provider) as client:
        answer = await probe.roots(client)
        assert answer["error"] == mcp_types.METHOD_NOT_FOUND == -32601
        provider.enabled = True
        assert len(uris(await probe.roots(client))) == 2


async def test_switching_roots_off_is_announced(dirs: tuple[Path, Path], clock: ManualClock) -> None:
    probe = Probe()
    provider = RootsProvider(dirs, **FAST, clock=clock)
    async with (
        Client(probe.server, mode="legacy", list_roots_callback=provider) as client,
        provider.attach(client),
    ):
        await probe.roots(client)
        provider.enabled = False
        await probe.wait_for_notifications(1, clock)
        assert (await probe.roots(client))["error"] == -32601


async def test_changes_undone_within_the_debounce_window_send_nothing(
    dirs: tuple[Path, Path], clock: ManualClock
) -> None:
    a, b = dirs
    probe = Probe()
    provider = RootsProvider([a], poll_interval=3600, debounce=0.2, clock=clock)
    async with (
        Client(probe.server, mode="legacy", list_roots_callback=provider) as client,
        provider.attach(client),
    ):
        await probe.roots(client)
        for _ in range(50):  # a burst of changes that ends where it started
            provider.add(b)
            provider.remove(b)
        await run_for(clock, 0.5)
        assert probe.list_changed == []
        for _ in range(50):  # a burst that ends changed: exactly one notification
            provider.add(b)
            provider.remove(b)
        provider.add(b)
        await probe.wait_for_notifications(1, clock)
        await run_for(clock, 0.4)
        assert len(probe.list_changed) == 1


async def test_leaving_attach_stops_the_watcher(dirs: tuple[Path, Path], clock: ManualClock) -> None:
    a, b = dirs
    probe = Probe()
    provider = RootsProvider([a, b], **FAST, clock=clock)
    async with Client(probe.server, mode="legacy", list_roots_callback=provider) as client:
        async with provider.attach(client):
            await probe.roots(client)
        shutil.rmtree(b)
        await run_for(clock, 0.3)  # 15 poll intervals
        assert probe.list_changed == []
        async with provider.attach(client.session):  # re-attachable, to the ClientSession too
            await probe.wait_for_notifications(1, clock)


async def test_attaching_twice_to_one_session_is_refused(dirs: tuple[Path, Path]) -> None:
    probe = Probe()
    provider = RootsProvider(dirs, **FAST)
    async with (
        Client(probe.server, mode="legacy", list_roots_callback=provider) as client,
        provider.attach(client),
    ):
        with pytest.raises(RuntimeError, match="already attached"):
            async with provider.attach(client):
                pass


@pytest.mark.parametrize("name", ["with space", "50%", "naïve", "a#b?c", "[x]"])
async def test_root_uris_round_trip_to_the_same_directory(tmp_path: Path, name: str) -> None:
    d = tmp_path / name
    d.mkdir()
    probe = Probe()
    provider = RootsProvider([d])
    async with Client(probe.server, mode="legacy", list_roots_callback=provider) as client:
        (uri,) = uris(await probe.roots(client))
    assert Path(uri_to_path(uri)) == d.resolve()


def test_refusals_name_the_path_and_the_reason(tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    ok = tmp_path / "ok"
    ok.mkdir()
    provider = RootsProvider([missing, a_file, fifo, ok])
    assert [r.path for r in provider.roots] == [ok.resolve()]
    assert provider.refused == {
        str(missing): f"root {str(missing)!r} does not exist",
        str(a_file): f"root {str(a_file)!r} is not a directory",
        str(fifo): f"root {str(fifo)!r} is neither a directory nor a regular file",
    }
    assert provider.chosen == (str(missing), str(a_file), str(fifo), str(ok))
    assert provider.add(tmp_path / "still-missing") is None
    missing.mkdir()
    assert provider.check() is True
    assert str(missing) not in provider.refused


# --- unreadable directories ---------------------------------------------------------------------------
#
# The readability check is os.access(R_OK | X_OK), which root always passes. As root, the test imports
# the library, then drops to an unprivileged uid in a subprocess and checks a chmod 000 directory next
# to a readable control: the control must be exposed, so the refusal is the permission check and not an
# unreachable parent.

_UNPRIVILEGED_CHECK = textwrap.dedent(
    """
    import json, os, sys
    from mcp_roots import RootsProvider
    locked, control = sys.argv[1], sys.argv[2]
    if os.geteuid() == 0:
        os.setgroups([])
        os.setresgid(65534, 65534, 65534)
        os.setresuid(65534, 65534, 65534)
    provider = RootsProvider([locked, control])
    print(json.dumps({"uid": os.geteuid(), "roots": [str(r.path) for r in provider.roots],
                      "refused": provider.refused}))
    """
)


@pytest.fixture
def world_traversable_dir() -> Iterator[Path]:
    base = Path(tempfile.mkdtemp(prefix="mcp-roots-perm-", dir="/tmp"))
    base.chmod(0o755)
    try:
        yield base
    finally:
        shutil.rmtree(base)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX permissions")
def test_unreadable_directory_is_refused_with_a_reason(world_traversable_dir: Path) -> None:
    locked = world_traversable_dir / "locked"
    control = world_traversable_dir / "control"
    locked.mkdir(mode=0o755)
    control.mkdir(mode=0o755)
    locked.chmod(0)
    try:
        out = subprocess.run(
            [sys.executable, "-c", _UNPRIVILEGED_CHECK, str(locked), str(control)],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
    finally:
        locked.chmod(0o755)
    report = json.loads(out.stdout)
    assert report["uid"] != 0, "the check must run without root's permission bypass"
    assert report["roots"] == [str(control)]
    assert report["refused"] == {str(locked): f"root {str(locked)!r} cannot be read (permission denied)"}


def test_invalid_chosen_paths_raise() -> None:
    bad: list[Callable[[], object]] = [
        lambda: RootsProvider([""]),
        lambda: RootsProvider(["a\x00b"]),
        lambda: RootsProvider([42]),  # type: ignore[list-item]
    ]
    for make in bad:
        with pytest.raises(ValueError, match="not a usable path"):
            make()
    with pytest.raises(ValueError, match="poll_interval"):
        RootsProvider(poll_interval=0)
