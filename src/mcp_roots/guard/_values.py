"""The values at a locator in a bound argument: read them (``values_at``), or replace them in a copy that
leaves the argument itself unchanged (``replace_at``). Pure and SDK-free: pydantic is duck-typed.
"""

from __future__ import annotations

import collections
import copy
import dataclasses
import datetime
import enum
import numbers
import os
import typing
import uuid
from collections.abc import Callable, Mapping

from ._annotations import is_model_class
from ._locators import Locator, Step, as_locator

__all__ = ["is_path_value", "replace_at", "values_at"]

_SCALARS = (str, bytes, bytearray, numbers.Number, os.PathLike, enum.Enum, uuid.UUID)

_SCALARS += (datetime.date, datetime.time, datetime.timedelta)  # type: ignore[assignment]


def is_path_value(value: object) -> bool:
    """A value that ``open()`` would take as a path: ``str``, ``bytes`` or ``os.PathLike``."""
    return isinstance(value, (str, bytes, os.PathLike))


def _is_record_value(value: object) -> bool:
    return is_model_class(type(value)) or dataclasses.is_dataclass(value) or hasattr(value, "_fields")


def _mismatch(value: object, step: Step, what: str) -> TypeError:
    kind = type(value).__name__
    return TypeError(f"cannot look inside a {kind} at '{step}' (expected {what}): it might hide a path")


def _field_of(value: object, name: str) -> tuple[bool, object]:
    """(present, value) of field ``name``; (False, None) for a value of another shape."""
    if isinstance(value, Mapping):
        return (True, value[name]) if name in value else (False, None)
    if _is_record_value(value):
        return (True, getattr(value, name)) if hasattr(value, name) else (False, None)
    if value is None or isinstance(value, (*_SCALARS, list, tuple, set, frozenset, collections.deque)):
        return False, None  # another member of a union (``str | Model``): nothing of this shape here
    raise _mismatch(value, Step("field", name), "a model, dataclass, named tuple or mapping")


def _elements(value: object, step: Step) -> list[tuple[int, object]]:
    if isinstance(value, (list, tuple, collections.deque)):
        items = list(enumerate(value))
        return items if step.kind == "each" else [p for p in items[step.index : step.index + 1]]
    if isinstance(value, (set, frozenset)):
        return list(enumerate(value)) if step.kind == "each" else []
    if value is None or isinstance(value, (*_SCALARS, Mapping)) or _is_record_value(value):
        return []
    raise _mismatch(value, step, "a list, tuple or set")


def _mapping(value: object, step: Step) -> Mapping[object, object] | None:
    if isinstance(value, Mapping):
        return value
    if (
        value is None
        or isinstance(value, (*_SCALARS, list, tuple, set, frozenset))
        or _is_record_value(value)
    ):
        return None
    raise _mismatch(value, step, "a mapping")


def values_at(value: object, locator: Locator | str) -> list[object]:
    """The values at ``locator`` in ``value`` (a model or dataclass instance, a mapping such as a call's
    bound arguments, a list...), in order; ``None`` and missing parts are skipped, and so are parts of
    another shape (a ``str`` where a model was expected: another member of a union). A part of no shape
    it knows (a generator, an arbitrary object) raises ``TypeError``: it might hide a path.

    Every element is visited: linear in the size of ``value``, which the framework already holds.
    """
    frontier = [value]
    for step in as_locator(locator).steps:
        following: list[object] = []
        for current in frontier:
            if step.kind == "field":
                present, inner = _field_of(current, step.name)
                following.extend([inner] if present else [])
            elif step.kind in ("each", "index"):
                following.extend(v for _, v in _elements(current, step))
            else:
                mapping = _mapping(current, step)
                if mapping is not None:
                    following.extend(mapping.values() if step.kind == "values" else mapping.keys())
        frontier = [v for v in following if v is not None]
    return [v for v in frontier if v is not None]


def replace_at(value: object, locator: Locator | str, fn: Callable[[object], object]) -> object:
    """A copy of ``value`` with ``fn(v)`` in place of each value ``v`` at ``locator`` (what ``values_at``
    returns); ``value`` itself is never changed. Records are copied as their kind allows (pydantic
    ``model_copy(update=...)``, ``dataclasses.replace``, ``NamedTuple._replace``; frozen ones included),
    lists, tuples, sets and dicts as new ones of their type. Where nothing changes (``fn`` returned every
    value itself) the result is ``value``. A container it cannot rebuild raises ``TypeError``; two mapping
    keys that become one raise ``ValueError``.
    """
    return _replace(value, as_locator(locator).steps, fn)


def _replace(value: object, steps: tuple[Step, ...], fn: Callable[[object], object]) -> object:
    if value is None:
        return None
    if not steps:
        return fn(value)
    step, rest = steps[0], steps[1:]
    if step.kind == "field":
        present, old = _field_of(value, step.name)
        new = _replace(old, rest, fn) if present else old
        return value if new is old else _with_field(value, step.name, new)
    if step.kind in ("each", "index"):
        elements = _elements(value, step)
        changed = {i: n for i, v in elements if (n := _replace(v, rest, fn)) is not v}
        return _rebuild(value, changed) if changed else value
    mapping = _mapping(value, step)
    if mapping is None:
        return value
    if step.kind == "values":
        new_values = {k: n for k, v in mapping.items() if (n := _replace(v, rest, fn)) is not v}
        return _with_items(value, new_values) if new_values else value
    new_keys = {k: _replace(k, rest, fn) for k in mapping}
    if all(n is k for k, n in new_keys.items()):
        return value
    if len(set(new_keys.values())) != len(new_keys):
        raise ValueError(f"two keys of one mapping name the same path: {sorted(map(str, new_keys))!r}")
    rebuilt = {new_keys[k]: v for k, v in mapping.items()}
    return _with_items(value, rebuilt, clear=True)


def _with_field(value: typing.Any, name: str, new: object) -> object:
    if isinstance(value, Mapping):
        return _with_items(value, {name: new})
    if is_model_class(type(value)):
        return value.model_copy(update={name: new})
    if isinstance(value, tuple):  # a NamedTuple
        return typing.cast(typing.Any, value)._replace(**{name: new})
    field = next(f for f in dataclasses.fields(value) if f.name == name)
    if field.init:
        return dataclasses.replace(value, **{name: new})
    copied = copy.copy(value)
    object.__setattr__(copied, name, new)  # a field outside __init__: set as dataclasses itself does
    return copied


def _with_items(value: object, items: Mapping[object, object], *, clear: bool = False) -> object:
    if not isinstance(value, dict):
        raise TypeError(f"cannot rebuild a {type(value).__name__} (only dict and its subclasses)")
    copied = copy.copy(value)
    if clear:
        copied.clear()
    copied.update(items)
    return copied


def _rebuild(value: typing.Any, changed: Mapping[int, object]) -> object:
    items = [changed.get(i, v) for i, v in enumerate(value)]
    if type(value) in (list, tuple, set, frozenset):
        return type(value)(items)
    if isinstance(value, collections.deque):
        return collections.deque(items, maxlen=value.maxlen)
    if isinstance(value, tuple) and hasattr(value, "_make"):  # a NamedTuple
        return value._make(items)
    raise TypeError(f"cannot rebuild a {type(value).__name__} with checked paths in it")
