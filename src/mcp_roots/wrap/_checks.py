"""The check before a request is forwarded: its paths against the child's roots.
The kernel is the guarantee; this is the early, readable refusal.
"""

# The check before a request is forwarded: every path in a ``tools/call``'s arguments (where the child's
# input schema puts them, and under any path name) and the ``file:`` URI of a ``resources/read`` or
# ``resources/subscribe``, against the roots of the child that would serve it, refused in the guard's words.
# The kernel is the guarantee; this is the early, readable refusal.

from __future__ import annotations

import os
from collections.abc import Callable

from .. import RootSet, uri_to_path
from ..errors import InvalidPath, InvalidRootURI, PathOutsideRoots
from ._child import Child
from ._schema import named_values
from ._wire import Message

__all__ = ["outside", "path_values", "refusal"]


async def refusal(child: Child, message: Message, next_id: Callable[[], int], limit: float) -> str | None:
    """The refusal of the request's first path outside ``child``'s roots, or None."""
    for value in await path_values(child, message, next_id, limit):
        why = outside(child.roots, value)
        if why is not None:
            return why
    return None


async def path_values(child: Child, message: Message, next_id: Callable[[], int], limit: float) -> list[str]:
    """Every path the request names (once each, in order): where ``child``'s tool schema puts them, under
    any path name, or a resource's ``file:`` URI."""
    params = message.get("params")
    if not isinstance(params, dict):
        return []
    method = message.get("method")
    values: list[str] = []
    if method == "tools/call":
        arguments = params.get("arguments")
        name = params.get("name")
        listed = child.init_result is not None and "tools" in (child.init_result.get("capabilities") or {})
        if isinstance(name, str) and listed and isinstance(arguments, dict):
            for slot in await child.tool_slots(name, next_id, limit) or ():
                values.extend(v for v in slot.values(arguments) if isinstance(v, str))
        values.extend(named_values(arguments))
    elif method in ("resources/read", "resources/subscribe"):
        uri = params.get("uri")
        if isinstance(uri, str) and uri[:5].lower() == "file:":
            values.append(uri)
    return list(dict.fromkeys(values))


def outside(roots: RootSet, value: str) -> str | None:
    """Why ``value`` (a path, a ``file:`` URI, ``~/...``) is outside ``roots``, or None when it is inside. A
    relative path is taken against the first root (the child's working folder)."""
    text = value
    try:
        if value[:5].lower() == "file:":
            text = str(uri_to_path(value))
        elif value.startswith("~"):
            text = os.path.expanduser(value)
        roots.resolve_text(text)
    except (PathOutsideRoots, InvalidPath, InvalidRootURI) as exc:
        message = str(exc)
        return message if message.startswith("Access denied") else f"Access denied: {message}"
    return None
