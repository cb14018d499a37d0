"""The config file's parser: ``mcp-roots.json`` read as the operator wrote it, checked for shape (one
``"roots"`` array of ``{"path" | "uri", "name"}`` objects, no unknown keys, no duplicate keys), every error
naming the file and line. Which roots the entries become (and the home rule) is ``_sources``' business.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Any

from ..errors import ConfigError

__all__ = ["config_entries", "read_config_text"]

_ENTRY_KEYS = frozenset({"path", "uri", "name"})
_EXAMPLE = '{"roots": [{"path": "./data", "name": "Data"}, {"uri": "file:///srv/media"}]}'
_WHITESPACE = re.compile(r"[ \t\n\r]*")

_Key = tuple[str | int, ...]


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _member_offsets(text: str, file: Path) -> dict[_Key, int]:
    """Where each value of a valid JSON document starts: object members by the offset of their key,
    array elements by their own. Refuses duplicate keys, which json.loads would silently merge."""
    decoder = json.JSONDecoder()
    offsets: dict[_Key, int] = {}

    def skip(i: int) -> int:
        match = _WHITESPACE.match(text, i)
        return match.end() if match else i

    def value(i: int, key: _Key, at: int | None) -> int:
        i = skip(i)
        offsets[key] = i if at is None else at
        if text[i] == "{":
            seen: set[str] = set()
            i = skip(i + 1)
            if text[i] == "}":
                return i + 1
            while True:
                key_at = skip(i)
                name, i = decoder.raw_decode(text, key_at)
                if name in seen:
                    raise ConfigError(
                        f"{file}:{_line_of(text, key_at)}: the key {name!r} appears twice in the same "
                        "object; give it once"
                    )
                seen.add(name)
                i = skip(i) + 1  # the ':'
                i = skip(value(i, (*key, name), key_at))
                if text[i] == "}":
                    return i + 1
                i += 1  # the ','
        if text[i] == "[":
            index = 0
            i = skip(i + 1)
            if text[i] == "]":
                return i + 1
            while True:
                i = skip(value(i, (*key, index), None))
                index += 1
                if text[i] == "]":
                    return i + 1
                i += 1
        _, end = decoder.raw_decode(text, i)
        return int(end)

    value(0, (), None)
    return offsets


def read_config_text(path: Path) -> str | None:
    """The file's text, None if there is no file, ConfigError if it exists but cannot be used."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if os.path.lexists(path):
            raise ConfigError(f"{path}: is a symbolic link to nothing; fix or remove it") from None
        return None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be examined: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        raise ConfigError(f"{path}: is not a regular file")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read: {exc.strerror or exc}") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ConfigError(f"{path}:{line}: is not valid UTF-8 ({exc.reason})") from None


def config_entries(path: Path, text: str) -> list[tuple[int, dict[str, Any]]]:
    """Parse and check the shape of a config file; return ``(line, entry)`` pairs."""

    def parse_int(literal: str) -> int:
        try:
            return int(literal)
        except ValueError:
            # Longer than the interpreter converts (sys.get_int_max_str_digits()); no number belongs in
            # this file anyway, so say where it is rather than let ValueError escape.
            line = _line_of(text, max(text.find(literal), 0))
            raise ConfigError(
                f"{path}:{line}: holds a number of {len(literal.lstrip('-'))} digits, too long to read; "
                'entries are objects with "path" or "uri" strings'
            ) from None

    try:
        document = json.loads(text, parse_int=parse_int)
        offsets = _member_offsets(text, path)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}:{exc.lineno}:{exc.colno}: is not valid JSON: {exc.msg}") from None
    except RecursionError:
        raise ConfigError(f"{path}: is nested too deeply to be a config file") from None

    def fail(key: _Key, rule: str) -> ConfigError:
        return ConfigError(f"{path}:{_line_of(text, offsets.get(key, 0))}: {rule}")

    if not isinstance(document, dict):
        raise fail((), f"the file must hold a JSON object like {_EXAMPLE}, not {_json_type(document)}")
    for name in document:
        if name != "roots":
            # Refused rather than ignored: a setting this version does not know (a typo, or a future
            # restriction) must not be silently dropped.
            raise fail((name,), f'unknown key {name!r}; the only key of a config file is "roots"')
    if "roots" not in document:
        raise fail((), f'the object has no "roots" key; expected {_EXAMPLE}')
    entries = document["roots"]
    if not isinstance(entries, list):
        raise fail(("roots",), f'"roots" must be an array of entries, not {_json_type(entries)}')
    checked: list[tuple[int, dict[str, Any]]] = []
    for index, entry in enumerate(entries):
        key: _Key = ("roots", index)
        what = f'entry {index + 1} of "roots"'
        if not isinstance(entry, dict):
            raise fail(key, f'{what} must be an object with "path" or "uri", not {_json_type(entry)}')
        for name in entry:
            if name not in _ENTRY_KEYS:
                raise fail(
                    (*key, name), f'{what} has the unknown key {name!r} (allowed: "path", "uri", "name")'
                )
        if ("path" in entry) == ("uri" in entry):
            count = "both" if "path" in entry else "neither"
            raise fail(key, f'{what} has {count} "path" and "uri"; give exactly one')
        kind = "path" if "path" in entry else "uri"
        if not isinstance(entry[kind], str) or not entry[kind]:
            raise fail((*key, kind), f'"{kind}" of {what} must be a non-empty string')
        if entry.get("name") is not None and not isinstance(entry["name"], str):
            raise fail((*key, "name"), f'"name" of {what} must be a string, not {_json_type(entry["name"])}')
        checked.append((_line_of(text, offsets[key]), entry))
    return checked
