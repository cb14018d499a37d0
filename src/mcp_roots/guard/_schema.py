"""Where the paths are in a tool's JSON input schema.
And a whole schema-valid argument around one of them.
"""

# ``path_slots(schema)`` walks an MCP tool's ``inputSchema`` (as JSON) the way ``_annotations.path_locators``
# walks a Python annotation, with the same name rule (``is_path_name``) and the same locator syntax
# (``job.path``, ``items[].file_path``, ``paths[]``, ``opts{}.path``):
#
# - nested objects (``properties``), local ``$ref`` (``#/$defs/X``, ``#/definitions/X``), arrays (``items``,
#   ``prefixItems`` as ``[N]``), maps (``additionalProperties``, ``patternProperties`` as ``{}``),
#   ``anyOf``/``oneOf``/``allOf`` and nullable types (``["string", "null"]``) are followed;
# - a string (or an untyped value) is a path slot when its own name (a property's, or the array's or map's
#   it is an element of: a name carries into elements, not into an object's fields) passes ``is_path_name``,
#   when its ``format`` is ``uri``/``uri-reference``/``iri``, or when its description or title speaks of a
#   path, a directory, a folder, a file name or a ``file:`` URI (not for names that hold text: content,
#   pattern, query...);
# - a slot's ``kind`` is ``"uri"`` when it takes ``file:`` URIs (``format: uri``, a name ending in ``uri``,
#   a description that speaks of URIs and not of paths), ``"path"`` otherwise.
#
# ``walk_schema(schema)`` gives the slots and the opaque places; ``walk_schema(schema, every=True)`` every
# string place (path-like or not, ``by="user"`` where only a user says so); ``slot_at(schema, locator)`` the
# place a user names (``--tool NAME:LOCATOR``). A slot found only by its description (``by="description"``,
# e.g. a ``folder_id`` titled "Folder Id") is a weaker claim than one found by its name or format.
#
# The walk is bounded (``MAX_NODES`` schema nodes, ``MAX_DEPTH`` steps, ``$ref`` cycles cut): what it could
# not follow is listed in ``SchemaPaths.opaque`` as a locator ending in ``...``, where a path may lie.
#
# A ``PathSlot`` reads the values at its place in a call's arguments (``slot.values(arguments)``: what a
# wrapper checks), and builds a whole argument object around a value (``slot.arguments(value)``): the objects
# and arrays on the way are made, every required sibling filled (from ``const``, ``default``, ``enum``,
# ``examples``, else a minimal value of its type within its bounds), and other path slots filled by a caller's
# function, so that a call passes input validation and the value reaches the tool's code. Pure and SDK-free.

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ._locators import MAX_DEPTH, OPAQUE, parse_locator
from ._pathnames import is_path_name
from ._values import values_at

__all__ = ["MAX_NODES", "PathSlot", "SchemaPaths", "path_slots", "sample", "slot_at", "walk_schema"]

MAX_NODES = 5_000  # schema nodes one walk visits; past it, the rest is opaque
_MAX_REFS = 16  # $ref hops resolving one node

#: A description that says the value is a path (``file`` alone is too common: "the text of the file").
_PATH_WORDS = re.compile(
    r"\b(path|pathname|directory|folder)\b|\bfile ?name\b|\bfile:|\bfile (uri|url|location)\b", re.I
)
_URI_WORDS = re.compile(r"\buri\b|\bfile://|\bfile:", re.I)
#: Names of values that hold text, never a path, whatever their description says.
_TEXT_NAMES = re.compile(
    r"content|text|body|data|pattern|glob|query|regex|message|code|command|script|diff|patch|template", re.I
)
_URI_FORMATS = frozenset({"uri", "uri-reference", "iri", "iri-reference"})
_SCALAR_TYPES = frozenset({"string", "integer", "number", "boolean", "null"})

