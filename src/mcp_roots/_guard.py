"""RootsGuard: the framework-neutral policy engine. It decides which RootSet is in force for a call, keeps
the per-connection roots state, checks guarded arguments and records guarded functions; it never imports
an MCP SDK. The modules in ``adapters/`` wire it into one framework each, through the interface below.

The adapter interface (internal; ``adapters/mcp2.py`` is the reference implementation)
---------------------------------------------------------------------------------------
``guard.install(server)`` asks :func:`mcp_roots.adapters.adapter_for_server` for the adapter that serves
``server``'s type and calls ``adapter.install(server)``; ``await guard.roots(ctx)`` outside a guarded call
asks :func:`mcp_roots.adapters.adapter_for_context`. An adapter module adds its rows to
``adapters.KINDS`` (which classes it serves, by module and name) and to ``adapters.TOOL_ERRORS`` (its
framework's "tool failed with this message" exception). An adapter is built as ``Adapter(policy)`` with
the guard's :class:`GuardPolicy` (or ``Adapter(None)`` to read a server only: ``handlers``/``installed``
for ``mcp-roots audit``) and satisfies :class:`Adapter`. What it gets from this module:

* :class:`GuardPolicy`, the guard's configuration and the services an adapter needs:
  ``fallback``, ``ceiling``, ``strict``, ``expand_user``, ``timeout``, ``clip(roots)``,
  ``say_once(key, message, *args)``;
  ``open_connection(key, fetch, declared=, list_changed=)`` -> :class:`ConnectionRoots` (idempotent per
  key; ``key`` is whatever object the framework offers as the connection: hashable by identity and
  weak-referenceable; ``fetch()`` is an async callable returning the raw ``roots/list`` result dict, or
  raising: every failure, -32601 included, keeps the client's last valid roots or none, never the
  fallback), ``connection(key)``, ``close_connection(key)`` (call it when the connection ends),
  ``cannot_ask(state, why)`` (a connection that cannot send roots/list at all: stateless HTTP),
  ``served_roots(roots)`` (what a cache handed out, or RootsUnavailable when that is the unconfigured
  fallback), ``no_capability_fallback()``, ``no_lifecycle_fallback()`` (both raise RootsUnavailable
  saying how to configure fallback roots when there are none), ``await roots_from_client_answer(answer)``
  (a modern-era raw answer -> clipped RootSet, built in a worker thread; RootsUnavailable when malformed),
  ``log_refusal(tool, exc)`` (each reason once per streak at INFO) and ``call_passed()``.
  Legacy era: ``await state.cache.fresh(policy.timeout)`` gives a call's roots.
* :class:`GuardedFunction` and :func:`guarded_function_of`: ``@guard.paths(...)`` marks both the
  function it decorates and the wrapper it returns (``spec.wrapper``); whichever of the two the framework
  registered, ``guarded_function_of(registered_fn)`` finds the spec (where it is the bare function,
  @guard.paths stood above the tool decorator: swap ``spec.wrapper`` in). Enforce only specs whose
  ``spec.policy`` is yours. ``spec.check(roots, arguments)`` returns the arguments with every guarded path
  canonical (JSON-able: ``str``/lists of ``str``) or raises ``PathOutsideRoots`` / ``InvalidPath``;
  ``spec.precheck(ceiling, arguments)`` refuses absolute paths outside the ceiling before any roots are
  asked for (2026-07-28: zero round trips for them).
* :func:`guarded_call`: the adapter runs the tool call (its ``call_next``) inside
  ``with guarded_call(spec, roots, refuse[, checked]):`` after checking the arguments (``checked``: where
  the adapter cannot rewrite the arguments the framework passes, the wrapper substitutes these). The
  wrapper of a guarded function runs its body only inside such a call for its own spec (otherwise it raises
  :class:`GuardNotInstalled`, also an instance of every loaded ``TOOL_ERRORS`` type: "guard.install(server)
  was not called"); inside, ``await guard.roots(ctx)`` returns ``roots`` without asking the adapter, and a
  ``RootsError`` or ``OSError`` raised by the body becomes ``refuse(one_line_message)`` (the framework's
  ``isError`` tool result).
* :func:`call_roots`: the same context variable for calls that are not guarded functions (a low-level
  handler whose roots the adapter obtained itself, e.g. by a multi-round-trip): ``with call_roots(roots):``.
* The audit: ``Adapter.handlers(server)`` lists :class:`Handler` rows; :func:`audit_handlers` classifies
  them; :func:`warn_unguarded` logs them once per server (call it at startup, i.e. on the first message);
  with ``policy.strict``, refuse a tool call when :func:`strict_refusal` returns a reason.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
import logging
import os
import sys
import types
import typing
import weakref
from collections.abc import Awaitable, Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ._cache import MalformedRoots, RootsCache, build_client_roots
from ._errors import ConfigError, InvalidPath, InvalidRootURI, RootsError, RootsUnavailable, os_error_line
from ._rootset import RootSet
from ._sources import SOURCE_UNCONFIGURED, clip_to_ceiling, fallback_roots, how_to_configure
from ._uri import uri_to_path

if TYPE_CHECKING:
    import subprocess

    from .broker import BrokeredFiles

__all__ = [
    "Adapter",
    "AuditRow",
    "ConnectionRoots",
    "GuardNotInstalled",
    "GuardPolicy",
    "GuardedFunction",
    "Handler",
    "RootsGuard",
    "audit_handlers",
    "audit_server",
    "call_roots",
    "client_error_text",
    "exemption_of",
    "format_audit",
    "guarded_call",
    "guarded_function_of",
    "not_installed_error",
    "note_deprecation",
    "parameters_of",
    "strict_refusal",
    "warn_unguarded",
]

logger = logging.getLogger("mcp_roots")

F = TypeVar("F", bound=Callable[..., Any])

GUARDED_ATTRIBUTE = "__mcp_roots_guarded__"
"""The attribute under which @guard.paths records its GuardedFunction on the function and its wrapper."""

NOT_INSTALLED = (
    "guard.install(server) was not called: this tool is guarded by mcp-roots (@guard.paths) but the "
    "server it runs on was never wired to the guard, so it refuses every call"
)

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


class GuardNotInstalled(RootsError):
    """A guarded function ran on a server where ``guard.install(server)`` never ran."""


def not_installed_error() -> GuardNotInstalled:
    """GuardNotInstalled, also of the tool-error type of every loaded framework, so that the framework
    running the function shows the client the reason instead of a generic "Error executing tool"."""
    from .adapters import tool_error_types

    bases = tool_error_types()
    if not bases:
        return GuardNotInstalled(NOT_INSTALLED)
    error_type = type("GuardNotInstalled", (GuardNotInstalled, *bases), {"__module__": __name__})
    error: GuardNotInstalled = error_type(NOT_INSTALLED)
    return error


def client_error_text(exc: BaseException) -> str | None:
    """The one line a client reads for what a guarded tool body raised, or None when it is neither a
    ``RootsError`` (its message is written for the client) nor an ``OSError`` (:func:`os_error_line`).

    Frameworks wrap a body's exception in their own (``raise ToolError(...) from exc``), so the chain of
    ``__cause__`` is followed (adapters use it where the framework ran the bare function).
    """
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, RootsError):
            return " ".join(str(cause).splitlines())
        if isinstance(cause, OSError):
            return os_error_line(cause)
        seen.add(id(cause))
        cause = cause.__cause__
    return None


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

    async def roots_from_client_answer(self, answer: object) -> RootSet:
        """The RootSet of a client's per-request (2026-07-28) raw roots answer (``{"roots": [...]}``),
        clipped to the ceiling. Checked like a legacy answer (schema, the 1,000-entry cap) and built in a
        worker thread under the same resolution budget; a malformed answer is RootsUnavailable (there are
        no earlier roots to keep on this era)."""
        note_deprecation()
        try:
            roots = await build_client_roots(answer, self.clip)
        except MalformedRoots as exc:
            raise RootsUnavailable(f"the roots the client sent with this call are malformed: {exc}") from None
        if not roots:
            self.say_once("granted-none", "the client granted no roots; every path is refused")
        return roots


class Adapter(Protocol):
    """What one framework's adapter offers the guard (built as ``Adapter(policy)``)."""

    def install(self, server: Any) -> None:
        """Wire the guard into ``server`` (idempotent); raise ``SDKChanged`` if a private corner moved."""

    async def roots(self, ctx: Any) -> RootSet:
        """The roots in force for the request ``ctx`` (the framework's context object), outside a
        guarded call."""
        ...

    def handlers(self, server: Any) -> list[Handler]:
        """Every tool and resource template ``server`` has registered now, for the audit (an empty list
        where handlers are not registered functions, as on a low-level server)."""
        ...

    def installed(self, server: Any) -> list[GuardPolicy]:
        """The policies of the guards installed on ``server``."""
        ...


