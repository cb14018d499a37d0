"""Where roots come from and which are in force (tier 3, on the path layer).
This face is the roots layer's internal API for the applications.
"""

# ``_sources`` (fallback roots from the operator's configuration, the ceiling) and ``_config`` (its config
# file's parser), ``_answers`` (a client's roots/list answer, checked), ``_owned`` (the task group an object
# owns while open), ``_clock`` and ``_streak`` (the time, and the failure streak, of ``_cache``: RootsCache,
# one connection's roots kept fresh), ``_facts`` (what an adapter reports about a request),
# ``_connections`` (the one legacy lifecycle and ``roots/list`` fetcher), ``_policy`` (the one decision
# table: which RootSet a request gets), ``_consent`` and ``_asking`` (folders by the user's consent: the
# question, the ledger, the round trips), ``_provider`` (the client side). This face
# is the roots layer's internal API for the applications (``serve`` and the CLI read the operator's
# configuration through it): the names below, nothing else.

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_names
from ._facts import NeedRoots
from ._sources import (
    CONFIG_DIR_ENV_VAR,
    CONFIG_FILE_ENV_VAR,
    CONFIG_FILENAME,
    ENV_VAR,
    SOURCE_UNCONFIGURED,
    default_user_config_dir,
    fallback_roots,
    how_to_configure,
)

if TYPE_CHECKING:
    from ._asking import ask_legacy, consent_question, modern_answer, modern_question
    from ._consent import READ, READ_WRITE
    from ._jsonrpc import JsonRpcPort

__all__ = [
    "CONFIG_DIR_ENV_VAR",
    "CONFIG_FILENAME",
    "CONFIG_FILE_ENV_VAR",
    "ENV_VAR",
    "READ",
    "READ_WRITE",
    "SOURCE_UNCONFIGURED",
    "JsonRpcPort",
    "NeedRoots",
    "ask_legacy",
    "consent_question",
    "default_user_config_dir",
    "fallback_roots",
    "how_to_configure",
    "modern_answer",
    "modern_question",
]

# The raw JSON-RPC port loads the policy and the roots cache: on first use, not with the configuration.
__getattr__, __dir__ = lazy_names(
    __name__,
    {
        "JsonRpcPort": "._jsonrpc",
        **dict.fromkeys(("ask_legacy", "consent_question", "modern_answer", "modern_question"), "._asking"),
        **dict.fromkeys(("READ", "READ_WRITE"), "._consent"),
    },
)
