"""RootsCache: the legacy-era roots lifecycle, driven by a fake client's fetch function on asyncio and trio.

The fetch function is the cache's seam to the transport (the guard passes one that sends roots/list), so a
scripted fake client is the real input here, not a mock of the cache. Roots are real temporary directories.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from types import SimpleNamespace

import anyio
import pytest

from mcp_roots import RootsCache, RootSet, path_to_uri
from mcp_roots._cache import MAX_ROOTS

pytestmark = pytest.mark.anyio

Answer = dict[str, object]
Behaviour = Callable[[Answer], Awaitable[object]]


def answer_for(paths: list[Path]) -> Answer:
    return {"roots": [{"uri": path_to_uri(str(p)), "name": p.name} for p in paths]}


class FakeClient:
    """A client's side of roots/list: its roots now, and optionally a scripted behaviour per request."""

    def __init__(self, roots: list[Path], latency: float = 0.0) -> None:
        self.roots = list(roots)
        self.latency = latency
        self.calls = 0
        self.cancelled = 0
        self.script: list[Behaviour] = []
        self.returned: list[tuple[int, Answer | object]] = []  # (call number, answer) in return order

    async def fetch(self) -> object:
        self.calls += 1
        call = self.calls
        snapshot = answer_for(self.roots)  # a client answers with its roots when the request arrives
        behaviour = self.script.pop(0) if self.script else None
        try:
            if behaviour is not None:
                result = await behaviour(snapshot)
            else:
                if self.latency:
                    await anyio.sleep(self.latency)
                result = snapshot
        except anyio.get_cancelled_exc_class():
            self.cancelled += 1
            raise
        self.returned.append((call, result))
        return result


def paths_of(roots: RootSet) -> list[Path]:
    return list(roots.paths)


@pytest.fixture
def dirs(tmp_path: Path) -> dict[str, Path]:
    made = {}
    for name in ("fallback", "a", "b", "c", "d"):
        (tmp_path / name).mkdir()
        made[name] = (tmp_path / name).resolve()
    return made


def make_cache(client: FakeClient, dirs: dict[str, Path], **kwargs: object) -> RootsCache:
    options: dict[str, object] = {"debounce": 0.01, "max_wait": 0.05, "timeout": 1.0}
    options.update(kwargs)
    cache = RootsCache(
        client.fetch,
        fallback=RootSet.from_paths([dirs["fallback"]], source="fallback"),
        **options,  # type: ignore[arg-type]
    )
    return cache


@asynccontextmanager
async def running(
    cache: RootsCache, *, roots: bool = True, list_changed: bool = True
) -> AsyncIterator[RootsCache]:
    """A connection's life: initialize (capabilities), the worker, initialized (start)."""
    cache.set_capabilities(roots=roots, list_changed=list_changed)
    async with cache:
        cache.start()
        yield cache


async def until(condition: Callable[[], bool], limit: float = 2.0) -> None:
    # Polls what a user can observe from outside the cache; there is no event to wait on there.
    with anyio.fail_after(limit):
        while not condition():  # noqa: ASYNC110
            await anyio.sleep(0.002)


def failure_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "mcp_roots"
        and r.levelno == logging.WARNING
        and r.getMessage().startswith("roots/list #")
    ]


# --- the first answer ----------------------------------------------------------------------------------


async def test_initial_fetch_applies_the_client_roots(dirs: dict[str, Path]) -> None:
    client = FakeClient([dirs["a"], dirs["b"]])
    async with running(make_cache(client, dirs)) as cache:
        roots = await cache.fresh()
        assert paths_of(roots) == [dirs["a"], dirs["b"]]
        assert roots.source == "client"
        assert cache.current() is roots
        assert client.calls == 1


async def test_no_roots_capability_sends_no_request(dirs: dict[str, Path]) -> None:
    client = FakeClient([dirs["a"]])
    cache = make_cache(client, dirs)
    cache.set_capabilities(roots=False, list_changed=False)
    with anyio.fail_after(1):
        await cache.run()  # nothing to do: returns at once
    async with cache:
        cache.start()
        cache.notify_changed()
        assert paths_of(await cache.fresh()) == [dirs["fallback"]]
        await anyio.sleep(0.1)
    assert client.calls == 0
    assert cache.current().source == "fallback"


