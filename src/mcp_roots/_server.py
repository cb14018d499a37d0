"""RootsGuard: mcp-roots wired into `mcp` servers (MCPServer and the low-level Server), on both eras.

Legacy connections get a RootsCache each, fed by a context-tier middleware (initialize, initialized,
roots/list_changed); 2026-07-28 requests get their roots through the SDK's multi-round-trip resolver.
"""

from __future__ import annotations

import contextvars
import dataclasses
import functools
import inspect
import logging
import os
import sys
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, TypeVar

import anyio
from mcp.server.connection import Connection
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.resolve import ListRoots, Resolve
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CONNECTION_CLOSED,
    CallToolResult,
    ListRootsResult,
    TextContent,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ._cache import MalformedRoots, RootsCache, build_client_roots, check_roots_answer, off_loop
from ._errors import InvalidPath, InvalidRootURI, PathOutsideRoots, RootsError, RootsUnavailable, SDKChanged
from ._rootset import RootSet, _uri_and_name
from ._sources import SOURCE_UNCONFIGURED, clip_to_ceiling, fallback_roots, how_to_configure
from ._uri import uri_to_path
from .broker._sdk import connection_of as _connection_of
from .broker._server import BrokeredFiles, enable_brokering
from .broker._server import files as broker_files

__all__ = ["RootsGuard"]

logger = logging.getLogger("mcp_roots")

F = TypeVar("F", bound=Callable[..., Any])

_STATE_KEY = "mcp_roots.roots"
_ROOTS_PARAM = "mcp_roots_client_roots"
_CTX_PARAM = "mcp_roots_context"

# Roots a @guard.paths wrapper resolved for the tool call in progress, so that `await guard.roots(ctx)`
# inside the body sees exactly the set the arguments were checked against (and, on 2026-07-28, the
# roots that arrived with the call).
_CALL_ROOTS: contextvars.ContextVar[RootSet | None] = contextvars.ContextVar(
    "mcp_roots_call_roots", default=None
)
# Why the roots a 2026-07-28 retry carried are malformed (set by the middleware for the call it passes on):
# the SDK only sees an empty list in their place, and the guarded tool refuses with this reason.
_MALFORMED_CALL_ROOTS: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "mcp_roots_malformed_call_roots", default=None
)

_deprecation_noted = False


def _note_deprecation() -> None:
    global _deprecation_noted
    if not _deprecation_noted:
        _deprecation_noted = True
        logger.info(
            "client roots are deprecated as of MCP 2026-07-28 (SEP-2577) but remain supported; "
            "mcp-roots keeps enforcing them and its fallback roots apply where clients send none"
        )


# --- The SDK's private corners, each isolated here and pinned by tests/test_sdk_contract.py ----------


def _request_channel(request_ctx: ServerRequestContext[Any, Any]) -> Any:
    """The request-scoped back-channel of a request (on streamable HTTP: its POST's response stream).

    ``ServerSession.send_request(..., metadata=ServerMessageMetadata(related_request_id=...))`` is the
    public way to use it, but it validates the answer as a whole ``ListRootsResult`` (one ``http:`` entry
    fails every root); the raw channel is the private ``ServerSession._request_outbound``.
    """
    channel = getattr(request_ctx.session, "_request_outbound", None)
    if channel is None or not callable(getattr(channel, "send_raw_request", None)):
        raise SDKChanged(
            "mcp-roots cannot find the request-scoped channel of ServerSession (the mcp SDK changed: "
            "ServerSession._request_outbound is gone); please report this with your mcp version"
        )
    return channel


def _request_context_of(ctx: object) -> ServerRequestContext[Any, Any]:
    """Accept MCPServer's tool Context or the low-level ServerRequestContext."""
    if isinstance(ctx, ServerRequestContext):
        return ctx
    if isinstance(ctx, Context):
        return ctx.request_context
    raise TypeError(
        f"expected an mcp Context or ServerRequestContext, got {type(ctx).__name__}; declare a parameter "
        "typed `Context` on your tool and pass it to guard.roots(ctx)"
    )


def _is_modern(connection: Connection) -> bool:
    return connection.protocol_version in MODERN_PROTOCOL_VERSIONS


