"""RootsCache: one legacy-era connection's roots, kept fresh.
A state machine; anyio only, it never imports mcp.
"""

# RootsCache: the per-connection roots lifecycle of a legacy-era MCP connection, as a state machine
# (capability, first fetch, debounced refreshes with one request in flight, generation order, fail closed).
# The answers are parsed in _answers, the failure streak kept (and logged) in _streak, the time read from
# _clock; anyio only, it never imports mcp. About 500 lines on purpose: one state machine, whose triggers,
# reads, worker and outcomes change the same few fields and are read together.

from __future__ import annotations

import enum
import inspect
import logging
from collections.abc import Awaitable, Callable
from types import TracebackType

import anyio
from anyio.abc import TaskGroup

from ..errors import RootsUnavailable
from ..paths._rootset import RootSet
from ._answers import RESOLUTION_BUDGET, MalformedRoots, build_client_roots
from ._clock import Clock, LoopClock
from ._owned import OwnedTaskGroup
from ._streak import NOT_SENT_YET, FailureStreak

__all__ = ["MAX_OUTSTANDING", "Clock", "LoopClock", "Phase", "RootsCache"]  # the clocks: from _clock

logger = logging.getLogger("mcp_roots")

ChangeCallback = Callable[["RootSet | None", "RootSet | None"], object]

_NO_OUTCOME = object()
# roots/list requests one connection may have unanswered at once; a refresh due while at the cap waits
# for an answer (any answer) instead of cancelling a request the host may still be asking its user about.
MAX_OUTSTANDING = 4


class Phase(enum.Enum):
    """What the cache serves, decided by the client's capabilities and the lifecycle."""

    UNKNOWN = "capabilities unknown"  # set_capabilities() not called yet: nothing is allowed
    FALLBACK = "no roots capability"  # the client cannot send roots: the operator's fallback roots
    CLIENT = "client roots"  # the client is the only authority: its last valid answer, or nothing
    CLOSED = "closed"


# --- The cache ------------------------------------------------------------------------------------------


class _Request:
    """One roots/list request: its generation, the refresh triggers it covers, and when it went out."""

    __slots__ = ("covers", "generation", "sent")

    def __init__(self, generation: int, covers: int, sent: float) -> None:
        self.generation = generation
        # Number of refresh triggers (start + notifications) received before this request was sent: when
        # it is answered, every one of them has had its refresh.
        self.covers = covers
        self.sent = sent


