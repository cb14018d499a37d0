"""Which RootSet a request gets: the one decision table over an adapter's facts.
It never imports an MCP SDK, an adapter or the broker.
"""

# Which RootSet a request gets: the guard's configuration (fallback, ceiling, eras), the one decision
# table over the facts an adapter reports (:meth:`GuardPolicy.roots_for`), the legacy connections it serves
# from (``_connections``), and the refusal-logging policy (each reason once per streak). It never imports an
# MCP SDK, an adapter or the broker.
#
# The decision table, era x capability x connection state, the rows in the order they are tried (``-``: any;
# ``seen``: the adapter saw the connection's own messages)::
#
#     era         capability  connection                           roots
#     -           -           no MCP request behind the call       refused
#     -           none        consent on, the client can be asked  the fallback plus the key's grants
#     -           none        consent on, it cannot be asked       the fallback, or refused: cannot be asked
#     2026-07-28  none        -                                    the fallback (said once), or refused
#     2026-07-28  roots       the request carried roots            the client's answer, checked, clipped
#     2026-07-28  roots       none carried, the port can ask       ask the client (NeedRoots)
#     2026-07-28  roots       none carried, the port cannot ask    refused, the port's reason (fastmcp 4)
#     legacy      -           the adapter proves it never saw it   refused: guard.install() was not called
#     legacy      roots       an empty list, none before it        the fallback (fallback_until_roots)
#     legacy      roots       an empty list after a non-empty one  refused: revoked (fallback_until_roots)
#     legacy      -           its lifecycle runs                   its fresh roots (started, waited for)
#     legacy      unknown     no handshake (stateless HTTP)        the fallback (said once), or refused
#     legacy      -           not opened, seen                     opened now (mcp 1.x), then as above
#     legacy      roots       not opened, seen unknown             refused: guard.install() was not called
#     legacy      none        not opened, seen unknown             the fallback (said once), or refused
#
# Roots sent with a request that cannot carry them (a legacy connection, a client without the capability) are
# ignored, with a warning. A legacy connection's roots are served as its cache holds them: the client's, or,
# for a client without the capability, the fallback, or a refusal saying how to configure one.

from __future__ import annotations

import contextlib
import logging
import sys
import weakref
from collections.abc import Awaitable, Callable

from ..errors import GuardNotInstalled, InvalidPath, RootsError, RootsUnavailable
from ..paths._root import Root
from ..paths._rootset import RootSet
from ._answers import LastAnswers, MalformedRoots, answer_key, build_checked_roots, check_roots_answer
from ._cache import RootsCache
from ._clock import LoopClock
from ._connections import LegacyConnections
from ._consent import READ, READ_WRITE, ConsentConfig, ConsentLedger, Grant
from ._facts import NeedRoots, RequestFacts
from ._sources import NO_FOLDERS, SOURCE_UNCONFIGURED, clip_to_ceiling

__all__ = [
    "NOT_INSTALLED",
    "GuardNotInstalled",
    "GuardPolicy",
    "not_installed_error",
    "note_deprecation",
    "shown_to_client",
]

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


NOT_INSTALLED = (
    "guard.install(server) was not called: this tool is guarded by mcp-roots (@guard.paths) but the "
    "server it runs on was never wired to the guard, so it refuses every call"
)


#: The source of an empty roots answer, where ``fallback_until_roots`` tells it from one clipped to nothing.
EMPTY_LIST = "client (an empty list)"
REVOKED = (
    "the client's roots list is now empty: it has revoked every folder it granted before, so every path is "
    "refused until it lists one again"
)


CANNOT_ASK = (
    "this server asks its user for folders (consent), but this client cannot be asked: it declared no "
    "elicitation (form) capability, or this server cannot ask on its connection; use a client that supports "
    "elicitation, or give the server folders"
)

NO_REQUEST = "mcp-roots can tell the roots only during an MCP request (no request context is active)"


