"""The audit: every tool, resource template and prompt with the parameters that look like paths, and whether
each is guarded (by an installed guard's ``@guard.paths``) or exempted (``@guard.exempt``); the strict rule
built on it; and the record ``@guard.paths`` leaves on a function, which the audit and the calls read.
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..paths._uri import is_file_uri
from ..roots._policy import GuardPolicy
from ._annotations import parameter_annotations, path_locators
from ._locators import OPAQUE

__all__ = [
    "EXEMPT_ATTRIBUTE",
    "GUARDED_ATTRIBUTE",
    "AuditRow",
    "GuardedFunction",
    "Handler",
    "audit_handlers",
    "exemption_of",
    "format_audit",
    "guarded_function_of",
    "parameters_of",
    "path_places",
    "strict_refusal",
    "warn_unguarded",
]

logger = logging.getLogger("mcp_roots")

GUARDED_ATTRIBUTE = "__mcp_roots_guarded__"
"""The attribute under which @guard.paths records its GuardedFunction on the function and its wrapper."""


class GuardedFunction:
    """What ``@guard.paths(*names)`` recorded about one function: the guard (its policy) and the names. The
    calls layer (``_argcheck.GuardedCall``) adds how the arguments are checked."""

    policy: GuardPolicy
    fn: Callable[..., Any]
    names: tuple[str, ...]
    wrapper: Callable[..., Any] | None
    """The wrapper @guard.paths returned: what the framework must run (an adapter swaps it in where the
    framework registered ``fn`` itself, i.e. @guard.paths stood above the tool decorator)."""

    @property
    def name(self) -> str:
        return getattr(self.fn, "__name__", repr(self.fn))


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


EXEMPT_ATTRIBUTE = "__mcp_roots_exempt__"


@dataclass(frozen=True)
class Handler:
    """A tool or resource template as an adapter sees it, for the audit."""

    kind: str  # "tool" or "resource template"
    name: str
    fn: Callable[..., Any] | None
    parameters: Mapping[str, Any]  # name -> annotation (or None where only the name is known)
    component: object = (
        None  # what the framework registered (whose ``fn`` it runs), where the port may swap it
    )

    @classmethod
    def of(cls, kind: str, name: str, fn: Any, context_type: type, component: object = None) -> Handler:
        """The handler of function ``fn``, its parameters read without its framework's context object
        (``context_type``: see :func:`parameters_of`)."""
        return cls(kind, name, fn, parameters_of(fn, context_type), component)

    @property
    def checked_by_uri(self) -> bool:
        """A ``file:`` resource template: its reads are checked by URI (the read check's own test)."""
        return self.kind == "resource template" and is_file_uri(self.name)


@dataclass(frozen=True)
class AuditRow:
    """One line of the audit: a handler, its path-like parameters and whether each is guarded."""

    kind: str
    name: str
    path_parameters: tuple[str, ...]
    guarded: tuple[str, ...]
    exempt: str | None
    not_installed: bool = False
    """The handler has ``@guard.paths``, but that guard was never installed on this server."""

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
        if not self.unguarded:
            return "guarded"
        forgotten = (
            " (its guard was never installed: call guard.install(server))" if self.not_installed else ""
        )
        return "UNGUARDED: " + ", ".join(self.unguarded) + forgotten


def path_places(parameters: Mapping[str, Any]) -> tuple[str, ...]:
    """The locators of every path-like part of ``parameters`` (name -> annotation): a parameter or a field
    inside it (pydantic models, dataclasses, TypedDicts, lists and dicts of them) that is a path by name
    (``_pathnames.is_path_name``) or by type (``Path``); ``cfg.path``, ``items[].src``, ``paths[]``."""
    return tuple(
        place
        for name, annotation in parameters.items()
        if not (
            isinstance(annotation, str) and annotation in _CONTEXT_NAMES
        )  # a framework's context, named in an annotation left unresolved
        for place in path_locators(annotation, name)
    )


_CONTEXT_NAMES = frozenset({"Context", "Context[Any]", "Context[Any, Any]", "Context[Any, Any, Any]"})


def covers(guarded: str, place: str) -> bool:
    """Whether ``@guard.paths(guarded)`` checks the path-like part at locator ``place``: the same place or
    one inside it (``cfg`` covers ``cfg.path``; ``paths`` covers ``paths[]``). A place ending in ``...``
    (too deep or recursive to name) is covered by nothing."""
    if place.endswith(OPAQUE):
        return False
    return place == guarded or (place.startswith(guarded) and place[len(guarded) : len(guarded) + 1] in ".[{")


def exemption_of(fn: object) -> str | None:
    """The reason given to ``@guard.exempt(reason)`` for ``fn``, if any."""
    reason = getattr(fn, EXEMPT_ATTRIBUTE, None)
    return reason if isinstance(reason, str) else None


def parameters_of(fn: Any, context_type: type) -> dict[str, Any]:
    """A handler's parameters (name -> annotation, resolved where it can be) for the audit, without the
    context object its framework injects (annotated ``context_type``, or that class's name as a string)."""
    return {
        name: annotation
        for name, annotation in parameter_annotations(fn).items()
        if not (isinstance(annotation, type) and issubclass(annotation, context_type))
        and annotation != context_type.__name__
    }


def audit_handlers(handlers: Sequence[Handler], installed: Collection[GuardPolicy]) -> list[AuditRow]:
    """The audit of ``handlers``: every one with its path-like parameters, guarded or not. A parameter
    counts as guarded only when the guard of its ``@guard.paths`` is one of those ``installed`` on the
    server (a guard that was never installed checks nothing where the framework holds the bare function).
    """
    rows = []
    for handler in handlers:
        path_params = path_places(handler.parameters)
        spec = guarded_function_of(handler.fn)
        names = spec.names if spec is not None and spec.policy in installed else ()
        guarded = tuple(p for p in path_params if any(covers(n, p) for n in names))
        if handler.checked_by_uri:
            guarded = path_params
        forgotten = spec is not None and spec.policy not in installed
        rows.append(
            AuditRow(handler.kind, handler.name, path_params, guarded, exemption_of(handler.fn), forgotten)
        )
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


@functools.lru_cache(maxsize=1024)
def _places_of_hashable(fn: object) -> tuple[str, ...] | None:
    try:
        inspect.signature(fn)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return path_places(parameter_annotations(fn))


def _places_of(fn: object) -> tuple[str, ...] | None:
    """The path-like places of ``fn``'s parameters (None without a signature), found once per function:
    strict mode asks on every call."""
    try:
        return _places_of_hashable(fn)
    except TypeError:  # an unhashable callable
        return _places_of_hashable.__wrapped__(fn)


def strict_refusal(fn: object, name: str, kind: str = "tool") -> str | None:
    """Why a strict guard refuses to run tool (or prompt: ``kind``) ``name`` (registered as ``fn``), or
    None: a path-like part of a parameter (at any depth) that its ``@guard.paths`` does not cover."""
    places = _places_of(fn)
    if not places or exemption_of(fn) is not None:
        return None
    spec = guarded_function_of(fn)
    names = spec.names if spec is not None else ()
    unguarded = [p for p in places if not any(covers(n, p) for n in names)]
    if not unguarded:
        return None
    return (
        f"{kind} {name!r} refuses every call: its path-like parameters ({', '.join(unguarded)}) are not "
        "checked by mcp-roots and the server runs with RootsGuard(strict=True); guard them with "
        f"@guard.paths(...) or mark the {kind} @guard.exempt(reason)"
    )
