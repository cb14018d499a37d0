"""The guarded call, written once: strict -> roots in force -> ceiling precheck -> argument check (on the
arguments as the body receives them, defaults applied) -> canonical paths substituted -> refuse or run; the
same for ``resources/read``. Adapters supply a :class:`CallPort` (how to get this call's roots, ask the
client, refuse, run the next handler) and decide nothing about paths or roots.

Who calls whom::

    framework middleware (adapters/*)  --tool_call(port, request, ...)-->  _calls  --run()-->  framework
        framework validates the arguments  --calls-->  wrapper of @guard.paths (_calls)  --checks-->  body
    _calls --port.call_roots(request) / port.ask(request) / port.refuse(message)--> the adapter's port
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
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any, Protocol

from ._audit import GUARDED_ATTRIBUTE, GuardedFunction, covers, guarded_function_of, strict_refusal
from ._errors import (
    InvalidPath,
    InvalidRootURI,
    PathOutsideRoots,
    RootsError,
    RootsUnavailable,
    os_error_line,
)
from ._pathlike import OPAQUE, is_path_value, locator_fits, parse_locator, path_locators, replace_at
from ._policy import GuardPolicy
from ._rootset import RootSet
from ._uri import uri_to_path

__all__ = [
    "NOT_INSTALLED",
    "CallPort",
    "GuardNotInstalled",
    "GuardedCall",
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

    def has_roots(self, request: Any) -> bool:
        """Whether this call's roots are in hand: :meth:`call_roots` will send nothing to the client
        (the ceiling precheck is then skipped: the check against the roots refuses the same paths)."""
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


@dataclass(frozen=True)
class _Call:
    """The call in progress, as the algorithm entered it."""

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
    kind: str = "tool",
    refuse: Callable[[str], Any] | None = None,
    ask: Callable[[Any], Any] | None = None,
    refuse_in_body: Callable[[str], Any] | None = None,
) -> Any:
    """A ``tools/call`` of tool ``name`` (registered as ``fn``, None when the framework keeps no function),
    with the client's raw ``arguments`` and the roots ``answer`` the request carried (2026-07-28), or None.
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
            roots = await policy.roots_from_client_answer(answer)
        elif spec is not None:
            if policy.ceiling is not None and not port.has_roots(request):
                spec.precheck(spec.raw_values(arguments))  # 0 round trips for a path outside the ceiling
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
            roots = await policy.roots_from_client_answer(answer)
        elif path is not None or spec is not None:
            ceiling = policy.ceiling if path is not None and not port.has_roots(request) else None
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


def lexically_within(ceiling: RootSet, text: str) -> bool:
    """Whether absolute ``text``, its ``..`` taken by the letter, lies in ``ceiling``. The precheck leaves
    such a path to the check against the call's roots: walking it in the ceiling would make the answer (and
    whether the client is asked) depend on what lies there, outside the roots (issue 25 item 8)."""
    norm = os.path.normpath(text)
    return any(norm == str(p) or norm.startswith(str(p).rstrip("/") + "/") for p in ceiling.paths)


# --- The checks -----------------------------------------------------------------------------------------


