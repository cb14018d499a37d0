"""Where the paths are in a parameter's type.
The walk over an annotation yields the locators of its path-like parts.
"""

# Where the paths are in a parameter's type: the walk over an annotation (Optional, unions, Annotated,
# NewType, aliases, containers, records: pydantic models, dataclasses, TypedDicts, NamedTuples) that yields
# the locators of its path-like parts, and whether a declared locator fits a type. Pure and SDK-free:
# pydantic is duck-typed.

from __future__ import annotations

import collections
import collections.abc as abc
import dataclasses
import inspect
import os
import re
import types
import typing
from collections.abc import Callable
from pathlib import PurePath

from ._locators import EACH, KEYS, MAX_DEPTH, OPAQUE, VALUES, Locator, Step, as_locator, render
from ._pathnames import is_path_name

__all__ = ["is_model_class", "locator_fits", "parameter_annotations", "path_locators"]

_MAX_NODES = 10_000  # type nodes one path_locators call may visit; past it, the rest is opaque

_MAX_LEVEL = 64  # nested wrappers (Optional, Annotated, aliases) on one branch

_SEQUENCES: tuple[object, ...] = (list, tuple, set, frozenset, collections.deque, abc.Sequence)

_SEQUENCES += (abc.MutableSequence, abc.Set, abc.MutableSet, abc.Collection)

_MAPPINGS: tuple[object, ...] = (dict, abc.Mapping, abc.MutableMapping, collections.OrderedDict)

_MAPPINGS += (collections.defaultdict,)

_ONE_SHOT: tuple[object, ...] = (abc.Iterable, abc.Iterator, abc.Generator, abc.AsyncIterable)

_ONE_SHOT += (abc.AsyncIterator,)  # consumed by reading: nothing can check one and hand it on

_WRAPPERS = frozenset({"Required", "NotRequired", "ReadOnly", "Final", "ClassVar", "InitVar"})

_UNKNOWN: tuple[object, ...] = (typing.Any, object, inspect.Parameter.empty, None)


class _Record(typing.NamedTuple):
    """One field of a model, dataclass, TypedDict or NamedTuple, as the walk sees it."""

    name: str
    annotation: object
    path_named: bool  # by its own name or an alias


def _hints(owner: object) -> dict[str, object]:
    """``owner``'s annotations, resolved where possible (raw where not); never raises."""
    try:
        return dict(typing.get_type_hints(owner, include_extras=True))
    except Exception:  # any odd annotation: NameError, TypeError, AttributeError...
        raw = getattr(owner, "__annotations__", None)
        return dict(raw) if isinstance(raw, dict) else {}


def _alias_names(info: object) -> list[str]:
    """The names a pydantic ``FieldInfo`` (or any object with ``alias``/``validation_alias``) reads from:
    a string, ``AliasChoices`` (each choice), ``AliasPath`` (its last string)."""
    names: list[str] = []
    for alias in (getattr(info, "alias", None), getattr(info, "validation_alias", None)):
        for choice in getattr(alias, "choices", None) or [alias]:
            if isinstance(choice, str):
                names.append(choice)
            parts = getattr(choice, "path", None)
            if isinstance(parts, list):
                names.extend([p for p in parts if isinstance(p, str)][-1:])
    return names


def _aliased_path(info: object) -> bool:
    return any(is_path_name(n) for n in _alias_names(info))


def is_model_class(tp: object) -> bool:
    """A pydantic v2 model class, by duck typing."""
    fields = getattr(tp, "model_fields", None) if isinstance(tp, type) else None
    return isinstance(fields, dict) and hasattr(tp, "model_copy")


def _records(tp: type) -> list[_Record] | None:
    """The fields of a record type (pydantic model, dataclass, TypedDict, NamedTuple), or None."""
    cls: typing.Any = tp
    if is_model_class(tp):  # a RootModel's "root" is no name: the model is named as its parameter
        named = not getattr(tp, "__pydantic_root_model__", False)
        return [
            _Record(n, getattr(i, "annotation", None), _aliased_path(i) or (named and is_path_name(n)))
            for n, i in cls.model_fields.items()
        ]
    hints = _hints(tp)
    if dataclasses.is_dataclass(tp):
        infos = getattr(tp, "__pydantic_fields__", None) or {}  # a pydantic dataclass's aliases
        return [
            _Record(
                f.name, hints.get(f.name, f.type), is_path_name(f.name) or _aliased_path(infos.get(f.name))
            )
            for f in dataclasses.fields(tp)
        ]
    if issubclass(tp, dict) and hasattr(tp, "__required_keys__"):  # a TypedDict
        return [_Record(n, a, is_path_name(n)) for n, a in hints.items()]
    if issubclass(tp, tuple) and isinstance(getattr(tp, "_fields", None), tuple):  # a NamedTuple
        return [_Record(n, hints.get(n, typing.Any), is_path_name(n)) for n in cls._fields]
    return None


def _is_text_type(tp: object) -> bool:
    return isinstance(tp, type) and issubclass(tp, (str, bytes, bytearray))


