"""A tool call's arguments checked against the tool's input schema, the error in the schema's words
(``path must be a string, not a number``), before any framework's own validation words it otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["argument_error"]

#: Nesting followed at most (serve's schemas nest three deep: edits[i].oldText).
_MAX_DEPTH = 8


def _kind(value: object) -> str:
    """The JSON type of ``value`` as a schema names it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    return "object" if isinstance(value, Mapping) else type(value).__name__


_ARTICLE = {"array": "an array", "integer": "an integer", "object": "an object"}


def _named(kind: str) -> str:
    return "null" if kind == "null" else _ARTICLE.get(kind, f"a {kind}")


def _fits(kind: str, wanted: str, value: object) -> bool:
    if kind == wanted:
        return True
    if wanted == "number":
        return kind == "integer"
    if wanted == "integer":
        return kind == "number" and float(value).is_integer()  # type: ignore[arg-type]
    return False


def _resolve(schema: Mapping[str, Any], root: Mapping[str, Any]) -> Mapping[str, Any]:
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        found = root.get("$defs", {}).get(ref.removeprefix("#/$defs/"))
        if isinstance(found, Mapping):
            return found
    return schema


def _check(
    value: object, schema: Mapping[str, Any], root: Mapping[str, Any], where: str, depth: int
) -> str | None:
    schema = _resolve(schema, root)
    if depth > _MAX_DEPTH:
        return None
    arms = schema.get("anyOf")
    if isinstance(arms, list) and arms:
        errors = [_check(value, arm, root, where, depth + 1) for arm in arms if isinstance(arm, Mapping)]
        if any(error is None for error in errors):
            return None
        kinds = [_resolve(arm, root).get("type") for arm in arms if isinstance(arm, Mapping)]
        shown = " or ".join(_named(kind) for kind in kinds if isinstance(kind, str))
        return f"{where} must be {shown}, not {_named(_kind(value))}"
    wanted = schema.get("type")
    kind = _kind(value)
    if isinstance(wanted, str) and not _fits(kind, wanted, value):
        return f"{where} must be {_named(wanted)}, not {_named(kind)}"
    enum = schema.get("enum")
    if isinstance(enum, list) and value not in enum:
        return f"{where} must be one of {', '.join(repr(v) for v in enum)}"
    least = schema.get("minItems")
    if kind == "array" and isinstance(least, int) and len(value) < least:  # type: ignore[arg-type]
        return f"{where} must have at least {least} item{'' if least == 1 else 's'}"
    if kind == "array" and isinstance(schema.get("items"), Mapping):
        assert isinstance(value, (list, tuple))
        for index, item in enumerate(value):
            error = _check(item, schema["items"], root, f"{where}[{index}]", depth + 1)
            if error is not None:
                return error
    if kind == "object" and isinstance(value, Mapping):
        return _check_object(value, schema, root, where, depth)
    return None


def _check_object(
    value: Mapping[str, Any], schema: Mapping[str, Any], root: Mapping[str, Any], where: str, depth: int
) -> str | None:
    properties = schema.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    prefix = f"{where}." if where else ""
    for name in schema.get("required", ()):
        if name not in value:
            return f"{prefix}{name} is required"
    for name, spec in properties.items():
        if name in value and isinstance(spec, Mapping):
            error = _check(value[name], spec, root, f"{prefix}{name}", depth + 1)
            if error is not None:
                return error
    return None


def argument_error(tool: str, schema: Mapping[str, Any], arguments: Mapping[str, Any]) -> str | None:
    """The error of ``arguments`` against ``schema`` (a tool's input schema), in the schema's words and
    naming the tool, or None where they fit it."""
    error = _check_object(arguments, schema, schema, "", 0)
    return None if error is None else f"Invalid arguments for {tool}: {error}"