class PathArg:
    """How one guarded argument is checked: ``param`` names the parameter, ``locator`` the part of its
    value that is the path ("" = the value itself)."""

    def __init__(self, param: str, annotation: Any, locator: str = "", *, loose: bool = False) -> None:
        self.param = param
        self.locator = locator
        self.loose = loose  # a non-path value at the locator is another member of a union: left as it is
        self.at = parse_locator(locator.lstrip("."))  # "." (the value itself, beside its fields) is ""
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
        if origin in (list, tuple, set, frozenset, Sequence) or target in (list, tuple, set, frozenset):
            self.many = True
            inner = typing.get_args(target)
            target = inner[0] if inner else str
            if typing.get_origin(target) is typing.Annotated:
                target = typing.get_args(target)[0]
        self.as_path = isinstance(target, type) and issubclass(target, Path)

    def check(self, roots: RootSet, value: Any, *, expand_user: bool, absolute_only: bool = False) -> Any:
        """``value`` with each path canonical (``Path`` where annotated so, else ``str``); with
        ``absolute_only``, relative paths are passed through unjudged (the ceiling precheck)."""
        if value is None:
            return None
        if self.locator:  # a part inside the value: checked in a copy, the canonical path put in its place
            try:
                return replace_at(value, self.at, lambda v: self._leaf(roots, v, expand_user, absolute_only))
            except (TypeError, ValueError) as exc:  # a shape the locator cannot look inside: refused
                bad = InvalidPath(f"argument {self.param!r} at {self.locator!r}: {exc}")
                raise (exc if isinstance(exc, RootsError) else bad) from None
        if self.many:
            if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple, set, frozenset)):
                raise InvalidPath(
                    f"argument {self.param!r} must be a list of paths, not {type(value).__name__}"
                )
            checked = [self._one(roots, v, expand_user, absolute_only) for v in value]
            return checked if isinstance(value, list) else type(value)(checked)
        return self._one(roots, value, expand_user, absolute_only)

    def _leaf(self, roots: RootSet, value: object, expand_user: bool, absolute_only: bool) -> object:
        if not is_path_value(value):
            if self.loose or absolute_only:  # the precheck reads raw JSON: the check proper judges it
                return value
            raise InvalidPath(
                f"argument {self.param!r} at {self.locator!r}: a {type(value).__name__}, no path"
            )
        checked = self._one(roots, value, expand_user, absolute_only)
        return Path(checked) if isinstance(value, PurePath) and not absolute_only else checked

    def _one(self, roots: RootSet, value: Any, expand_user: bool, absolute_only: bool) -> Any:
        if isinstance(value, os.PathLike):
            value = os.fspath(value)
        if isinstance(value, str):
            value = self._as_written(value, expand_user)
            if absolute_only and (not os.path.isabs(value) or lexically_within(roots, value)):
                return value
        canonical = str(roots.resolve(value))
        return Path(canonical) if self.as_path and not absolute_only else canonical

    def _as_written(self, value: str, expand_user: bool) -> str:
        """Paths as models write them: ``~/x`` and ``file:///x`` are never names under the first root."""
        if value.startswith("~"):
            if not expand_user:
                raise InvalidPath(
                    f"argument {self.param!r}: {value!r} starts with '~', which this server does not expand; "
                    "pass an absolute path, or './' + the name for a file really named '~...'"
                )
            expanded = os.path.expanduser(value)
            if expanded.startswith("~"):
                raise InvalidPath(f"argument {self.param!r}: cannot expand {value!r} (no such user)")
            return expanded
        if value[:5].lower() == "file:":
            if not expand_user:
                raise InvalidPath(
                    f"argument {self.param!r}: {value!r} is a file: URI; pass a filesystem path instead"
                )
            try:
                return uri_to_path(value)
            except InvalidRootURI as exc:
                raise InvalidPath(f"argument {self.param!r}: {exc}") from None
        return value


_MISSING: Any = object()
_BY_NAME = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


