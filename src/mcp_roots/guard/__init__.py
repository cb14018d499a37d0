"""The guard (tier 4, on the roots layer): which parameters are paths and how a call is checked.

``_pathlike`` (the path-name rule, locators into nested types, the values at a locator), ``_audit`` (guarded
or exempt: the record ``@guard.paths`` leaves, and the audit of a server), ``_argcheck`` (the checks of a
guarded function's arguments), ``_calls`` (the guarded call, written once; adapters are its ports). This face
is the guard's internal API for the applications: the names below, nothing else.
"""

from __future__ import annotations

__all__: list[str] = []
