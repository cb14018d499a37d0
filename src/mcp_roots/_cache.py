"""RootsCache: the per-connection roots lifecycle of a legacy-era MCP connection, as a state machine.

It records the client's roots capability, fetches roots/list after initialized, refreshes on list_changed
(debounced, single flight, generation-checked), and hands tools a coherent, fresh RootSet. anyio only: it
never imports mcp, so it is driven in tests by a plain async fetch function.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping
from types import TracebackType

import anyio
from anyio.abc import TaskGroup

from ._errors import RootsError
from ._rootset import RootSet

__all__ = ["RootsCache"]

logger = logging.getLogger("mcp_roots")

ChangeCallback = Callable[[RootSet, RootSet], object]

_NO_OUTCOME = object()
# Each entry costs a few filesystem lookups on the event loop; real clients send a handful. An answer with
# more than this is refused as a whole rather than trusted to be harmless.
MAX_ROOTS = 1000
_STREAK_NOTE = "; later failures are logged at debug level until a refresh succeeds"


class _MalformedAnswer(RootsError):
    """Internal: a roots/list answer that is not a list of roots at all."""


class _Request:
    """One roots/list request: its generation, the notifications it covers, and how it ended."""

    __slots__ = ("abandoned", "covers", "done", "error", "generation", "raw", "scope")

    def __init__(self, generation: int, covers: int) -> None:
        self.generation = generation
        # Number of refresh triggers (start + notifications) received before this request was sent: when
        # it settles, every one of them has had its refresh.
        self.covers = covers
        self.scope = anyio.CancelScope()
        self.done = anyio.Event()
        self.abandoned = False
        self.raw: object = _NO_OUTCOME
        self.error: Exception | None = None


def _entries_of(raw: object) -> list[object]:
    """The list of root entries in a raw roots/list result, or _MalformedAnswer."""
    if isinstance(raw, Mapping):
        if "roots" not in raw:
            raise _MalformedAnswer(f"the answer has no 'roots' (keys: {sorted(map(str, raw))[:10]})")
        entries = raw["roots"]
    else:
        entries = getattr(raw, "roots", _NO_OUTCOME)
        if entries is _NO_OUTCOME:
            raise _MalformedAnswer(f"the answer is a {type(raw).__name__}, not an object with 'roots'")
    if not isinstance(entries, (list, tuple)):
        raise _MalformedAnswer(f"'roots' is a {type(entries).__name__}, not a list")
    if len(entries) > MAX_ROOTS:
        raise _MalformedAnswer(f"'roots' has {len(entries)} entries, more than the {MAX_ROOTS} accepted")
    kept: list[object] = []
    for entry in entries:
        # A root on the wire is an object with a uri; a bare string or number is not one, even if it
        # happens to spell a URI.
        if isinstance(entry, Mapping) or (not isinstance(entry, (str, bytes)) and hasattr(entry, "uri")):
            kept.append(entry)
        else:
            logger.warning("skipping root from client: entry %.200r is not a root object", entry)
    return kept


class RootsCache:
    """The roots one legacy-era connection's client granted, kept fresh.

    ``fetch`` sends roots/list and returns the raw result (a mapping with a ``"roots"`` list, or an object
    with ``.roots``) or raises. ``fallback`` applies while the client has no roots capability, cannot
    answer (:meth:`mark_unsupported`), or has not answered yet. ``transform`` is applied to every RootSet
    built from a client answer (the guard clips it to the operator's ceiling).

    Refreshes are debounced: the request goes out ``debounce`` seconds after the last notification of a
    burst, but never later than ``max_wait`` after its first. One request is in flight at a time and each
    has ``timeout`` seconds to answer. All methods must be called from the event loop's thread.
    """

    def __init__(
        self,
        fetch: Callable[[], Awaitable[object]],
        *,
        fallback: RootSet,
        transform: Callable[[RootSet], RootSet] | None = None,
        debounce: float = 0.02,
        max_wait: float = 0.1,
        timeout: float = 5.0,
        first_answer_timeout: float | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        if not callable(fetch):
            raise TypeError(f"fetch must be an async function, got {type(fetch).__name__}")
        if not isinstance(fallback, RootSet):
            raise TypeError(f"fallback must be a RootSet, got {type(fallback).__name__}")
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
        self._fetch = fetch
        self._fallback = fallback
        self._transform = transform
        self._debounce = debounce
        self._max_wait = max_wait
        self._timeout = timeout
        self._first_answer_timeout = timeout if first_answer_timeout is None else first_answer_timeout
        self._clock = clock or anyio.current_time

        # Capability state (None: set_capabilities() not called yet).
        self._declared: bool | None = None
        self._list_changed = False
        self._unsupported = False
        self._closed = False

        # What current() returns, kept ready so a read is one attribute load.
        self._current = fallback
        self._client_roots: RootSet | None = None
        self._listeners: list[ChangeCallback] = []

        # Refresh triggers and the pending burst.
        self._started = False
        self._immediate = False
        self._triggers = 0
        self._burst_first: float | None = None
        self._burst_last = 0.0
        self._wakeup: anyio.Event | None = None

        # Requests and their outcomes.
        self._generation = 0
        self._applied_generation = 0
        self._settled = 0
        self._settled_once = False
        self._first_deadline: float | None = None
        self._progress: anyio.Event | None = None
        self._failures = 0
        self._in_flight = False
        self._retry_not_before = 0.0
        self._said_first_timeout = False
        self._said_stale = False
        self._said_late = False

        # The worker.
        self._run_scope: anyio.CancelScope | None = None
        self._stopped: anyio.Event | None = None
        self._fetch_tasks: set[int] = set()
        self._owned_group: TaskGroup | None = None

    def __repr__(self) -> str:
        if self._closed:
            state = "closed"
        elif self._declared is None:
            state = "capabilities unknown"
        elif not self._declared:
            state = "no roots capability"
        elif self._unsupported:
            state = "roots/list unsupported"
        else:
            state = f"roots{' with listChanged' if self._list_changed else ''}, request #{self._generation}"
        return f"<RootsCache {state}: {self._current!r}>"

    # -- capability state --

    def set_capabilities(self, *, roots: bool, list_changed: bool) -> None:
        """Record what the client declared in ``initialize`` (``capabilities.roots`` and its
        ``listChanged``). Without the roots capability the cache never fetches and serves the fallback."""
        self._declared = bool(roots)
        self._list_changed = bool(roots) and bool(list_changed)
        self._recompute()
        if not self._declared:
            self._stop_worker()
            self._signal_progress()

    def mark_unsupported(self) -> None:
        """The client cannot answer roots/list (-32601, "not supported", no back-channel): serve the
        fallback roots from now on, stop refreshing, and release every waiter."""
        if self._unsupported:
            return
        self._unsupported = True
        logger.debug(
            "roots/list is not available on this connection; fallback roots from %s apply: %s",
            self._fallback.source,
            self._fallback.describe(),
        )
        self._recompute()
        self._stop_worker()
        self._signal_progress()

    @property
    def _can_fetch(self) -> bool:
        return bool(self._declared) and not self._unsupported and not self._closed

    @property
    def _may_fetch_later(self) -> bool:
        # The worker waits while the capabilities are still unknown.
        return self._declared is not False and not self._unsupported and not self._closed

    # -- triggers --

    def start(self) -> None:
        """Schedule the first roots/list (call after ``notifications/initialized``). Sync, non-blocking;
        :meth:`run` (or ``async with cache``) does the work. A no-op when the client declared no roots."""
        if self._declared is None:
            raise RuntimeError(
                "RootsCache.start() before set_capabilities(): the cache cannot know whether the client "
                "declared the roots capability; call set_capabilities() with what initialize said"
            )
        if self._started or not self._can_fetch:
            return
        self._started = True
        self._immediate = True
        self._triggers += 1
        if self._first_deadline is None:
            self._first_deadline = self._clock() + self._first_answer_timeout
        if self._wakeup is not None:
            self._wakeup.set()

    def notify_changed(self) -> None:
        """The client sent ``notifications/roots/list_changed``. O(1); the refresh is debounced."""
        if not self._can_fetch:
            return
        now = self._clock()
        self._triggers += 1
        self._burst_last = now
        if self._burst_first is None:
            self._burst_first = now
        if self._started and self._wakeup is not None:
            self._wakeup.set()

    # -- reads --

    def current(self) -> RootSet:
        """The roots in force now: the client's (transformed) or the fallback. O(1), never waits."""
        return self._current

    # The timeout bounds a wait whose expiry is an answer (the roots in force), not an error, so it is a
    # parameter rather than the caller's fail_after.
    async def fresh(self, timeout: float | None = None) -> RootSet:  # noqa: ASYNC109
        """The roots in force once every refresh triggered before this call has settled.

        Waits (at most ``timeout`` seconds, default the cache's timeout plus max_wait) for the refresh that
        any earlier list_changed triggered, and before the first answer for that answer (at most
        first_answer_timeout after :meth:`start`). On timeout returns :meth:`current` and logs it. After a
        failed refresh it also schedules a retry (at most one per ``timeout`` seconds) without waiting for it.
        """
        if not self._can_fetch:
            return self._current
        now = self._clock()
        deadline = now + (self._timeout + self._max_wait if timeout is None else timeout)
        if self._first_deadline is None:
            # A tool call can arrive before start(): the first-answer budget starts with it.
            self._first_deadline = now + self._first_answer_timeout
        target = self._triggers
        self._maybe_retry(now)
        while self._can_fetch and not (self._settled_once and self._settled >= target):
            bound = deadline if self._settled_once else min(deadline, self._first_deadline)
            remaining = bound - self._clock()
            if remaining <= 0:
                self._say_wait_timed_out()
                break
            if self._progress is None:
                self._progress = anyio.Event()
            progress = self._progress
            with anyio.move_on_after(remaining):
                await progress.wait()
        return self._current

    def _maybe_retry(self, now: float) -> None:
        # After a failed refresh, a client without listChanged would never be asked again. A tool call
        # then schedules one retry, at most once per `timeout` seconds, and does not wait for it.
        if not self._failures or self._in_flight or self._immediate or self._burst_first is not None:
            return
        if now < self._retry_not_before:
            return
        self._retry_not_before = now + self._timeout
        logger.debug("retrying roots/list after %d failed attempt(s)", self._failures)
        self._immediate = True
        self._triggers += 1
        if self._started and self._wakeup is not None:
            self._wakeup.set()

    def _say_wait_timed_out(self) -> None:
        if not self._settled_once:
            if not self._said_first_timeout:
                self._said_first_timeout = True
                logger.warning(
                    "the client has not answered roots/list within %gs; using fallback roots from %s "
                    "until it does: %s",
                    self._first_answer_timeout,
                    self._fallback.source,
                    self._fallback.describe(),
                )
        elif not self._said_stale:
            self._said_stale = True
            logger.info(
                "a roots refresh is still pending; answering with the roots in force: %s",
                self._current.describe(),
            )

    # -- listeners --

    def on_change(self, callback: ChangeCallback) -> None:
        """Call ``callback(old, new)`` (synchronously) whenever the roots in force change."""
        if inspect.iscoroutinefunction(callback):
            raise TypeError("on_change() takes a plain function; it is called synchronously with (old, new)")
        self._listeners.append(callback)

    def _recompute(self) -> None:
        old = self._current
        if self._declared and not self._unsupported and self._client_roots is not None:
            new = self._client_roots
        else:
            new = self._fallback
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
        roots capability, or roots/list unsupported). The caller owns the task it runs in."""
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
            if not (self._started and (self._immediate or self._burst_first is not None)):
                self._wakeup = anyio.Event()
                await self._wakeup.wait()
                self._wakeup = None
                continue
            if not self._immediate:
                assert self._burst_first is not None
                # Trailing edge, but never later than max_wait after the burst's first notification.
                due = min(self._burst_last + self._debounce, self._burst_first + self._max_wait)
                delay = due - self._clock()
                if delay > 0:
                    await anyio.sleep(delay)
                    continue
            self._immediate = False
            self._burst_first = None
            self._generation += 1
            request = _Request(self._generation, self._triggers)
            await self._send(fetches, request)

    async def _send(self, fetches: TaskGroup, request: _Request) -> None:
        fetches.start_soon(self._fetch_one, request, name=f"roots/list #{request.generation}")
        self._in_flight = True
        try:
            with anyio.move_on_after(self._timeout):
                await request.done.wait()
        finally:
            self._in_flight = False
        if request.done.is_set():
            return
        # Stop waiting and move on, but let the fetch live a while longer (one more timeout): a client
        # that is merely slow (an overloaded host) still gets its answer applied when it comes, competing by
        # generation with any newer request. After that, the fetch is cancelled; one that ignores
        # cancellation may still answer later, under the same rule, and never blocks the next request.
        request.abandoned = True
        request.scope.deadline = min(request.scope.deadline, anyio.current_time() + self._timeout)
        self._settle(request)
        self._failed(request, f"got no answer within {self._timeout:g}s")

    async def _fetch_one(self, request: _Request) -> None:
        task_id = anyio.get_current_task().id
        self._fetch_tasks.add(task_id)
        try:
            with request.scope:
                try:
                    request.raw = await self._fetch()
                except Exception as exc:
                    request.error = exc
            self._deliver(request)
        finally:
            self._fetch_tasks.discard(task_id)
            request.done.set()

    # -- outcomes --

    def _deliver(self, request: _Request) -> None:
        if request.raw is _NO_OUTCOME and request.error is None:
            return  # cancelled before it answered
        if not self._can_fetch:
            logger.debug(
                "dropping the answer to roots/list #%d: the cache is closed or roots are unsupported",
                request.generation,
            )
            return
        try:
            if request.error is not None:
                exc = request.error
                raise _Failure(f"failed: {type(exc).__name__}: {exc}")
            roots = self._parse(request.raw)
        except _Failure as failure:
            if not request.abandoned:
                self._settle(request)
            self._failed(request, str(failure))
            return
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
            self._succeeded(request)
        if not request.abandoned:
            self._settle(request)

    def _parse(self, raw: object) -> RootSet:
        try:
            entries = _entries_of(raw)
        except _MalformedAnswer as exc:
            raise _Failure(f"answered with a malformed payload: {exc}") from None
        roots = RootSet.from_uris(entries, strict=False, source="client")
        if self._transform is not None:
            try:
                roots = self._transform(roots)
            except Exception as exc:
                raise _Failure(f"was answered, but transform raised {type(exc).__name__}: {exc}") from None
            if not isinstance(roots, RootSet):
                raise _Failure(f"was answered, but transform returned {type(roots).__name__}, not a RootSet")
        return roots

    def _settle(self, request: _Request) -> None:
        self._settled = max(self._settled, request.covers)
        self._settled_once = True
        self._signal_progress()

    def _signal_progress(self) -> None:
        if self._progress is not None:
            self._progress.set()
            self._progress = None

    def _failed(self, request: _Request, why: str) -> None:
        if not self._failures:
            self._retry_not_before = self._clock() + self._timeout
        self._failures += 1
        if request.abandoned and why.startswith("failed"):
            level = logging.DEBUG  # the timeout of this request was already reported
        else:
            level = logging.WARNING if self._failures == 1 else logging.DEBUG
        logger.log(
            level,
            "roots/list #%d %s; keeping the roots in force (%s)%s",
            request.generation,
            why,
            self._current.describe(),
            _STREAK_NOTE if level > logging.DEBUG else "",
        )

    def _succeeded(self, request: _Request) -> None:
        if self._said_first_timeout and not self._said_late:
            self._said_late = True
            logger.info(
                "the client answered roots/list #%d after the fallback was used; its roots apply: %s",
                request.generation,
                self._current.describe(),
            )
        elif self._failures:
            logger.info(
                "roots/list #%d answered after %d failed attempt(s); roots: %s",
                request.generation,
                self._failures,
                self._current.describe(),
            )
        else:
            logger.debug("roots/list #%d applied: %s", request.generation, self._current.describe())
        self._failures = 0
        self._said_stale = False

    # -- shutdown --

    def _stop_worker(self) -> None:
        if self._run_scope is not None:
            self._run_scope.cancel()
        if self._wakeup is not None:
            self._wakeup.set()

    async def aclose(self) -> None:
        """Stop refreshing: cancel the pending and in-flight work, release waiters, and return once the
        worker has stopped. No answer changes the roots after this (call it from outside ``fetch``)."""
        self._closed = True
        self._stop_worker()
        self._signal_progress()
        if self._stopped is not None and anyio.get_current_task().id not in self._fetch_tasks:
            await self._stopped.wait()

    async def __aenter__(self) -> RootsCache:
        if self._closed:
            raise RuntimeError("this RootsCache is closed")
        group = anyio.create_task_group()
        await group.__aenter__()
        self._owned_group = group
        group.start_soon(self.run, name="RootsCache.run")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        group, self._owned_group = self._owned_group, None
        self._closed = True
        self._stop_worker()
        self._signal_progress()
        if group is None:
            return None
        return await group.__aexit__(exc_type, exc, tb)


class _Failure(Exception):
    """Internal: why an answer could not be used."""