async def test_start_before_set_capabilities_is_refused(dirs: dict[str, Path]) -> None:
    cache = make_cache(FakeClient([]), dirs)
    with pytest.raises(RuntimeError, match="set_capabilities"):
        cache.start()


async def test_first_answer_that_never_comes_gives_fallback_within_bound_then_later_answer_applies(
    dirs: dict[str, Path], caplog: pytest.LogCaptureFixture
) -> None:
    client = FakeClient([dirs["a"]])
    released = anyio.Event()

    async def slow(snapshot: Answer) -> object:
        await released.wait()
        return snapshot

    client.script.append(slow)
    caplog.set_level(logging.INFO, logger="mcp_roots")
    async with running(make_cache(client, dirs, timeout=5.0, first_answer_timeout=0.15)) as cache:
        t0 = anyio.current_time()
        roots = await cache.fresh()
        waited = anyio.current_time() - t0
        assert paths_of(roots) == [dirs["fallback"]]
        assert 0.14 <= waited < 1.0
        assert any("has not answered roots/list" in r.getMessage() for r in caplog.records)
        # Once the budget is spent, tool calls do not wait again for the same first answer.
        t1 = anyio.current_time()
        assert paths_of(await cache.fresh()) == [dirs["fallback"]]
        assert anyio.current_time() - t1 < 0.05
        released.set()
        await until(lambda: cache.current().source == "client")
        assert paths_of(await cache.fresh()) == [dirs["a"]]
        assert client.calls == 1
    assert any("answered roots/list #1 after the fallback was used" in r.getMessage() for r in caplog.records)


async def test_tool_call_before_start_waits_for_the_first_answer(dirs: dict[str, Path]) -> None:
    # A tool call can run before the initialized handler has called start(): it must not get the fallback.
    client = FakeClient([dirs["a"]])
    cache = make_cache(client, dirs)
    cache.set_capabilities(roots=True, list_changed=True)
    async with cache, anyio.create_task_group() as tg:
        seen: list[RootSet] = []

        async def tool_call() -> None:
            seen.append(await cache.fresh())

        tg.start_soon(tool_call)
        await anyio.sleep(0.05)
        assert seen == []
        cache.start()
    assert paths_of(seen[0]) == [dirs["a"]]


# --- storms, debounce and single flight ------------------------------------------------------------------


@pytest.mark.parametrize("yield_every", [10_000, 1_000, 100])
async def test_storm_of_10000_notifications_costs_few_requests_and_ends_on_the_last_answer(
    dirs: dict[str, Path], yield_every: int
) -> None:
    choices = [dirs["a"], dirs["b"], dirs["c"], dirs["d"]]
    client = FakeClient([choices[0]], latency=0.001)
    async with running(make_cache(client, dirs, debounce=0.02, max_wait=0.1)) as cache:
        await cache.fresh()
        for i in range(1, 10_001):
            client.roots = [choices[i % 4], choices[(i + 1) % 4]]
            cache.notify_changed()
            if i % yield_every == 0:
                await anyio.lowlevel.checkpoint()
        final = [choices[10_000 % 4], choices[10_001 % 4]]
        assert paths_of(await cache.fresh()) == final
        assert paths_of(cache.current()) == final
        await anyio.sleep(0.15)  # nothing more is pending
    assert client.calls <= 5, client.calls
    assert client.calls >= 2  # the first answer and at least one refresh


async def test_steady_stream_cannot_starve_the_refresh(dirs: dict[str, Path]) -> None:
    # Notifications every 5 ms never leave a 20 ms quiet gap, so only max_wait makes the refresh go out.
    client = FakeClient([dirs["a"]])
    async with running(make_cache(client, dirs, debounce=0.02, max_wait=0.06)) as cache:
        await cache.fresh()
        client.roots = [dirs["b"]]
        for _ in range(60):  # about 0.3 s
            cache.notify_changed()
            await anyio.sleep(0.005)
            if paths_of(cache.current()) == [dirs["b"]]:
                break
        assert paths_of(cache.current()) == [dirs["b"]], "the stream starved the refresh"


async def test_debounce_is_trailing_edge(dirs: dict[str, Path]) -> None:
    client = FakeClient([dirs["a"]])
    async with running(make_cache(client, dirs, debounce=0.05, max_wait=1.0)) as cache:
        await cache.fresh()
        client.roots = [dirs["b"]]
        cache.notify_changed()
        await anyio.sleep(0.02)
        assert client.calls == 1  # still inside the quiet period
        await until(lambda: client.calls == 2, limit=0.5)
        assert paths_of(await cache.fresh()) == [dirs["b"]]


