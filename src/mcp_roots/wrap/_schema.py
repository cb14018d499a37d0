"""The second net of wrap's argument check: the strings held under a path name anywhere in a call's
arguments, whatever the tool's schema says (a server whose schema says less than its code reads). The first
net is the guard's schema walk (``mcp_roots.guard.path_slots``: every path slot of the input schema).
"""

from __future__ import annotations

from collections.abc import Mapping

from ..guard import is_path_name

__all__ = ["named_values"]

_MAX_DEPTH = 12


def named_values(arguments: object, depth: int = 0) -> list[str]:
    """The strings held under a path name (the guard's rule) anywhere in ``arguments``, to a bounded depth."""
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