def audit_server(server: Any) -> list[AuditRow]:
    """The audit of any supported server, whichever guards are installed on it (``mcp-roots audit``)."""
    from .adapters import adapter_for_server

    adapter: Adapter = adapter_for_server(server)(None)
    return audit_handlers(adapter.handlers(server), adapter.installed(server))


# --- Guarded functions -------------------------------------------------------------------------------


class _PathArg:
    """How one guarded argument is checked."""

    def __init__(self, name: str, annotation: Any) -> None:
        self.name = name
        self.many = False
        self.as_path = False
        target = annotation
        origin = typing.get_origin(target)
        if origin is typing.Annotated:
            target = typing.get_args(target)[0]
            origin = typing.get_origin(target)
        if origin is typing.Union or origin is types.UnionType:
            args = [a for a in typing.get_args(target) if a is not type(None)]
            target = args[0] if len(args) == 1 else target
            origin = typing.get_origin(target)
        if origin in (list, tuple, set, frozenset, Sequence) or target in (list, tuple):
            self.many = True
            inner = typing.get_args(target)
            target = inner[0] if inner else str
        if isinstance(target, type) and issubclass(target, Path):
            self.as_path = True

    def check(self, roots: RootSet, value: Any, *, expand_user: bool, absolute_only: bool = False) -> Any:
        """``value`` canonical; with ``absolute_only``, relative paths are passed through unjudged."""
        if value is None:
            return None
        if self.many:
            if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
                raise InvalidPath(
                    f"argument {self.name!r} must be a list of paths, not {type(value).__name__}"
                )
            return [self._one(roots, v, expand_user, absolute_only) for v in value]
        return self._one(roots, value, expand_user, absolute_only)

    def typed(self, checked: Any) -> Any:
        """A checked (canonical ``str``) value as the body expects it: ``Path`` where annotated so."""
        if checked is None or not self.as_path:
            return checked
        return [Path(v) for v in checked] if self.many else Path(checked)

    def _one(self, roots: RootSet, value: Any, expand_user: bool, absolute_only: bool) -> Any:
        if isinstance(value, str):
            value = self._as_written(value, expand_user)
            if absolute_only and not os.path.isabs(value):
                return value
        return str(roots.resolve(value))

    def _as_written(self, value: str, expand_user: bool) -> str:
        """Paths as models write them: ``~/x`` and ``file:///x`` are never names under the first root."""
        if value.startswith("~"):
            if not expand_user:
                raise InvalidPath(
                    f"argument {self.name!r}: {value!r} starts with '~', which this server does not expand; "
                    "pass an absolute path, or './' + the name for a file really named '~...'"
                )
            expanded = os.path.expanduser(value)
            if expanded.startswith("~"):
                raise InvalidPath(f"argument {self.name!r}: cannot expand {value!r} (no such user)")
            return expanded
        if value[:5].lower() == "file:":
            if not expand_user:
                raise InvalidPath(
                    f"argument {self.name!r}: {value!r} is a file: URI; pass a filesystem path instead"
                )
            try:
                return uri_to_path(value)
            except InvalidRootURI as exc:
                raise InvalidPath(f"argument {self.name!r}: {exc}") from None
        return value


