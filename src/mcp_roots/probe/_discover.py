"""Which places in a tool's arguments take paths (every one in the input schema, found by the guard's own
schema walk, or named by the user as ``NAME:LOCATOR``), the whole arguments of a call that puts a value in one
of them, which tools look like file tools, and whether an answer came from the tool or from before it ran.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ..guard import PathSlot, slot_at, walk_schema

__all__ = [
    "PathArgument",
    "fill_arguments",
    "looks_like_file_tool",
    "not_reached",
    "opaque_places",
    "parse_override",
    "path_arguments",
    "takes_arguments",
]

#: Slots named like these get a fresh inside name (they name where something goes, not what exists).
_DESTINATION = re.compile(r"dest|destination|target|^to$|new", re.IGNORECASE)
_OLD_TEXT = re.compile(r"old|search|find|match", re.IGNORECASE)
_PATTERN = re.compile(r"pattern|glob|query", re.IGNORECASE)
_REVISION = re.compile(r"revision|^rev$|^ref$|commit", re.IGNORECASE)
#: A tool named or described like this handles files: not reaching it is a failure, not a shrug.
_FILE_TOOL = re.compile(
    r"\b(read|write|file|files|path|paths|dir|dirs|directory|directories|folder|folders|edit|move|copy|"
    r"delete|remove|rename|upload|download|save|open|mkdir|ls|cat)\b",
    re.IGNORECASE,
)
#: An error that says the arguments were refused before the tool ran (a schema or type check).
_VALIDATION = re.compile(
    r"validation error|input validation|invalid (params|parameters|arguments|input)|is a required property|"
    r"field required|input should be|missing required|unexpected keyword|is not of type|"
    r"additional properties are not allowed|unknown tool|tool .* not found",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class PathArgument:
    """A place in a tool's arguments that takes a path: ``name`` is its locator (``path``, ``job.path``,
    ``items[].file_path``, ``paths[]``), ``uri`` when it takes file: URIs."""

    tool: str
    name: str
    uri: bool = False
    slot: PathSlot | None = field(default=None, compare=False, repr=False)


def _of(tool: str, slot: PathSlot) -> PathArgument:
    return PathArgument(tool, slot.locator, slot.kind == "uri", slot)


def path_arguments(tool: dict[str, Any]) -> list[PathArgument]:
    """Every place in the arguments of ``tool`` (a tools/list entry, as JSON) that takes a path."""
    return [_of(tool["name"], s) for s in walk_schema(tool.get("inputSchema") or {}).slots]


def opaque_places(tool: dict[str, Any]) -> list[str]:
    """The places of ``tool``'s input schema the walk could not follow (too deep, recursive, unresolved)."""
    return walk_schema(tool.get("inputSchema") or {}).opaque


def parse_override(spec: str, tools: list[dict[str, Any]]) -> PathArgument:
    """``NAME:LOCATOR`` from --tool: the place LOCATOR (``path``, ``job.path``, ``items[].file_path``) of
    tool NAME takes a path (ValueError naming what is wrong)."""
    name, sep, locator = spec.partition(":")
    if not sep or not name or not locator:
        raise ValueError(
            f"--tool {spec!r} is not NAME:LOCATOR (for example read_file:path or write_job:job.path)"
        )
    tool = next((t for t in tools if t.get("name") == name), None)
    if tool is None:
        raise ValueError(f"--tool {spec!r}: the server has no tool named {name!r}")
    try:
        found = slot_at(tool.get("inputSchema") or {}, locator)
    except ValueError as exc:
        raise ValueError(f"--tool {spec!r}: tool {name!r}: {exc}") from None
    return _of(name, found)


def looks_like_file_tool(tool: dict[str, Any]) -> bool:
    """Whether a tool's name or description says it handles files (read, write, file, path, dir...)."""
    words = (
        re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", str(tool.get("name", ""))).replace("_", " ").replace("-", " ")
    )
    return bool(_FILE_TOOL.search(words) or _FILE_TOOL.search(str(tool.get("description") or "")))


def takes_arguments(tool: dict[str, Any]) -> bool:
    return bool((tool.get("inputSchema") or {}).get("properties"))


def not_reached(result: dict[str, Any] | None) -> str | None:
    """Why a call's answer came from before the tool ran (a protocol error, a refused schema check), or None
    when the tool's own code answered (or nothing answered: that is judged as a hang)."""
    if result is None:
        return None
    if "error" in result:
        return f"protocol error: {str(result['error'])[:200]}"
    if result.get("isError"):
        text = " ".join(str(c.get("text", "")) for c in result.get("content") or [] if isinstance(c, dict))
        if _VALIDATION.search(text):
            return f"refused by input validation: {text[:200]}"
    return None


def fill_arguments(
    tool: dict[str, Any],
    target: PathArgument,
    value: str,
    *,
    benign_file: str,
    fresh_name: str,
    write_token: str,
    old_text: str = "x",
) -> dict[str, Any]:
    """The whole arguments of one call: ``value`` at ``target``; every other path place an existing inside
    file (or a fresh inside name, for a destination); every other required value a sample of its type
    (``old_text`` for one named like the text an edit replaces, ``*`` for a pattern, ``HEAD`` for a revision,
    else ``write_token``)."""
    slot = target.slot or parse_override(f"{tool['name']}:{target.name}", [tool]).slot
    assert slot is not None  # parse_override always gives one

    def other(place: PathSlot) -> str:
        inside = fresh_name if _DESTINATION.search(place.name) else benign_file
        return "file://" + inside if place.kind == "uri" else inside

    def text(name: str) -> str:
        if _PATTERN.search(name):
            return "*"
        if _REVISION.search(name):
            return "HEAD"  # a git revision: the commit checked out
        return old_text if _OLD_TEXT.search(name) else write_token

    arguments = slot.arguments(value, other=other, text=text)
    return arguments if isinstance(arguments, dict) else {}
