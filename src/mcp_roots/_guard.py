"""RootsGuard: the framework-neutral policy engine. It decides which RootSet is in force for a call, keeps
the per-connection roots state, checks guarded arguments and records guarded functions; it never imports
an MCP SDK. The modules in ``adapters/`` wire it into one framework each, through the interface below.

The adapter interface (internal; ``adapters/mcp2.py`` is the reference implementation)
---------------------------------------------------------------------------------------
``guard.install(server)`` asks :func:`mcp_roots.adapters.adapter_for_server` for the adapter that serves
``server``'s type and calls ``adapter.install(server)``; ``await guard.roots(ctx)`` outside a guarded call
asks :func:`mcp_roots.adapters.adapter_for_context`. An adapter is built as ``Adapter(policy)`` with the
guard's :class:`GuardPolicy` and satisfies :class:`Adapter`. What it gets from this module:

* :class:`GuardPolicy`, the guard's configuration and the services an adapter needs:
  ``fallback``, ``ceiling``, ``clip(roots)``, ``say_once(key, message, *args)``;
  ``open_connection(key, fetch, declared=, list_changed=)`` -> :class:`ConnectionRoots` (idempotent per
  key; ``key`` is whatever object the framework offers as the connection: hashable by identity and
  weak-referenceable; ``fetch()`` is an async callable returning the raw ``roots/list`` result dict, or
  raising), ``connection(key)``, ``close_connection(key)`` (call it when the connection ends),
  ``mark_unsupported(state, why)``, ``no_capability_fallback()``, ``no_lifecycle_fallback()``,
  ``roots_from_client_answer(entries)`` (a modern-era answer's raw ``roots`` list -> clipped RootSet).
* :class:`GuardedFunction` and :func:`guarded_function_of`: ``@guard.paths(...)`` marks both the
  function it decorates and the wrapper it returns; whichever of the two the framework registered,
  ``guarded_function_of(registered_fn)`` finds the spec. ``spec.check(roots, arguments)`` returns the
  arguments with every guarded path replaced by its canonical form (JSON-able: ``str``/lists of ``str``),
  or raises ``PathOutsideRoots`` / ``InvalidPath``. ``spec.guard`` is the RootsGuard that owns it (a tool
  guarded by another guard than the one installed is not this adapter's business).
* :func:`guarded_call`: the adapter runs the tool call (its ``call_next``) inside
  ``with guarded_call(spec, roots, refuse):`` after checking the arguments. The wrapper of a guarded
  function runs its body only inside such a call for its own spec (otherwise it raises
  :class:`GuardNotInstalled`: "guard.install(server) was not called"); inside, ``await guard.roots(ctx)``
  returns ``roots`` without asking the adapter, and a ``RootsError`` raised by the body becomes
  ``refuse(message)`` (the framework's ``isError`` tool result).
* :func:`call_roots`: the same context variable for calls that are not guarded functions (a low-level
  handler whose roots the adapter obtained itself, e.g. by a multi-round-trip): ``with call_roots(roots):``.
"""

from __future__ import annotations

import contextlib
import contextvars
import errno
import functools
import inspect
import logging
import os
import sys
import types
import typing
import weakref
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ._cache import RootsCache
from ._errors import InvalidPath, RootsError
from ._rootset import RootSet
from ._sources import clip_to_ceiling, fallback_roots

if TYPE_CHECKING:
    from .broker import BrokeredFiles

