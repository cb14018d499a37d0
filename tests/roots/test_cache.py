"""RootsCache: the legacy-era roots lifecycle, driven by a fake client's fetch function on asyncio and trio.

The fetch function is the cache's seam to the transport (the guard passes one that sends roots/list), so a
scripted fake client is the real input here, not a mock of the cache. Roots are real temporary directories.
Time is a manual clock (tests/kit.py): "after 3 x timeout" costs no wall-clock time and no margin.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from types import SimpleNamespace

import anyio
import pytest

from mcp_roots import RootsCache, RootSet, RootsUnavailable, path_to_uri
from mcp_roots.roots._answers import MAX_ROOTS
from mcp_roots.roots._cache import MAX_OUTSTANDING, Phase
from tests.kit import ManualClock

pytestmark = pytest.mark.anyio

Answer = dict[str, object]
Behaviour = Callable[[Answer], Awaitable[object]]
TIMEOUT = 1.0


def answer_for(paths: list[Path]) -> Answer:
    return {"roots": [{"uri": path_to_uri(str(p)), "name": p.name} for p in paths]}


class FakeClient:
    """A client's side of roots/list: its roots now, and optionally a scripted behaviour per request."""

    def __init__(self, roots: list[Path]) -> None:
        self.roots = list(roots)
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
            result = await behaviour(snapshot) if behaviour is not None else snapshot
        except anyio.get_cancelled_exc_class():
            self.cancelled += 1
            raise
        self.returned.append((call, result))
        return result


class Gate:
    """A scripted answer that waits until the test opens it (the host asking its user)."""

    def __init__(self, answer: object = None) -> None:
        self.opened = anyio.Event()
        self.entered = anyio.Event()
        self.answer = answer

    async def __call__(self, snapshot: Answer) -> object:
        self.entered.set()
        await self.opened.wait()
        return snapshot if self.answer is None else self.answer


def paths_of(roots: RootSet | None) -> list[Path]:
    return [] if roots is None else list(roots.paths)


@pytest.fixture
def dirs(tmp_path: Path) -> dict[str, Path]:
    made = {}
    for name in ("fallback", "a", "b", "c", "d"):
        (tmp_path / name).mkdir()
        made[name] = (tmp_path / name).resolve()
    return made


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


def make_cache(
    client: FakeClient | StreamClient, dirs: dict[str, Path], clock: ManualClock, **kwargs: object
) -> RootsCache:
    options: dict[str, object] = {"debounce": 0.01, "max_wait": 0.05, "timeout": TIMEOUT, "clock": clock}
    options.update(kwargs)
    return RootsCache(
        client.fetch,
        fallback=RootSet.from_paths([dirs["fallback"]], source="fallback"),
        **options,  # type: ignore[arg-type]
    )


@asynccontextmanager
async def running(
    cache: RootsCache, *, roots: bool = True, list_changed: bool = True
) -> AsyncIterator[RootsCache]:
    """A connection's life: initialize (capabilities), the worker, initialized (start)."""
    cache.set_capabilities(roots=roots, list_changed=list_changed)
    async with cache:
        cache.start()
        yield cache


async def until(condition: Callable[[], bool]) -> None:
    # Waits for work done in a worker thread (building roots), which no clock can step; the limit only
    # bounds a failing test.
    with anyio.fail_after(10):
        while not condition():  # noqa: ASYNC110
            await anyio.sleep(0.001)


def failure_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "mcp_roots"
        and r.levelno == logging.WARNING
        and r.getMessage().startswith("roots/list #")
    ]


def roots_now(cache: RootsCache) -> list[Path]:
    """The paths in force, or [] while calls are refused."""
    try:
        return paths_of(cache.current())
    except RootsUnavailable:
        return []


async def refused(cache: RootsCache) -> str:
    with pytest.raises(RootsUnavailable) as caught:
        await cache.fresh()
    return str(caught.value)


# --- the first answer ----------------------------------------------------------------------------------


async def test_initial_fetch_applies_the_client_roots(dirs: dict[str, Path], clock: ManualClock) -> None:
    client = FakeClient([dirs["a"], dirs["b"]])
    async with running(make_cache(client, dirs, clock)) as cache:
        roots = await cache.fresh()
        assert paths_of(roots) == [dirs["a"], dirs["b"]]
        assert roots.source == "client"
        assert cache.current() is roots
        assert cache.phase is Phase.CLIENT
        assert client.calls == 1


async def test_no_roots_capability_sends_no_request_and_serves_the_fallback(
    dirs: dict[str, Path], clock: ManualClock
) -> None:
    client = FakeClient([dirs["a"]])
    cache = make_cache(client, dirs, clock)
    cache.set_capabilities(roots=False, list_changed=False)
    with anyio.fail_after(5):
        await cache.run()  # nothing to do: returns at once
    async with cache:
        cache.start()
        cache.notify_changed()
        assert paths_of(await cache.fresh()) == [dirs["fallback"]]
        await clock.advance(10 * TIMEOUT)
    assert client.calls == 0
    assert cache.current().source == "fallback"


async def test_before_capabilities_nothing_is_allowed(dirs: dict[str, Path], clock: ManualClock) -> None:
    cache = make_cache(FakeClient([]), dirs, clock)
    with pytest.raises(RuntimeError, match="set_capabilities"):
        cache.start()
    with pytest.raises(RootsUnavailable, match="capabilities are not known"):
        cache.current()


