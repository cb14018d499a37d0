"""Glob patterns as the official filesystem server reads them (minimatch with ``dot: true``), compiled once.

``*`` and ``?`` stay inside one path component, ``**`` as a whole component spans any number of them,
``[...]`` is a character class (``!`` or ``^`` negates) and ``{a,b}`` alternates. Patterns match the path
relative to the directory the search started in, with '/' separators.
"""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = ["compile_glob", "excluder"]

#: A pattern is a few dozen characters in practice; this bounds the work and the alternation blow-up.
MAX_PATTERN_LENGTH = 1024
MAX_ALTERNATIVES = 256


def _expand_braces(pattern: str) -> list[str]:
    """``a{b,c}d`` -> ``[abd, acd]``, innermost-first; a brace without a comma stays literal."""
    results = [pattern]
    for _ in range(MAX_ALTERNATIVES):
        expanded: list[str] = []
        changed = False
        for text in results:
            match = re.search(r"\{([^{}]*)\}", text)
            if match is None or "," not in match.group(1):
                expanded.append(text)
                continue
            changed = True
            for option in match.group(1).split(","):
                expanded.append(text[: match.start()] + option + text[match.end() :])
        results = expanded
        if len(results) > MAX_ALTERNATIVES:
            raise ValueError(f"glob pattern {pattern!r} expands to more than {MAX_ALTERNATIVES} alternatives")
        if not changed:
            return results
    return results


def _component(text: str) -> str:
    """The regex of one path component (no '/' inside)."""
    out: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char == "*":
            while i + 1 < len(text) and text[i + 1] == "*":
                i += 1  # '**' inside a component is a plain '*'
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[":
            end = text.find("]", i + 2 if i + 1 < len(text) and text[i + 1] in "!^" else i + 1)
            if end == -1:
                out.append(re.escape(char))
            else:
                body = text[i + 1 : end]
                negate = body[:1] in ("!", "^")
                if negate:
                    body = body[1:]
                body = body.replace("\\", "\\\\").replace("[", "\\[")
                out.append(f"[^/{body}]" if negate else f"[{body}]")
                i = end
        elif char == "\\" and i + 1 < len(text):
            i += 1
            out.append(re.escape(text[i]))
        else:
            out.append(re.escape(char))
        i += 1
    return "".join(out)


def _one(pattern: str) -> str:
    parts = pattern.split("/")
    pieces: list[str] = []
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        if part == "**":
            # Zero or more whole components: the separator that follows belongs to the match.
            pieces.append(".*" if last else "(?:[^/]*(?:/[^/]*)*/)?")
            continue
        pieces.append(_component(part) + ("" if last else "/"))
    return "".join(pieces)


@lru_cache(maxsize=256)
def compile_glob(pattern: str) -> re.Pattern[str]:
    """The compiled matcher of ``pattern`` (``fullmatch`` it against a relative path)."""
    if not isinstance(pattern, str) or not pattern:
        raise ValueError("a glob pattern must be a non-empty string")
    if len(pattern) > MAX_PATTERN_LENGTH:
        raise ValueError(f"glob pattern is longer than {MAX_PATTERN_LENGTH} characters")
    alternatives = _expand_braces(pattern)
    return re.compile("|".join(f"(?:{_one(p)})" for p in alternatives), re.DOTALL)


def excluder(patterns: list[str], *, anywhere: bool) -> re.Pattern[str] | None:
    """One matcher for a list of exclude patterns, or None when there are none.

    With ``anywhere`` (``directory_tree``), a pattern without ``*`` also excludes that name at any depth
    and everything below it (``node_modules`` excludes ``src/node_modules/x``), as the official server does.
    """
    regexes: list[str] = []
    for pattern in patterns:
        variants = [pattern]
        if anywhere and "*" not in pattern:
            variants += [f"**/{pattern}", f"**/{pattern}/**"]
        regexes += [compile_glob(v).pattern for v in variants]
    if not regexes:
        return None
    return re.compile("|".join(f"(?:{r})" for r in regexes), re.DOTALL)
