"""Which parts of a tool parameter are paths: the name rule, locators into nested types, and the values at a
locator in a bound argument (read, or replaced in a copy). Pure and SDK-free: pydantic is duck-typed.
"""

from __future__ import annotations

import collections
import collections.abc as abc
import copy
import dataclasses
import datetime
import enum
import inspect
import numbers
import os
import re
import types
import typing
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import PurePath

MAX_DEPTH = 8  # the most steps in a locator (the parameter's own name included)
OPAQUE = "..."  # the end of a locator that path_locators could not follow (too deep, recursive, unresolved)
_MAX_NODES = 10_000  # type nodes one path_locators call may visit; past it, the rest is opaque
_MAX_LEVEL = 64  # nested wrappers (Optional, Annotated, aliases) on one branch

# --- The name rule -----------------------------------------------------------------------------------

#: A name that is one of these, as a whole, is a path.
_WHOLE = re.compile(r"(?:src|source|dest|dst|destination|target|uri)s?|cwd")
#: A name whose last word ends with one of these is a path (``path``, ``file_path``, ``workdir``).
_HEAD = re.compile(r"(?:path|pathname|file|filename|fname|dir|dirname|folder|root)s?$|director(?:y|ies)$")
#: Words that end like a path word but are not one.
_NOT_PATHS = frozenset({"profile", "profiles", "xpath", "jsonpath"})
#: ``file_name``, ``dir_name``, ``file_uri``: a path word, then one of these.
_WORDS = ("path", "file", "dir", "folder", "directory")
_NAME_WORDS = {"name": _WORDS, "names": _WORDS, "uri": (*_WORDS[1:], "root"), "uris": (*_WORDS[1:], "root")}
#: Trailing words that say "several of the above": ``file_list``, ``path_array``.
_CONTAINER_WORDS = frozenset({"list", "array", "arr", "set", "seq"})
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def is_path_name(name: str) -> bool:
    """Whether a parameter or field called ``name`` holds a path, judged by its name alone.

    The name is split into words (``filePath``, ``file-path`` and ``file_path`` are ``file path``), and a
    trailing ``list``/``array``/``set`` word is dropped (``file_list``). Then it is a path when:

    - the whole name is ``src``, ``source``, ``dest``, ``dst``, ``destination``, ``target``, ``cwd``, ``uri``
      (or their plurals): alone they name a place; as the last word of a longer name (``data_source``,
      ``build_target``) they mostly do not;
    - the last word ends with ``path``, ``file``, ``filename``, ``fname``, ``dir``, ``dirname``,
      ``directory``, ``folder``, ``root`` or their plurals: ``path``, ``src_path``, ``infile``, ``workdir``,
      ``project_root``, ``fnames``; except ``profile``, ``xpath``, ``jsonpath``;
    - the last two words are a path word and ``name`` (``file_name``, ``dir_name``, ``folder_names``) or a
      file/dir/root word and ``uri`` (``file_uri``).

    It leans to yes: a false positive costs a warning (or an exemption under ``strict=True``), a false
    negative an unchecked path. Words before the last are not judged (``file_size``, ``root_name``: no).
    """
    words = [w for w in re.split(r"[^a-z0-9]+", _CAMEL.sub("_", name).lower()) if w]
    while len(words) > 1 and words[-1] in _CONTAINER_WORDS:
        words.pop()
    if not words or _WHOLE.fullmatch("_".join(words)):
        return bool(words)
    last = words[-1]
    if _HEAD.search(last) and last not in _NOT_PATHS:
        return True
    before = _NAME_WORDS.get(last)
    return before is not None and len(words) > 1 and words[-2].endswith(before)


# --- Locators ----------------------------------------------------------------------------------------


StepKind = typing.Literal["field", "each", "index", "values", "keys"]


@dataclass(frozen=True)
class Step:
    """One step of a locator: ``field`` (``.name``: a record's field or a mapping's key), ``each`` (``[]``:
    every element of a list, tuple or set), ``index`` (``[N]``: one element), ``values`` (``{}``: every
    value of a mapping), ``keys`` (``{key}``: every key of a mapping; last only, a key is a path or nothing).
    """

    kind: StepKind
    name: str = ""
    index: int = 0

    def __str__(self) -> str:
        texts = {"field": "." + self.name, "each": "[]", "values": "{}", "keys": "{key}"}
        return texts.get(self.kind, f"[{self.index}]")