async def test_a_silent_client_is_refused_never_given_the_fallback(
    dirs: dict[str, Path], clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    client = FakeClient([dirs["a"]])
    gate = Gate()
    client.script.append(gate)
    caplog.set_level(logging.INFO, logger="mcp_roots")
    cache = make_cache(client, dirs, clock, first_answer_timeout=2.0)
    async with running(cache), anyio.create_task_group() as tg:
        outcome: list[str] = []

        async def tool_call() -> None:
            outcome.append(await refused(cache))

        tg.start_soon(tool_call)
        await clock.advance(1.9)
        assert outcome == []  # still waiting within first_answer_timeout
        await clock.advance(0.2)
        await until(lambda: bool(outcome))
        assert outcome[0].startswith("the client has not sent its roots yet")
        # Later calls do not wait again for the same first answer, and are refused too.
        assert (await refused(cache)).startswith("the client has not sent its roots yet")
        with pytest.raises(RootsUnavailable):
            cache.current()
        gate.opened.set()
        await until(lambda: roots_now(cache) == [dirs["a"]])
    assert client.calls == 1
    assert client.cancelled == 0
    assert any("never given fallback roots" in r.getMessage() for r in caplog.records)


async def test_consent_answering_after_three_timeouts_applies_and_nothing_was_allowed_meanwhile(
    dirs: dict[str, Path], clock: ManualClock
) -> None:
    # The host asks its user, who takes 3 x timeout: the request is never cancelled (that would cancel the
    # prompt), no second request is sent for the same roots, and every call meanwhile is refused.
    client = FakeClient([dirs["a"]])
    gate = Gate()
    client.script.append(gate)
    async with running(make_cache(client, dirs, clock)) as cache:
        await gate.entered.wait()
        for _ in range(6):
            await clock.advance(TIMEOUT / 2)
            with pytest.raises(RootsUnavailable):
                cache.current()
        assert client.calls == 1
        assert client.cancelled == 0
        gate.opened.set()
        await until(lambda: roots_now(cache) == [dirs["a"]])
    assert client.calls == 1


async def test_a_consent_refusal_is_an_empty_list_and_allows_nothing(
    dirs: dict[str, Path], clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    client = FakeClient([])
    caplog.set_level(logging.INFO, logger="mcp_roots")
    async with running(make_cache(client, dirs, clock)) as cache:
        roots = await cache.fresh()
        assert len(roots) == 0
        assert roots.source == "client"
        assert not roots.contains(dirs["fallback"] / "x")
    assert any("the client granted no roots; every path is refused" in r.getMessage() for r in caplog.records)
    assert not any("fallback" in r.getMessage() for r in caplog.records)


async def test_tool_call_before_start_waits_for_the_first_answer(
    dirs: dict[str, Path], clock: ManualClock
) -> None:
    # A tool call can run before the initialized handler has called start(): it must not get the fallback.
    client = FakeClient([dirs["a"]])
    cache = make_cache(client, dirs, clock)
    cache.set_capabilities(roots=True, list_changed=True)
    seen: list[RootSet] = []
    async with cache, anyio.create_task_group() as tg:

        async def tool_call() -> None:
            seen.append(await cache.fresh())

        tg.start_soon(tool_call)
        await anyio.wait_all_tasks_blocked()
        assert seen == []
        cache.start()
    assert paths_of(seen[0]) == [dirs["a"]]


# --- storms and debounce ---------------------------------------------------------------------------------


@pytest.mark.parametrize("yield_every", [10_000, 1_000, 100])
async def test_storm_of_10000_notifications_costs_few_requests_and_ends_on_the_last_answer(
    dirs: dict[str, Path], clock: ManualClock, yield_every: int
) -> None:
    choices = [dirs["a"], dirs["b"], dirs["c"], dirs["d"]]
    client = FakeClient([choices[0]])
    async with running(make_cache(client, dirs, clock, debounce=0.02, max_wait=0.1)) as cache:
        await cache.fresh()
        for i in range(1, 10_001):
            client.roots = [choices[i % 4], choices[(i + 1) % 4]]
            cache.notify_changed()
            if i % yield_every == 0:
                await clock.advance(0.001)
        await clock.advance(0.1)
        final = [choices[10_000 % 4], choices[10_001 % 4]]
        assert paths_of(await cache.fresh()) == final
        assert paths_of(cache.current()) == final
        await clock.advance(1.0)  # nothing more is pending
    assert 2 <= client.calls <= 5, client.calls


class StreamClient:
    """A client at the other end of one ordered stream (stdio) that writes a storm of list_changed far
    faster than the server reads it, and answers each roots/list at once: with the roots it has when the
    request reaches it, on the same stream, so the answer reaches the server after every notification it
    wrote before it (the server still has those to read)."""

    def __init__(
        self, clock: ManualClock, states: list[Path], changes: list[int], total: int, write_every: float
    ) -> None:
        self.clock = clock
        self.states = states  # the roots after 0, changes[0], changes[1], ... notifications written
        self.changes = changes
        self.total = total
        self.write_every = write_every
        self.started_at: float | None = None  # when the client began writing the storm
        self.read = 0  # notifications the server has read so far
        self.waiting: list[tuple[int, anyio.Event]] = []
        self.calls = 0

    def written(self) -> int:
        if self.started_at is None:
            return 0
        return min(self.total, round((self.clock.now() - self.started_at) / self.write_every))

    def roots_after(self, written: int) -> list[Path]:
        return [self.states[sum(1 for change in self.changes if written >= change)]]

    async def fetch(self) -> object:
        self.calls += 1
        written = self.written()
        answer = answer_for(self.roots_after(written))
        if self.read < written:  # behind `written - read` notifications on the stream
            behind = (written, anyio.Event())
            self.waiting.append(behind)
            await behind[1].wait()
        return answer

    def server_reads_one(self) -> None:
        self.read += 1
        for entry in [e for e in self.waiting if e[0] <= self.read]:
            self.waiting.remove(entry)
            entry[1].set()


async def test_storm_over_an_ordered_stream_costs_the_first_answer_the_change_and_the_final_state(
    dirs: dict[str, Path], clock: ManualClock
) -> None:
    # A storm: 2,000 list_changed over stdio from a client that answers at once, its roots changed
    # mid-storm and once before the last. The client writes them in 80 ms; the server reads one per ms. An
    # answer reaches the server behind the notifications written before it, so a request sent mid-storm
    # stays unanswered until the server has read them all: if every max_wait of the storm sends another
    # request, up to MAX_OUTSTANDING go out that the answer in flight already covers (6 requests in all).
    # The minimum is 3: the first answer, one for the change mid-storm, one for the final state.
    total = 2000
    states = [dirs["a"], dirs["b"], dirs["c"]]
    client = StreamClient(clock, states, changes=[total // 2, total - 1], total=total, write_every=0.00004)
    cache = make_cache(client, dirs, clock, debounce=0.02, max_wait=0.1, timeout=5.0)  # the guard's
    async with running(cache):
        assert paths_of(await cache.fresh()) == [dirs["a"]]
        assert client.calls == 1
        client.started_at = clock.now()
        for _ in range(total):
            client.server_reads_one()
            cache.notify_changed()
            await clock.advance(0.001)
        # A call right after the storm sees the final roots (stale-read protection), then nothing more goes
        # out: the last request covers every notification.
        assert paths_of(await cache.fresh()) == [dirs["c"]]
        await clock.advance(1.0)
        assert paths_of(cache.current()) == [dirs["c"]]
    assert client.calls == 3, f"{client.calls} roots/list requests for one storm"


async def test_steady_stream_cannot_starve_the_refresh(dirs: dict[str, Path], clock: ManualClock) -> None:
    # Notifications every 5 ms never leave a 20 ms quiet gap, so only max_wait makes the refresh go out.
    client = FakeClient([dirs["a"]])
    async with running(make_cache(client, dirs, clock, debounce=0.02, max_wait=0.06)) as cache:
        await cache.fresh()
        client.roots = [dirs["b"]]
        for _ in range(11):  # 55 ms: not yet
            cache.notify_changed()
            await clock.advance(0.005)
        assert client.calls == 1
        cache.notify_changed()
        await clock.advance(0.005)  # 60 ms after the first notification
        assert client.calls == 2
        assert paths_of(await cache.fresh()) == [dirs["b"]]


async def test_debounce_is_trailing_edge(dirs: dict[str, Path], clock: ManualClock) -> None:
    client = FakeClient([dirs["a"]])
    async with running(make_cache(client, dirs, clock, debounce=0.05, max_wait=1.0)) as cache:
        await cache.fresh()
        client.roots = [dirs["b"]]
        cache.notify_changed()
        await clock.advance(0.04)
        cache.notify_changed()
        await clock.advance(0.04)
        assert client.calls == 1  # still inside the quiet period of the second notification
        await clock.advance(0.02)
        assert client.calls == 2
        assert paths_of(await cache.fresh()) == [dirs["b"]]


# --- slow answers, generations and the cap ---------------------------------------------------------------


async def test_a_notification_while_a_request_is_unanswered_sends_a_new_one(
    dirs: dict[str, Path], clock: ManualClock
) -> None:
    # A silent request never wedges later refreshes: once it has been unanswered for `timeout` it is slow,
    # not in flight, and the newer request goes out beside it and its answer applies.
    client = FakeClient([dirs["a"]])
    async with running(make_cache(client, dirs, clock)) as cache:
        await cache.fresh()
        silent = Gate()
        client.script.append(silent)
        client.roots = [dirs["b"]]
        cache.notify_changed()
        await clock.advance(0.1)
        await silent.entered.wait()
        client.roots = [dirs["c"]]
        cache.notify_changed()
        await clock.advance(0.1)
        assert client.calls == 2  # one request in flight: the change waits for its answer
        await clock.advance(TIMEOUT)
        assert client.calls == 3
        assert paths_of(await cache.fresh()) == [dirs["c"]]
        # The older request was not cancelled; its answer, now older than the applied one, is dropped.
        assert client.cancelled == 0
        silent.opened.set()
        await until(lambda: len(client.returned) == 3)
        await clock.advance(0.1)
        assert paths_of(cache.current()) == [dirs["c"]]


async def test_answers_apply_in_generation_order(dirs: dict[str, Path], clock: ManualClock) -> None:
    client = FakeClient([dirs["a"]])
    changes: list[tuple[list[Path], list[Path]]] = []
    async with running(make_cache(client, dirs, clock)) as cache:
        await cache.fresh()
        cache.on_change(lambda old, new: changes.append((paths_of(old), paths_of(new))))
        older, newer = Gate(answer_for([dirs["b"]])), Gate(answer_for([dirs["c"]]))
        client.script.extend([older, newer])
        cache.notify_changed()
        await clock.advance(0.1)
        cache.notify_changed()
        await clock.advance(TIMEOUT + 0.1)  # #2 is slow by then: #3 goes out beside it
        await newer.entered.wait()
        newer.opened.set()
        await until(lambda: paths_of(cache.current()) == [dirs["c"]])
        older.opened.set()
        await until(lambda: len(client.returned) == 3)
        await clock.advance(0.1)
        assert paths_of(cache.current()) == [dirs["c"]]
    # The scenario really happened: #2's answer came back after #3's, so last-writer-wins would regress.
    assert [call for call, _ in client.returned] == [1, 3, 2]
    assert changes == [([dirs["a"]], [dirs["c"]])]


async def test_a_late_answer_applies_when_nothing_newer_has(
    dirs: dict[str, Path], clock: ManualClock
) -> None:
    client = FakeClient([dirs["a"]])
    async with running(make_cache(client, dirs, clock)) as cache:
        await cache.fresh()
        older, newer = Gate(answer_for([dirs["b"]])), Gate(answer_for([dirs["c"]]))
        client.script.extend([older, newer])
        cache.notify_changed()
        await clock.advance(0.1)
        cache.notify_changed()
        await clock.advance(3 * TIMEOUT)
        older.opened.set()  # the newest information there is: it applies
        await until(lambda: paths_of(cache.current()) == [dirs["b"]])
        newer.opened.set()
        await until(lambda: paths_of(cache.current()) == [dirs["c"]])
    assert client.cancelled == 0


async def test_outstanding_requests_are_capped_and_the_next_waits_for_an_answer(
    dirs: dict[str, Path], clock: ManualClock
) -> None:
    client = FakeClient([dirs["a"]])
    async with running(make_cache(client, dirs, clock)) as cache:
        await cache.fresh()
        gates = [Gate() for _ in range(MAX_OUTSTANDING)]
        client.script.extend(gates)
        for _ in range(MAX_OUTSTANDING + 3):
            cache.notify_changed()
            await clock.advance(TIMEOUT + 0.1)  # each unanswered request is slow by the next notification
        assert client.calls == 1 + MAX_OUTSTANDING  # at the cap: nothing more goes out
        client.roots = [dirs["d"]]
        gates[0].opened.set()  # one answer frees one slot; the pending refresh goes out
        await until(lambda: client.calls == 2 + MAX_OUTSTANDING)
        assert paths_of(await cache.fresh()) == [dirs["d"]]
        for gate in gates[1:]:
            gate.opened.set()
    assert client.cancelled == 0


async def test_a_call_waits_for_a_slow_refresh_bounded_then_uses_the_last_roots(
    dirs: dict[str, Path], clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    client = FakeClient([dirs["a"]])
    caplog.set_level(logging.INFO, logger="mcp_roots")
    async with running(make_cache(client, dirs, clock)) as cache, anyio.create_task_group() as tg:
        await cache.fresh()
        slow = Gate()
        client.script.append(slow)
        client.roots = [dirs["b"]]
        cache.notify_changed()
        seen: list[RootSet] = []

        async def tool_call() -> None:
            seen.append(await cache.fresh())

        tg.start_soon(tool_call)
        await clock.advance(TIMEOUT)
        assert seen == []  # waits (the bound is timeout + max_wait)
        await clock.advance(0.06)
        await until(lambda: bool(seen))
        assert paths_of(seen[0]) == [dirs["a"]]
        slow.opened.set()
        await until(lambda: paths_of(cache.current()) == [dirs["b"]])
    assert any("still unanswered" in r.getMessage() for r in caplog.records)


# --- failures keep the last valid roots and never stop later refreshes -----------------------------------


async def test_an_error_keeps_the_last_roots_then_the_next_notification_recovers(
    dirs: dict[str, Path], clock: ManualClock
) -> None:
    client = FakeClient([dirs["a"]])

    async def fails(snapshot: Answer) -> object:
        raise RuntimeError("JSON-RPC error -32603: internal error")

    async with running(make_cache(client, dirs, clock)) as cache:
        assert paths_of(await cache.fresh()) == [dirs["a"]]
        client.script.append(fails)
        client.roots = [dirs["b"]]
        cache.notify_changed()
        await clock.advance(0.1)
        assert paths_of(await cache.fresh()) == [dirs["a"]]
        cache.notify_changed()
        await clock.advance(0.1)
        assert paths_of(await cache.fresh()) == [dirs["b"]]
        assert client.calls == 3


async def test_switched_off_keeps_the_last_roots_and_switching_on_applies(
    dirs: dict[str, Path], clock: ManualClock
) -> None:
    # enable / disable / enable: -32601 is not permanent and never means "fallback".
    client = FakeClient([dirs["a"]])

    async def switched_off(snapshot: Answer) -> object:
        raise RuntimeError("-32601 Method not found")

    async with running(make_cache(client, dirs, clock)) as cache:
        assert paths_of(await cache.fresh()) == [dirs["a"]]
        client.script.extend([switched_off, switched_off])
        cache.notify_changed()
        await clock.advance(0.1)
        assert paths_of(await cache.fresh()) == [dirs["a"]]
        cache.notify_changed()
        await clock.advance(0.1)
        assert paths_of(await cache.fresh()) == [dirs["a"]]
        client.roots = [dirs["b"]]
        cache.notify_changed()  # switched back on
        await clock.advance(0.1)
        assert paths_of(await cache.fresh()) == [dirs["b"]]


async def test_switched_off_from_the_start_is_refused_not_the_fallback(
    dirs: dict[str, Path], clock: ManualClock
) -> None:
    client = FakeClient([dirs["a"]])

    async def switched_off(snapshot: Answer) -> object:
        raise RuntimeError("-32601 Method not found")

    client.script.append(switched_off)
    async with running(make_cache(client, dirs, clock)) as cache:
        reason = await refused(cache)
        assert reason.startswith("the client has not sent its roots yet: its answer to roots/list failed")
        assert "-32601" in reason
        cache.notify_changed()
        await clock.advance(0.1)
        assert paths_of(await cache.fresh()) == [dirs["a"]]


async def test_a_list_changed_after_the_first_budget_is_waited_for(
    dirs: dict[str, Path], clock: ManualClock
) -> None:
    # The first answer never came and its budget is spent; the client then sends list_changed and answers
    # the new request: a call made after the notification waits for that answer instead of being refused.
    client = FakeClient([dirs["a"]])
    silent = Gate()
    client.script.append(silent)
    async with running(make_cache(client, dirs, clock)) as cache, anyio.create_task_group() as tg:
        await clock.advance(2 * TIMEOUT)
        await refused(cache)
        cache.notify_changed()
        seen: list[RootSet] = []

        async def tool_call() -> None:
            seen.append(await cache.fresh())

        tg.start_soon(tool_call)
        await clock.advance(0.1)  # the debounced request goes out and is answered
        await until(lambda: bool(seen))
        assert paths_of(seen[0]) == [dirs["a"]]
        silent.opened.set()
    assert client.calls == 2


async def test_failed_first_answer_is_retried_by_a_later_tool_call_without_list_changed(
    dirs: dict[str, Path], clock: ManualClock
) -> None:
    # A client that declared roots without listChanged never sends a notification: after its first answer
    # failed, only a tool call can bring the roots (mcp-bash's refresh stayed dead for the session).
    client = FakeClient([dirs["a"]])

    async def fails(snapshot: Answer) -> object:
        raise RuntimeError("JSON-RPC error -32603: not ready yet")

    client.script.append(fails)
    async with running(make_cache(client, dirs, clock), list_changed=False) as cache:
        await refused(cache)
        for _ in range(20):  # tool calls inside the retry interval do not hammer the client
            await refused(cache)
        assert client.calls == 1
        await clock.advance(TIMEOUT)
        await refused(cache)  # schedules the retry, does not wait for it
        await until(lambda: roots_now(cache) == [dirs["a"]])
    assert client.calls == 2


async def test_retries_of_a_failing_client_are_rate_limited(
    dirs: dict[str, Path], clock: ManualClock
) -> None:
    client = FakeClient([dirs["a"]])

    async def fails(snapshot: Answer) -> object:
        raise RuntimeError("JSON-RPC error -32603")

    client.script.extend([fails] * 100)
    async with running(make_cache(client, dirs, clock), list_changed=False) as cache:
        for _ in range(100):  # 5 timeouts' worth of tool calls
            with pytest.raises(RootsUnavailable):
                await cache.fresh()
            await clock.advance(TIMEOUT / 20)
    assert 4 <= client.calls <= 6, client.calls  # about one request per timeout, not one per tool call


MALFORMED: list[object] = [
    None,
    42,
    "roots",
    {},
    {"roots": None},
    {"roots": "file:///tmp"},
    {"roots": {"uri": "file:///tmp"}},
    SimpleNamespace(other=[]),
    {"roots": [{"uri": 5}]},
    {"roots": [{"name": "no uri"}]},
    {"roots": [{"uri": None}]},
    {"roots": ["file:///tmp"]},
    {"roots": [7]},
    {"roots": [[]]},
]


@pytest.mark.parametrize("payload", MALFORMED, ids=repr)
async def test_each_malformed_shape_keeps_the_last_roots_then_recovers(
    dirs: dict[str, Path], clock: ManualClock, payload: object, caplog: pytest.LogCaptureFixture
) -> None:
    client = FakeClient([dirs["a"]])

    async def malformed(snapshot: Answer) -> object:
        return payload

    async with running(make_cache(client, dirs, clock)) as cache:
        assert paths_of(await cache.fresh()) == [dirs["a"]]
        client.script.append(malformed)
        client.roots = [dirs["b"]]
        cache.notify_changed()
        await clock.advance(0.1)
        assert paths_of(await cache.fresh()) == [dirs["a"]]
        cache.notify_changed()
        await clock.advance(0.1)
        assert paths_of(await cache.fresh()) == [dirs["b"]]
    assert len(failure_warnings(caplog)) == 1
    assert "malformed" in failure_warnings(caplog)[0]


async def test_a_malformed_first_answer_is_refused(dirs: dict[str, Path], clock: ManualClock) -> None:
    client = FakeClient([dirs["a"]])

    async def malformed(snapshot: Answer) -> object:
        return {"roots": [{"uri": 5}]}

    client.script.append(malformed)
    async with running(make_cache(client, dirs, clock)) as cache:
        assert "malformed" in await refused(cache)


async def test_warning_is_logged_once_per_failure_streak(
    dirs: dict[str, Path], clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    client = FakeClient([dirs["a"]])

    async def fails(snapshot: Answer) -> object:
        raise RuntimeError("JSON-RPC error -32603")

    caplog.set_level(logging.DEBUG, logger="mcp_roots")
    async with running(make_cache(client, dirs, clock)) as cache:
        await cache.fresh()
        for streak in range(2):
            for _ in range(3):
                client.script.append(fails)
                cache.notify_changed()
                await clock.advance(0.1)
                await cache.fresh()
            assert len(failure_warnings(caplog)) == streak + 1
            cache.notify_changed()  # succeeds: ends the streak
            await clock.advance(0.1)
            await cache.fresh()
    assert client.calls == 1 + 2 * 4
    assert len(failure_warnings(caplog)) == 2
    recoveries = [r for r in caplog.records if "answered after 3 failed attempt(s)" in r.getMessage()]
    assert len(recoveries) == 2
    assert all(r.levelno == logging.INFO for r in recoveries)


# --- what an answer means -------------------------------------------------------------------------------


async def test_refused_entries_are_dropped_alone_and_valid_ones_kept(
    dirs: dict[str, Path], clock: ManualClock, caplog: pytest.LogCaptureFixture
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
        {"uri": path_to_uri(str(dirs["c"])), "name": 7},
        good[1],
    ]

    async def mixed(snapshot: Answer) -> object:
        return {"roots": entries}

    client.script.append(mixed)
    async with running(make_cache(client, dirs, clock)) as cache:
        roots = await cache.fresh()
    assert paths_of(roots) == [dirs["a"], dirs["b"]]
    skipped = [
        r for r in caplog.records if r.levelno == logging.WARNING and "skipping root" in r.getMessage()
    ]
    assert len(skipped) == len(entries) - 2
    assert failure_warnings(caplog) == []


async def test_answer_with_too_many_entries_is_malformed_whole(
    dirs: dict[str, Path], clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    client = FakeClient([dirs["a"]])

    async def flood(snapshot: Answer) -> object:
        return {"roots": [{"uri": path_to_uri(str(dirs["b"]))}] * (MAX_ROOTS + 1)}

    async with running(make_cache(client, dirs, clock)) as cache:
        await cache.fresh()
        client.script.append(flood)
        cache.notify_changed()
        await clock.advance(0.1)
        assert paths_of(await cache.fresh()) == [dirs["a"]]
    assert f"more than the {MAX_ROOTS} accepted" in failure_warnings(caplog)[0]


def link_chain(base: Path, target: Path, hops: int) -> Path:
    """A chain of ``hops`` symbolic links ending at ``target``; returns its first link."""
    previous = target
    for hop in range(hops):
        link = base / f"hop-{hop}"
        link.symlink_to(previous)
        previous = link
    return previous


def expensive_uris(base: Path, target: Path, count: int) -> list[str]:
    """``count`` distinct URIs that each resolve through 40 symbolic links to ``target`` (distinct
    spellings of one chain: doubled slashes; creating thousands of links costs seconds here)."""
    head = link_chain(base, target, 39)
    return [path_to_uri(str(head.parent)) + "/" * (i + 1) + head.name for i in range(count)]


async def test_resolution_beyond_the_budget_is_malformed(
    dirs: dict[str, Path], clock: ManualClock, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    chains = tmp_path / "chains"
    chains.mkdir()
    answer = {"roots": [{"uri": uri} for uri in expensive_uris(chains, dirs["b"], 200)]}
    # The control: under the default budget, the same answer resolves (every chain leads to b).
    client = FakeClient([dirs["a"]])

    async def expensive(snapshot: Answer) -> object:
        return answer

    client.script.append(expensive)
    async with running(make_cache(client, dirs, clock)) as cache:
        assert paths_of(await cache.fresh()) == [dirs["b"]]
    # A budget smaller than the work: the answer is malformed, the last roots stay.
    client = FakeClient([dirs["a"]])
    async with running(make_cache(client, dirs, clock, resolution_budget=1e-4)) as cache:
        assert paths_of(await cache.fresh()) == [dirs["a"]]
        client.script.append(expensive)
        cache.notify_changed()
        await clock.advance(0.1)
        assert paths_of(await cache.fresh()) == [dirs["a"]]
    assert any("cost more than 0.0001s of CPU" in m for m in failure_warnings(caplog))


async def test_roots_are_built_in_a_worker_thread(dirs: dict[str, Path], clock: ManualClock) -> None:
    loop_thread = threading.get_ident()
    built_in: list[int] = []

    def transform(roots: RootSet) -> RootSet:
        built_in.append(threading.get_ident())
        return roots

    client = FakeClient([dirs["a"]])
    async with running(make_cache(client, dirs, clock, transform=transform)) as cache:
        assert paths_of(await cache.fresh()) == [dirs["a"]]
    assert built_in
    assert loop_thread not in built_in


async def test_answer_object_with_roots_attribute_is_accepted(
    dirs: dict[str, Path], clock: ManualClock
) -> None:
    client = FakeClient([])

    async def typed(snapshot: Answer) -> object:
        root = SimpleNamespace(uri=path_to_uri(str(dirs["d"])), name="D")
        return SimpleNamespace(roots=[root])

    client.script.append(typed)
    async with running(make_cache(client, dirs, clock)) as cache:
        roots = await cache.fresh()
    assert paths_of(roots) == [dirs["d"]]
    assert roots.roots[0].name == "D"


async def test_transform_is_applied_to_every_client_answer(dirs: dict[str, Path], clock: ManualClock) -> None:
    ceiling = {dirs["a"], dirs["b"]}

    def clip(roots: RootSet) -> RootSet:
        return RootSet.from_paths([p for p in roots.paths if p in ceiling], source="client")

    client = FakeClient([dirs["a"], dirs["c"]])
    async with running(make_cache(client, dirs, clock, transform=clip)) as cache:
        assert paths_of(await cache.fresh()) == [dirs["a"]]
        client.roots = [dirs["b"], dirs["d"]]
        cache.notify_changed()
        await clock.advance(0.1)
        assert paths_of(await cache.fresh()) == [dirs["b"]]


async def test_on_change_reports_old_and_new_only_when_roots_change(
    dirs: dict[str, Path], clock: ManualClock
) -> None:
    client = FakeClient([dirs["a"]])
    changes: list[tuple[list[Path], list[Path]]] = []
    cache = make_cache(client, dirs, clock)
    cache.on_change(lambda old, new: changes.append((paths_of(old), paths_of(new))))
    async with running(cache):
        await cache.fresh()
        cache.notify_changed()  # same roots again
        await clock.advance(0.1)
        await cache.fresh()
        client.roots = [dirs["b"]]
        cache.notify_changed()
        await clock.advance(0.1)
        await cache.fresh()
    assert client.calls == 3
    assert changes == [([], [dirs["a"]]), ([dirs["a"]], [dirs["b"]])]


async def test_on_change_refuses_async_callbacks(dirs: dict[str, Path], clock: ManualClock) -> None:
    async def listener(old: RootSet, new: RootSet) -> None:
        pass

    with pytest.raises(TypeError, match="plain function"):
        make_cache(FakeClient([]), dirs, clock).on_change(listener)  # type: ignore[arg-type]


# --- stale reads -----------------------------------------------------------------------------------------


async def test_tool_call_after_a_notification_sees_the_new_roots(
    dirs: dict[str, Path], clock: ManualClock
) -> None:
    client = FakeClient([dirs["a"]])
    async with running(make_cache(client, dirs, clock)) as cache, anyio.create_task_group() as tg:
        await cache.fresh()
        client.roots = [dirs["b"]]  # the user removed folder a
        cache.notify_changed()
        stale = cache.current()  # the control: a read that does not wait still sees the removed folder
        seen: list[RootSet] = []

        async def tool_call() -> None:
            seen.append(await cache.fresh())

        tg.start_soon(tool_call)
        await clock.advance(0.1)
        await until(lambda: bool(seen))
    assert paths_of(stale) == [dirs["a"]]
    assert paths_of(seen[0]) == [dirs["b"]]
    assert not seen[0].contains(dirs["a"] / "secret.txt")


async def test_fresh_now_hands_out_only_what_fresh_would_return_without_waiting(
    dirs: dict[str, Path], clock: ManualClock
) -> None:
    """The guarded call's one synchronous step: never roots a refresh is due for (the control, current(),
    still holds the stale ones), never the last roots after a failed refresh, nothing before the first
    answer; after close, what fresh() serves."""
    client = FakeClient([dirs["a"]])

    async def fails(snapshot: Answer) -> object:
        raise RuntimeError("JSON-RPC error -32603: internal error")

    cache = make_cache(client, dirs, clock)
    cache.set_capabilities(roots=True, list_changed=True)
    assert cache.fresh_now() is None
    async with cache:
        cache.start()
        assert cache.fresh_now() is None  # asked, not answered yet
        first = await cache.fresh()
        assert cache.fresh_now() is first
        client.roots = [dirs["b"]]
        cache.notify_changed()
        assert paths_of(cache.current()) == [dirs["a"]]  # the control: the stale roots are still in force
        assert cache.fresh_now() is None
        await clock.advance(0.1)
        await until(lambda: cache.fresh_now() is not None)
        assert paths_of(cache.fresh_now()) == [dirs["b"]]
        client.script.append(fails)
        cache.notify_changed()
        await clock.advance(0.1)
        await until(lambda: client.calls == 3)
        assert paths_of(cache.current()) == [dirs["b"]]
        assert cache.fresh_now() is None  # a failed refresh: fresh() retries, so nothing is handed out
    # Closed: the roots in force stay as they were and fetching stops, so fresh() serves them at once.
    assert cache.fresh_now() is cache.current()
    assert await cache.fresh() is cache.current()
    fallback_only = make_cache(FakeClient([dirs["a"]]), dirs, clock)
    fallback_only.set_capabilities(roots=False, list_changed=False)
    assert paths_of(fallback_only.fresh_now()) == [dirs["fallback"]]


# --- shutdown --------------------------------------------------------------------------------------------


async def test_close_during_a_request_cancels_it_and_nothing_changes_after(
    dirs: dict[str, Path], clock: ManualClock
) -> None:
    client = FakeClient([dirs["a"]])
    gate = Gate()
    client.script.append(gate)
    cache = make_cache(client, dirs, clock)
    changes: list[object] = []
    cache.on_change(lambda old, new: changes.append(new))
    cache.set_capabilities(roots=True, list_changed=True)
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(cache.run)
            cache.start()
            await gate.entered.wait()
            await cache.aclose()
            # run() has returned: the task group exits without being cancelled from outside.
    assert client.cancelled == 1
    cache.notify_changed()
    cache.start()
    with pytest.raises(RootsUnavailable, match="closing"):
        await cache.fresh()
    assert client.calls == 1
    assert changes == []


async def test_answer_arriving_after_close_is_not_applied(dirs: dict[str, Path], clock: ManualClock) -> None:
    client = FakeClient([dirs["a"]])
    in_flight = anyio.Event()
    release = anyio.Event()

    async def ignores_cancellation(snapshot: Answer) -> object:
        in_flight.set()
        with anyio.CancelScope(shield=True), anyio.move_on_after(5):  # bounded: a failing test must not hang
            await release.wait()
        return snapshot

    client.script.append(ignores_cancellation)
    cache = make_cache(client, dirs, clock)
    cache.set_capabilities(roots=True, list_changed=True)
    closed = anyio.Event()

    async def close() -> None:
        await cache.aclose()
        closed.set()

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(cache.run)
            cache.start()
            await in_flight.wait()
            tg.start_soon(close)
            await anyio.wait_all_tasks_blocked()
            assert not closed.is_set()  # aclose() waits for the in-flight fetch to end
            release.set()
    assert closed.is_set()
    assert [call for call, _ in client.returned] == [1]  # the answer did come back...
    with pytest.raises(RootsUnavailable):  # ...and was not applied
        cache.current()


async def test_aclose_from_inside_fetch_does_not_deadlock(dirs: dict[str, Path], clock: ManualClock) -> None:
    client = FakeClient([dirs["a"]])
    cache = make_cache(client, dirs, clock)

    async def closes(snapshot: Answer) -> object:
        # A transport that tears the connection down while answering, inside a shielded section: aclose()
        # must not wait for the worker, which waits for this very fetch. (Bounded so a failure cannot hang.)
        with anyio.CancelScope(shield=True), anyio.move_on_after(5):
            await cache.aclose()
        return snapshot

    client.script.append(closes)
    cache.set_capabilities(roots=True, list_changed=True)
    with anyio.fail_after(4):
        async with anyio.create_task_group() as tg:
            tg.start_soon(cache.run)
            cache.start()
    assert client.calls == 1
    with pytest.raises(RootsUnavailable):  # the answer came after close: not applied
        cache.current()


async def test_run_refuses_to_run_twice(dirs: dict[str, Path], clock: ManualClock) -> None:
    cache = make_cache(FakeClient([dirs["a"]]), dirs, clock)
    cache.set_capabilities(roots=True, list_changed=True)
    async with cache:
        await anyio.wait_all_tasks_blocked()
        with pytest.raises(RuntimeError, match="already running"):
            await cache.run()


async def test_entering_an_open_cache_again_is_refused(dirs: dict[str, Path], clock: ManualClock) -> None:
    # Its worker's task group is held once (OwnedTaskGroup); a second `async with` would start a second one.
    cache = make_cache(FakeClient([dirs["a"]]), dirs, clock)
    cache.set_capabilities(roots=True, list_changed=True)
    async with cache:
        with pytest.raises(RuntimeError, match="this RootsCache is already running"):
            await cache.__aenter__()
        cache.start()
        assert paths_of(await cache.fresh()) == [dirs["a"]]  # the first one still works


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("debounce", -1),
        ("max_wait", 0.001),
        ("timeout", 0),
        ("first_answer_timeout", -0.5),
        ("resolution_budget", 0),
    ],
)
def test_bad_settings_are_refused_with_their_name(
    dirs: dict[str, Path], clock: ManualClock, option: str, value: float
) -> None:
    with pytest.raises(ValueError, match=option):
        make_cache(FakeClient([]), dirs, clock, **{option: value})


async def test_the_default_clock_is_the_event_loop_clock(dirs: dict[str, Path]) -> None:
    # Without a clock argument, deadlines are on anyio's clock (under trio's MockClock, the mock).
    client = FakeClient([dirs["a"]])
    gate = Gate()
    client.script.append(gate)
    cache = RootsCache(client.fetch, timeout=0.05, first_answer_timeout=0.05)
    async with running(cache):
        with anyio.fail_after(5):
            await refused(cache)
        gate.opened.set()
        await until(lambda: roots_now(cache) == [dirs["a"]])
