"""The guarded call, written once: strict -> roots in force -> ceiling precheck -> argument check (on the
arguments as the body receives them, defaults applied) -> canonical paths substituted -> refuse or run; the
same for ``resources/read``. Adapters supply a :class:`CallPort` (how to get this call's roots, ask the
client, refuse, run the next handler) and decide nothing about paths or roots.

Who calls whom::

    framework middleware (adapters/*)  --tool_call(port, request, ...)-->  _calls  --run()-->  framework
        framework validates the arguments  --calls-->  wrapper of @guard.paths (_calls)  --checks-->  body
                                                       (the checks, worked out at decoration: _argcheck)
    _calls --port.call_roots(request) / port.ask(request) / port.refuse(message)--> the adapter's port
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
import logging
import sys
import typing
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, NamedTuple, NoReturn, Protocol

from ..errors import (
    InvalidPath,
    InvalidRootURI,
    PathOutsideRoots,
    RootsError,
    RootsUnavailable,
    os_error_line,
)
from ..paths._rootset import RootSet
from ..paths._uri import uri_to_path
from ..roots._policy import GuardPolicy
from ._argcheck import GuardedCall, lexically_within, targets_of
from ._audit import GUARDED_ATTRIBUTE, guarded_function_of, strict_refusal

__all__ = [
    "NOT_INSTALLED",
    "CallPort",
    "GuardNotInstalled",
    "NeedRoots",
    "client_error_text",
    "current_roots",
    "guard_function",
    "not_installed_error",
    "own_spec",
    "resource_read",
    "tool_call",
]

logger = logging.getLogger("mcp_roots")

NOT_INSTALLED = (
    "guard.install(server) was not called: this tool is guarded by mcp-roots (@guard.paths) but the "
    "server it runs on was never wired to the guard, so it refuses every call"
)

_REFUSED = (PathOutsideRoots, InvalidPath, InvalidRootURI, RootsUnavailable)
"""What the checks raise: each becomes one refusal line for the client."""


class GuardNotInstalled(RootsError):
    """A guarded function ran on a server where ``guard.install(server)`` never ran."""


_TOOL_ERRORS = (
    ("mcp.server.mcpserver.exceptions", "ToolError"),
    ("fastmcp.exceptions", "ToolError"),
    ("mcp.server.fastmcp.exceptions", "ToolError"),
)
"""(module, class) of each framework's "a tool failed, show the client this message" exception, by name:
nothing is imported to find them."""


@functools.lru_cache(maxsize=4)
def _not_installed_type(bases: tuple[type[Exception], ...]) -> type[GuardNotInstalled]:
    return type("GuardNotInstalled", (GuardNotInstalled, *bases), {"__module__": __name__})


def not_installed_error() -> GuardNotInstalled:
    """A GuardNotInstalled that is also of the tool-error type of every framework loaded in this process,
    so that the framework running the function shows the client the reason instead of a generic "Error
    executing tool" (the class is made once per set of loaded frameworks, not per call)."""
    found = []
    for module_name, class_name in _TOOL_ERRORS:
        cls = getattr(sys.modules.get(module_name), class_name, None)
        if isinstance(cls, type) and issubclass(cls, Exception):
            found.append(cls)
    return _not_installed_type(tuple(found))(NOT_INSTALLED)


class NeedRoots(Exception):
    """This call's roots must be asked of the client (2026-07-28: by an input request); the port's
    :meth:`CallPort.ask` answers the call with that request. A port may raise a subclass of its own (one
    its framework lets through a tool runner)."""