# --- Per-connection state ----------------------------------------------------------------------------


@dataclass
class _ConnectionRoots:
    cache: RootsCache
    # Guarded calls waiting for roots right now, newest last: a roots/list sent while one waits rides
    # that call's response stream (see _fetcher).
    waiting: list[ServerRequestContext[Any, Any]] = field(default_factory=list)
    cache_started: bool = False
    # notifications/initialized was handled (a repeated one is ignored quietly: the worker already runs).
    served: bool = False


def _raw_capabilities(params: Mapping[str, Any] | None) -> Mapping[str, Any]:
    caps = (params or {}).get("capabilities")
    return caps if isinstance(caps, Mapping) else {}


def _without_invalid_roots(params: Mapping[str, Any]) -> tuple[Mapping[str, Any], str | None]:
    """``params`` of a 2026-07-28 ``tools/call`` retry, with root entries that break the URI rules
    removed from its ``inputResponses`` (the same object when there are none), and why the roots are
    malformed (None when they are not; they are then replaced by an empty list).

    The SDK validates every input response as a whole before any handler runs, so one ``http:`` root
    would turn the call into -32602; on the legacy era such an entry is dropped and the valid ones kept,
    and this keeps the two eras alike. The entries that stay are judged again with the same rules. A
    malformed answer (the legacy era's schema and entry cap) is checked first, before the SDK spends
    anything on it.
    """
    responses = params.get("inputResponses")
    if not isinstance(responses, Mapping):
        return params, None
    cleaned: dict[str, Any] = {}
    changed = False
    malformed: str | None = None
    for key, response in responses.items():
        roots = response.get("roots") if isinstance(response, Mapping) else None
        if roots is not None:
            try:
                check_roots_answer(response)
            except MalformedRoots as exc:
                malformed = str(exc)
                logger.warning("the roots the client sent with a tool call are malformed: %s", exc)
                cleaned[key] = {**response, "roots": []}
                changed = True
                continue
        if isinstance(roots, list):
            kept = [entry for entry in roots if _valid_root_entry(entry)]
            if len(kept) != len(roots):
                changed = True
                logger.warning(
                    "dropped %d of %d roots the client sent with a tool call: not valid root URIs",
                    len(roots) - len(kept),
                    len(roots),
                )
                response = {**response, "roots": kept}
        cleaned[key] = response
    return ({**params, "inputResponses": cleaned} if changed else params), malformed


def _valid_root_entry(entry: object) -> bool:
    """The rules RootSet.from_uris applies to each entry (shape, name, URI), without the filesystem."""
    if not isinstance(entry, Mapping):
        return False
    try:
        uri_to_path(_uri_and_name(entry)[0])
    except InvalidRootURI:
        return False
    return True


def _refusal(message: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True)


class _PathArg:
    """How one guarded argument is checked and handed to the tool body."""

    def __init__(self, name: str, annotation: Any) -> None:
        self.name = name
        self.many = False
        self.as_path = False
        target = annotation
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

    def _one(self, roots: RootSet, value: Any) -> Any:
        resolved = roots.resolve(value)
        return resolved if self.as_path else str(resolved)


# --- The guard ---------------------------------------------------------------------------------------


