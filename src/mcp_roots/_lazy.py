"""Names a package face imports on first use (PEP 562).
Written once, for every face that defers some.
"""

# ``__getattr__, __dir__ = lazy_names(__name__, {"Name": ".module", ...})`` in a package's ``__init__``: each
# name is imported from its module (relative to the package) the first time it is read, then kept in the
# package's namespace, so later reads cost nothing. Faces defer what a caller may never need: ``mcp-roots
# wrap`` loads neither the ``RootsGuard`` facade nor the schema walk until it uses them.

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_names"]


def lazy_names(
    package: str, homes: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``'s face: each name of ``homes`` imported from its
    module on first use."""
    namespace = sys.modules[package].__dict__

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home, package), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *homes})

    return __getattr__, __dir__
