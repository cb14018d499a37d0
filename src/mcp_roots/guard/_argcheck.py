"""The checks of a guarded function's arguments: which parts of each parameter are paths (worked out once,
at decoration time, from ``@guard.paths(...)`` and the annotations), and how a value is checked against a
RootSet and made canonical; the ceiling precheck before any roots are asked for.
"""

from __future__ import annotations

import inspect
import os
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path, PurePath
from typing import Any

from ..errors import InvalidPath, InvalidRootURI, RootsError
from ..paths._rootset import RootSet
from ..paths._uri import uri_to_path
from ..roots._policy import GuardPolicy
from ..roots._sources import lexically_within
from ._annotations import locator_fits, path_locators
from ._audit import GuardedFunction, covers
from ._locators import OPAQUE, parse_locator
from ._values import is_path_value, replace_at

__all__ = ["GuardedCall", "PathArg", "lexically_within", "targets_of"]


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
        if type(value) is not str and isinstance(value, os.PathLike):  # (a str skips the ABC check)
            value = os.fspath(value)
        if isinstance(value, str):
            value = self._as_written(value, expand_user)
            if absolute_only and (not os.path.isabs(value) or lexically_within(roots, value)):
                return value
        canonical = roots.resolve_text(value)
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
        # The commonest guard, one parameter that is a path as text (no locator, no list, no Path, no
        # default): the wrapper checks it without binding when it comes by name as an absolute path.
        only = self.targets[0] if len(self.targets) == 1 else None
        self.text_param: str | None = (
            only.param
            if only is not None
            and not only.locator
            and not only.many
            and not only.as_path
            and self.by_name
            and not self.defaults
            else None
        )

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


def targets_of(fn_name: str, text: str, sig: inspect.Signature, hints: dict[str, Any]) -> list[PathArg]:
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
