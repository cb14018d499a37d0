"""The guard (tier 4, on the roots layer): which parameters are paths and how a call is checked.

``_pathlike`` (the path-name rule, locators into nested types, the values at a locator), ``_audit`` (guarded
or exempt: the record ``@guard.paths`` leaves, and the audit of a server), ``_argcheck`` (the checks of a
guarded function's arguments), ``_calls`` (the guarded call, written once; adapters are its ports),
``_schema`` (every path in a tool's JSON input schema, by the same name rule and locators). This face is the
guard's internal API for the applications: the names below, nothing else.
"""

from __future__ import annotations

from ._schema import PathSlot, SchemaPaths, path_slots, slot_at, walk_schema

__all__ = ["PathSlot", "SchemaPaths", "path_slots", "slot_at", "walk_schema"]