@dataclass(eq=False)
class GuardedFunction:
    """What ``@guard.paths(*names)`` recorded about one function."""

    guard: RootsGuard
    policy: GuardPolicy
    fn: Callable[..., Any]
    names: tuple[str, ...]
    args: Mapping[str, _PathArg]
    wrapper: Callable[..., Any] | None = None
    """The wrapper @guard.paths returned: what the framework must run (the adapter swaps it in where the
    framework registered ``fn`` itself, i.e. @guard.paths stood above the tool decorator)."""

    @property
    def name(self) -> str:
        return getattr(self.fn, "__name__", repr(self.fn))

    def check(self, roots: RootSet, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """``arguments`` with each guarded path canonical (or ``PathOutsideRoots`` / ``InvalidPath``)."""
        checked = dict(arguments)
        for name, arg in self.args.items():
            if name in checked:
                checked[name] = arg.check(roots, checked[name], expand_user=self.policy.expand_user)
        return checked

    def precheck(self, ceiling: RootSet, arguments: Mapping[str, Any]) -> None:
        """Refuse (``PathOutsideRoots`` / ``InvalidPath``) an absolute path outside ``ceiling`` before any
        roots are asked for: no client answer can make it allowed."""
        for name, arg in self.args.items():
            if name in arguments:
                arg.check(ceiling, arguments[name], expand_user=self.policy.expand_user, absolute_only=True)


def guarded_function_of(obj: object) -> GuardedFunction | None:
    """The GuardedFunction recorded on a function or on the wrapper @guard.paths returned, if any; also
    through wrappers a framework made of either (``__wrapped__``, as ``functools.wraps`` leaves it)."""
    for _ in range(8):  # a few layers of framework wrappers at most
        spec = getattr(obj, GUARDED_ATTRIBUTE, None)
        if isinstance(spec, GuardedFunction):
            return spec
        obj = getattr(obj, "__wrapped__", None)
        if obj is None:
            break
    return None


@dataclass(frozen=True)
class _Call:
    roots: RootSet | None
    spec: GuardedFunction | None = None
    refuse: Callable[[str], Any] | None = None
    checked: Mapping[str, Any] | None = None


# The call in progress: the RootSet a guarded call's arguments were checked against (so that
# `await guard.roots(ctx)` inside the body sees exactly that set), and which guarded function the adapter
# checked (so that the wrapper knows the adapter ran).
_CALL: contextvars.ContextVar[_Call | None] = contextvars.ContextVar("mcp_roots_call", default=None)


@contextlib.contextmanager
def guarded_call(
    spec: GuardedFunction,
    roots: RootSet,
    refuse: Callable[[str], Any],
    checked: Mapping[str, Any] | None = None,
) -> Iterator[None]:
    """Run a call to ``spec``'s function whose arguments the adapter checked against ``roots``.

    ``checked`` (what ``spec.check`` returned) is handed to the body in place of the guarded arguments the
    framework passes, for frameworks whose arguments the adapter cannot rewrite (resource templates)."""
    token = _CALL.set(_Call(roots, spec, refuse, checked))
    try:
        yield
    finally:
        _CALL.reset(token)


@contextlib.contextmanager
def call_roots(roots: RootSet) -> Iterator[None]:
    """Make ``roots`` what ``await guard.roots(ctx)`` returns for the call in progress."""
    token = _CALL.set(_Call(roots))
    try:
        yield
    finally:
        _CALL.reset(token)


# --- The audit ---------------------------------------------------------------------------------------

EXEMPT_ATTRIBUTE = "__mcp_roots_exempt__"

_PATH_NAMES = frozenset(
    {
        "path",
        "paths",
        "file",
        "files",
        "filename",
        "filepath",
        "dir",
        "dirs",
        "directory",
        "folder",
        "src",
        "source",
        "dest",
        "destination",
        "target",
        "root",
        "cwd",
        "workdir",
        "uri",
    }
)
_PATH_SUFFIXES = ("_path", "_paths", "_dir", "_dirs", "_file", "_files", "_directory", "_folder", "_root")


@dataclass(frozen=True)
class Handler:
    """A tool or resource template as an adapter sees it, for the audit."""

    kind: str  # "tool" or "resource template"
    name: str
    fn: Callable[..., Any] | None
    parameters: Mapping[str, Any]  # name -> annotation (or None where only the name is known)
    checked_by_uri: bool = False  # a file: resource template: its reads are checked by URI


@dataclass(frozen=True)
class AuditRow:
    """One line of the audit: a handler, its path-like parameters and whether each is guarded."""

    kind: str
    name: str
    path_parameters: tuple[str, ...]
    guarded: tuple[str, ...]
    exempt: str | None

    @property
    def unguarded(self) -> tuple[str, ...]:
        """Path-like parameters nothing checks (empty when exempted)."""
        if self.exempt is not None:
            return ()
        return tuple(p for p in self.path_parameters if p not in self.guarded)

    @property
    def status(self) -> str:
        if not self.path_parameters:
            return "no path parameters"
        if self.exempt is not None:
            return f"exempt: {self.exempt}"
        return "UNGUARDED: " + ", ".join(self.unguarded) if self.unguarded else "guarded"


def _looks_like_a_path(name: str, annotation: Any) -> bool:
    lowered = name.lower()
    if lowered in _PATH_NAMES or lowered.endswith(_PATH_SUFFIXES):
        return True
    target = annotation
    for _ in range(3):  # Optional[...], list[...], Annotated[...]
        args = [a for a in typing.get_args(target) if a is not type(None)]
        if not args:
            break
        target = args[0]
    return isinstance(target, type) and issubclass(target, os.PathLike)


def exemption_of(fn: object) -> str | None:
    """The reason given to ``@guard.exempt(reason)`` for ``fn``, if any."""
    reason = getattr(fn, EXEMPT_ATTRIBUTE, None)
    return reason if isinstance(reason, str) else None


def parameters_of(fn: Any, context_type: type) -> dict[str, Any]:
    """A handler's parameters (name -> annotation) for the audit, without the context object its framework
    injects (annotated ``context_type``, or by the name of that class as a string annotation)."""
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return {}
    return {
        p.name: p.annotation
        for p in parameters
        if not (isinstance(p.annotation, type) and issubclass(p.annotation, context_type))
        and p.annotation != context_type.__name__
    }


def audit_handlers(handlers: Sequence[Handler], installed: Collection[GuardPolicy]) -> list[AuditRow]:
    """The audit of ``handlers``: every one with its path-like parameters, guarded or not. A parameter
    counts as guarded only when the guard of its ``@guard.paths`` is one of those ``installed`` on the
    server (a guard that was never installed checks nothing where the framework holds the bare function).
    """
    rows = []
    for handler in handlers:
        path_params = tuple(p for p, a in handler.parameters.items() if _looks_like_a_path(p, a))
        spec = guarded_function_of(handler.fn)
        guarded: tuple[str, ...] = spec.names if spec is not None and spec.policy in installed else ()
        if handler.checked_by_uri:
            guarded = path_params
        rows.append(AuditRow(handler.kind, handler.name, path_params, guarded, exemption_of(handler.fn)))
    return rows


def format_audit(rows: Sequence[AuditRow]) -> str:
    """The audit as a plain-text table."""
    table = [("KIND", "NAME", "PATH PARAMETERS", "STATUS")]
    table += [(r.kind, r.name, ", ".join(r.path_parameters) or "-", r.status) for r in rows]
    widths = [max(len(line[i]) for line in table) for i in range(3)]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(line[:3], widths, strict=True)) + "  " + line[3]
        for line in table
    ]
    return "\n".join(line.rstrip() for line in lines)