async def test_notification_during_a_request_causes_exactly_one_follow_up(dirs: dict[str, Path]) -> None:
    client = FakeClient([dirs["a"]])
    in_flight = anyio.Event()
    release = anyio.Event()

    async def held(snapshot: Answer) -> object:
        in_flight.set()
        await release.wait()
        return snapshot

    async with running(make_cache(client, dirs)) as cache:
        await cache.fresh()
        client.script.append(held)
        client.roots = [dirs["b"]]
        cache.notify_changed()
        await in_flight.wait()
        client.roots = [dirs["c"]]
        for _ in range(3):
            cache.notify_changed()
            await anyio.sleep(0.01)
        await anyio.sleep(0.1)
        assert client.calls == 2  # single flight: nothing overlaps the held request
        release.set()
        assert paths_of(await cache.fresh()) == [dirs["c"]]
        await anyio.sleep(0.15)
    assert client.calls == 3, "expected the first answer, the held request and exactly one follow-up"


# --- generations -----------------------------------------------------------------------------------------


async def test_late_answer_to_a_timed_out_request_is_dropped_after_a_newer_one(
    dirs: dict[str, Path],
) -> None:
    client = FakeClient([dirs["a"]])
    release_late = anyio.Event()

    async def ignores_cancellation(snapshot: Answer) -> object:
        # A transport that does not honour cancellation: the answer to request #1 still comes back.
        with anyio.CancelScope(shield=True), anyio.move_on_after(2):  # bounded: a failing test must not hang
            await release_late.wait()
        return snapshot

    client.script.append(ignores_cancellation)
    changes: list[tuple[list[Path], list[Path]]] = []
    async with running(make_cache(client, dirs, timeout=0.1)) as cache:
        cache.on_change(lambda old, new: changes.append((paths_of(old), paths_of(new))))
        await until(lambda: client.calls == 1)
        client.roots = [dirs["b"]]  # request #1 carries [a]; the client moves on to [b]
        await anyio.sleep(0.15)  # request #1 times out
        cache.notify_changed()
        assert paths_of(await cache.fresh()) == [dirs["b"]]  # request #2 answered and applied
        release_late.set()
        await until(lambda: len(client.returned) == 2)
        await anyio.sleep(0.02)
        assert paths_of(cache.current()) == [dirs["b"]]
    # The scenario really happened: the answer to #1 came back after #2's, so last-writer-wins would leak.
    assert [call for call, _ in client.returned] == [2, 1]
    naive_last_writer_wins = client.returned[-1][1]
    assert naive_last_writer_wins == answer_for([dirs["a"]])
    assert changes == [([dirs["fallback"]], [dirs["b"]])]


async def test_late_answer_with_nothing_newer_applies(dirs: dict[str, Path]) -> None:
    # Generations only drop answers older than an applied one: a slow first answer is still the newest.
    client = FakeClient([dirs["a"]])
    release = anyio.Event()

    async def ignores_cancellation(snapshot: Answer) -> object:
        with anyio.CancelScope(shield=True), anyio.move_on_after(2):  # bounded: a failing test must not hang
            await release.wait()
        return snapshot

    client.script.append(ignores_cancellation)
    async with running(make_cache(client, dirs, timeout=0.05)) as cache:
        await anyio.sleep(0.1)
        assert paths_of(cache.current()) == [dirs["fallback"]]
        release.set()
        await until(lambda: cache.current().source == "client")
        assert paths_of(cache.current()) == [dirs["a"]]


# --- failures keep the previous roots and never stop later refreshes ----------------------------------


async def test_timeout_keeps_previous_roots_then_next_notification_recovers(
    dirs: dict[str, Path], caplog: pytest.LogCaptureFixture
) -> None:
    client = FakeClient([dirs["a"]])

    async def never(snapshot: Answer) -> object:
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    async with running(make_cache(client, dirs, timeout=0.1)) as cache:
        assert paths_of(await cache.fresh()) == [dirs["a"]]
        for attempt in range(2):  # two timeouts in a row: the refresh does not wedge
            client.script.append(never)
            client.roots = [dirs["b"]]
            cache.notify_changed()
            assert paths_of(await cache.fresh()) == [dirs["a"]]
            assert client.calls == 2 + attempt
        client.roots = [dirs["c"]]
        cache.notify_changed()
        assert paths_of(await cache.fresh()) == [dirs["c"]]
    assert client.cancelled == 2  # each timed-out fetch was cancelled, not left running
    assert len(failure_warnings(caplog)) == 1
    assert "no answer within 0.1s" in failure_warnings(caplog)[0]