class RootsGuard:
    """Keeps an MCP server's file tools inside the roots the client granted (or the operator configured).

    ``roots`` / ``project_root`` / ``environ`` / ``user_config_dir`` / ``allow_home`` select the fallback
    roots (see :func:`mcp_roots.fallback_roots`), which apply only to clients that cannot send roots;
    nothing configured means those clients are refused. ``ceiling`` bounds every client root (client roots
    narrow access, never widen it); ``debounce``, ``max_wait``, ``timeout`` and ``first_answer_timeout``
    tune the roots refresh.
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
        allow_home: bool = False,
    ) -> None:
        if isinstance(ceiling, (str, os.PathLike)):
            ceiling = [ceiling]  # one path, not a sequence of one-character paths
        if ceiling is not None and not isinstance(ceiling, RootSet):
            ceiling = RootSet.from_paths(list(ceiling), source="ceiling")
        self._ceiling: RootSet | None = ceiling
        fallback = fallback_roots(
            roots,
            project_root=project_root,
            environ=environ,
            user_config_dir=user_config_dir,
            allow_home=allow_home,
        )
        if fallback.source == SOURCE_UNCONFIGURED:
            # The official filesystem server refuses to start here; a guard still serves clients that send
            # roots, and refuses the others per call. Said once, at startup.
            logger.warning(
                "%s; until then, clients that send no roots are refused", how_to_configure(environ)
            )
        if ceiling is not None:
            fallback = clip_to_ceiling(fallback, ceiling)
        self._fallback = fallback
        self._debounce = debounce
        self._max_wait = max_wait
        self._timeout = timeout
        self._first_answer_timeout = timeout if first_answer_timeout is None else first_answer_timeout
        self._environ = environ
        self._said: set[str] = set()
        # Refusal reasons already said at info level in the current streak (cleared by a call that passes).
        self._refusals_said: set[str] = set()

    # -- configuration --

    @property
    def fallback(self) -> RootSet:
        """The roots used where the client sends none (already clipped to the ceiling)."""
        return self._fallback

    @property
    def ceiling(self) -> RootSet | None:
        """The operator's ceiling, or None."""
        return self._ceiling

    def _clip(self, roots: RootSet) -> RootSet:
        return roots if self._ceiling is None else clip_to_ceiling(roots, self._ceiling)

    def _fallback_or_refuse(self) -> RootSet:
        """The fallback roots, or RootsUnavailable saying how to configure them when there are none."""
        if self._fallback.source == SOURCE_UNCONFIGURED:
            raise RootsUnavailable(f"this client sends no roots, and {how_to_configure(self._environ)}")
        return self._fallback

    def _log_refusal(self, tool: str, exc: RootsError) -> None:
        # Once per reason per streak at info level (a model retrying the same refused call would flood the
        # log), then at debug level until a call passes.
        reason = type(exc).__name__
        level = logging.DEBUG if reason in self._refusals_said else logging.INFO
        self._refusals_said.add(reason)
        logger.log(level, "refused %s(): %s", tool, exc)

    def _say_once(self, key: str, message: str, *args: object) -> None:
        if key in self._said:
            logger.debug(message, *args)
        else:
            self._said.add(key)
            logger.info(message, *args)

    # -- installation --

    def install(self, server: Any) -> None:
        """Wire the guard into an ``MCPServer`` or a low-level ``Server``.

        Uses the public context-tier middleware list (``server.middleware``), first in the chain so that
        a ``roots/list_changed`` is recorded before any request that arrived after it is handled.
        """
        middleware = getattr(server, "middleware", None)
        if not isinstance(middleware, list):
            raise TypeError(f"guard.install() needs an mcp MCPServer or Server, got {type(server).__name__}")
        if self._middleware in middleware:
            return
        middleware.insert(0, self._middleware)
        # So that tools can also use the client-brokered files/* methods through guard.files(ctx).
        enable_brokering(server)

    async def _middleware(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        method = ctx.method
        if method == "initialize":
            result = await call_next(ctx)
            # Record only; never await the client here (initialize runs inline: that would deadlock).
            self._on_initialize(ctx)
            return result
        if method == "notifications/initialized":
            state = _connection_of(ctx).state.get(_STATE_KEY)
            if isinstance(state, _ConnectionRoots) and state.served:
                # A repeated initialized: the connection is already served. Ignored quietly, as the
                # contract says (the SDK's own handler would be re-run for nothing).
                logger.debug("ignoring a repeated notifications/initialized")
                return None
            await call_next(ctx)
            await self._serve_connection(ctx)
            return None
        if method == "notifications/roots/list_changed":
            state = _connection_of(ctx).state.get(_STATE_KEY)
            if isinstance(state, _ConnectionRoots):
                state.cache.notify_changed()
            return await call_next(ctx)
        if method == "tools/call" and ctx.params is not None and "inputResponses" in ctx.params:
            # Checking each URI costs time in proportion to what the client sent (up to the transport's body
            # limit): a worker thread's time, never the event loop's.
            params, malformed = await off_loop(functools.partial(_without_invalid_roots, ctx.params))
            if params is not ctx.params:
                token = _MALFORMED_CALL_ROOTS.set(malformed)
                try:
                    return await call_next(dataclasses.replace(ctx, params=params))
                finally:
                    _MALFORMED_CALL_ROOTS.reset(token)
        return await call_next(ctx)

    def _on_initialize(self, ctx: ServerRequestContext[Any, Any]) -> None:
        connection = _connection_of(ctx)
        raw = _raw_capabilities(ctx.params)
        self._state_for(connection, raw)

    def _state_for(self, connection: Connection, raw: Mapping[str, Any]) -> _ConnectionRoots:
        existing = connection.state.get(_STATE_KEY)
        if isinstance(existing, _ConnectionRoots):
            return existing
        roots_cap = raw.get("roots")
        declared = isinstance(roots_cap, Mapping)
        list_changed = declared and bool(roots_cap.get("listChanged"))  # type: ignore[union-attr]
        if declared:
            _note_deprecation()
        cache = RootsCache(
            self._fetcher(connection),
            fallback=self._fallback,
            transform=self._clip,
            debounce=self._debounce,
            max_wait=self._max_wait,
            timeout=self._timeout,
            first_answer_timeout=self._first_answer_timeout,
        )
        cache.set_capabilities(roots=declared, list_changed=list_changed)
        if not declared:
            self._say_no_capability()
        state = _ConnectionRoots(cache)
        connection.state[_STATE_KEY] = state
        connection.exit_stack.push_async_callback(cache.aclose)
        return state

    def _fetcher(self, connection: Connection) -> Callable[[], Any]:
        async def fetch() -> object:
            # The raw result, not ListRootsResult: the typed path rejects the whole answer when one entry is
            # not a file: URI. The cache judges each entry itself.
            state = connection.state.get(_STATE_KEY)
            waiting = (
                [c for c in state.waiting if c.session.can_send_request]
                if isinstance(state, _ConnectionRoots)
                else []
            )
            try:
                if waiting:
                    # Tied to a call that waits for the answer: on streamable HTTP the request then rides
                    # that call's open response stream, which exists for sure, rather than the standalone
                    # GET stream, which the client may not have opened (yet); the SDK drops messages for
                    # a stream that is not there.
                    return await _request_channel(waiting[-1]).send_raw_request("roots/list", None)
                return await connection.send_raw_request("roots/list", None)
            except MCPError as exc:
                if exc.code == CONNECTION_CLOSED:
                    # The connection is ending and its task group is about to cancel this refresh; a
                    # "failed" warning for a client that merely went away would be noise.
                    logger.debug("roots/list abandoned: the connection closed")
                    await anyio.sleep_forever()
                # -32601 / -32600 "not supported" (roots switched off in the host) is a failed answer like
                # any other: the last valid roots stay (or none), never the fallback, and the next valid
                # answer (after the client's list_changed) applies. The cache logs it.
                raise

        return fetch

    def _say_no_capability(self) -> None:
        if self._fallback.source == SOURCE_UNCONFIGURED:
            self._say_once(
                "no-capability",
                "client declared no roots capability and no fallback roots are configured; its guarded "
                "calls are refused",
            )
        else:
            self._say_once(
                "no-capability",
                "client declared no roots capability; using fallback roots from %s: %s",
                self._fallback.source,
                self._fallback.describe(),
            )

    async def _serve_connection(self, ctx: ServerRequestContext[Any, Any]) -> None:
        """Run this connection's roots refresh for as long as the connection lives.

        The SDK runs each notification handler as its own task in the connection's task group and
        cancels them when the connection ends, so the cache's worker lives exactly as long as the
        connection; the connection's exit stack closes the cache.
        """
        connection = _connection_of(ctx)
        state = self._state_for(connection, _raw_capabilities(None))
        if state.served:
            return
        state.served = True
        if not connection.has_standalone_channel:
            # A connection that cannot ask (stateless HTTP) is the one case besides "no capability" where
            # the fallback roots apply.
            state.cache.set_capabilities(roots=False, list_changed=False)
            self._say_once(
                "no-back-channel",
                "this connection has no back-channel (stateless HTTP): roots/list cannot be sent; "
                "fallback roots apply where configured",
            )
        if connection.session_id is None:
            state.cache_started = True
            state.cache.start()
        # else streamable HTTP: a roots/list sent now would go to the standalone GET stream, which the
        # client opens only after initialized (the SDK drops what it cannot deliver); the first guarded call
        # starts the cache instead, and the request rides that call's response stream.
        await state.cache.run()

    # -- roots for handlers --

    async def roots(self, ctx: object) -> RootSet:
        """The roots in force for this request: the client's (fresh, clipped to the ceiling) or the
        fallback roots. Accepts MCPServer's ``Context`` or the low-level ``ServerRequestContext``.

        Raises :class:`RootsUnavailable` on a 2026-07-28 request from a client that has roots, outside a
        ``@guard.paths`` tool (only a decorated tool can ask for them there).
        """
        call_roots = _CALL_ROOTS.get()
        if call_roots is not None:
            return call_roots
        return await self._roots_for(_request_context_of(ctx))

    async def _roots_for(self, request_ctx: ServerRequestContext[Any, Any]) -> RootSet:
        connection = _connection_of(request_ctx)
        caps = connection.client_capabilities
        if _is_modern(connection):
            if caps is None or caps.roots is None:
                self._say_no_capability()
                return self._fallback_or_refuse()
            raise RootsUnavailable(
                "on a 2026-07-28 connection the client's roots arrive with the tool call; decorate the tool "
                "with @guard.paths(...) (no names is fine) so mcp-roots can ask for them"
            )
        state = connection.state.get(_STATE_KEY)
        if not isinstance(state, _ConnectionRoots):
            # No initialize seen on this connection: stateless HTTP, or the guard was installed late.
            self._say_once(
                "no-lifecycle",
                "no roots lifecycle on this connection (stateless HTTP or no handshake seen); "
                "using fallback roots from %s: %s",
                self._fallback.source,
                self._fallback.describe(),
            )
            return self._fallback_or_refuse()
        if not state.cache_started:
            # Streamable HTTP: the first roots/list waits for the first guarded call (see _serve_connection).
            state.cache_started = True
            state.cache.start()
        state.waiting.append(request_ctx)
        try:
            roots = await state.cache.fresh(self._timeout)
        finally:
            state.waiting.remove(request_ctx)
        if roots.source == SOURCE_UNCONFIGURED:
            return self._fallback_or_refuse()
        return roots

    async def _roots_for_call(self, ctx: object, answer: object) -> RootSet:
        malformed = _MALFORMED_CALL_ROOTS.get()
        if malformed is not None:
            raise RootsUnavailable(f"the roots the client sent with this call are malformed: {malformed}")
        if isinstance(answer, ListRootsResult):
            _note_deprecation()
            try:
                # In a worker thread, under the same cap and resolution budget as the legacy era.
                roots = await build_client_roots(answer, self._clip)
            except MalformedRoots as exc:
                raise RootsUnavailable(
                    f"the roots the client sent with this call are malformed: {exc}"
                ) from None
            if not roots:
                self._say_once("granted-none", "the client granted no roots; every path is refused")
            return roots
        return await self._roots_for(_request_context_of(ctx))

    # -- the decorator --

    def paths(self, *names: str) -> Callable[[F], F]:
        """Guard the named path arguments of an MCPServer tool.

        Before the body runs, each named argument (a path, or a list of paths) is resolved against the
        roots in force; a refused one returns a tool result with ``isError: true`` and the body never runs.
        The body receives canonical paths (``str``, or ``Path`` where annotated so). The tool's input
        schema is unchanged. ``await guard.roots(ctx)`` inside the body returns the same RootSet.
        """

        def decorate(fn: F) -> F:
            # The decorating frame's names, so that string annotations (``from __future__ import
            # annotations``) of a tool defined inside a function resolve as they would for the SDK.
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
        args = {name: _PathArg(name, hints.get(name, str)) for name in names}
        ctx_name = next(
            (p for p, h in hints.items() if isinstance(h, type) and issubclass(h, Context)),
            None,
        )
        params = [p.replace(annotation=hints.get(p.name, p.annotation)) for p in sig.parameters.values()]
        extra = []
        if ctx_name is None:
            extra.append(inspect.Parameter(_CTX_PARAM, inspect.Parameter.KEYWORD_ONLY, annotation=Context))
        roots_annotation = Annotated[Any, Resolve(_ask_for_roots)]
        extra.append(
            inspect.Parameter(_ROOTS_PARAM, inspect.Parameter.KEYWORD_ONLY, annotation=roots_annotation)
        )
        # Keyword-only extras go after every other parameter (before **kwargs if there is one).
        var_kw = [p for p in params if p.kind is inspect.Parameter.VAR_KEYWORD]
        params = [p for p in params if p.kind is not inspect.Parameter.VAR_KEYWORD] + extra + var_kw
        new_sig = sig.replace(parameters=params, return_annotation=hints.get("return", sig.return_annotation))
        is_async = inspect.iscoroutinefunction(fn)
        guard = self

        async def wrapper(**kwargs: Any) -> Any:
            ctx = kwargs[ctx_name] if ctx_name is not None else kwargs.pop(_CTX_PARAM)
            answer = kwargs.pop(_ROOTS_PARAM, None)
            try:
                roots = await guard._roots_for_call(ctx, answer)
                for name, arg in args.items():
                    if name in kwargs:
                        kwargs[name] = arg.check(roots, kwargs[name])
            except (PathOutsideRoots, InvalidPath, RootsUnavailable) as exc:
                guard._log_refusal(fn.__name__, exc)
                return _refusal(str(exc))
            if guard._refusals_said:
                guard._refusals_said.clear()  # a call passed: the streak of refusals is over
            token = _CALL_ROOTS.set(roots)
            try:
                if is_async:
                    return await fn(**kwargs)
                # anyio copies contextvars into the worker thread, so guard.roots(ctx) works there too.
                return await anyio.to_thread.run_sync(functools.partial(fn, **kwargs))
            except RootsError as exc:
                # The body's own RootSet operations refused (a symlink swapped in after the check, a file
                # over max_bytes), or brokered access is unavailable: every RootsError message is written
                # for the client to read, so it becomes the tool's error text instead of the SDK's generic
                # "Error executing tool".
                guard._log_refusal(fn.__name__, exc)
                return _refusal(str(exc))
            finally:
                _CALL_ROOTS.reset(token)

        functools.update_wrapper(wrapper, fn)
        wrapper.__signature__ = new_sig  # type: ignore[attr-defined]
        annotations = {p.name: p.annotation for p in params if p.annotation is not inspect.Parameter.empty}
        if new_sig.return_annotation is not inspect.Signature.empty:
            annotations["return"] = new_sig.return_annotation
        wrapper.__annotations__ = annotations
        del wrapper.__wrapped__  # type: ignore[attr-defined]  # the SDK must see the new signature
        return wrapper

    # -- client-brokered file access --

    async def files(self, ctx: Context, **options: Any) -> BrokeredFiles:
        """The client's files, operated by the client for this tool call (the ``files/*`` methods; see
        ``docs/brokering.md``): ``fs = await guard.files(ctx)``, then ``await fs.read_text("notes/a.md")``.

        Raises :class:`BrokeringUnavailable` when the client does not offer it or on a 2026-07-28
        connection. ``options`` go to :func:`mcp_roots.broker.files` (``timeout``, ``chunk_size``).
        """
        return await broker_files(ctx, **options)

    # -- errors as tool results, for hand-written handlers --

    @staticmethod
    def refusal(exc: RootsError | str) -> CallToolResult:
        """A tool result with ``isError: true`` carrying ``exc``'s message, for hand-written handlers."""
        return _refusal(str(exc))


async def _ask_for_roots(ctx: Context) -> ListRoots | None:
    """Resolver behind every @guard.paths tool: on a 2026-07-28 request from a client with the roots
    capability, ask for its roots (the SDK turns this into the multi-round-trip input request);
    otherwise answer nothing and let the connection's cache or the fallback decide."""
    request_ctx = ctx.request_context
    connection = _connection_of(request_ctx)
    caps = connection.client_capabilities
    if _is_modern(connection) and caps is not None and caps.roots is not None:
        return ListRoots()
    return None