def _is_path_type(tp: object) -> bool:
    """``Path``, ``PurePath``, ``os.PathLike`` (and subclasses, and ``os.PathLike[str]``)."""
    tp = typing.get_origin(tp) or tp
    try:
        return isinstance(tp, type) and issubclass(tp, (PurePath, os.PathLike))
    except TypeError:
        return False


class _Walk:
    """One walk over a type: every locator of a path-like part (``reach=False``), or only whether there
    is one (``reach=True``, which ignores the depth bound and visits each record once); ``every=True``
    takes every field as path-like and ends unknown parts with ``...``: every place the type has."""

    def __init__(self, *, reach: bool, every: bool = False) -> None:
        self.reach, self.every = reach, every
        self.found: list[tuple[Step | str, ...]] = []
        self.nodes = 0
        self.chain: dict[tuple[int, bool], object] = {}  # records and aliases on the way (reach: ever seen)
        self.reachable: dict[tuple[int, bool], tuple[object, bool]] = {}  # the type kept: ids are reused

    def emit(self, steps: tuple[Step | str, ...]) -> None:
        self.found.append(steps)

    def opaque(self, tp: object, flag: bool, steps: tuple[Step | str, ...]) -> None:
        """A place the walk does not follow: a path-like part there (if any) is reported as ``...``."""
        if self.reach:
            return  # already counted: the record or alias is being (or was) walked
        key = (id(tp), flag)
        if key not in self.reachable or self.reachable[key][0] is not tp:
            probe = _Walk(reach=True, every=self.every)
            probe.walk(tp, flag, (), 0)
            self.reachable[key] = (tp, bool(probe.found))
        if self.reachable[key][1]:
            self.emit((*steps, OPAQUE))

    def step(self, tp: object, flag: bool, steps: tuple[Step | str, ...], step: Step, level: int) -> None:
        if not self.reach and len(steps) >= MAX_DEPTH:
            self.opaque(tp, flag, steps)
        else:
            self.walk(tp, flag, (*steps, step), level + 1)

    def walk(self, tp: object, flag: bool, steps: tuple[Step | str, ...], level: int) -> None:
        if self.reach and self.found:
            return
        self.nodes += 1
        if self.nodes > _MAX_NODES or level > _MAX_LEVEL:
            self.emit((*steps, OPAQUE))
            return
        origin, args = typing.get_origin(tp), typing.get_args(tp)
        if origin is typing.Annotated:
            meta_named = any(_aliased_path(m) for m in getattr(tp, "__metadata__", ()))
            self.walk(args[0], flag or meta_named, steps, level + 1)
        elif getattr(origin, "_name", None) in _WRAPPERS or type(tp).__name__ == "InitVar":
            inner = args[0] if args else getattr(tp, "type", typing.Any)
            self.walk(inner, flag, steps, level + 1)
        elif origin is typing.Union or origin is types.UnionType:
            for arg in args:
                self.walk(arg, flag, steps, level + 1)
        elif origin is typing.Literal:
            if flag and (self.every or any(isinstance(a, (str, bytes)) for a in args)):
                self.emit(steps)
        elif hasattr(tp, "__supertype__"):  # a NewType: its name counts as a name
            named = is_path_name(str(getattr(tp, "__name__", "")))
            self.walk(typing.cast(typing.Any, tp).__supertype__, flag or named, steps, level + 1)
        elif type(tp).__name__ == "TypeAliasType" and hasattr(tp, "__value__"):
            value = typing.cast(typing.Any, tp).__value__
            self.walk_once(tp, flag, steps, level, lambda: self.walk(value, flag, steps, level + 1))
        elif _is_path_type(tp):
            self.emit(steps)
        elif tp in _UNKNOWN or isinstance(tp, typing.TypeVar):
            if flag:
                self.emit((*steps, OPAQUE) if self.every else steps)
        elif _is_text_type(tp):
            if flag:
                self.emit(steps)
        elif isinstance(tp, (str, typing.ForwardRef)):  # an annotation nobody could resolve
            self.emit(steps if flag and not self.every else (*steps, OPAQUE))
        elif origin is not None:
            self.walk_generic(origin, args, flag, steps, level)
        elif isinstance(tp, type):
            self.walk_class(tp, flag, steps, level)
        elif flag:  # not a type at all (``42``, a bare ``Union``): nothing is known, the name decides
            self.emit((*steps, OPAQUE) if self.every else steps)

    def walk_generic(
        self, origin: object, args: tuple[object, ...], flag: bool, steps: tuple[Step | str, ...], level: int
    ) -> None:
        if origin is tuple and args and args[-1] is not Ellipsis:
            for i, arg in enumerate(args):
                self.step(arg, flag, steps, Step("index", index=i), level)
        elif origin in _MAPPINGS:
            if len(args) == 2:  # keys are paths by type only: ``dict[Path, str]``
                self.step(args[0], self.every, steps, KEYS, level)
            self.step(args[1] if len(args) == 2 else typing.Any, flag, steps, VALUES, level)
        elif origin in _SEQUENCES:
            self.step(args[0] if args else typing.Any, flag, steps, EACH, level)
        elif origin in _ONE_SHOT:
            self.opaque(args[0] if args else typing.Any, flag, steps)
        elif isinstance(origin, type):
            self.walk_class(origin, flag, steps, level)  # a generic model: list its fields

    def walk_class(self, tp: type, flag: bool, steps: tuple[Step | str, ...], level: int) -> None:
        if tp in _SEQUENCES or tp in _MAPPINGS:  # bare ``list``, ``dict``: of anything
            self.walk_generic(tp, (), flag, steps, level)
            return
        records = _records(tp)
        if records is None:  # a class of its own (int, datetime, an enum, a client object): not a path
            if self.every and flag:
                self.emit(steps)
            return

        def fields() -> None:
            root_model = bool(getattr(tp, "__pydantic_root_model__", False))
            for record in records:
                if root_model and record.name == "root":  # RootModel[X]: the model is X, named as it is
                    self.step(
                        record.annotation, flag or record.path_named, steps, Step("field", "root"), level
                    )
                else:
                    named = record.path_named or self.every
                    self.step(record.annotation, named, steps, Step("field", record.name), level)

        self.walk_once(tp, flag, steps, level, fields)

    def walk_once(
        self, tp: object, flag: bool, steps: tuple[Step | str, ...], level: int, body: Callable[[], None]
    ) -> None:
        """Run ``body`` for a record or alias not already on the way (a recursive type ends here)."""
        key = (id(tp), flag)
        if self.chain.get(key) is tp and (self.reach or not self.every):  # every: MAX_DEPTH bounds it
            self.opaque(tp, flag, steps)
            return
        outer, self.chain[key] = self.chain.get(key), tp
        try:
            body()
        finally:
            if not self.reach and outer is None:
                del self.chain[key]