Kind = Literal["path", "uri"]
#: ``other(slot)``: the value for another path slot met while building (or None: leave it out if allowed).
OtherPaths = Callable[["PathSlot"], Any]
#: ``text(name)``: the value for a free string field called ``name`` (it is not a path).
Text = Callable[[str], str]


@dataclass(frozen=True)
class PathSlot:
    """One place in a tool's arguments that takes a path: ``locator`` (the guard's syntax: ``path``,
    ``job.path``, ``items[].file_path``, ``paths[]``, ``opts{}.path``), ``kind`` (``"path"``, or ``"uri"``
    for ``file:`` URIs), ``by`` (``"name"``, ``"format"`` or ``"description"``: why it is one), ``name`` (the
    name judged) and ``required`` (every step to it is required: the tool cannot be called without it)."""

    locator: str
    kind: Kind
    by: str
    name: str
    required: bool
    _trail: tuple[Mapping[str, Any], ...] = field(default=(), repr=False, compare=False)
    _top: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def values(self, arguments: Mapping[str, Any]) -> list[object]:
        """The values at this slot in a call's ``arguments`` (JSON: every element of a ``[]``, every value of
        a ``{}``), in order; missing parts and ``null`` are skipped, parts of another shape too (another
        member of a union), so a caller that must see every path checks what the schema lets through."""
        return values_at(arguments, self.locator)

    def arguments(self, value: Any, *, other: OtherPaths | None = None, text: Text | None = None) -> Any:
        """A whole argument object with ``value`` at this slot (one element for ``[]``, one entry ``"a"``
        for ``{}``); required siblings on the way get ``sample`` values; other path slots of the same
        objects get ``other(slot)`` (required ones always; optional ones when it returns non-None)."""
        steps = parse_locator(self.locator).steps
        return self._build(0, steps, value, other, text or _default_text, self.locator)

    def _build(
        self, i: int, steps: tuple[Any, ...], value: Any, other: OtherPaths | None, text: Text, loc: str
    ) -> Any:
        if i == len(steps):
            return value
        node = self._trail[i]
        step = steps[i]
        inner = self._build(i + 1, steps, value, other, text, loc)
        if step.kind == "field":
            obj = _fill_object(node, self._top, other, text, _prefix(steps[:i]), skip=step.name)
            obj[step.name] = inner
            return obj
        if step.kind == "each":
            low = node.get("minItems")
            extra = max(low - 1, 0) if isinstance(low, int) else 0
            item = node.get("items") if isinstance(node.get("items"), Mapping) else {}
            name = steps[i - 1].name if i else ""
            return [inner, *[sample(item, self._top, name, text, other=other) for _ in range(min(extra, 64))]]
        if step.kind == "index":
            items = node.get("prefixItems") or []
            return [
                sample(items[k], self._top, "", text) if k < len(items) else "" for k in range(step.index)
            ] + [inner]
        return {"a": inner}  # "values"


@dataclass(frozen=True)
class SchemaPaths:
    """What ``walk_schema`` found: the path slots, and the places it could not follow (``...``)."""

    slots: list[PathSlot]
    opaque: list[str]


def path_slots(schema: Mapping[str, Any]) -> list[PathSlot]:
    """The path slots of a tool's input schema (``walk_schema(schema).slots``)."""
    return walk_schema(schema).slots


def walk_schema(schema: Mapping[str, Any], *, every: bool = False) -> SchemaPaths:
    """Every path slot of ``schema`` (a tool's ``inputSchema``, an object), in property order; never raises:
    a schema it cannot read has no slots, and a part it cannot follow is opaque. ``every=True``: every
    string is a slot (``by="user"``), for a locator a user names (``--tool NAME:LOCATOR``)."""
    walk = _Walk(schema if isinstance(schema, Mapping) else {}, every=every)
    try:
        walk.object_fields(walk.top, (), (), required=True)
    except _TooBig:
        walk.opaque.append(OPAQUE)
    slots = list({s.locator: s for s in walk.slots}.values())
    return SchemaPaths(slots, list(dict.fromkeys(walk.opaque)))