async def test_error_keeps_previous_roots_then_next_notification_recovers(dirs: dict[str, Path]) -> None:
    client = FakeClient([dirs["a"]])

    async def fails(snapshot: Answer) -> object:
        raise RuntimeError("JSON-RPC error -32603: internal error")

    async with running(make_cache(client, dirs)) as cache:
        assert paths_of(await cache.fresh()) == [dirs["a"]]
        client.script.append(fails)
        client.roots = [dirs["b"]]
        cache.notify_changed()
        assert paths_of(await cache.fresh()) == [dirs["a"]]
        cache.notify_changed()
        assert paths_of(await cache.fresh()) == [dirs["b"]]
        assert client.calls == 3


async def test_failed_first_answer_is_retried_by_a_later_tool_call_without_list_changed(
    dirs: dict[str, Path],
) -> None:
    # A client that declared roots without listChanged never sends a notification: after its first answer
    # failed, only a tool call can bring the roots back (mcp-bash's refresh stayed dead for the session).
    client = FakeClient([dirs["a"]])

    async def fails(snapshot: Answer) -> object:
        raise RuntimeError("JSON-RPC error -32603: not ready yet")

    client.script.append(fails)
    async with running(make_cache(client, dirs, timeout=0.1), list_changed=False) as cache:
        assert paths_of(await cache.fresh()) == [dirs["fallback"]]
        for _ in range(20):  # tool calls inside the retry interval do not hammer the client
            await cache.fresh()
        assert client.calls == 1
        await anyio.sleep(0.12)
        await cache.fresh()  # schedules the retry, does not wait for it
        await until(lambda: cache.current().source == "client")
        assert paths_of(await cache.fresh()) == [dirs["a"]]
    assert client.calls == 2


async def test_retries_of_a_failing_client_are_rate_limited(dirs: dict[str, Path]) -> None:
    client = FakeClient([dirs["a"]])

    async def fails(snapshot: Answer) -> object:
        raise RuntimeError("JSON-RPC error -32603")

    client.script.extend([fails] * 100)
    async with running(make_cache(client, dirs, timeout=0.1), list_changed=False) as cache:
        t0 = anyio.current_time()
        while anyio.current_time() - t0 < 0.5:
            await cache.fresh()
            await anyio.sleep(0.005)
    assert 3 <= client.calls <= 7, client.calls  # about one request per 0.1 s, not one per tool call


MALFORMED = [
    None,
    42,
    "roots",
    {},
    {"roots": None},
    {"roots": "file:///tmp"},
    {"roots": {"uri": "file:///tmp"}},
    SimpleNamespace(other=[]),
]


@pytest.mark.parametrize("payload", MALFORMED, ids=repr)
async def test_malformed_payload_keeps_previous_roots_then_recovers(
    dirs: dict[str, Path], payload: object, caplog: pytest.LogCaptureFixture
) -> None:
    client = FakeClient([dirs["a"]])

    async def malformed(snapshot: Answer) -> object:
        return payload

    async with running(make_cache(client, dirs)) as cache:
        assert paths_of(await cache.fresh()) == [dirs["a"]]
        client.script.append(malformed)
        client.roots = [dirs["b"]]
        cache.notify_changed()
        assert paths_of(await cache.fresh()) == [dirs["a"]]
        assert paths_of(cache.current()) == [dirs["a"]]
        cache.notify_changed()
        assert paths_of(await cache.fresh()) == [dirs["b"]]
    assert len(failure_warnings(caplog)) == 1
    assert "malformed" in failure_warnings(caplog)[0]


async def test_malformed_first_answer_keeps_the_fallback(dirs: dict[str, Path]) -> None:
    client = FakeClient([dirs["a"]])

    async def malformed(snapshot: Answer) -> object:
        return {"roots": "everything"}

    client.script.append(malformed)
    async with running(make_cache(client, dirs)) as cache:
        assert paths_of(await cache.fresh()) == [dirs["fallback"]]