def path_locators(annotation: object, name: str = "", *, named: bool | None = None) -> list[str]:
    """Where the path-like parts of a parameter called ``name`` annotated ``annotation`` are (``[]``: none).

    Path-like by type (``Path``, ``PurePath``, ``os.PathLike``), or by name (``is_path_name`` of the
    parameter, a field, a pydantic ``alias``/``validation_alias``, a ``NewType``) where the type can hold a
    path (``str``, ``bytes``, a ``Literal`` of strings, ``Any``, none). A name carries into list, tuple, set
    and mapping values (``paths: list[str]``: ``paths[]``), not into a record's fields, judged by their own
    names; mapping keys only by type (``dict[Path, str]``: ``x{key}``). It looks through ``Optional``,
    unions, ``Annotated``, ``NewType``, aliases, ``NotRequired``, containers and records (pydantic models,
    dataclasses, TypedDicts, NamedTuples), and never raises: what it cannot follow (past ``MAX_DEPTH``,
    recursive, unresolved, a one-shot iterable, too large) ends in ``...`` where a path may lie. Locators
    start with ``name`` (``""``: the value itself). ``named=True``/``False`` overrides the name rule for
    the value itself (what ``@guard.paths("query")`` declares).
    """
    start: tuple[Step | str, ...] = (Step("field", name),) if name else ()
    return _places(annotation, start, is_path_name(name) if named is None else named, every=False)


def _places(annotation: object, start: tuple[Step | str, ...], flag: bool, *, every: bool) -> list[str]:
    walk = _Walk(reach=False, every=every)
    try:
        walk.walk(annotation, flag, start, 0)
    except Exception:  # an annotation no rule above foresaw: assume the worst, never raise
        return [render((*start, OPAQUE))]
    return list(dict.fromkeys(render(steps) for steps in walk.found))


def locator_fits(annotation: object, locator: Locator | str) -> bool:
    """Whether ``locator``, relative to a value annotated ``annotation``, names a place that type has (each
    field exists, ``[]`` meets a list, ``{}`` a mapping; ``Any`` and unresolved parts fit anything), so that
    ``@guard.paths("cfg.pth")`` is an error where the tool is defined, not a guard that checks nothing."""
    texts = {str(as_locator(locator)), re.sub(r"\[[0-9]+\]", "[]", str(as_locator(locator)))}  # [N] in []
    places = _places(annotation, (), True, every=True)  # what cannot be walked is "..."
    return any(
        _under(p, t) or (p.endswith(OPAQUE) and _under(t, p[: -len(OPAQUE)])) for p in places for t in texts
    )


def _under(longer: str, shorter: str) -> bool:
    """``longer`` is ``shorter`` or a place inside it (``cfg.path`` is under ``cfg``, not under ``cf``)."""
    return longer.startswith(shorter) and (not shorter or longer[len(shorter) : len(shorter) + 1] in ".[{")


def parameter_annotations(fn: object) -> dict[str, object]:
    """``fn``'s parameters and their annotations, resolved with ``typing.get_type_hints`` where possible
    (``Annotated`` kept), as written where not (``inspect.Parameter.empty`` where there is none)."""
    try:
        parameters = inspect.signature(fn).parameters  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return {}
    hints = _hints(fn)
    return {p: hints.get(p, parameters[p].annotation) for p in parameters}