def client_error_text(exc: BaseException) -> str | None:
    """The one line a client reads for what a guarded tool body raised, or None when it is neither a
    ``RootsError`` (its message is written for the client) nor an ``OSError`` (:func:`os_error_line`).

    Frameworks wrap a body's exception in their own (``raise ToolError(...) from exc``), so the chain of
    ``__cause__`` is followed.
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


# --- The port: what an adapter supplies -----------------------------------------------------------------


class CallPort(Protocol):
    """One framework's port into the guarded call. ``request`` is whatever object the adapter uses for
    one request (its SDK's request context); the algorithm only hands it back."""

    policy: GuardPolicy
    framework_errors: tuple[type[BaseException], ...]
    """The exceptions in which the framework wraps what a tool body raised (unwrapped to one line)."""

    async def call_roots(self, request: Any) -> RootSet:
        """The roots in force for ``request`` (legacy: the connection's fresh roots; no capability: the
        fallback), or raise :class:`NeedRoots` when they must be asked of the client."""
        ...

    def roots_now(self, request: Any) -> RootSet | None:
        """This call's roots when they are in hand and nothing is due (what :meth:`call_roots` would
        return at once, with no wait and nothing sent to the client), else None. The common call takes
        them in one synchronous step; otherwise the ceiling precheck runs, then :meth:`call_roots`."""
        ...

    def ask(self, request: Any) -> Any:
        """The result that answers the call with a request for the client's roots (2026-07-28)."""
        ...

    def refuse(self, message: str) -> Any:
        """The framework's ``isError`` tool result carrying ``message``."""
        ...

    def refuse_in_body(self, message: str) -> Any:
        """What the wrapper of a guarded function returns (or raises) to refuse from inside the framework's
        tool runner (a result where the framework passes it through, else an exception it shows)."""
        ...

    def refuse_read(self, message: str, uri: str) -> Any:
        """Refuse a ``resources/read`` of ``uri`` (raises the framework's resource error)."""
        ...


class _Call(NamedTuple):
    """The call in progress, as the algorithm entered it (a named tuple: made on every call)."""

    policy: GuardPolicy
    port: CallPort | None
    request: Any
    roots: RootSet | None
    refuse: Callable[[str], Any]


# The call in progress: which guard's adapter entered it (so that a guarded function knows install() ran),
# the roots its arguments are checked against (so that `await guard.roots(ctx)` inside the body sees exactly
# that set) and how to refuse from inside the body.
_CALL: contextvars.ContextVar[_Call | None] = contextvars.ContextVar("mcp_roots_call", default=None)


def current_roots() -> RootSet | None:
    """The roots of the guarded call in progress, if they are known."""
    call = _CALL.get()
    return call.roots if call is not None else None


def own_spec(fn: object, policy: GuardPolicy) -> GuardedCall | None:
    """The guarded-call record of ``fn`` when ``policy``'s guard decorated it (a function guarded by another
    RootsGuard is that guard's business: its wrapper refuses every call if that guard was never installed)."""
    spec = guarded_function_of(fn)
    return spec if isinstance(spec, GuardedCall) and spec.policy is policy else None


# --- The algorithm ----------------------------------------------------------------------------------------


async def tool_call(
    port: CallPort,
    request: Any,
    *,
    name: str,
    fn: object,
    arguments: Mapping[str, Any],
    answer: object,
    run: Callable[[], Awaitable[Any]],
    stream: object | None = None,
    kind: str = "tool",
    refuse: Callable[[str], Any] | None = None,
    ask: Callable[[Any], Any] | None = None,
    refuse_in_body: Callable[[str], Any] | None = None,
) -> Any:
    """A ``tools/call`` of tool ``name`` (registered as ``fn``, None when the framework keeps no function),
    with the client's raw ``arguments`` and the roots ``answer`` the request carried (2026-07-28), or None,
    from the client channel ``stream`` (see :meth:`GuardPolicy.roots_from_client_answer`; None: unknown).
    ``run()`` runs the next handler (the framework, which runs the tool's wrapper). A ``prompts/get`` is the
    same call (``kind="prompt"``) with its own ``refuse`` (prompt results have no ``isError``: it raises)."""
    policy = port.policy
    refuse_call = port.refuse if refuse is None else refuse
    ask_client = port.ask if ask is None else ask
    if policy.strict and fn is not None:
        why = strict_refusal(fn, name, kind)
        if why is not None:
            logger.warning("refused %s(): %s", name, why)
            return refuse_call(why)
    spec = own_spec(fn, policy)
    roots: RootSet | None = None
    try:
        if answer is not None:
            roots = await policy.roots_from_client_answer(answer, stream)
        elif spec is not None:
            roots = port.roots_now(request)
            if roots is None:
                if policy.ceiling is not None:  # 0 round trips, and no wait, for a path outside the ceiling
                    spec.precheck(spec.raw_values(arguments))
                roots = await port.call_roots(request)
    except NeedRoots:
        return ask_client(request)
    except _REFUSED as exc:
        policy.log_refusal(name, exc)
        return refuse_call(str(exc))
    body_refuse = refuse_in_body or (port.refuse_in_body if refuse is None else refuse)
    token = _CALL.set(_Call(policy, port, request, roots, body_refuse))
    try:
        return await run()
    except NeedRoots:  # a hand-written handler asked for the roots (guard.roots(ctx)) or a lazy wrapper
        return ask_client(request)
    except port.framework_errors as exc:
        text = client_error_text(exc) if spec is not None else None
        if text is None:
            raise
        return refuse_call(text)
    finally:
        _CALL.reset(token)


async def resource_read(
    port: CallPort,
    request: Any,
    *,
    uri: str,
    fn: object,
    runs_wrapper: bool,
    answer: object,
    run: Callable[[], Awaitable[Any]],
    stream: object | None = None,
) -> Any:
    """A ``resources/read`` of ``uri``: a ``file:`` URI is checked against the same roots as tools, and a
    resource template under ``@guard.paths`` (registered as ``fn``; ``runs_wrapper``: the framework runs
    the guard's wrapper, not the bare function) has its parameters checked by its wrapper."""
    policy = port.policy
    spec = own_spec(fn, policy)
    is_file = uri[:5].lower() == "file:"
    refuse = functools.partial(port.refuse_read, uri=uri)
    roots: RootSet | None = None
    try:
        if spec is not None and not runs_wrapper:
            raise RootsUnavailable(
                f"@guard.paths stands above the resource decorator on {spec.name}(): the framework "
                "registered the unchecked function; put @guard.paths below the resource decorator"
            )
        path = uri_to_path(uri) if is_file else None
        if answer is not None:
            roots = await policy.roots_from_client_answer(answer, stream)
        elif path is not None or spec is not None:
            roots = port.roots_now(request)
            if roots is None:
                ceiling = policy.ceiling if path is not None else None
                if path is not None and ceiling is not None and not lexically_within(ceiling, path):
                    ceiling.resolve(path)  # outside the ceiling: refused before the client is asked
                roots = await port.call_roots(request)
        if path is not None and roots is not None:
            roots.resolve(path)
    except NeedRoots:
        return port.ask(request)
    except _REFUSED as exc:
        policy.log_refusal("resources/read", exc)
        return refuse(str(exc))
    # A guarded template's wrapper checks its parameters (asking for the roots if they are not known yet).
    token = _CALL.set(_Call(policy, port, request, roots, refuse))
    try:
        return await run()
    except NeedRoots:
        return port.ask(request)
    finally:
        _CALL.reset(token)


# --- The wrapper of @guard.paths ------------------------------------------------------------------


def _not_entered(spec: GuardedCall) -> NoReturn:
    """A guarded function called outside a call an installed adapter of its guard entered: refused."""
    logger.error("refused %s(): %s", spec.name, NOT_INSTALLED)
    raise not_installed_error()


def _refused(spec: GuardedCall, call: _Call, exc: RootsError | OSError) -> Any:
    """A refused check, or the body's own refusal or OS error: one readable line, no traceback."""
    message = " ".join(str(exc).splitlines()) if isinstance(exc, RootsError) else os_error_line(exc)
    spec.policy.log_refusal(spec.name, exc, message)
    return call.refuse(message)


async def _roots_of(spec: GuardedCall, call: _Call, values: Mapping[str, Any]) -> tuple[RootSet, Any]:
    """The call's roots, not known yet: asked of the port now (a hand-written handler calling a guarded
    function), after the ceiling precheck; and the token that makes them the call's roots."""
    if call.port is None:
        raise RootsUnavailable(f"{spec.name}(): the roots of this call are not known")
    spec.precheck(values)
    roots = await call.port.call_roots(call.request)
    return roots, _CALL.set(_Call(call.policy, call.port, call.request, roots, call.refuse))


def guard_function(
    policy: GuardPolicy, fn: Callable[..., Any], names: tuple[str, ...], localns: dict[str, Any] | None
) -> Callable[..., Any]:
    """The wrapper ``@guard.paths(*names)`` returns for ``fn``: it runs the body only inside a call an
    installed adapter of ``policy``'s guard entered, with each guarded argument (as bound, defaults
    applied) checked against the call's roots and replaced by its canonical path."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"@guard.paths: cannot read the signature of {fn!r}: {exc}") from None
    fn_name = getattr(fn, "__name__", repr(fn))
    # A functools.partial has no annotations of its own: its function's are the ones its signature shows.
    annotated = fn.func if isinstance(fn, functools.partial) else fn
    try:
        hints = typing.get_type_hints(annotated, localns=localns, include_extras=True)
    except NameError as exc:
        raise TypeError(f"@guard.paths: cannot resolve the annotations of {fn_name}(): {exc}") from None
    except TypeError:
        hints = {}
    targets = [t for name in names for t in targets_of(fn_name, name, sig, hints)]
    params = [p.replace(annotation=hints.get(p.name, p.annotation)) for p in sig.parameters.values()]
    new_sig = sig.replace(parameters=params, return_annotation=hints.get("return", sig.return_annotation))
    spec = GuardedCall(policy, fn, names, targets, new_sig)

    def prepare(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
        """(the arguments by name, to check in place; how to call the body with them)."""
        bound = spec.bind(args, kwargs)
        return (bound, None) if isinstance(bound, dict) else (bound.arguments, bound)

    text_param = spec.text_param
    wrapper: Callable[..., Any]
    if inspect.iscoroutinefunction(fn):

        async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
            call = _CALL.get()
            if call is None or call.policy is not policy:
                _not_entered(spec)
            roots = call.roots
            if text_param is not None and roots is not None and not args:
                value = kwargs.get(text_param)
                if type(value) is str and value[:1] == "/":  # as written: no '~', no 'file:' to read
                    try:  # spec.check's one step for this value, with nothing to bind
                        kwargs[text_param] = roots.resolve_text(value)
                        policy.call_passed()
                        return await fn(**kwargs)
                    except (RootsError, OSError) as exc:
                        return _refused(spec, call, exc)
            token = None
            try:
                arguments, bound = prepare(args, kwargs)
                if roots is None:
                    roots, token = await _roots_of(spec, call, arguments)
                spec.check(roots, arguments)
                spec.policy.call_passed()
                if bound is None:
                    return await fn(**arguments)
                return await fn(*bound.args, **bound.kwargs)
            except (RootsError, OSError) as exc:
                return _refused(spec, call, exc)
            finally:
                if token is not None:
                    _CALL.reset(token)

        wrapper = async_wrapper
    else:

        def sync_wrapper(*args: Any, **kwargs: Any) -> Any:
            call = _CALL.get()
            if call is None or call.policy is not policy:
                _not_entered(spec)
            roots = call.roots
            if text_param is not None and roots is not None and not args:
                value = kwargs.get(text_param)
                # async_wrapper's one step, written out again rather than called: a frame costs the hot
                # path more than the lines (tests/test_guard_safety.py holds both to binding's answers)
                if type(value) is str and value[:1] == "/":
                    try:
                        kwargs[text_param] = roots.resolve_text(value)
                        policy.call_passed()
                        return fn(**kwargs)
                    except (RootsError, OSError) as exc:
                        return _refused(spec, call, exc)
            try:
                if roots is None:
                    raise RootsUnavailable(f"{spec.name}(): the roots of this call are not known")
                arguments, bound = prepare(args, kwargs)
                spec.check(roots, arguments)
                spec.policy.call_passed()
                if bound is None:
                    return fn(**arguments)
                return fn(*bound.args, **bound.kwargs)
            except (RootsError, OSError) as exc:
                return _refused(spec, call, exc)

        wrapper = sync_wrapper
    # The framework sees the tool's own signature, with its annotations resolved here (a tool defined
    # inside a function may name local types): no hidden parameters, the input schema is the tool's own.
    functools.update_wrapper(wrapper, fn)
    setattr(wrapper, "__signature__", new_sig)  # noqa: B010
    wrapper.__annotations__ = {k: v for k, v in hints.items() if k in sig.parameters or k == "return"}
    delattr(wrapper, "__wrapped__")  # nothing may unwrap to the unguarded body
    setattr(wrapper, GUARDED_ATTRIBUTE, spec)
    spec.wrapper = wrapper
    with contextlib.suppress(AttributeError, TypeError):  # a builtin or a callable object
        setattr(fn, GUARDED_ATTRIBUTE, spec)
    return wrapper