__all__ = [
    "Adapter",
    "ConnectionRoots",
    "GuardNotInstalled",
    "GuardPolicy",
    "GuardedFunction",
    "RootsGuard",
    "call_roots",
    "client_error_text",
    "guarded_call",
    "guarded_function_of",
    "note_deprecation",
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


# --- What a client reads when a guarded body fails -----------------------------------------------------

# An OS error in a guarded tool is one line for the client, by errno (never by message text); the precise
# error and the traceback stay in the server log.
_OS_ERROR_TEXT = {
    errno.ENOENT: "No such file",
    errno.ENOTDIR: "Not a directory",
    errno.EISDIR: "Is a directory",
    errno.EACCES: "Permission denied",
    errno.EPERM: "Operation not permitted",
    errno.EEXIST: "Already exists",
    errno.ENOTEMPTY: "Directory not empty",
    errno.ENOSPC: "No space left on the device",
    errno.EROFS: "Read-only file system",
    errno.ELOOP: "Too many levels of symbolic links",
    errno.ENAMETOOLONG: "File name too long",
}


def client_error_text(exc: BaseException) -> str | None:
    """The one line a client reads for what a guarded tool body raised, or None when it is neither a
    ``RootsError`` (its message is written for the client) nor an ``OSError`` (``No such file: 'x'``).

    Frameworks wrap a body's exception in their own (``raise ToolError(...) from exc``), so the chain of
    ``__cause__`` is followed.
    """
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, RootsError):
            return " ".join(str(cause).split("\n"))
        if isinstance(cause, OSError):
            what = _OS_ERROR_TEXT.get(cause.errno or 0) or cause.strerror or type(cause).__name__
            name = cause.filename
            text = f"{what}: {os.fsdecode(name)!r}" if isinstance(name, (str, bytes)) else what
            return " ".join(text.split("\n"))
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
    ) -> None:
        self.fallback = fallback
        self.ceiling = ceiling
        self.debounce = debounce
        self.max_wait = max_wait
        self.timeout = timeout
        self.first_answer_timeout = first_answer_timeout
        self._said: set[str] = set()
        self._connections: weakref.WeakKeyDictionary[object, ConnectionRoots] = weakref.WeakKeyDictionary()

    def clip(self, roots: RootSet) -> RootSet:
        """``roots`` narrowed to the ceiling (client roots narrow access, never widen it)."""
        return roots if self.ceiling is None else clip_to_ceiling(roots, self.ceiling)

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
            self.no_capability_fallback()
        state = ConnectionRoots(cache)
        self._connections[key] = state
        return state

    async def close_connection(self, key: object) -> None:
        """Forget connection ``key`` and close its cache (the adapter calls this when it ends)."""
        state = self._connections.pop(key, None)
        if state is not None:
            await state.cache.aclose()

    def mark_unsupported(self, state: ConnectionRoots | None, why: str) -> None:
        """The client cannot answer roots/list (``why``): its connection uses the fallback roots."""
        if state is not None:
            state.cache.mark_unsupported()
        self.say_once(
            "unsupported:" + why.split(" ", 3)[0],
            "%s; using fallback roots from %s: %s",
            why,
            self.fallback.source,
            self.fallback.describe(),
        )

    def no_capability_fallback(self) -> RootSet:
        """The fallback roots, for a client that declared no roots capability (said once)."""
        self.say_once(
            "no-capability",
            "client declared no roots capability; using fallback roots from %s: %s",
            self.fallback.source,
            self.fallback.describe(),
        )
        return self.fallback

    def no_lifecycle_fallback(self) -> RootSet:
        """The fallback roots, for a connection whose handshake the guard never saw (said once)."""
        self.say_once(
            "no-lifecycle",
            "no roots lifecycle on this connection (stateless HTTP or no handshake seen); "
            "using fallback roots from %s: %s",
            self.fallback.source,
            self.fallback.describe(),
        )
        return self.fallback

    def roots_from_client_answer(self, entries: Sequence[object]) -> RootSet:
        """The RootSet of a client's per-request (2026-07-28) roots answer, clipped to the ceiling."""
        note_deprecation()
        return self.clip(RootSet.from_uris(list(entries), strict=False, source="client"))


class Adapter(Protocol):
    """What one framework's adapter offers the guard (built as ``Adapter(policy)``)."""

    def install(self, server: Any) -> None:
        """Wire the guard into ``server`` (idempotent); raise ``SDKChanged`` if a private corner moved."""

    async def roots(self, ctx: Any) -> RootSet:
        """The roots in force for the request ``ctx`` (the framework's context object), outside a
        guarded call."""
        ...


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

    def check(self, roots: RootSet, value: Any) -> Any:
        if value is None:
            return None
        if self.many:
            if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
                raise InvalidPath(
                    f"argument {self.name!r} must be a list of paths, not {type(value).__name__}"
                )
            return [self._one(roots, v) for v in value]
        return self._one(roots, value)

    def _one(self, roots: RootSet, value: Any) -> str:
        return str(roots.resolve(value))


