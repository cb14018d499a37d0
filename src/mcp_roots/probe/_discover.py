"""Which tool arguments take paths, found from a tool's input schema (names, descriptions, ``format: uri``,
``file:`` URIs) or named by the user, and the other arguments filled so that a call reaches its path.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ._scratch import CANARY_PREFIX

__all__ = ["PathArgument", "fill_arguments", "parse_override", "path_arguments"]

_PATH_NAMES = re.compile(
    r"^(paths?|files?|filenames?|filepaths?|dirs?|directory|directories|folders?|src|source|dest|destination|"
    r"target|location|uri|uris|url|root|cwd)$|(_|\b)(path|file|dir|directory|folder|uri)s?$|(Path|File|Dir|Uri|URI)s?$",
)
_PATH_WORDS = re.compile(r"\b(path|file|directory|folder)\b|file:", re.IGNORECASE)
_URI_WORDS = re.compile(r"\buri\b|file://|file:", re.IGNORECASE)
#: Arguments named like these get a fresh inside name (they name where something goes, not what exists).
_DESTINATION = re.compile(r"dest|destination|target|^to$|new", re.IGNORECASE)
_OLD_TEXT = re.compile(r"old|search|find|match", re.IGNORECASE)
_PATTERN = re.compile(r"pattern|glob|query", re.IGNORECASE)


@dataclass(frozen=True)
class PathArgument:
    """A tool argument that takes a path: ``array`` when it takes a list of them, ``uri`` when file: URIs."""

    tool: str
    name: str
    array: bool = False
    uri: bool = False


def _is_string(schema: dict[str, Any]) -> bool:
    kind = schema.get("type")
    return kind == "string" or (isinstance(kind, list) and "string" in kind) or "anyOf" in schema


def _is_pathlike(name: str, schema: dict[str, Any]) -> tuple[bool, bool]:
    """(takes a path, takes a URI) for one string property."""
    text = f"{schema.get('description', '')} {schema.get('title', '')}"
    uri = schema.get("format") in ("uri", "uri-reference", "iri") or name.lower() in ("uri", "uris")
    uri = uri or (bool(_URI_WORDS.search(text)) and not _PATH_WORDS.search(text.replace("file:", "")))
    named = bool(_PATH_NAMES.search(name))
    described = bool(_PATH_WORDS.search(text)) and not _PATTERN.search(name)
    return (named or described or uri), uri


def path_arguments(tool: dict[str, Any]) -> list[PathArgument]:
    """The arguments of ``tool`` (a tools/list entry, as JSON) that take a path or a list of paths."""
    schema = tool.get("inputSchema") or {}
    found: list[PathArgument] = []
    for name, prop in (schema.get("properties") or {}).items():
        if not isinstance(prop, dict):
            continue
        if prop.get("type") == "array" and isinstance(prop.get("items"), dict):
            item = prop["items"]
            if _is_string(item):
                pathlike, uri = _is_pathlike(name, {**item, "description": prop.get("description", "")})
                if pathlike:
                    found.append(PathArgument(tool["name"], name, array=True, uri=uri))
            continue
        if _is_string(prop):
            pathlike, uri = _is_pathlike(name, prop)
            if pathlike:
                found.append(PathArgument(tool["name"], name, uri=uri))
    return found


def parse_override(spec: str, tools: list[dict[str, Any]]) -> PathArgument:
    """``NAME:ARG`` from --tool: the argument ARG of tool NAME takes a path (ValueError naming what is
    wrong)."""
    name, sep, arg = spec.partition(":")
    if not sep or not name or not arg:
        raise ValueError(f"--tool {spec!r} is not NAME:ARG (for example read_file:path)")
    tool = next((t for t in tools if t.get("name") == name), None)
    if tool is None:
        raise ValueError(f"--tool {spec!r}: the server has no tool named {name!r}")
    prop = ((tool.get("inputSchema") or {}).get("properties") or {}).get(arg)
    if not isinstance(prop, dict):
        raise ValueError(f"--tool {spec!r}: tool {name!r} has no argument {arg!r}")
    uri = prop.get("format") in ("uri", "uri-reference")
    return PathArgument(name, arg, array=prop.get("type") == "array", uri=uri)


def _resolve(schema: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with a local ``$ref`` (``#/$defs/X``, ``#/definitions/X``) followed, at most 8 deep."""
    for _ in range(8):
        ref = schema.get("$ref")
        if not isinstance(ref, str) or not ref.startswith("#/"):
            return schema
        node: Any = top
        for part in ref[2:].split("/"):
            node = node.get(part) if isinstance(node, dict) else None
        if not isinstance(node, dict):
            return schema
        schema = node
    return schema


def _sample(name: str, schema: dict[str, Any], write_token: str, top: dict[str, Any]) -> Any:
    """A value for a non-path argument: enough for the call to go through."""
    schema = _resolve(schema, top)
    if "default" in schema:
        return schema["default"]
    if schema.get("enum"):
        return schema["enum"][0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if kind == "string" or (kind is None and "anyOf" in schema):
        if _PATTERN.search(name):
            return "*"
        return CANARY_PREFIX if _OLD_TEXT.search(name) else write_token
    if kind in ("integer", "number"):
        return max(1, schema.get("minimum", 1))
    if kind == "boolean":
        return False
    if kind == "array":
        item = schema.get("items")
        return [_sample(name, item if isinstance(item, dict) else {}, write_token, top)]
    if kind == "object":
        return {
            key: _sample(key, sub, write_token, top)
            for key, sub in (schema.get("properties") or {}).items()
            if key in (schema.get("required") or []) and isinstance(sub, dict)
        }
    return write_token


def fill_arguments(
    tool: dict[str, Any],
    target: PathArgument,
    value: str,
    *,
    benign_file: str,
    fresh_name: str,
    write_token: str,
    path_args: list[PathArgument],
) -> dict[str, Any]:
    """The arguments of one call: ``value`` in ``target``; another path argument an existing inside file (or
    a fresh inside name, for a destination); every other required argument a sample of its type."""
    schema = tool.get("inputSchema") or {}
    props = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    args: dict[str, Any] = {}
    other_paths = {a.name: a for a in path_args if a.name != target.name}
    for name, prop in props.items():
        if not isinstance(prop, dict):
            continue
        if name == target.name:
            args[name] = [value] if target.array else value
        elif name in other_paths:
            inside = fresh_name if _DESTINATION.search(name) else benign_file
            if other_paths[name].uri:
                inside = "file://" + inside
            args[name] = [inside] if other_paths[name].array else inside
        elif name in required:
            args[name] = _sample(name, prop, write_token, schema)
    return args
