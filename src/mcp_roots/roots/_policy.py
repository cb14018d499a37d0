"""Which RootSet is in force for a connection or a request: the guard's configuration (fallback, ceiling,
eras), each connection's RootsCache, and the refusal-logging policy (each reason once per streak). It never
imports an MCP SDK, an adapter or the broker.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import RootsUnavailable
from ..paths._rootset import RootSet
from ._answers import LastAnswers, MalformedRoots, answer_key, build_checked_roots, check_roots_answer
from ._cache import RootsCache
from ._sources import SOURCE_UNCONFIGURED, clip_to_ceiling

__all__ = ["ConnectionRoots", "GuardPolicy", "note_deprecation"]

logger = logging.getLogger("mcp_roots")

_deprecation_noted = False


def note_deprecation() -> None:
    """Say once per process that client roots are deprecated (SEP-2577) but still enforced."""
    global _deprecation_noted
    if not _deprecation_noted:
        _deprecation_noted = True
        logger.info(
            "client roots are deprecated as of MCP 2026-07-28 (SEP-2577) but remain supported; "
            "mcp-roots keeps enforcing them and its fallback roots apply where clients send none"
        )


# --- Per-connection state ----------------------------------------------------------------------------


@dataclass
class ConnectionRoots:
    """The roots state of one connection: its RootsCache, and adapter bookkeeping."""

    cache: RootsCache
    waiting: list[Any] = field(default_factory=list)
    """Adapter-defined handles of the guarded calls waiting for roots right now, newest last (the mcp 2.x
    adapter ties a roots/list sent meanwhile to the newest one's response stream)."""
    cache_started: bool = False
    served: bool = False
    """notifications/initialized was handled: a repeated one is ignored quietly."""


class GuardPolicy:
    """A RootsGuard's configuration and the services adapters build on (see the module docstring)."""

    def __init__(
        self,
        *,
        fallback: RootSet,
        ceiling: RootSet | None,
        debounce: float,
        max_wait: float,
        timeout: float,
        first_answer_timeout: float,
        strict: bool = False,
        expand_user: bool = False,
        how_to_configure: str = "",
    ) -> None:
        self.fallback = fallback
        self.strict = strict
        self.expand_user = expand_user
        self.how_to_configure = how_to_configure
        self.ceiling = ceiling
        self.debounce = debounce
        self.max_wait = max_wait
        self.timeout = timeout
        self.first_answer_timeout = first_answer_timeout
        self._said: set[str] = set()
        # Refusal reasons said at INFO in the current streak (cleared when a guarded call passes).
        self._refusals_said: set[str] = set()
        self._connections: weakref.WeakKeyDictionary[object, ConnectionRoots] = weakref.WeakKeyDictionary()
        # 2026-07-28: each client stream's last roots answer and its RootSet (see roots_from_client_answer).
        self._answers = LastAnswers()

    def clip(self, roots: RootSet) -> RootSet:
        """``roots`` narrowed to the ceiling (client roots narrow access, never widen it)."""
        return roots if self.ceiling is None else clip_to_ceiling(roots, self.ceiling)

    def log_refusal(self, tool: str, exc: Exception, message: str | None = None) -> None:
        """Log a refused call (``message``, else ``exc``'s text): each reason once per streak at INFO (a
        model retrying the same refused call would flood the log), then at DEBUG until a call passes."""
        reason = type(exc).__name__
        level = logging.DEBUG if reason in self._refusals_said else logging.INFO
        self._refusals_said.add(reason)
        logger.log(level, "refused %s(): %s", tool, exc if message is None else message)

    def call_passed(self) -> None:
        """A guarded call passed its checks: the streak of refusals is over."""
        if self._refusals_said:
            self._refusals_said.clear()

    def say_once(self, key: str, message: str, *args: object) -> None:
        """Log at INFO the first time for ``key``, at DEBUG afterwards."""
        if key in self._said:
            logger.debug(message, *args)
        else:
            self._said.add(key)
            logger.info(message, *args)

    # -- connections --

    def connection(self, key: object) -> ConnectionRoots | None:
        """The state of the connection ``key``, if :meth:`open_connection` ran for it."""
        return self._connections.get(key)

    def roots_now(self, key: object) -> RootSet | None:
        """The roots a guarded call on the legacy-era connection ``key`` gets at once: its cache runs and
        has nothing due (:meth:`RootsCache.fresh_now`), as :meth:`served_roots` serves them; None when
        the call must go the long way (wait for an answer, start the cache, or find no connection)."""
        state = self._connections.get(key)
        if state is None or not state.cache_started:
            return None
        roots = state.cache.fresh_now()
        return None if roots is None else self.served_roots(roots)

    def open_connection(
        self,
        key: object,
        fetch: Callable[[], Awaitable[object]],
        *,
        declared: bool,
        list_changed: bool,
    ) -> ConnectionRoots:
        """The state of connection ``key``, created on first use from the client's declared capability."""
        existing = self._connections.get(key)
        if existing is not None:
            return existing
        if declared:
            note_deprecation()
        cache = RootsCache(
            fetch,
            fallback=self.fallback,
            transform=self.clip,
            debounce=self.debounce,
            max_wait=self.max_wait,
            timeout=self.timeout,
            first_answer_timeout=self.first_answer_timeout,
        )
        cache.set_capabilities(roots=declared, list_changed=list_changed)
        if not declared:
            self._say_fallback("no-capability", "client declared no roots capability")
        state = ConnectionRoots(cache)
        self._connections[key] = state
        return state

    async def close_connection(self, key: object) -> None:
        """Forget connection ``key`` and close its cache (the adapter calls this when it ends)."""
        state = self._connections.pop(key, None)
        if state is not None:
            await state.cache.aclose()

    def cannot_ask(self, state: ConnectionRoots, why: str) -> None:
        """The connection cannot send roots/list at all (``why``: no back-channel, stateless HTTP): like a
        client without the roots capability, it gets the fallback roots (if any are configured). This is
        about the transport; a client that answers -32601 is not "unable", it is refused (see the cache)."""
        state.cache.set_capabilities(roots=False, list_changed=False)
        self.say_once("cannot-ask:" + why, "%s: roots/list cannot be sent; fallback roots apply", why)

    def _fallback_or_refuse(self) -> RootSet:
        if self.fallback.source == SOURCE_UNCONFIGURED:
            raise RootsUnavailable(f"this client sends no roots, and {self.how_to_configure}")
        return self.fallback

    def served_roots(self, roots: RootSet) -> RootSet:
        """``roots`` as a connection's cache handed them out, or RootsUnavailable when they are the
        fallback and none is configured."""
        return self._fallback_or_refuse() if roots.source == SOURCE_UNCONFIGURED else roots

    def _say_fallback(self, key: str, who: str) -> None:
        if self.fallback.source == SOURCE_UNCONFIGURED:
            self.say_once(key, "%s and no fallback roots are configured: its guarded calls are refused", who)
        else:
            self.say_once(
                key,
                "%s; using fallback roots from %s: %s",
                who,
                self.fallback.source,
                self.fallback.describe(),
            )

    def no_capability_fallback(self) -> RootSet:
        """The fallback roots, for a client that declared no roots capability (said once), or
        RootsUnavailable saying how to configure them when there are none."""
        self._say_fallback("no-capability", "client declared no roots capability")
        return self._fallback_or_refuse()

    def no_lifecycle_fallback(self) -> RootSet:
        """The fallback roots, for a connection whose handshake the guard never saw (said once), or
        RootsUnavailable saying how to configure them when there are none."""
        self._say_fallback(
            "no-lifecycle", "no roots lifecycle on this connection (stateless HTTP or no handshake seen)"
        )
        return self._fallback_or_refuse()

    async def roots_from_client_answer(self, answer: object, stream: object | None = None) -> RootSet:
        """The RootSet of a client's per-request (2026-07-28) raw roots answer (``{"roots": [...]}``),
        clipped to the ceiling. Checked like a legacy answer (schema, the 1,000-entry cap) and built in a
        worker thread under the same resolution budget; a malformed answer is RootsUnavailable (there are
        no earlier roots to keep on this era).

        ``stream`` is the client's channel as the adapter can prove it (an object that lives as long as
        that one client's stream, compared by identity), or None (each request its own exchange): when
        the stream's previous answer was the same (each entry's uri and name, in order), its RootSet is
        returned as it is, with no worker thread, as a legacy connection keeps the RootSet of one answer
        until the next. Any other answer is built anew and replaces it."""
        note_deprecation()
        try:
            entries = check_roots_answer(answer)
        except MalformedRoots as exc:
            if stream is not None:
                self._answers.forget(stream)
            raise RootsUnavailable(f"the roots the client sent with this call are malformed: {exc}") from None
        key = answer_key(entries) if stream is not None else None
        roots = self._answers.get(stream, key) if key is not None else None
        if roots is None:
            if stream is not None:
                self._answers.forget(stream)
            try:
                roots = await build_checked_roots(entries, self.clip)
            except MalformedRoots as exc:
                raise RootsUnavailable(
                    f"the roots the client sent with this call are malformed: {exc}"
                ) from None
            if key is not None:
                self._answers.put(stream, key, roots)
        if not roots:
            self.say_once("granted-none", "the client granted no roots; every path is refused")
        return roots