def warn_unguarded(rows: Sequence[AuditRow], *, strict: bool) -> None:
    """One warning per handler with unguarded path-like parameters (adapters call it once per server)."""
    for row in rows:
        if row.unguarded:
            logger.warning(
                "%s %r has path-like parameters that mcp-roots does not check: %s; guard them with "
                "@guard.paths(...) or mark it @guard.exempt(reason)%s",
                row.kind,
                row.name,
                ", ".join(row.unguarded),
                " (strict=True: it refuses every call)" if strict else "",
            )


def strict_refusal(fn: object, name: str) -> str | None:
    """Why a strict guard refuses to run tool ``name`` (registered as ``fn``), or None."""
    parameters: dict[str, Any] = {}
    try:
        parameters = {p.name: p.annotation for p in inspect.signature(fn).parameters.values()}  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    spec = guarded_function_of(fn)
    installed = [spec.policy] if spec is not None else []
    (row,) = audit_handlers([Handler("tool", name, fn, parameters)], installed)  # type: ignore[arg-type]
    if not row.unguarded:
        return None
    return (
        f"tool {name!r} refuses every call: its path-like parameters ({', '.join(row.unguarded)}) are not "
        "checked by mcp-roots and the server runs with RootsGuard(strict=True); guard them with "
        "@guard.paths(...) or mark the tool @guard.exempt(reason)"
    )


