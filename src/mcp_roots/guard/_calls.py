"""The guarded call, written once, for tools and ``resources/read``.
The adapter reports facts; the roots layer decides; the port shows the outcome.
"""

# The guarded call, written once: strict -> roots in force -> ceiling precheck -> argument check (on the
# arguments as the body receives them, defaults applied) -> canonical paths substituted -> refuse or run; the
# same for ``resources/read``. An adapter reports the facts of each request (``roots._facts.RequestFacts``),
# the roots layer's one decision table picks its roots (``GuardPolicy.roots_for``), and the adapter's
# :class:`CallPort` turns the outcome (run, refuse, ask the client) into its framework's result: it decides
# nothing about paths or roots.
#
# Who calls whom::
#
#     framework middleware (adapters/*)  --tool_call(port, facts, ...)-->  _calls  --run()-->  framework
#         framework validates the arguments  --calls-->  wrapper of @guard.paths (_calls)  --checks-->  body
#                                                        (the checks, worked out at decoration: _argcheck)
#     _calls --policy.roots_now(connection) / policy.roots_for(facts)--> the roots layer (roots/_policy)
#     _calls --port.ask(facts) / port.refuse(facts, message)--> the adapter's port

from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
import logging
import typing
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, NamedTuple, NoReturn

from ..errors import (
    InvalidPath,
    InvalidRootURI,
    PathOutsideRoots,
    RootsError,
    RootsUnavailable,
    os_error_line,
)
from ..paths._rootset import RootSet
from ..paths._uri import is_file_uri, uri_to_path
from ..roots._facts import NeedRoots, RequestFacts
from ..roots._policy import NOT_INSTALLED, GuardPolicy, not_installed_error
from ._argcheck import GuardedCall, lexically_within, targets_of
from ._audit import GUARDED_ATTRIBUTE, strict_refusal
from ._consent import GO, consent_step, guarded_paths, tool_writes
from ._port import SdkPort, own_spec, swap_in_wrapper

__all__ = [
    "client_error_text",
    "current_call",
    "current_roots",
    "guard_function",
    "resource_read",
    "tool_call",
]

logger = logging.getLogger("mcp_roots")

_REFUSED = (PathOutsideRoots, InvalidPath, InvalidRootURI, RootsUnavailable)
"""What the checks raise: each becomes one refusal line for the client."""


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


class _Call(NamedTuple):
    """The call in progress, as the algorithm entered it (a named tuple: made on every call)."""

    policy: GuardPolicy
    port: SdkPort
    facts: RequestFacts
    roots: RootSet | None


# The call in progress: which guard's adapter entered it (so that a guarded function knows install() ran),
# the roots its arguments are checked against (so that `await guard.roots(ctx)` inside the body sees exactly
# that set) and how to refuse from inside the body.
_CALL: contextvars.ContextVar[_Call | None] = contextvars.ContextVar("mcp_roots_call", default=None)


def current_roots() -> RootSet | None:
    """The roots of the guarded call in progress, if they are known."""
    call = _CALL.get()
    return call.roots if call is not None else None


def current_call() -> tuple[GuardPolicy, RequestFacts] | None:
    """The policy and facts of the tool call an installed adapter entered (guarded or not), or None."""
    call = _CALL.get()
    return None if call is None else (call.policy, call.facts)


def _runs_wrapper(fn: object, spec: GuardedCall) -> bool:
    """Whether ``fn`` (what the framework registered, often its own wrapper of the user's function) runs
    the wrapper @guard.paths returned, not the bare function underneath it."""
    for _ in range(8):  # a few layers of framework wrappers at most
        if fn is None or fn is spec.fn:
            return False
        if fn is spec.wrapper:
            return True
        fn = getattr(fn, "__wrapped__", None)
    return False


# --- The algorithm ----------------------------------------------------------------------------------------