@dataclass(frozen=True, eq=False)
class GuardedFunction:
    """What ``@guard.paths(*names)`` recorded about one function."""

    guard: RootsGuard
    policy: GuardPolicy
    fn: Callable[..., Any]
    names: tuple[str, ...]
    args: Mapping[str, _PathArg]

    @property
    def name(self) -> str:
        return getattr(self.fn, "__name__", repr(self.fn))

    def check(self, roots: RootSet, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """``arguments`` with each guarded path canonical (or ``PathOutsideRoots`` / ``InvalidPath``)."""
        checked = dict(arguments)
        for name, arg in self.args.items():
            if name in checked:
                checked[name] = arg.check(roots, checked[name])
        return checked


def guarded_function_of(obj: object) -> GuardedFunction | None:
    """The GuardedFunction recorded on a function or on the wrapper @guard.paths returned, if any."""
    spec = getattr(obj, GUARDED_ATTRIBUTE, None)
    return spec if isinstance(spec, GuardedFunction) else None


@dataclass(frozen=True)
class _Call:
    roots: RootSet | None
    spec: GuardedFunction | None = None
    refuse: Callable[[str], Any] | None = None


# The call in progress: the RootSet a guarded call's arguments were checked against (so that
# `await guard.roots(ctx)` inside the body sees exactly that set), and which guarded function the adapter
# checked (so that the wrapper knows the adapter ran).
_CALL: contextvars.ContextVar[_Call | None] = contextvars.ContextVar("mcp_roots_call", default=None)


@contextlib.contextmanager
def guarded_call(spec: GuardedFunction, roots: RootSet, refuse: Callable[[str], Any]) -> Iterator[None]:
    """Run a call to ``spec``'s function whose arguments the adapter checked against ``roots``."""
    token = _CALL.set(_Call(roots, spec, refuse))
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


# --- The guard ---------------------------------------------------------------------------------------


class RootsGuard:
    """Keeps an MCP server's file tools inside the roots the client granted (or the operator configured).

    ``roots`` / ``project_root`` / ``environ`` / ``user_config_dir`` select the fallback roots (see
    :func:`mcp_roots.fallback_roots`); ``ceiling`` bounds every client root (client roots narrow
    access, never widen it); ``debounce``, ``max_wait`` and ``timeout`` tune the roots refresh.
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
    ) -> None:
        if isinstance(ceiling, (str, os.PathLike)):
            ceiling = [ceiling]  # one path, not a sequence of one-character paths
        if ceiling is not None and not isinstance(ceiling, RootSet):
            ceiling = RootSet.from_paths(list(ceiling), source="ceiling")
        fallback = fallback_roots(
            roots, project_root=project_root, environ=environ, user_config_dir=user_config_dir
        )
        if ceiling is not None:
            fallback = clip_to_ceiling(fallback, ceiling)
        self._policy = GuardPolicy(
            fallback=fallback,
            ceiling=ceiling,
            debounce=debounce,
            max_wait=max_wait,
            timeout=timeout,
            first_answer_timeout=timeout if first_answer_timeout is None else first_answer_timeout,
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
                raise GuardNotInstalled(NOT_INSTALLED)
            return call

        def refused(call: _Call, exc: RootsError) -> Any:
            # The body's own RootSet operations refused (a symlink swapped in after the check, a file
            # over max_bytes), or brokered access is unavailable: every RootsError message is written for
            # the client to read, so it becomes the tool's error text instead of a generic one.
            logger.info("refused %s(): %s", spec.name, exc)
            assert call.refuse is not None
            return call.refuse(str(exc))

        wrapper: Callable[..., Any]
        if inspect.iscoroutinefunction(fn):

            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                call = entered()
                try:
                    return await fn(*args, **kwargs)
                except RootsError as exc:
                    return refused(call, exc)

            wrapper = async_wrapper
        else:

            def sync_wrapper(*args: Any, **kwargs: Any) -> Any:
                call = entered()
                try:
                    return fn(*args, **kwargs)
                except RootsError as exc:
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
        with contextlib.suppress(AttributeError, TypeError):  # a builtin or a callable object
            setattr(fn, GUARDED_ATTRIBUTE, spec)
        return wrapper

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
