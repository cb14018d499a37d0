"""The legacy-era connections of one guard: one lifecycle for every adapter.
It runs the machinery; ``_policy`` decides which roots a request gets.
"""

# The legacy-era connections of one guard: one lifecycle for every adapter. A connection's RootsCache is
# opened at ``initialize`` (from the capability the client declared), served from
# ``notifications/initialized``
# for as long as the connection lives, told of ``roots/list_changed``, and fed by the one ``roots/list``
# fetcher below, which sends through the adapter's sender (``_facts.SendRootsList``). A call on the
# connection starts the cache if nothing has yet, waits (bounded) for the refreshes due, and gets its roots.
#
# Which roots a request gets (a connection never opened, the fallback) is decided in ``_policy``; this module
# runs the machinery. It imports no SDK.

from __future__ import annotations

import logging
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio

from ..errors import RootsUnavailable
from ..paths._rootset import RootSet
from ._cache import RootsCache
from ._facts import ConnectionEnded, SendRootsList

__all__ = ["ConnectionRoots", "LegacyConnections", "NewCache"]

logger = logging.getLogger("mcp_roots")

NewCache = Callable[[Callable[[], Awaitable[object]], bool, bool], RootsCache]
"""``new_cache(fetch, declared, list_changed)``: a connection's RootsCache, configured by the guard."""


@dataclass
class ConnectionRoots:
    """The roots state of one legacy connection: its RootsCache and the lifecycle's bookkeeping."""

    cache: RootsCache
    waiting: list[Any] = field(default_factory=list)
    """The ``request`` of each call waiting for roots right now, newest last (the sender ties a
    ``roots/list`` sent meanwhile to one of them)."""
    cache_started: bool = False
    served: bool = False
    """notifications/initialized was handled: a repeated one is ignored quietly."""


class LegacyConnections:
    """One guard's legacy-era connections, by key (an object that lives as long as its connection; the
    states are held weakly by it)."""

    def __init__(self, new_cache: NewCache, say_once: Callable[..., None], timeout: float) -> None:
        self._new_cache = new_cache
        self._say_once = say_once
        self._timeout = timeout
        self.states: weakref.WeakKeyDictionary[object, ConnectionRoots] = weakref.WeakKeyDictionary()

    def get(self, key: object) -> ConnectionRoots | None:
        """The state of connection ``key``, if it was opened."""
        return self.states.get(key)

    def open(
        self, key: object, send: SendRootsList, *, declared: bool, list_changed: bool
    ) -> ConnectionRoots:
        """The state of connection ``key``, created on first use (``initialize``, or the first call where
        the adapter saw the connection but not its ``initialize``) from the client's declared capability."""
        existing = self.states.get(key)
        if existing is not None:
            return existing
        state = ConnectionRoots(self._new_cache(self._fetcher(key, send), declared, list_changed))
        self.states[key] = state
        return state

    async def close(self, key: object) -> None:
        """Forget connection ``key`` and close its cache (when the connection ends)."""
        state = self.states.pop(key, None)
        if state is not None:
            await state.cache.aclose()

    def changed(self, key: object) -> None:
        """The client sent ``notifications/roots/list_changed`` on connection ``key``."""
        state = self.states.get(key)
        if state is not None:
            state.cache.notify_changed()

    async def serve(self, key: object, *, cannot_ask: str | None, send_now: bool) -> None:
        """``notifications/initialized`` on connection ``key``: run its roots refresh for as long as the
        connection lives (the adapter runs this in a task the SDK cancels when the connection ends: then
        the connection is forgotten). ``cannot_ask``: why ``roots/list`` cannot be sent on it at all (no
        back-channel: it gets the fallback, as a client without the capability), or None. ``send_now``:
        the first ``roots/list`` may go out now; otherwise the first call that needs roots sends it, tied
        to that call (on streamable HTTP a request sent before the client opened its GET stream is lost).
        """
        state = self.states.get(key)
        if state is None or state.served:
            return
        state.served = True
        if cannot_ask is not None:
            state.cache.set_capabilities(roots=False, list_changed=False)
            self._say_once(
                "cannot-ask:" + cannot_ask, "%s: roots/list cannot be sent; fallback roots apply", cannot_ask
            )
        if send_now:
            self._start(state)
        try:
            await state.cache.run()  # returns at once where there is nothing to refresh (the fallback)
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):  # the connection ended
                await self.close(key)
            raise

    def _start(self, state: ConnectionRoots) -> None:
        if not state.cache_started:
            state.cache_started = True
            state.cache.start()

    async def fresh(self, state: ConnectionRoots, request: Any) -> RootSet:
        """The roots of a call (``request``: the adapter's object for it) on the connection of ``state``:
        the cache started if it was not, and every refresh due answered (the wait is bounded)."""
        self._start(state)
        state.waiting.append(request)
        try:
            return await state.cache.fresh(self._timeout)
        finally:
            state.waiting.remove(request)

    def _fetcher(self, key: object, send: SendRootsList) -> Callable[[], Awaitable[object]]:
        """The one ``roots/list`` fetcher: through the adapter's ``send``, tied to the calls waiting."""
        # A weak reference: the states are held weakly by the connection, and a strong one from inside a
        # state would keep both alive if the connection's end were never seen.
        key_ref = weakref.ref(key)

        async def fetch() -> object:
            connection = key_ref()
            if connection is None:
                raise RootsUnavailable("the connection has ended")
            state = self.states.get(connection)
            waiting = list(state.waiting) if state is not None else []
            try:
                return await send(connection, waiting)
            except ConnectionEnded:
                # The connection is ending and its task group is about to cancel this refresh.
                logger.debug("roots/list abandoned: the connection closed")
                await anyio.sleep_forever()
                raise  # not reached: sleep_forever returns only by cancellation

        return fetch