EACH, VALUES, KEYS = Step("each"), Step("values"), Step("keys")


@dataclass(frozen=True)
class Locator:
    """Places inside a value, relative to it: ``""`` is the value itself, ``cfg.path`` the field (or key)
    ``path`` of ``cfg``, ``items[].src`` the ``src`` of every element of ``items``, ``opts{}.path`` that of
    every value of the mapping ``opts``. Applied to a call's bound arguments, the first name is the
    parameter. At most ``MAX_DEPTH`` steps; ``path_locators`` ends a locator with ``...`` where paths lie
    deeper or inside a recursive type: no ``@guard.paths`` can name that place, so it stays unguarded.
    """

    steps: tuple[Step, ...] = ()

    @property
    def parameter(self) -> str | None:
        """The first field's name: the parameter, when the locator applies to bound arguments."""
        return self.steps[0].name if self.steps and self.steps[0].kind == "field" else None

    def within(self) -> Locator:
        """This locator without its first step (relative to the parameter's value)."""
        return Locator(self.steps[1:])

    def __str__(self) -> str:
        return _render(self.steps)


def _render(steps: typing.Sequence[Step | str]) -> str:
    text = "".join(map(str, steps))
    return text[1:] if steps and isinstance(steps[0], Step) and steps[0].kind == "field" else text


_NAME = r"[^.\[\]{}\s]+"
_TOKEN = re.compile(
    rf"(?P<first>{_NAME})|\.(?P<field>{_NAME})|\[(?P<index>[0-9]{{0,9}})\]|\{{(?P<key>(key)?)\}}"
)
_SYNTAX = f"""a locator is a name, then '.name' (a field or key), '[]' (each element), '[N]' (one), '{{}}' \
(each value of a mapping), '{{key}}' (each key, last only); at most {MAX_DEPTH} steps; e.g. 'items[].src'"""


def parse_locator(text: str) -> Locator:
    """The locator written ``text`` (``""``, ``path``, ``cfg.path``, ``items[].src``, ``opts{}.path``).

    Raises ``ValueError`` naming ``text`` and the rule for anything else (a ``...`` locator included).
    """
    if text.endswith(OPAQUE):
        raise ValueError(
            f"locator {text!r}: the paths at '...' lie too deep or in a recursive type, and "
            "cannot be guarded by name; exempt the tool or flatten the type"
        )
    steps: list[Step] = []
    pos = 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None or match["first" if pos else "field"] is not None:  # 'a' first, '.a' after
            raise ValueError(f"bad locator {text!r} at offset {pos}: {_SYNTAX}")
        pos = match.end()
        if match["first"] is not None or match["field"] is not None:
            steps.append(Step("field", match["first"] or match["field"]))
        elif match["index"] is not None:
            steps.append(Step("index", index=int(match["index"])) if match["index"] else EACH)
        else:
            steps.append(KEYS if match["key"] else VALUES)
    if len(steps) > MAX_DEPTH:
        raise ValueError(f"bad locator {text!r}: {len(steps)} steps; {_SYNTAX}")
    if KEYS in steps[:-1]:
        raise ValueError(f"bad locator {text!r}: '{{key}}' must be the last step; {_SYNTAX}")
    return Locator(tuple(steps))


def _as_locator(locator: Locator | str) -> Locator:
    return locator if isinstance(locator, Locator) else parse_locator(locator)


# --- Types: where the paths are ----------------------------------------------------------------------

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
        return [_render((*start, OPAQUE))]
    return list(dict.fromkeys(_render(steps) for steps in walk.found))


def locator_fits(annotation: object, locator: Locator | str) -> bool:
    """Whether ``locator``, relative to a value annotated ``annotation``, names a place that type has (each
    field exists, ``[]`` meets a list, ``{}`` a mapping; ``Any`` and unresolved parts fit anything), so that
    ``@guard.paths("cfg.pth")`` is an error where the tool is defined, not a guard that checks nothing."""
    texts = {str(_as_locator(locator)), re.sub(r"\[[0-9]+\]", "[]", str(_as_locator(locator)))}  # [N] in []
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


# --- Values: what is at a locator --------------------------------------------------------------------

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
    for step in _as_locator(locator).steps:
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
    return _replace(value, _as_locator(locator).steps, fn)


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
