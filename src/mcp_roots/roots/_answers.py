"""Client answers to roots/list, both eras: the schema and entry cap (on the event loop, no I/O), the
RootSet built from them in a bounded worker thread under a CPU budget (never on the event loop), and the
last answer of each client stream remembered with its RootSet (an unchanged answer is not built again).
"""

from __future__ import annotations

import functools
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TypeVar

import anyio
import anyio.lowlevel
import anyio.to_thread

from ..errors import InvalidRootURI, RootsError
from ..paths._rootset import RootSet
from ..paths._uri import uri_and_name

__all__ = [
    "BUILD_THREADS",
    "MAX_ROOTS",
    "MAX_STREAMS",
    "RESOLUTION_BUDGET",
    "AnswerKey",
    "LastAnswers",
    "MalformedRoots",
    "answer_key",
    "build_checked_roots",
    "build_client_roots",
    "check_roots_answer",
    "off_loop",
]

T = TypeVar("T")

_MISSING = object()
# An answer with more entries than this is malformed as a whole (both eras): real clients send a handful.
MAX_ROOTS = 1000
# CPU seconds (time.thread_time of the worker thread) that resolving one answer's entries may cost; beyond
# it the answer is malformed. 1,000 plain roots cost ~0.05 s; 1,000 entries through 40-link chains ~1 s.
RESOLUTION_BUDGET = 0.5
# Worker threads that build RootSets from client answers at once, per event loop, whatever the number of
# connections: a crowd of hostile peers queues behind these instead of taking every thread of the loop.
BUILD_THREADS = 4
# Client streams whose last answer is remembered at once (per guard); the oldest is forgotten first. Each
# holds one RootSet, whose root descriptors stay open while it is remembered (at most 64 per set).
MAX_STREAMS = 64

AnswerKey = tuple[tuple[str, "str | None"], ...]
"""What a RootSet built from an answer depends on: each entry's uri and name, in order."""


class MalformedRoots(RootsError):
    """A roots answer that breaks the schema (not a list, too many entries, an entry that is not an object
    with a string ``uri``) or costs more than the resolution budget: the last valid roots stay in force."""


def check_roots_answer(raw: object) -> list[object]:
    """The root entries of a raw roots/list result (a mapping with ``"roots"``, or an object with ``.roots``),
    or :class:`MalformedRoots` when it breaks the schema. O(entries), no I/O: cheap on the event loop."""
    if isinstance(raw, Mapping):
        if "roots" not in raw:
            raise MalformedRoots(f"the answer has no 'roots' (keys: {sorted(map(str, raw))[:10]})")
        entries = raw["roots"]
    else:
        entries = getattr(raw, "roots", _MISSING)
        if entries is _MISSING:
            raise MalformedRoots(f"the answer is a {type(raw).__name__}, not an object with 'roots'")
    if not isinstance(entries, (list, tuple)):
        raise MalformedRoots(f"'roots' is a {type(entries).__name__}, not a list")
    if len(entries) > MAX_ROOTS:
        raise MalformedRoots(f"'roots' has {len(entries)} entries, more than the {MAX_ROOTS} accepted")
    for index, entry in enumerate(entries):
        if isinstance(entry, Mapping):
            uri = entry.get("uri")
            if not isinstance(uri, str):
                shown = "no 'uri'" if uri is None else f"a 'uri' that is {type(uri).__name__}, not a string"
                raise MalformedRoots(f"root entry {index + 1} has {shown}")
        elif isinstance(entry, (str, bytes)) or getattr(entry, "uri", None) is None:
            # A root on the wire is an object with a uri; a bare string or number is not one, even if it
            # happens to spell a URI. (Typed SDK roots carry their uri as an object, hence the attribute.)
            raise MalformedRoots(
                f"root entry {index + 1} is {type(entry).__name__}, not an object with a uri"
            )
    return list(entries)


def _within_budget(entries: Iterable[object], budget: float) -> Iterator[object]:
    # RootSet.from_uris pulls the entries one by one, so the cost of those already resolved is known here
    # before the next one starts; the CPU time of this thread (system time included: lstat, readlink) does
    # not grow with the machine's load the way wall-clock time does.
    start = time.thread_time()
    for count, entry in enumerate(entries):
        spent = time.thread_time() - start
        if spent > budget:
            raise MalformedRoots(
                f"resolving the roots cost more than {budget:g}s of CPU after {count} entries "
                f"(symbolic link chains?); the answer is refused whole"
            )
        yield entry