class GuardedCall(GuardedFunction):
    """A guarded function with what its checks need, computed once at decoration time."""

    def __init__(
        self,
        policy: GuardPolicy,
        fn: Callable[..., Any],
        names: tuple[str, ...],
        targets: Sequence[PathArg],
        signature: inspect.Signature,
    ) -> None:
        self.policy = policy
        self.fn = fn
        self.names = names
        self.wrapper = None
        self.targets = tuple(targets)
        self.signature = signature
        params = signature.parameters
        self.params = tuple(dict.fromkeys(t.param for t in targets))  # the parameters the names start with
        self.defaults = {
            n: params[n].default for n in self.params if params[n].default is not params[n].empty
        }
        # Frameworks pass arguments by keyword: then the guarded values are found without binding.
        self.by_name = all(params[n].kind in _BY_NAME for n in self.params)

    def raw_values(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """The guarded values of a request's raw ``arguments``, an omitted one as its default."""
        values = {n: arguments.get(n, self.defaults.get(n, _MISSING)) for n in self.params}
        return {n: v for n, v in values.items() if v is not _MISSING}

    def precheck(self, values: Mapping[str, Any]) -> None:
        """Refuse an absolute path outside the ceiling before any roots are asked for: no client answer
        can make it allowed (0 round trips)."""
        ceiling, expand_user = self.policy.ceiling, self.policy.expand_user
        for target in self.targets:
            if ceiling is not None and target.param in values:
                target.check(ceiling, values[target.param], expand_user=expand_user, absolute_only=True)

    def bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> inspect.BoundArguments | dict[str, Any]:
        """The call as the body receives it, defaults applied: the keyword arguments (with every guarded
        default filled in) when all came by name, else the bound arguments."""
        if not args and self.by_name:
            for name, default in self.defaults.items():  # ``kwargs`` is the call's own dict
                kwargs.setdefault(name, default)
            return kwargs
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise InvalidPath(f"{self.name}(): {exc}") from None
        bound.apply_defaults()
        return bound

    def check(self, roots: RootSet, arguments: dict[str, Any]) -> None:
        """Each guarded value of ``arguments`` (bound, by parameter name) made canonical in place, or
        ``PathOutsideRoots`` / ``InvalidPath``."""
        expand_user = self.policy.expand_user
        for target in self.targets:
            if target.param in arguments:
                arguments[target.param] = target.check(
                    roots, arguments[target.param], expand_user=expand_user
                )


def _entered(spec: GuardedCall) -> _Call:
    call = _CALL.get()
    if call is None or call.policy is not spec.policy:
        logger.error("refused %s(): %s", spec.name, NOT_INSTALLED)
        raise not_installed_error()
    return call


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


def _targets(fn_name: str, text: str, sig: inspect.Signature, hints: dict[str, Any]) -> list[PathArg]:
    """The checks ``@guard.paths(text)`` asks for: the parameter itself (a path, or a list of paths), or
    each path-like part at or inside locator ``text`` (``cfg``: a model's every path field; ``cfg.path``)."""
    rule = f"@guard.paths({text!r}) on {fn_name}()"
    try:
        locator = parse_locator(text)
    except ValueError as exc:
        raise TypeError(f"{rule}: {exc}") from None
    param = locator.parameter
    if param is None or param not in sig.parameters:
        raise TypeError(f"{rule}: {fn_name}() has no parameter named {param or text!r}")
    annotation = hints.get(param, str)
    within = str(locator.within())
    if within and not locator_fits(annotation, within):
        raise TypeError(f"{rule}: the type of {param!r} has no part at {within!r}; a locator names fields")
    text = str(locator)
    places = [p for p in path_locators(annotation, param, named=not within) if covers(text, p)]
    opaque = [p for p in places if p.endswith(OPAQUE)]
    if opaque:
        raise TypeError(f"{rule}: the path-like part at {opaque[0]!r} lies too deep or in a recursive type")
    if all(p in (param, param + "[]") for p in places):  # the value is the path (or a list of them)
        return [PathArg(param, annotation)] if not within else [PathArg(param, Any, within)]
    relative = [p[len(param) :].lstrip(".") or "." for p in places]  # "." is the value itself
    return [PathArg(param, Any, p, loose=p in (".", "[]")) for p in relative]


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
    targets = [t for name in names for t in _targets(fn_name, name, sig, hints)]
    params = [p.replace(annotation=hints.get(p.name, p.annotation)) for p in sig.parameters.values()]
    new_sig = sig.replace(parameters=params, return_annotation=hints.get("return", sig.return_annotation))
    spec = GuardedCall(policy, fn, names, targets, new_sig)

    def prepare(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
        """(the arguments by name, to check in place; how to call the body with them)."""
        bound = spec.bind(args, kwargs)
        return (bound, None) if isinstance(bound, dict) else (bound.arguments, bound)

    wrapper: Callable[..., Any]
    if inspect.iscoroutinefunction(fn):

        async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
            call = _entered(spec)
            token = None
            try:
                arguments, bound = prepare(args, kwargs)
                roots = call.roots
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
            call = _entered(spec)
            try:
                if call.roots is None:
                    raise RootsUnavailable(f"{spec.name}(): the roots of this call are not known")
                arguments, bound = prepare(args, kwargs)
                spec.check(call.roots, arguments)
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