_TOOL_ERRORS = (
    ("mcp.server.mcpserver.exceptions", "ToolError"),
    ("fastmcp.exceptions", "ToolError"),
    ("mcp.server.fastmcp.exceptions", "ToolError"),
)
"""(module, class) of each framework's "a tool failed, show the client this message" exception, by name:
nothing is imported to find them."""


_SHOWN: dict[tuple[type[RootsError], tuple[type[Exception], ...]], type[RootsError]] = {}
"""The classes shown_to_client made: one per error type and set of loaded frameworks (a handful)."""


def _shown_type(kind: type[RootsError], bases: tuple[type[Exception], ...]) -> type[RootsError]:
    made = _SHOWN.get((kind, bases))
    if made is None:
        made = _SHOWN.setdefault(
            (kind, bases), type(kind.__name__, (kind, *bases), {"__module__": kind.__module__})
        )
    return made


def shown_to_client(error: RootsError) -> RootsError:
    """``error`` as an instance of its own type and of the tool-error type of every framework loaded in
    this process, so that the framework running the tool shows the client its one line instead of a
    generic "Error executing tool" and a traceback in the server's log (the class is made once per error
    type and set of loaded frameworks, not per call). Still a ``RootsError``: a handler that catches it and
    answers ``guard.refusal(exc)`` keeps working."""
    found = []
    for module_name, class_name in _TOOL_ERRORS:
        cls = getattr(sys.modules.get(module_name), class_name, None)
        if isinstance(cls, type) and issubclass(cls, Exception) and not isinstance(error, cls):
            found.append(cls)
    if not found:
        return error
    shown = _shown_type(type(error), tuple(found))(*error.args)
    shown.__cause__, shown.__suppress_context__ = error.__cause__, True
    return shown


def not_installed_error() -> GuardNotInstalled:
    """A GuardNotInstalled the framework running the function shows its client as it is (see
    :func:`shown_to_client`)."""
    error = shown_to_client(GuardNotInstalled(NOT_INSTALLED))
    assert isinstance(error, GuardNotInstalled)
    return error


#: The source of the roots of a client that is asked for its folders (consent).
SOURCE_CONSENT = "the user's consent"


def grant_roots(grants: tuple[Grant, ...], fallback: RootSet) -> RootSet:
    """The fallback roots (granted up front, when configured) and the folders granted, as one RootSet; a
    granted folder that is gone is left out."""
    roots = [] if fallback.source == SOURCE_UNCONFIGURED else list(fallback)
    for grant in grants:
        try:
            access = READ if grant.access == READ else READ_WRITE
            roots.append(Root.from_path(grant.folder, "granted by the user", access=access))
        except InvalidPath as exc:
            logger.warning("a granted folder is left out: %s", exc)
    return RootSet(roots, source=SOURCE_CONSENT)


class _StreamKey:
    """The consent key of one 2026-07-28 client stream (compared by identity)."""