async def test_warning_is_logged_once_per_failure_streak(
    dirs: dict[str, Path], caplog: pytest.LogCaptureFixture
) -> None:
    client = FakeClient([dirs["a"]])

    async def fails(snapshot: Answer) -> object:
        raise RuntimeError("JSON-RPC error -32603")

    caplog.set_level(logging.DEBUG, logger="mcp_roots")
    async with running(make_cache(client, dirs)) as cache:
        await cache.fresh()
        for streak in range(2):
            for _ in range(3):
                client.script.append(fails)
                cache.notify_changed()
                await cache.fresh()
            assert len(failure_warnings(caplog)) == streak + 1
            cache.notify_changed()  # succeeds: ends the streak
            await cache.fresh()
    assert client.calls == 1 + 2 * 4
    assert len(failure_warnings(caplog)) == 2
    recoveries = [r for r in caplog.records if "answered after 3 failed attempt(s)" in r.getMessage()]
    assert len(recoveries) == 2
    assert all(r.levelno == logging.INFO for r in recoveries)


# --- what an answer means -------------------------------------------------------------------------------


async def test_empty_list_means_no_roots_not_the_fallback(dirs: dict[str, Path]) -> None:
    client = FakeClient([])
    async with running(make_cache(client, dirs)) as cache:
        roots = await cache.fresh()
        assert len(roots) == 0
        assert roots.source == "client"
        assert not roots.contains(dirs["fallback"] / "x")
        assert not roots.contains(dirs["a"])


async def test_invalid_entries_are_dropped_and_valid_ones_kept(
    dirs: dict[str, Path], caplog: pytest.LogCaptureFixture
) -> None:
    client = FakeClient([])
    good = answer_for([dirs["a"], dirs["b"]])["roots"]
    assert isinstance(good, list)
    entries = [
        good[0],
        {"uri": "http://example.com/a"},
        {"uri": "file://otherhost/srv"},
        {"uri": path_to_uri(str(dirs["a"])) + "%2F..%2Fetc"},
        {"uri": path_to_uri(str(dirs["a"] / "missing"))},
        {"name": "no uri"},
        path_to_uri(str(dirs["c"])),  # a bare string is not a root object
        7,
        good[1],
    ]

    async def mixed(snapshot: Answer) -> object:
        return {"roots": entries}

    client.script.append(mixed)
    async with running(make_cache(client, dirs)) as cache:
        roots = await cache.fresh()
    assert paths_of(roots) == [dirs["a"], dirs["b"]]
    skipped = [
        r for r in caplog.records if r.levelno == logging.WARNING and "skipping root" in r.getMessage()
    ]
    assert len(skipped) == len(entries) - 2
    assert failure_warnings(caplog) == []


async def test_answer_with_too_many_entries_is_refused_whole(
    dirs: dict[str, Path], caplog: pytest.LogCaptureFixture
) -> None:
    client = FakeClient([dirs["a"]])

    async def flood(snapshot: Answer) -> object:
        return {"roots": [{"uri": path_to_uri(str(dirs["b"]))}] * (MAX_ROOTS + 1)}

    async with running(make_cache(client, dirs)) as cache:
        await cache.fresh()
        client.script.append(flood)
        cache.notify_changed()
        assert paths_of(await cache.fresh()) == [dirs["a"]]
    assert f"more than the {MAX_ROOTS} accepted" in failure_warnings(caplog)[0]


async def test_answer_object_with_roots_attribute_is_accepted(dirs: dict[str, Path]) -> None:
    client = FakeClient([])

    async def typed(snapshot: Answer) -> object:
        root = SimpleNamespace(uri=path_to_uri(str(dirs["d"])), name="D")
        return SimpleNamespace(roots=[root])

    client.script.append(typed)
    async with running(make_cache(client, dirs)) as cache:
        roots = await cache.fresh()
    assert paths_of(roots) == [dirs["d"]]
    assert roots.roots[0].name == "D"