# --- The guard ---------------------------------------------------------------------------------------


class RootsGuard:
    """Keeps an MCP server's file tools inside the roots the client granted (or the operator configured).

    ``roots`` / ``project_root`` / ``environ`` / ``user_config_dir`` / ``allow_home`` select the fallback
    roots (see :func:`mcp_roots.fallback_roots`), which apply only to clients that cannot send roots;
    nothing configured means those clients are refused. ``ceiling`` bounds every client root (client roots
    narrow access, never widen it); ``debounce``, ``max_wait``, ``timeout`` and ``first_answer_timeout``
    tune the roots refresh.
    ``strict=True`` makes a tool with path-like parameters that are neither guarded nor exempted refuse
    every call; ``expand_user=True`` expands ``~`` and ``file://`` path arguments instead of refusing them;
    ``confine=True`` confines the server process itself with Landlock to the ceiling (or the fallback roots).
    """

    def __init__(
        self,
        roots: Sequence[str | Any] | str | None = None,
        *,
        project_root: str | Any | None = None,
        ceiling: RootSet | str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None = None,
        environ: Mapping[str, str] | None = None,
        user_config_dir: str | Any | None = None,
        debounce: float = 0.02,
        max_wait: float = 0.1,
        timeout: float = 5.0,
        first_answer_timeout: float | None = None,
        strict: bool = False,
        expand_user: bool = False,
        confine: bool = False,
        allow_home: bool = False,
    ) -> None:
        if isinstance(ceiling, (str, os.PathLike)):
            ceiling = [ceiling]  # one path, not a sequence of one-character paths
        if ceiling is not None and not isinstance(ceiling, RootSet):
            ceiling = RootSet.from_paths(list(ceiling), source="ceiling")
        fallback = fallback_roots(
            roots,
            project_root=project_root,
            environ=environ,
            user_config_dir=user_config_dir,
            allow_home=allow_home,
        )
        advice = how_to_configure(environ, user_config_dir)
        if fallback.source == SOURCE_UNCONFIGURED:
            # The official filesystem server refuses to start here; a guard still serves clients that send
            # roots, and refuses the others per call. Said once, at startup.
            logger.warning("%s; until then, clients that send none are refused", advice)
        if ceiling is not None:
            fallback = clip_to_ceiling(fallback, ceiling)
        if confine:
            ceiling = self._confine_process(ceiling, fallback)
        self._policy = GuardPolicy(
            fallback=fallback,
            ceiling=ceiling,
            debounce=debounce,
            max_wait=max_wait,
            timeout=timeout,
            first_answer_timeout=timeout if first_answer_timeout is None else first_answer_timeout,
            strict=strict,
            expand_user=expand_user,
            how_to_configure=advice,
        )
        # One adapter per framework this guard was installed on (a guard may serve several servers).
        self._adapters: dict[type, Adapter] = {}

    # -- configuration --

    @property
    def fallback(self) -> RootSet:
        """The roots used where the client sends none (already clipped to the ceiling)."""
        return self._policy.fallback

    @property
    def ceiling(self) -> RootSet | None:
        """The operator's ceiling, or None."""
        return self._policy.ceiling

    # -- confinement by the kernel (Landlock; the bodies live in _sandbox) --

    @staticmethod
    def _confine_process(ceiling: RootSet | None, fallback: RootSet) -> RootSet:
        # confine=True: the process is confined to the ceiling, or to the fallback roots, which then become
        # the ceiling (client roots can only narrow within it, so the guard never allows what the kernel
        # refuses). Landlock confines only the calling thread and what it starts later, so confine_process
        # refuses (SandboxUnavailable) when other threads already exist.
        from . import _sandbox

        if ceiling is None:
            if not fallback:
                raise ConfigError(
                    "RootsGuard(confine=True) needs a ceiling or fallback roots to confine the process to"
                )
            ceiling = fallback
        _sandbox.confine_process(ceiling)
        return ceiling

    async def run(self, ctx: object, argv: Any, **options: Any) -> subprocess.CompletedProcess[bytes]:
        """``await roots.run_async(argv, **options)`` with the roots in force for this tool call: the
        command is confined by the kernel to them (see ``RootSet.run_async``)."""
        roots = await self.roots(ctx)
        return await roots.run_async(argv, **options)

    # -- installation --

    def install(self, server: Any) -> None:
        """Wire the guard into a server: ``mcp`` 2.x ``MCPServer`` or low-level ``Server`` (see
        :mod:`mcp_roots.adapters` for every supported kind). Anything else is a ``TypeError``."""
        from .adapters import adapter_for_server

        self._adapter(adapter_for_server(server)).install(server)

    def _adapter(self, adapter_type: type) -> Adapter:
        adapter = self._adapters.get(adapter_type)
        if adapter is None:
            adapter = self._adapters[adapter_type] = adapter_type(self._policy)
        return adapter

    # -- roots for handlers --

    async def roots(self, ctx: object) -> RootSet:
        """The roots in force for this request: the client's (fresh, clipped to the ceiling) or the
        fallback roots. Accepts the framework's request context (MCPServer's ``Context``, the low-level
        ``ServerRequestContext``...)."""
        call = _CALL.get()
        if call is not None and call.roots is not None:
            return call.roots
        from .adapters import adapter_for_context

        return await self._adapter(adapter_for_context(ctx)).roots(ctx)

    # -- the decorator --

    def paths(self, *names: str) -> Callable[[F], F]:
        """Guard the named path arguments of a tool.

        Before the body runs, each named argument (a path, or a list of paths) is resolved against the
        roots in force; a refused one returns a tool result with ``isError: true`` and the body never runs.
        The body receives canonical paths (``str``, or ``Path`` where annotated so). The tool's input
        schema is unchanged. ``await guard.roots(ctx)`` inside the body returns the same RootSet.
        """

        def decorate(fn: F) -> F:
            # The decorating frame's names, so that string annotations (``from __future__ import
            # annotations``) of a tool defined inside a function resolve.
            caller_locals = dict(sys._getframe(1).f_locals)
            return typing.cast(F, self._wrap(fn, names, caller_locals))

        return decorate

    def _wrap(
        self, fn: Callable[..., Any], names: tuple[str, ...], localns: dict[str, Any] | None = None
    ) -> Callable[..., Any]:
        sig = inspect.signature(fn)
        try:
            hints = typing.get_type_hints(fn, localns=localns, include_extras=True)
        except NameError as exc:
            raise TypeError(
                f"@guard.paths: cannot resolve the annotations of {fn.__name__}(): {exc}"
            ) from None
        for name in names:
            if name not in sig.parameters:
                raise TypeError(f"@guard.paths({name!r}): {fn.__name__}() has no parameter named {name!r}")
        spec = GuardedFunction(
            self, self._policy, fn, names, {name: _PathArg(name, hints.get(name, str)) for name in names}
        )

        def entered() -> _Call:
            call = _CALL.get()
            if call is None or call.spec is not spec or call.refuse is None:
                logger.error("refused %s(): %s", spec.name, NOT_INSTALLED)
                raise not_installed_error()
            return call

        def substituted(call: _Call, kwargs: dict[str, Any]) -> dict[str, Any]:
            if call.checked is None:
                return kwargs
            for name, arg in spec.args.items():
                if name in kwargs and name in call.checked:
                    kwargs[name] = arg.typed(call.checked[name])
            return kwargs

        def refused(call: _Call, exc: OSError | RootsError) -> Any:
            # The body's own RootSet operations refused (a symlink swapped in after the check, a file
            # over max_bytes), brokered access is unavailable, or the OS said no (a missing file): each
            # becomes one readable line of tool error text, with no traceback in the log.
            message = str(exc) if isinstance(exc, RootsError) else os_error_line(exc)
            spec.policy.log_refusal(spec.name, exc, message)
            assert call.refuse is not None
            return call.refuse(message)

        wrapper: Callable[..., Any]
        if inspect.iscoroutinefunction(fn):

            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                call = entered()
                try:
                    return await fn(*args, **substituted(call, kwargs))
                except (RootsError, OSError) as exc:
                    return refused(call, exc)

            wrapper = async_wrapper
        else:

            def sync_wrapper(*args: Any, **kwargs: Any) -> Any:
                call = entered()
                try:
                    return fn(*args, **substituted(call, kwargs))
                except (RootsError, OSError) as exc:
                    return refused(call, exc)

            wrapper = sync_wrapper
        # The framework sees the tool's own signature, with its annotations resolved here (a tool defined
        # inside a function may name local types): no hidden parameters, the input schema is the tool's own.
        functools.update_wrapper(wrapper, fn)
        params = [p.replace(annotation=hints.get(p.name, p.annotation)) for p in sig.parameters.values()]
        new_sig = sig.replace(parameters=params, return_annotation=hints.get("return", sig.return_annotation))
        setattr(wrapper, "__signature__", new_sig)  # noqa: B010
        wrapper.__annotations__ = {k: v for k, v in hints.items() if k in sig.parameters or k == "return"}
        delattr(wrapper, "__wrapped__")  # nothing may unwrap to the unguarded body
        setattr(wrapper, GUARDED_ATTRIBUTE, spec)
        spec.wrapper = wrapper
        with contextlib.suppress(AttributeError, TypeError):  # a builtin or a callable object
            setattr(fn, GUARDED_ATTRIBUTE, spec)
        return wrapper

    # -- the audit --

    @staticmethod
    def exempt(reason: str) -> Callable[[F], F]:
        """Mark a tool whose path-like parameters are not paths on this machine (or are checked by the
        tool itself) so that the audit and ``strict=True`` accept it; ``reason`` is shown in the audit."""
        if not isinstance(reason, str) or not reason.strip():
            raise TypeError("@guard.exempt(reason): give the reason as a non-empty string")

        def decorate(fn: F) -> F:
            setattr(fn, EXEMPT_ATTRIBUTE, reason)
            return fn

        return decorate

    def audit(self, server: Any) -> list[AuditRow]:
        """Every tool and resource template of ``server`` with the parameters that look like paths, and
        whether each is guarded (see :func:`format_audit` for the table ``mcp-roots audit`` prints)."""
        from .adapters import adapter_for_server

        adapter = self._adapter(adapter_for_server(server))
        return audit_handlers(adapter.handlers(server), adapter.installed(server))

    # -- client-brokered file access --

    async def files(self, ctx: Any, **options: Any) -> BrokeredFiles:
        """The client's files, operated by the client for this tool call (the ``files/*`` methods; see
        ``docs/brokering.md``): ``fs = await guard.files(ctx)``, then ``await fs.read_text("notes/a.md")``.

        Raises :class:`BrokeringUnavailable` when the client does not offer it or on a 2026-07-28
        connection. ``options`` go to :func:`mcp_roots.broker.files` (``timeout``, ``chunk_size``).
        """
        from .broker import files

        return await files(ctx, **options)

    # -- errors as tool results, for hand-written handlers --

    @staticmethod
    def refusal(exc: RootsError | str) -> Any:
        """A tool result with ``isError: true`` carrying ``exc``'s message, for hand-written handlers
        (a ``CallToolResult`` of the ``mcp`` SDK that is installed, 2.x or 1.x)."""
        from .adapters import refusal

        return refusal(str(exc))