class GuardPolicy:
    """A RootsGuard's configuration, its legacy connections, and the decision table over the facts its
    adapters report (see the comment atop this module)."""

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
        fallback_until_roots: bool = False,
        consent: ConsentConfig | None = None,
    ) -> None:
        self.fallback = fallback
        #: folders by the user's consent (``_consent``), or None; the guarded call asks (``guard._consent``)
        self.consent = None if consent is None else ConsentLedger(consent, LoopClock())
        self._consent_built: weakref.WeakKeyDictionary[object, tuple[tuple[Grant, ...], RootSet]] = (
            weakref.WeakKeyDictionary()
        )
        self._stream_keys: dict[int, tuple[weakref.ref[object], _StreamKey]] = {}
        #: an empty roots list keeps the fallback until the client sends a non-empty one (the official
        #: filesystem server's rule); after that an empty list revokes every root, with a refusal saying so
        self.fallback_until_roots = fallback_until_roots
        self._granted: weakref.WeakSet[RootsCache] = weakref.WeakSet()
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
        # The legacy connections, and their states by key (read directly by the fast lane, roots_now).
        self.connections = LegacyConnections(self._new_cache, self.say_once, timeout)
        self._states = self.connections.states
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

    # -- the decision table (see the comment atop this module) --

    def roots_now(self, connection: object) -> RootSet | None:
        """The fast lane: the roots a guarded call on the legacy connection ``connection`` gets at once, its
        cache running and nothing due (:meth:`RootsCache.fresh_now`), served as :meth:`roots_for` would;
        None when the call must go the long way (wait, start the cache, or no connection opened)."""
        state = self._states.get(connection)
        if state is None or not state.cache_started or self.consent is not None:
            return None
        roots = state.cache.fresh_now()
        return None if roots is None else self._served(roots, state.cache)

    async def roots_for(self, facts: RequestFacts, precheck: Callable[[], object] | None = None) -> RootSet:
        """The roots the request ``facts`` describes gets (the table above), or :class:`NeedRoots` (ask the
        client), or a refusal (``RootsUnavailable``, ``GuardNotInstalled``). ``precheck`` runs first
        unless the roots are the request's own answer: the ceiling's 0-round-trip refusal, before any
        wait or question."""
        if facts.request is None:
            raise RootsUnavailable(NO_REQUEST)
        if self.consent is not None and facts.declared is False:
            if precheck is not None:
                precheck()
            if facts.elicit:
                return self.consent_roots(facts)
            if self.fallback.source == SOURCE_UNCONFIGURED:
                raise RootsUnavailable(CANNOT_ASK)
        if facts.modern:
            if facts.declared:
                if facts.answer is not None:
                    return await self.roots_from_client_answer(facts.answer, facts.stream)
                if precheck is not None:
                    precheck()
                if facts.cannot_ask is not None:
                    raise RootsUnavailable(facts.cannot_ask)
                raise NeedRoots()
            self._ignore_answer(facts)
            if precheck is not None:
                precheck()
            return self.no_capability_fallback()
        self._ignore_answer(facts)
        if precheck is not None:
            precheck()
        if facts.seen is False:
            raise self._not_installed()
        state = self._states.get(facts.connection) if facts.connection is not None else None
        if state is None:
            if facts.declared is None or facts.connection is None:
                return self.no_lifecycle_fallback()  # no handshake on this connection: stateless HTTP
            if facts.seen is None or facts.send is None:
                if facts.declared:
                    # The client declared roots in an initialize the guard never saw: the guard is not wired
                    # into this server. Its roots are the only authority; the fallback would be a wider one.
                    raise self._not_installed()
                return self.no_lifecycle_fallback()
            state = self.connections.open(
                facts.connection, facts.send, declared=facts.declared, list_changed=facts.list_changed
            )
        return self._served(await self.connections.fresh(state, facts.request), state.cache)

    async def answered_roots(self, facts: RequestFacts) -> RootSet | None:
        """The roots the request carried, where it may carry them (2026-07-28, a client with the roots
        capability), for a call that needs none of its own (an unguarded tool: ``guard.roots(ctx)`` in its
        body sees them); else None, with nothing waited for or asked."""
        if facts.answer is None:
            return None
        if facts.modern and facts.declared:
            return await self.roots_from_client_answer(facts.answer, facts.stream)
        self._ignore_answer(facts)
        return None

    # -- folders by consent --

    def consent_key(self, facts: RequestFacts) -> object | None:
        """Whose grants a request uses: its legacy connection (they end with it); on 2026-07-28 its
        authenticated principal, else its client stream (one process on stdio), else None (no grant is
        kept across requests)."""
        if not facts.modern:
            return facts.connection
        if facts.principal is not None:
            return ("principal", facts.principal)
        return None if facts.stream is None else self._identity_key(facts.stream)

    def _identity_key(self, stream: object) -> object | None:
        """A key standing for ``stream`` by identity (a stream may compare equal to another, as a frozen
        dataclass does), held while it lives; its grants are forgotten with it. None: it cannot be
        tracked, so nothing is kept across its requests."""
        known = self._stream_keys.get(id(stream))
        if known is not None and known[0]() is stream:
            return known[1]
        token = _StreamKey()
        ledger = self.consent

        def gone(_: object, ident: int = id(stream)) -> None:
            if self._stream_keys.get(ident, (None, None))[1] is token:
                del self._stream_keys[ident]
            if ledger is not None:
                ledger.forget(token)

        try:
            self._stream_keys[id(stream)] = (weakref.ref(stream, gone), token)
        except TypeError:
            return None
        return token

    def consent_roots(self, facts: RequestFacts, extra: Grant | None = None) -> RootSet:
        """The roots of a client without roots that can be asked: the fallback (granted up front) and the
        grants in force for its key (and ``extra``, granted for this one request), within the ceiling."""
        assert self.consent is not None
        key = self.consent_key(facts)
        grants = self.consent.grants(key) if key is not None else ()
        if extra is not None:
            grants = (*grants, extra)
        if not grants:
            configured = self.fallback.source != SOURCE_UNCONFIGURED
            return self.fallback if configured else RootSet.empty(source=SOURCE_CONSENT)
        built = None
        if key is not None and extra is None:
            with contextlib.suppress(TypeError):  # a key not weakly referenced (a principal): built anew
                built = self._consent_built.get(key)
        if built is not None and built[0] == grants:
            return built[1]
        roots = self.clip(grant_roots(grants, self.fallback))
        if key is not None and extra is None:
            with contextlib.suppress(TypeError):  # a key not weakly referenced (a principal): built anew
                self._consent_built[key] = (grants, roots)
        return roots

    def _ignore_answer(self, facts: RequestFacts) -> None:
        if facts.answer is not None:
            facts.answer = None
            logger.warning("ignored roots sent with a request on a connection that cannot send them")

    @staticmethod
    def _not_installed() -> GuardNotInstalled:
        logger.error("refused a request for roots: %s", NOT_INSTALLED)
        return not_installed_error()

    def _new_cache(
        self, fetch: Callable[[], Awaitable[object]], declared: bool, list_changed: bool
    ) -> RootsCache:
        """A legacy connection's RootsCache, from the client's declared capability."""
        if declared:
            note_deprecation()
        cache = RootsCache(
            fetch,
            fallback=self.fallback,
            transform=self._clip_answer if self.fallback_until_roots else self.clip,
            debounce=self.debounce,
            max_wait=self.max_wait,
            timeout=self.timeout,
            first_answer_timeout=self.first_answer_timeout,
        )
        cache.set_capabilities(roots=declared, list_changed=list_changed)
        if not declared:
            self._say_fallback("no-capability", "client declared no roots capability")
        return cache

    def _fallback_or_refuse(self) -> RootSet:
        if self.fallback.source == SOURCE_UNCONFIGURED:
            raise RootsUnavailable(NO_FOLDERS)
        return self.fallback

    def _served(self, roots: RootSet, cache: RootsCache | None = None) -> RootSet:
        """``roots`` as a connection's cache handed them out, or RootsUnavailable when they are the
        fallback and none is configured; with ``fallback_until_roots``, an empty client list is the
        fallback until the connection's client has sent a non-empty one, then a refusal."""
        if roots.source == SOURCE_UNCONFIGURED:
            return self._fallback_or_refuse()
        if cache is not None and self.fallback_until_roots:
            if roots.source == EMPTY_LIST:
                if cache not in self._granted:
                    self._say_fallback("empty-list", "the client's roots list is empty (none sent before)")
                    return self._fallback_or_refuse()
                raise RootsUnavailable(REVOKED)
            if roots.source == "client":
                self._granted.add(cache)
        return roots

    def _clip_answer(self, roots: RootSet) -> RootSet:
        """A client's answer clipped to the ceiling; an empty one marked (``EMPTY_LIST``)."""
        return RootSet.empty(source=EMPTY_LIST) if not roots else self.clip(roots)

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