async def tool_call(
    port: SdkPort,
    facts: RequestFacts,
    *,
    name: str,
    component: object | None,
    arguments: Mapping[str, Any],
    run: Callable[[], Awaitable[Any]],
) -> Any:
    """A ``tools/call`` of tool ``name`` (or a ``prompts/get``: ``facts.kind``), registered as
    ``component`` (whose ``fn`` the framework runs; None when it keeps none), with the client's raw
    ``arguments``. ``run()`` runs the next handler (the framework, which runs the tool's wrapper)."""
    policy = port.policy
    fn, spec = swap_in_wrapper(component, policy) if component is not None else (None, None)
    if policy.strict and fn is not None:
        why = strict_refusal(fn, name, facts.kind)
        if why is not None:
            logger.warning("refused %s(): %s", name, why)
            return port.refuse(facts, why)
    roots: RootSet | None = None
    try:
        if spec is None:
            if facts.answer is not None:  # for guard.roots(ctx) in an unguarded body
                roots = await policy.answered_roots(facts)
        else:
            if not facts.modern:  # the fast lane: the connection's roots in hand, nothing due
                roots = policy.roots_now(facts.connection)
            if roots is None:
                roots = await policy.roots_for(
                    facts,
                    # 0 round trips, and no wait, for a path outside the ceiling
                    (lambda: spec.precheck(spec.raw_values(arguments)))
                    if policy.ceiling is not None
                    else None,
                )
    except NeedRoots:
        return port.ask(facts)
    except _REFUSED as exc:
        policy.log_refusal(name, exc)
        return port.refuse(facts, str(exc))
    if policy.consent is not None and spec is not None and roots is not None and facts.declared is False:
        # folders by the user's consent: a path the roots refuse inside the ceiling asks the user
        paths = guarded_paths(spec, spec.raw_values(arguments))
        roots, outcome = await consent_step(
            port, facts, paths, roots, name=name, writes=tool_writes(component)
        )
        if outcome is not GO:
            return outcome
    token = _CALL.set(_Call(policy, port, facts, roots))
    try:
        return await run()
    except NeedRoots:  # a hand-written handler asked for the roots (guard.roots(ctx)) or a lazy wrapper
        return port.ask(facts)
    except port.framework_errors as exc:
        text = client_error_text(exc) if spec is not None else None
        if text is None:
            raise
        return port.refuse(facts, text)
    finally:
        _CALL.reset(token)


async def resource_read(
    port: SdkPort,
    facts: RequestFacts,
    *,
    uri: str,
    component: object | None,
    run: Callable[[], Awaitable[Any]],
    swap: bool = True,
) -> Any:
    """A ``resources/read`` of ``uri``: a ``file:`` URI is checked against the same roots as tools (with
    consent, a path they refuse inside the ceiling asks the user for read access, as a tool call does), and
    a resource template under ``@guard.paths`` (``component``, the template matching ``uri``, or None) has
    its parameters checked by its wrapper. ``swap``: the framework runs the template's ``fn``, so the
    guard's wrapper may be put there (else it must be found under what the framework runs)."""
    policy = port.policy
    if swap and component is not None:
        fn, spec = swap_in_wrapper(component, policy)
    else:
        fn = getattr(component, "fn", None)
        spec = own_spec(fn, policy)
    path: str | None = None
    roots: RootSet | None = None
    try:
        if spec is not None and not _runs_wrapper(fn, spec):
            raise RootsUnavailable(
                f"@guard.paths stands above the resource decorator on {spec.name}(): the framework "
                "registered the unchecked function; put @guard.paths below the resource decorator"
            )
        path = uri_to_path(uri) if is_file_uri(uri) else None
        if path is None and spec is None:
            if facts.answer is not None:
                roots = await policy.answered_roots(facts)
        else:
            if not facts.modern:
                roots = policy.roots_now(facts.connection)
            if roots is None:
                ceiling = policy.ceiling if path is not None else None
                outside = ceiling is not None and path is not None and not lexically_within(ceiling, path)
                roots = await policy.roots_for(
                    facts,
                    # outside the ceiling: refused before the client is asked
                    (lambda: ceiling.resolve(path)) if outside and ceiling is not None and path else None,
                )
        if path is not None and roots is not None:
            if policy.consent is not None and facts.declared is False:
                # folders by the user's consent: a read grant is all a read needs
                roots, outcome = await consent_step(port, facts, [path], roots, name=uri, writes=False)
                if outcome is not GO:
                    return outcome
            roots.resolve(path)
    except NeedRoots:
        return port.ask(facts)
    except _REFUSED as exc:
        policy.log_refusal("resources/read", exc)
        return port.refuse(facts, str(exc))
    # A guarded template's wrapper checks its parameters (asking for the roots if they are not known yet).
    token = _CALL.set(_Call(policy, port, facts, roots))
    try:
        return await run()
    except NeedRoots:
        return port.ask(facts)
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
    return call.port.refuse(call.facts, message, True)


async def _roots_of(spec: GuardedCall, call: _Call, values: Mapping[str, Any]) -> tuple[RootSet, Any]:
    """The call's roots, not known yet: asked of the port now (a hand-written handler calling a guarded
    function), after the ceiling precheck; and the token that makes them the call's roots."""
    spec.precheck(values)
    try:
        roots = await call.policy.roots_for(call.facts)
    except NeedRoots:
        raise call.port.need_roots() from None  # the port's own signal passes its framework's runner
    return roots, _CALL.set(_Call(call.policy, call.port, call.facts, roots))


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
                # path more than the lines (tests/guard/test_guard_safety.py holds both to binding's answers)
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