async def test_transform_is_applied_to_every_client_answer(dirs: dict[str, Path]) -> None:
    ceiling = {dirs["a"], dirs["b"]}

    def clip(roots: RootSet) -> RootSet:
        return RootSet.from_paths([p for p in roots.paths if p in ceiling], source="client")

    client = FakeClient([dirs["a"], dirs["c"]])
    async with running(make_cache(client, dirs, transform=clip)) as cache:
        assert paths_of(await cache.fresh()) == [dirs["a"]]
        client.roots = [dirs["b"], dirs["d"]]
        cache.notify_changed()
        assert paths_of(await cache.fresh()) == [dirs["b"]]


async def test_on_change_reports_old_and_new_only_when_roots_change(dirs: dict[str, Path]) -> None:
    client = FakeClient([dirs["a"]])
    changes: list[tuple[list[Path], list[Path]]] = []
    cache = make_cache(client, dirs)
    cache.on_change(lambda old, new: changes.append((paths_of(old), paths_of(new))))
    async with running(cache):
        await cache.fresh()
        cache.notify_changed()  # same roots again
        await cache.fresh()
        client.roots = [dirs["b"]]
        cache.notify_changed()
        await cache.fresh()
    assert client.calls == 3
    assert changes == [([dirs["fallback"]], [dirs["a"]]), ([dirs["a"]], [dirs["b"]])]


async def test_on_change_refuses_async_callbacks(dirs: dict[str, Path]) -> None:
    async def listener(old: RootSet, new: RootSet) -> None:
        pass

    with pytest.raises(TypeError, match="plain function"):
        make_cache(FakeClient([]), dirs).on_change(listener)


# --- stale reads -----------------------------------------------------------------------------------------


async def test_tool_call_after_a_notification_sees_the_new_roots(dirs: dict[str, Path]) -> None:
    client = FakeClient([dirs["a"]], latency=0.01)
    async with running(make_cache(client, dirs)) as cache:
        await cache.fresh()
        client.roots = [dirs["b"]]  # the user removed folder a
        cache.notify_changed()
        stale = cache.current()  # the control: a read that does not wait still sees the removed folder
        fresh = await cache.fresh()
    assert paths_of(stale) == [dirs["a"]]
    assert paths_of(fresh) == [dirs["b"]]
    assert not fresh.contains(dirs["a"] / "secret.txt")


async def test_fresh_is_bounded_when_the_refresh_hangs(dirs: dict[str, Path]) -> None:
    client = FakeClient([dirs["a"]])

    async def never(snapshot: Answer) -> object:
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    async with running(make_cache(client, dirs, timeout=5.0)) as cache:
        await cache.fresh()
        client.script.append(never)
        cache.notify_changed()
        t0 = anyio.current_time()
        assert paths_of(await cache.fresh(0.1)) == [dirs["a"]]
        assert anyio.current_time() - t0 < 1.0


# --- unsupported and shutdown ----------------------------------------------------------------------------


async def test_mark_unsupported_releases_waiters_and_serves_the_fallback(dirs: dict[str, Path]) -> None:
    client = FakeClient([dirs["a"]])
    cache = make_cache(client, dirs, timeout=5.0)

    async def unsupported(snapshot: Answer) -> object:
        cache.mark_unsupported()  # what the guard's fetch does on -32601 before re-raising
        raise RuntimeError("-32601 Method not found")

    async def held(snapshot: Answer) -> object:
        await anyio.sleep(0.05)
        return await unsupported(snapshot)

    client.script.append(held)
    async with running(cache):
        with anyio.fail_after(1):
            roots = await cache.fresh()
        assert paths_of(roots) == [dirs["fallback"]]
        cache.notify_changed()
        await anyio.sleep(0.1)
        assert paths_of(await cache.fresh()) == [dirs["fallback"]]
    assert client.calls == 1


async def test_close_during_a_request_cancels_it_and_nothing_changes_after(dirs: dict[str, Path]) -> None:
    client = FakeClient([dirs["a"]])
    in_flight = anyio.Event()

    async def hangs(snapshot: Answer) -> object:
        in_flight.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    client.script.append(hangs)
    cache = make_cache(client, dirs)
    changes: list[object] = []
    cache.on_change(lambda old, new: changes.append(new))
    cache.set_capabilities(roots=True, list_changed=True)
    with anyio.fail_after(2):
        async with anyio.create_task_group() as tg:
            tg.start_soon(cache.run)
            cache.start()
            await in_flight.wait()
            await cache.aclose()
            # run() has returned: the task group exits without being cancelled from outside.
    assert client.cancelled == 1
    cache.notify_changed()
    cache.start()
    assert paths_of(await cache.fresh()) == [dirs["fallback"]]
    assert client.calls == 1
    assert changes == []


