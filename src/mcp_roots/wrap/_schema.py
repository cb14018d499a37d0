"""Where the paths are in a tool's JSON input schema, and the values found there in a call's arguments.

A minimal walk of wrap's own, behind two functions (``path_locators``, ``values_at``), so that the guard's
schema walk (the probe's, ``guard/_schema.py``) can replace it whole. A string is a path when the name of
the property holding it is a path name (the guard's rule), or when the schema says ``format: uri``;
objects, arrays, ``additionalProperties``, ``anyOf``/``oneOf``/``allOf`` and local ``$ref`` are followed,
to a bounded depth and node count.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..guard import is_path_name

__all__ = ["Locator", "named_values", "path_locators", "values_at"]

#: A locator: the steps from the arguments object to a path value. A step is a property name (``str``),
#: ``"[]"`` (each element of an array) or ``"{}"`` (each value of an object's other properties).
Locator = tuple[str, ...]

EACH = "[]"
VALUES = "{}"
_MAX_DEPTH = 12
_MAX_NODES = 5_000
_URI_FORMATS = frozenset({"uri", "uri-reference", "iri", "iri-reference"})


def path_locators(schema: object) -> list[Locator]:
    """The locators of every path value ``schema`` (a tool's ``inputSchema``) admits, deduplicated."""
    found: dict[Locator, None] = {}
    budget = [_MAX_NODES]
    root = schema if isinstance(schema, Mapping) else {}

    def walk(node: object, where: Locator, named: bool, seen: frozenset[str]) -> None:
        if not isinstance(node, Mapping) or len(where) > _MAX_DEPTH or budget[0] <= 0:
            return
        budget[0] -= 1
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/") and ref not in seen:
            target = _resolve(root, ref)
            if target is not None:
                walk(target, where, named, seen | {ref})
        for key in ("anyOf", "oneOf", "allOf"):
            options = node.get(key)
            if isinstance(options, list):
                for option in options:
                    walk(option, where, named, seen)
        types = node.get("type")
        kinds = set(types) if isinstance(types, list) else {types}
        text = "string" in kinds or (types is None and "properties" not in node and "items" not in node)
        if where and text and (named or node.get("format") in _URI_FORMATS):
            found.setdefault(where, None)
        properties = node.get("properties")
        if isinstance(properties, Mapping):
            for name, sub in properties.items():
                if isinstance(name, str):
                    walk(sub, (*where, name), is_path_name(name), seen)
        extra = node.get("additionalProperties")
        if isinstance(extra, Mapping):
            walk(extra, (*where, VALUES), named, seen)
        items = node.get("items")
        if isinstance(items, Mapping):
            walk(items, (*where, EACH), named, seen)
        elif isinstance(items, list):
            for item in items:
                walk(item, (*where, EACH), named, seen)

    walk(root, (), False, frozenset())
    return list(found)


def _resolve(root: Mapping[str, Any], ref: str) -> object:
    node: object = root
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def values_at(arguments: object, locator: Locator) -> list[str]:
    """The strings at ``locator`` in a call's ``arguments`` (anything else found there is not a path)."""
    current: list[object] = [arguments]
    for step in locator:
        following: list[object] = []
        for value in current:
            if step == EACH and isinstance(value, list):
                following.extend(value)
            elif step == VALUES and isinstance(value, Mapping):
                following.extend(value.values())
            elif isinstance(value, Mapping) and step in value:
                following.append(value[step])
        current = following
    return [value for value in current if isinstance(value, str)]


def named_values(arguments: object, depth: int = 0) -> list[str]:
    """The strings held under a path name anywhere in ``arguments`` (a second net beside the schema: a
    server whose schema says less than its code reads)."""
    found: list[str] = []
    if depth > _MAX_DEPTH:
        return found
    if isinstance(arguments, Mapping):
        for name, value in arguments.items():
            if isinstance(name, str) and is_path_name(name):
                if isinstance(value, str):
                    found.append(value)
                elif isinstance(value, list):
                    found.extend(v for v in value if isinstance(v, str))
            found.extend(named_values(value, depth + 1))
    elif isinstance(arguments, list):
        for value in arguments:
            found.extend(named_values(value, depth + 1))
    return found