def slot_at(schema: Mapping[str, Any], locator: str) -> PathSlot:
    """The string place at ``locator`` (``[N]`` read as ``[]``) of ``schema``, path-like by the rules or not
    (a place a user names as a path); ValueError naming the locator and the places there are."""
    wanted = re.sub(r"\[[0-9]+\]", "[]", str(parse_locator(locator)))
    slots = walk_schema(schema, every=True).slots
    for slot in slots:
        if slot.locator == wanted:
            return slot
    places = ", ".join(s.locator for s in slots) or "none"
    raise ValueError(f"no string at {locator!r} (the strings: {places})")


class _TooBig(Exception):
    pass


def _prefix(steps: tuple[Any, ...]) -> str:
    text = "".join(str(s) for s in steps)
    return text[1:] if text.startswith(".") else text


def _join(prefix: str, step: str) -> str:
    return step[1:] if not prefix and step.startswith(".") else prefix + step


def resolve(node: Any, top: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """``node`` with local ``$ref`` followed (None: not an object, or a ``$ref`` that leads nowhere)."""
    seen = 0
    while isinstance(node, Mapping) and isinstance(node.get("$ref"), str):
        ref: str = node["$ref"]
        seen += 1
        if seen > _MAX_REFS or not ref.startswith("#"):
            return None
        target: Any = top
        for part in [p for p in ref[1:].split("/") if p]:
            part = part.replace("~1", "/").replace("~0", "~")
            target = target.get(part) if isinstance(target, Mapping) else None
        if not isinstance(target, Mapping):
            return None
        siblings = {k: v for k, v in node.items() if k != "$ref"}
        node = {**target, **siblings} if siblings else target
    return node if isinstance(node, Mapping) else None


def _types(node: Mapping[str, Any]) -> set[str]:
    kind = node.get("type")
    if isinstance(kind, str):
        return {kind}
    if isinstance(kind, list):
        return {k for k in kind if isinstance(k, str)}
    return set()


def _branches(node: Mapping[str, Any]) -> list[Any]:
    found: list[Any] = []
    for key in ("anyOf", "oneOf", "allOf"):
        value = node.get(key)
        if isinstance(value, list):
            found += value
    return found


class _Walk:
    def __init__(self, top: Mapping[str, Any], *, every: bool) -> None:
        self.top = top
        self.every = every
        self.slots: list[PathSlot] = []
        self.opaque: list[str] = []
        self.nodes = 0

    def visit(self) -> None:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise _TooBig

    def object_fields(
        self,
        node: Mapping[str, Any],
        steps: tuple[str, ...],
        trail: tuple[Mapping[str, Any], ...],
        *,
        required: bool,
        refs: tuple[str, ...] = (),
    ) -> None:
        props = node.get("properties")
        needed = _required(node)
        if isinstance(props, Mapping):
            for name, sub in props.items():
                if isinstance(name, str):
                    self.value(
                        sub,
                        name,
                        (*steps, "." + name),
                        (*trail, node),
                        named=is_path_name(name),
                        required=required and name in needed,
                        refs=refs,
                    )

    def value(
        self,
        raw: Any,
        name: str,
        steps: tuple[str, ...],
        trail: tuple[Mapping[str, Any], ...],
        *,
        named: bool,
        required: bool,
        refs: tuple[str, ...],
    ) -> None:
        self.visit()
        locator = _prefix(steps)
        if len(steps) > MAX_DEPTH:
            self.opaque.append(locator + OPAQUE)
            return
        ref = raw.get("$ref") if isinstance(raw, Mapping) else None
        if isinstance(ref, str):
            if ref in refs:  # a recursive type: paths may lie deeper, forever
                self.opaque.append(locator + OPAQUE)
                return
            refs = (*refs, ref)
        node = resolve(raw, self.top)
        if node is None:
            if raw is True or (isinstance(raw, Mapping) and not raw and named):
                self._slot(name, {}, locator, trail, named=named, required=required)
            elif isinstance(raw, Mapping) and "$ref" in raw:
                self.opaque.append(locator + OPAQUE)
            return
        hints = {k: node[k] for k in ("description", "title", "format") if k in node}
        for branch in _branches(node):
            branch = {**hints, **branch} if isinstance(branch, Mapping) else branch
            self.value(branch, name, steps, trail, named=named, required=required, refs=refs)
        types = _types(node)
        if "object" in types or isinstance(node.get("properties"), Mapping):
            self.object_fields(node, steps, trail, required=required, refs=refs)
            for key in ("additionalProperties",):
                if isinstance(node.get(key), Mapping):
                    self.value(
                        node[key],
                        name,
                        (*steps, "{}"),
                        (*trail, node),
                        named=named,
                        required=False,
                        refs=refs,
                    )
            patterns = node.get("patternProperties")
            if isinstance(patterns, Mapping):
                for sub in patterns.values():
                    self.value(
                        sub, name, (*steps, "{}"), (*trail, node), named=named, required=False, refs=refs
                    )
        if "array" in types or "items" in node or "prefixItems" in node:
            prefix = node.get("prefixItems")
            if isinstance(prefix, list):
                for k, sub in enumerate(prefix):
                    self.value(
                        sub, name, (*steps, f"[{k}]"), (*trail, node), named=named, required=False, refs=refs
                    )
            if isinstance(node.get("items"), (Mapping, bool)) and node.get("items") is not False:
                self.value(
                    node["items"],
                    name,
                    (*steps, "[]"),
                    (*trail, node),
                    named=named,
                    required=False,
                    refs=refs,
                )
        scalar_or_open = "string" in types or (not types and not _branches(node) and not _is_container(node))
        if scalar_or_open:
            self._slot(name, node, locator, trail, named=named, required=required)

    def _slot(
        self,
        name: str,
        node: Mapping[str, Any],
        locator: str,
        trail: tuple[Mapping[str, Any], ...],
        *,
        named: bool,
        required: bool,
    ) -> None:
        judged = _judge(name, node, named)
        if judged is None and self.every:
            forced = _judge(name, node, True)
            judged = ("user", forced[1]) if forced else None
        if not locator or judged is None:
            return
        try:
            parse_locator(locator)
        except ValueError:  # a property name no locator can spell ('a.b', 'a b')
            self.opaque.append(locator + OPAQUE)
            return
        by, kind = judged
        self.slots.append(PathSlot(locator, kind, by, name, required, trail, self.top))


def _judge(name: str, node: Mapping[str, Any], named: bool) -> tuple[str, Kind] | None:
    """(why, kind) when a string called ``name`` with schema ``node`` takes a path; None when not."""
    text = " ".join(str(node.get(k, "")) for k in ("description", "title"))
    formatted = node.get("format") in _URI_FORMATS
    described = bool(_PATH_WORDS.search(text) or _URI_WORDS.search(text)) and not _TEXT_NAMES.search(name)
    if not (named or formatted or described):
        return None
    words = [w for w in re.split(r"[^a-z0-9]+", re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()) if w]
    uri = formatted or words[-1:] in (["uri"], ["uris"])
    uri = uri or (bool(_URI_WORDS.search(text)) and not re.search(r"\bpath\b", text, re.I))
    return ("name" if named else "format" if formatted else "description"), ("uri" if uri else "path")


def _required(node: Mapping[str, Any]) -> list[str]:
    needed = node.get("required")
    return [n for n in needed if isinstance(n, str)] if isinstance(needed, list) else []


def _is_container(node: Mapping[str, Any]) -> bool:
    return any(
        k in node for k in ("properties", "items", "prefixItems", "additionalProperties", "enum", "const")
    )


def _default_text(name: str) -> str:
    return "x"


def _fill_object(
    node: Mapping[str, Any],
    top: Mapping[str, Any],
    other: OtherPaths | None,
    text: Text,
    prefix: str,
    *,
    skip: str,
) -> dict[str, Any]:
    """An object for ``node`` with its required properties (and its optional path properties, where
    ``other`` gives a value), ``skip`` left for the caller."""
    props: Mapping[str, Any] = node.get("properties") or {}
    if not isinstance(props, Mapping):
        props = {}
    needed = _required(node)
    obj: dict[str, Any] = {}
    for name, sub in props.items():
        if name == skip or not isinstance(name, str):
            continue
        where = _join(prefix, "." + name)
        if name in needed:
            obj[name] = sample(sub, top, name, text, other=other, prefix=where)
        elif other is not None:
            resolved = resolve(sub, top) or {}
            if _types(resolved) & {"string"} and (judged := _judge(name, resolved, is_path_name(name))):
                found = other(PathSlot(where, judged[1], judged[0], name, False))
                if found is not None:
                    obj[name] = found
    return obj


def sample(
    raw: Any,
    top: Mapping[str, Any],
    name: str,
    text: Text | None = None,
    *,
    other: OtherPaths | None = None,
    prefix: str = "",
    depth: int = 0,
) -> Any:
    """A minimal value valid for the schema ``raw`` (``const``, ``default``, the first of ``enum`` or
    ``examples``, the first non-null branch, else the least value of its type within its bounds; strings from
    ``text(name)``); objects get their required properties. Bounded: past ``MAX_DEPTH`` levels, None."""
    text = text or _default_text
    node = resolve(raw, top)
    if node is None or depth > MAX_DEPTH:
        return None
    for key in ("const", "default"):
        if key in node:
            return node[key]
    for key in ("enum", "examples"):
        if isinstance(node.get(key), list) and node[key]:
            return node[key][0]
    branches = [b for b in _branches(node) if _types(resolve(b, top) or {}) != {"null"}]
    if branches and not _types(node) and "properties" not in node:
        if "allOf" in node:
            merged: dict[str, Any] = {"type": "object", "properties": {}, "required": []}
            for b in node["allOf"]:
                part = resolve(b, top) or {}
                merged["properties"].update(part.get("properties") or {})
                merged["required"] += part.get("required") or []
            return _fill_object(merged, top, other, text, prefix, skip="")
        return sample(branches[0], top, name, text, other=other, prefix=prefix, depth=depth + 1)
    kinds = _types(node) - {"null"} or (
        {"object"} if "properties" in node else {"array"} if "items" in node else set()
    )
    kind = sorted(kinds)[0] if kinds else "string"
    for preferred in ("string", "object", "array", "integer", "number", "boolean"):
        if preferred in kinds:
            kind = preferred
            break
    if kind == "string":
        judged = _judge(name, node, is_path_name(name)) if other is not None else None
        if judged is not None and other is not None:
            found = other(PathSlot(prefix, judged[1], judged[0], name, True))
            if found is not None:
                return found
        value = text(name)
        low, high = node.get("minLength"), node.get("maxLength")
        if isinstance(low, int) and len(value) < low:
            value += "x" * (low - len(value))
        if isinstance(high, int) and high >= 0:
            value = value[:high]
        return value
    if kind in ("integer", "number"):
        low = node.get("minimum", node.get("exclusiveMinimum", 0))
        number = low + 1 if "exclusiveMinimum" in node and "minimum" not in node else max(low, 1)
        high = node.get("maximum")
        if isinstance(high, (int, float)) and number > high:
            number = high
        return int(number) if kind == "integer" else number
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    if kind == "array":
        count = max(node.get("minItems", 1) if isinstance(node.get("minItems"), int) else 1, 1)
        if isinstance(node.get("maxItems"), int):
            count = min(count, node["maxItems"])
        item = node.get("items") if isinstance(node.get("items"), Mapping) else {}
        return [
            sample(item, top, name, text, other=other, prefix=prefix + "[]", depth=depth + 1)
            for _ in range(count)
        ]
    return _fill_object(node, top, other, text, prefix, skip="")