async def test_answer_arriving_after_close_is_not_applied(dirs: dict[str, Path]) -> None:
    client = FakeClient([dirs["a"]])
    in_flight = anyio.Event()
    release = anyio.Event()

    async def ignores_cancellation(snapshot: Answer) -> object:
        in_flight.set()
        with anyio.CancelScope(shield=True), anyio.move_on_after(2):  # bounded: a failing test must not hang
            await release.wait()
        return snapshot

    client.script.append(ignores_cancellation)
    cache = make_cache(client, dirs)
    cache.set_capabilities(roots=True, list_changed=True)
    closed = anyio.Event()

    async def close() -> None:
        await cache.aclose()
        closed.set()

    with anyio.fail_after(2):
        async with anyio.create_task_group() as tg:
            tg.start_soon(cache.run)
            cache.start()
            await in_flight.wait()
            tg.start_soon(close)
            await anyio.sleep(0.05)
            assert not closed.is_set()  # aclose() waits for the in-flight fetch to end
            release.set()
    assert closed.is_set()
    assert [call for call, _ in client.returned] == [1]  # the answer did come back...
    assert paths_of(cache.current()) == [dirs["fallback"]]  # ...and was not applied


async def test_aclose_from_inside_fetch_does_not_deadlock(dirs: dict[str, Path]) -> None:
    client = FakeClient([dirs["a"]])
    cache = make_cache(client, dirs)

    async def closes(snapshot: Answer) -> object:
        # A transport that tears the connection down while answering, inside a shielded section: aclose()
        # must not wait for the worker, which waits for this very fetch. (Bounded so a failure cannot hang.)
        with anyio.CancelScope(shield=True), anyio.move_on_after(1):
            await cache.aclose()
        return snapshot

    client.script.append(closes)
    cache.set_capabilities(roots=True, list_changed=True)
    t0 = anyio.current_time()
    with anyio.fail_after(2):
        async with anyio.create_task_group() as tg:
            tg.start_soon(cache.run)
            cache.start()
    assert anyio.current_time() - t0 < 0.5, "aclose() inside fetch waited for the worker"
    assert client.calls == 1
    assert paths_of(cache.current()) == [dirs["fallback"]]  # the answer came after close: not applied


async def test_run_refuses_to_run_twice(dirs: dict[str, Path]) -> None:
    cache = make_cache(FakeClient([dirs["a"]]), dirs)
    cache.set_capabilities(roots=True, list_changed=True)
    async with cache:
        await anyio.sleep(0.01)
        with pytest.raises(RuntimeError, match="already running"):
            await cache.run()


@pytest.mark.parametrize(
    ("option", "value"),
    [("debounce", -1), ("max_wait", 0.001), ("timeout", 0), ("first_answer_timeout", -0.5)],
)
def test_bad_settings_are_refused_with_their_name(dirs: dict[str, Path], option: str, value: float) -> None:
    with pytest.raises(ValueError, match=option):
        make_cache(FakeClient([]), dirs, **{option: value})


async def test_a_slow_answer_after_the_timeout_still_applies(dirs: dict[str, Path]) -> None:
    # An overloaded client answers later than the timeout: the tool call in between gets the fallback
    # (bounded wait), and the answer, when it comes, is applied rather than thrown away.
    # Answered 0.55 s after the request: past the 0.4 s timeout, well inside the one-timeout grace (0.8 s).
    client = FakeClient([dirs["a"]], latency=0.55)
    cache = make_cache(client, dirs, timeout=0.4)
    async with running(cache):
        with anyio.fail_after(2):
            assert paths_of(await cache.fresh()) == [dirs["fallback"]]
        await until(lambda: paths_of(cache.current()) == [dirs["a"]])
    assert client.calls == 1
    assert client.cancelled == 0


async def test_an_answer_later_than_two_timeouts_is_cancelled(dirs: dict[str, Path]) -> None:
    client = FakeClient([dirs["a"]], latency=5.0)
    cache = make_cache(client, dirs, timeout=0.1)
    async with running(cache):
        await until(lambda: client.cancelled == 1, limit=1.0)  # after one timeout of grace
        assert paths_of(cache.current()) == [dirs["fallback"]]
