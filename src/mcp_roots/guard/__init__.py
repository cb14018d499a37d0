"""The guard (tier 4, on the roots layer): which parameters are paths.
And how a call is checked. This face is the guard's internal API for applications.
"""

# ``_pathnames`` (the path-name rule, ``is_path_name``: one rule for the type walk and the schema walk),
# ``_locators`` (places inside a value: ``cfg.path``, ``items[].src``), ``_annotations`` (where the paths are
# in a parameter's type), ``_values`` (the values at a locator, read or replaced in a copy), ``_audit``
# (guarded or exempt: the record ``@guard.paths`` leaves, and the audit of a server), ``_schema`` (every path
# in a tool's JSON input schema, by the same name rule and locators), ``_argcheck`` (the checks of a guarded
# function's arguments), ``_calls`` (the guarded call, written once; adapters are its ports), ``_port`` (what
# every adapter's port shares: the audit at the first message, the legacy lifecycle facts). This face is the
# guard's internal API for the applications (the probe, wrap, serve's lean path): the names below, nothing
# else. The schema
# walk's names are imported on first use (PEP 562): wrap needs the name rule at start and the walk only at
# its first tool call.

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_names
from ._pathnames import is_path_name

if TYPE_CHECKING:
    from ._calls import current_roots, tool_call
    from ._schema import PathSlot, SchemaPaths, path_slots, slot_at, walk_schema

__all__ = [
    "PathSlot",
    "SchemaPaths",
    "current_roots",
    "is_path_name",
    "path_slots",
    "slot_at",
    "tool_call",
    "walk_schema",
]

#: The schema walk's names, and the guarded call's (serve's lean path), imported on first use.
_LAZY = {
    **{name: "._schema" for name in ("PathSlot", "SchemaPaths", "path_slots", "slot_at", "walk_schema")},
    **{name: "._calls" for name in ("current_roots", "tool_call")},
}

__getattr__, __dir__ = lazy_names(__name__, _LAZY)