def _build(entries: list[object], transform: Callable[[RootSet], RootSet] | None, budget: float) -> RootSet:
    roots = RootSet.from_uris(_within_budget(entries, budget), strict=False, source="client")
    if transform is not None:
        roots = transform(roots)
        if not isinstance(roots, RootSet):
            raise TypeError(f"transform returned {type(roots).__name__}, not a RootSet")
    return roots


_BUILD_LIMITER: anyio.lowlevel.RunVar[anyio.CapacityLimiter] = anyio.lowlevel.RunVar("mcp_roots_build")


def _build_limiter() -> anyio.CapacityLimiter:
    # One limiter per event loop (a RunVar): a limiter belongs to the loop that made it.
    try:
        return _BUILD_LIMITER.get()
    except LookupError:
        limiter = anyio.CapacityLimiter(BUILD_THREADS)
        _BUILD_LIMITER.set(limiter)
        return limiter


async def off_loop(job: Callable[[], T]) -> T:
    """Run ``job`` in a worker thread under the shared, bounded limiter (BUILD_THREADS per event loop):
    work a peer can make arbitrarily large (its roots) never runs on the event loop."""
    return await anyio.to_thread.run_sync(job, limiter=_build_limiter())


async def build_client_roots(
    raw: object,
    transform: Callable[[RootSet], RootSet] | None = None,
    *,
    budget: float = RESOLUTION_BUDGET,
) -> RootSet:
    """A RootSet from a client's raw roots answer, built in a worker thread (never on the event loop).

    Raises :class:`MalformedRoots` for a schema violation, more than :data:`MAX_ROOTS` entries, or more than
    ``budget`` CPU seconds of resolution. Well-formed entries that break a rule (scheme, host, encoding, a
    missing directory) are dropped alone. ``transform`` (the ceiling) runs in the same thread.
    """
    return await build_checked_roots(check_roots_answer(raw), transform, budget=budget)


async def build_checked_roots(
    entries: list[object],
    transform: Callable[[RootSet], RootSet] | None = None,
    *,
    budget: float = RESOLUTION_BUDGET,
) -> RootSet:
    """:func:`build_client_roots` of the entries :func:`check_roots_answer` returned."""
    return await off_loop(functools.partial(_build, entries, transform, budget))


def answer_key(entries: list[object]) -> AnswerKey | None:
    """The :data:`AnswerKey` of checked ``entries`` (:func:`check_roots_answer`), read as the build reads
    them; None when an entry's uri or name is one the build refuses (such an answer is not remembered)."""
    try:
        return tuple(uri_and_name(entry) for entry in entries)
    except InvalidRootURI:
        return None


class LastAnswers:
    """The last roots answer of each client stream and the RootSet built from it, so that a stream that
    sends the same answer again (2026-07-28: the roots come with every call) gets the same RootSet with no
    worker thread. One answer per stream: any other answer replaces it, and the RootSet of an earlier one is
    never handed out again. A stream is an object that lives exactly as long as one client's channel,
    compared by identity, never by value (two clients' objects may compare equal), and held weakly: the
    entry goes with the stream. At most ``limit`` streams are remembered; the oldest is forgotten first.
    Event loop thread only."""

    __slots__ = ("_limit", "_slots")

    def __init__(self, limit: int = MAX_STREAMS) -> None:
        self._limit = limit
        self._slots: dict[int, tuple[weakref.ref[object], AnswerKey, RootSet]] = {}

    def __len__(self) -> int:
        return len(self._slots)

    def get(self, stream: object, key: AnswerKey) -> RootSet | None:
        """The RootSet of ``stream``'s last answer when that answer was ``key``, else None."""
        slot = self._slots.get(id(stream))
        if slot is None or slot[0]() is not stream or slot[1] != key:
            return None
        return slot[2]

    def forget(self, stream: object) -> None:
        """Drop ``stream``'s last answer (a new one is being built)."""
        slot = self._slots.get(id(stream))
        if slot is not None and slot[0]() is stream:
            self._slots.pop(id(stream), None)

    def put(self, stream: object, key: AnswerKey, roots: RootSet) -> None:
        """Remember ``roots`` as built from ``stream``'s last answer ``key`` (a stream that cannot be
        referenced weakly is not remembered)."""
        slots, ident = self._slots, id(stream)

        def gone(ref: weakref.ref[object]) -> None:
            slot = slots.get(ident)
            if slot is not None and slot[0] is ref:
                slots.pop(ident, None)

        try:
            ref = weakref.ref(stream, gone)
        except TypeError:
            return
        slots.pop(ident, None)
        while len(slots) >= self._limit:
            # A snapshot: a collected stream's callback may drop an entry (from any thread) meanwhile.
            slots.pop(next(iter(list(slots))), None)
        slots[ident] = (ref, key, roots)