class RootsCache:
    """The roots one legacy-era connection's client granted, kept fresh; fail closed.

    ``fetch`` sends roots/list and returns the raw result (a mapping with a ``"roots"`` list, or an object
    with ``.roots``) or raises. A client that declared roots is the only authority for its connection:
    before its first valid answer :meth:`current` raises :class:`RootsUnavailable`; after it, failures
    (errors, -32601, malformed answers) keep the last valid roots, and any later valid answer applies.
    ``fallback`` applies only to a client without the roots capability. ``transform`` is applied to every
    RootSet built from a client answer (the guard clips it to the operator's ceiling), in a worker thread.

    Refreshes are debounced: the request goes out ``debounce`` seconds after the last notification of a
    burst, but never later than ``max_wait`` after its first. A request is never cancelled for being slow
    (the host may be asking its user); a new list_changed sends a new request even while older ones are
    unanswered (at most :data:`MAX_OUTSTANDING`), and answers apply in generation order. ``timeout`` bounds
    how long a tool call waits for a refresh; ``first_answer_timeout`` how long it waits for the first
    answer before it is refused. All methods must be called from the event loop's thread.

    Args:
        fetch: Sends ``roots/list`` and returns the raw result, or raises.
        fallback: The roots of a client without the roots capability.
        transform: Applied to every RootSet built from a client's answer (the guard clips to the ceiling).
        debounce: Seconds after the last notification of a burst before the request goes out.
        max_wait: The latest, in seconds after a burst's first notification, that the request goes out.
        timeout: Seconds a tool call waits for a refresh.
        first_answer_timeout: Seconds a tool call waits for the first answer (default ``timeout``).
        clock: The time and the sleeps (default: the event loop's clock; tests pass a manual one).
        resolution_budget: Seconds of CPU that resolving one answer's roots may cost; beyond, the answer
            is refused whole.
    """

    def __init__(
        self,
        fetch: Callable[[], Awaitable[object]],
        *,
        fallback: RootSet | None = None,
        transform: Callable[[RootSet], RootSet] | None = None,
        debounce: float = 0.02,
        max_wait: float = 0.1,
        timeout: float = 5.0,
        first_answer_timeout: float | None = None,
        clock: Clock | None = None,
        resolution_budget: float = RESOLUTION_BUDGET,
    ) -> None:
        if not callable(fetch):
            raise TypeError(f"fetch must be an async function, got {type(fetch).__name__}")
        if fallback is not None and not isinstance(fallback, RootSet):
            raise TypeError(f"fallback must be a RootSet or None, got {type(fallback).__name__}")
        for name, value in (("debounce", debounce), ("max_wait", max_wait)):
            if not value >= 0:
                raise ValueError(f"{name} must be a number of seconds >= 0, got {value!r}")
        if max_wait < debounce:
            raise ValueError(f"max_wait ({max_wait!r}) must not be shorter than debounce ({debounce!r})")
        if not timeout > 0:
            raise ValueError(f"timeout must be a number of seconds > 0, got {timeout!r}")
        if first_answer_timeout is not None and not first_answer_timeout >= 0:
            raise ValueError(
                f"first_answer_timeout must be a number of seconds >= 0, got {first_answer_timeout!r}"
            )
        if not resolution_budget > 0:
            raise ValueError(f"resolution_budget must be a number of seconds > 0, got {resolution_budget!r}")
        self._fetch = fetch
        self._fallback = fallback if fallback is not None else RootSet.empty(source="no fallback roots")
        self._transform = transform
        self._debounce = debounce
        self._max_wait = max_wait
        self._timeout = timeout
        self._first_answer_timeout = timeout if first_answer_timeout is None else first_answer_timeout
        self._clock: Clock = clock if clock is not None else LoopClock()
        self._budget = resolution_budget

        self._phase = Phase.UNKNOWN
        self._list_changed = False

        # What current() returns (None: refuse), kept ready so a read is one attribute load.
        self._current: RootSet | None = None
        self._client_roots: RootSet | None = None
        self._listeners: list[ChangeCallback] = []

        # Refresh triggers and the pending burst.
        self._started = False
        self._immediate = False
        self._triggers = 0
        self._first_triggers = 0  # the triggers the first request covers (set by start())
        self._burst_first: float | None = None
        self._burst_last = 0.0
        self._wakeup: anyio.Event | None = None
        self._answered: anyio.Event | None = None  # set by any answer while the worker waits on one

        # Requests and their outcomes.
        self._generation = 0
        self._applied_generation = 0
        self._outstanding: dict[int, _Request] = {}
        self._settled = 0
        self._answered_once = False
        self._first_deadline: float | None = None
        self._progress: anyio.Event | None = None
        self._streak = FailureStreak(timeout, self._first_answer_timeout)

        # The worker.
        self._run_scope: anyio.CancelScope | None = None
        self._stopped: anyio.Event | None = None
        self._fetch_tasks: set[int] = set()
        self._owned = OwnedTaskGroup("this RootsCache")

    def __repr__(self) -> str:
        state = self._phase.value
        if self._phase is Phase.CLIENT:
            state = f"roots{' with listChanged' if self._list_changed else ''}, request #{self._generation}"
        shown = "no roots in force" if self._current is None else repr(self._current)
        return f"<RootsCache {state}: {shown}>"

    @property
    def phase(self) -> Phase:
        """What the cache serves now (see :class:`Phase`)."""
        return self._phase

    # -- capability state --

    def set_capabilities(self, *, roots: bool, list_changed: bool) -> None:
        """Record what the client declared in ``initialize``, or that the connection cannot ask.

        Args:
            roots: The client's ``capabilities.roots``; ``False`` also where the connection has no
                back-channel. Without it the cache never fetches and serves the fallback.
            list_changed: Its ``listChanged``: the client notifies when its roots change.
        """
        if self._phase is Phase.CLOSED:
            return
        self._phase = Phase.CLIENT if roots else Phase.FALLBACK
        self._list_changed = bool(roots) and bool(list_changed)
        self._recompute()
        if self._phase is Phase.FALLBACK:
            self._stop_worker()
            self._signal_progress()

    @property
    def _can_fetch(self) -> bool:
        return self._phase is Phase.CLIENT

    @property
    def _may_fetch_later(self) -> bool:
        # The worker waits while the capabilities are still unknown.
        return self._phase in (Phase.UNKNOWN, Phase.CLIENT)

    # -- triggers --

    def start(self) -> None:
        """Schedule the first roots/list (call after ``notifications/initialized``). Sync, non-blocking;
        :meth:`run` (or ``async with cache``) does the work. A no-op when the client declared no roots."""
        if self._phase is Phase.UNKNOWN:
            raise RuntimeError(
                "RootsCache.start() before set_capabilities(): the cache cannot know whether the client "
                "declared the roots capability; call set_capabilities() with what initialize said"
            )
        if self._started or not self._can_fetch:
            return
        self._started = True
        self._immediate = True
        self._triggers += 1
        self._first_triggers = self._triggers
        if self._first_deadline is None:
            self._first_deadline = self._clock.now() + self._first_answer_timeout
        self._wake()

    def notify_changed(self) -> None:
        """The client sent ``notifications/roots/list_changed``. O(1); the refresh is debounced."""
        if not self._can_fetch:
            return
        now = self._clock.now()
        self._triggers += 1
        self._burst_last = now
        if self._burst_first is None:
            self._burst_first = now
        if self._started:
            self._wake()

    def _wake(self) -> None:
        if self._wakeup is not None:
            self._wakeup.set()

    # -- reads --

    def current(self) -> RootSet:
        """The roots in force now: the client's last valid answer (transformed), or the fallback for a
        client without the roots capability. O(1), never waits. Raises :class:`RootsUnavailable` when none
        are in force (the client declared roots and has not sent valid ones yet, or the cache is closed)."""
        current = self._current
        if current is None:
            raise RootsUnavailable(self._unavailable_reason())
        return current

    def _unavailable_reason(self) -> str:
        if self._phase is Phase.CLOSED:
            return "the connection's roots are no longer kept (it is closing)"
        if self._phase is Phase.UNKNOWN:
            return "the client's capabilities are not known yet (no initialize seen)"
        if self._streak.last_failure is not None:
            return f"{NOT_SENT_YET}: its answer to roots/list {self._streak.last_failure}"
        return f"{NOT_SENT_YET}; try again once it has answered roots/list"

    def fresh_now(self) -> RootSet | None:
        """What :meth:`fresh` would return at once, without waiting: the roots in force when every refresh
        triggered so far has been answered and none failed (or the client sends no roots); None when
        :meth:`fresh` would wait, schedule a retry or raise. O(1)."""
        if self._can_fetch and not (
            self._answered_once
            and self._settled >= self._triggers
            and not self._streak.failures
            and self._first_deadline is not None
        ):
            return None
        return self._current

    # The timeout bounds a wait whose expiry is an answer (the roots in force, or a refusal), so it is a
    # parameter rather than the caller's fail_after.
    async def fresh(self, timeout: float | None = None) -> RootSet:  # noqa: ASYNC109
        """The roots in force once every refresh triggered before this call has been answered.

        It waits for the answer to the refresh any earlier list_changed triggered; before the first valid
        answer, for that answer (until first_answer_timeout after :meth:`start`, whatever ``timeout`` says).
        After a failed refresh it also schedules a retry (at most one per ``timeout`` seconds) without
        waiting for it.

        Args:
            timeout: The most seconds to wait (default: the cache's timeout plus max_wait).

        Returns:
            :meth:`current`'s roots.

        Raises:
            RootsUnavailable: The client has not sent valid roots yet.
        """
        ready = self.fresh_now()
        if ready is not None:
            return ready  # every refresh answered, none failed: nothing to wait for or retry
        if not self._can_fetch:
            return self.current()  # raises: no roots in force
        now = self._clock.now()
        deadline = now + (self._timeout + self._max_wait if timeout is None else timeout)
        if self._first_deadline is None:
            # A tool call can arrive before start(): the first-answer budget starts with it.
            self._first_deadline = now + self._first_answer_timeout
        target = self._triggers
        self._maybe_retry(now)
        while self._can_fetch and not (self._answered_once and self._settled >= target):
            bound = deadline
            if self._client_roots is None:
                # Before the first valid answer the first-answer budget decides, not the per-call bound,
                # unless a list_changed came after start(): its refresh gets the per-call wait as usual.
                later_change = target > self._first_triggers
                bound = max(self._first_deadline, deadline) if later_change else self._first_deadline
            if bound <= self._clock.now():
                self._streak.wait_timed_out(self._client_roots)
                break
            if self._progress is None:
                self._progress = anyio.Event()
            await self._clock.wait_until(self._progress, bound)
        return self.current()

    def _maybe_retry(self, now: float) -> None:
        # After a failed refresh (an error or a malformed answer, never a slow one: that one is still
        # outstanding), a client without listChanged would never be asked again. A tool call then schedules
        # one retry, at most once per `timeout` seconds, and does not wait for it.
        if self._outstanding or self._immediate or self._burst_first is not None:
            return
        if not self._streak.retry_due(now):
            return
        self._immediate = True
        self._triggers += 1
        if self._started:
            self._wake()

    # -- listeners --

    def on_change(self, callback: ChangeCallback) -> None:
        """Call ``callback`` whenever the roots in force change.

        Args:
            callback: A plain function, called synchronously as ``callback(old, new)``; None stands for "no
                roots in force" (calls are refused).
        """
        if inspect.iscoroutinefunction(callback):
            raise TypeError("on_change() takes a plain function; it is called synchronously with (old, new)")
        self._listeners.append(callback)

    def _recompute(self) -> None:
        old = self._current
        new: RootSet | None
        if self._phase is Phase.CLIENT:
            new = self._client_roots
        elif self._phase is Phase.FALLBACK:
            new = self._fallback
        else:
            new = None
        self._current = new
        if new != old:
            for callback in list(self._listeners):
                try:
                    callback(old, new)
                except Exception:
                    logger.exception("an on_change listener of RootsCache raised; the roots changed anyway")

    # -- the worker --

    async def run(self) -> None:
        """The refresh worker. Runs until cancelled, :meth:`aclose`, or there is nothing left to do (no
        roots capability). The caller owns the task it runs in."""
        if self._stopped is not None and not self._stopped.is_set():
            raise RuntimeError("RootsCache.run() is already running")
        if not self._may_fetch_later:
            return
        self._stopped = anyio.Event()
        try:
            with anyio.CancelScope() as scope:
                self._run_scope = scope
                async with anyio.create_task_group() as fetches:
                    await self._refresh_loop(fetches)
        finally:
            self._run_scope = None
            self._stopped.set()

    async def _refresh_loop(self, fetches: TaskGroup) -> None:
        while self._may_fetch_later:
            due_now = self._started and (self._immediate or self._burst_first is not None)
            if not due_now or len(self._outstanding) >= MAX_OUTSTANDING:
                # Nothing to send, or at the cap: an answer (which frees a slot) or a trigger wakes us.
                self._wakeup = anyio.Event()
                await self._wakeup.wait()
                self._wakeup = None
                continue
            in_flight_until = self._in_flight_until()
            if in_flight_until is not None and in_flight_until > self._clock.now():
                # One request in flight: the changes made while it is unanswered get one request after its
                # answer (on an ordered stream that answer comes behind the notifications the client wrote
                # before it, so a request per max_wait would be covered by it already). A request still
                # unanswered after `timeout` is slow, not in flight: it is not cancelled, and the next
                # refresh goes out beside it (at most MAX_OUTSTANDING).
                self._answered = anyio.Event()
                await self._clock.wait_until(self._answered, in_flight_until)
                self._answered = None
                continue
            if not self._immediate:
                assert self._burst_first is not None
                # Trailing edge, but never later than max_wait after the burst's first notification.
                due = min(self._burst_last + self._debounce, self._burst_first + self._max_wait)
                if due > self._clock.now():
                    await self._clock.sleep_until(due)
                    continue
            self._immediate = False
            self._burst_first = None
            self._generation += 1
            request = _Request(self._generation, self._triggers, self._clock.now())
            self._outstanding[request.generation] = request
            fetches.start_soon(self._fetch_one, request, name=f"roots/list #{request.generation}")

    def _in_flight_until(self) -> float | None:
        # When the newest outstanding request stops counting as in flight (None: nothing outstanding).
        if not self._outstanding:
            return None
        newest = self._outstanding[max(self._outstanding)]
        return newest.sent + self._timeout

    async def _fetch_one(self, request: _Request) -> None:
        task_id = anyio.get_current_task().id
        self._fetch_tasks.add(task_id)
        raw: object = _NO_OUTCOME
        error: Exception | None = None
        try:
            # No timeout here: a slow answer is not a failed one (only aclose() cancels a request).
            try:
                raw = await self._fetch()
            except Exception as exc:
                error = exc
            await self._deliver(request, raw, error)
        finally:
            self._fetch_tasks.discard(task_id)
            self._outstanding.pop(request.generation, None)
            self._wake()  # a slot is free
            if self._answered is not None:
                self._answered.set()  # and no request is in flight any more

    # -- outcomes --

    async def _deliver(self, request: _Request, raw: object, error: Exception | None) -> None:
        if not self._can_fetch:
            logger.debug("dropping the answer to roots/list #%d: the cache is closed", request.generation)
            return
        try:
            if error is not None:
                raise _Failure(f"failed: {type(error).__name__}: {error}")
            try:
                roots = await build_client_roots(raw, self._transform, budget=self._budget)
            except MalformedRoots as exc:
                raise _Failure(f"was answered with a malformed payload: {exc}") from None
            except Exception as exc:
                raise _Failure(
                    f"was answered, but its roots could not be built: {type(exc).__name__}: {exc}"
                ) from None
        except _Failure as failure:
            if self._can_fetch:
                self._streak.failed(request.generation, str(failure), self._clock.now(), self._client_roots)
                self._settle(request)
            return
        if not self._can_fetch:
            return  # closed while the roots were being built
        if request.generation <= self._applied_generation:
            logger.debug(
                "dropping the answer to roots/list #%d: #%d is newer and already applied",
                request.generation,
                self._applied_generation,
            )
        else:
            self._applied_generation = request.generation
            self._client_roots = roots
            self._recompute()
            self._streak.succeeded(request.generation, roots)
        self._settle(request)

    def _settle(self, request: _Request) -> None:
        self._settled = max(self._settled, request.covers)
        self._answered_once = True
        self._signal_progress()

    def _signal_progress(self) -> None:
        if self._progress is not None:
            self._progress.set()
            self._progress = None

    # -- shutdown --

    def _stop_worker(self) -> None:
        if self._run_scope is not None:
            self._run_scope.cancel()
        self._wake()

    async def aclose(self) -> None:
        """Stop refreshing: cancel the pending and outstanding requests, release waiters, and return once
        the worker has stopped. No answer changes the roots after this (call it from outside ``fetch``)."""
        self._close()
        if self._stopped is not None and anyio.get_current_task().id not in self._fetch_tasks:
            await self._stopped.wait()

    def _close(self) -> None:
        # The roots in force stay as they were (nothing changes them any more); only fetching stops.
        self._phase = Phase.CLOSED
        self._stop_worker()
        self._signal_progress()

    async def __aenter__(self) -> RootsCache:
        if self._phase is Phase.CLOSED:
            raise RuntimeError("this RootsCache is closed")
        group = await self._owned.open()
        group.start_soon(self.run, name="RootsCache.run")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        self._close()  # the worker stops by itself; its task group is left, not cancelled
        return await self._owned.close(exc_type, exc, tb, cancel=False)


class _Failure(Exception):
    """Internal: why an answer could not be used."""
