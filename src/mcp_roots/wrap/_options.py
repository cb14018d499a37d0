"""The operator's bounds for one wrap (``Options``) and the message-size default: plain values, built by
``command`` before the event loop and the proxy are imported (the first child starts in between).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .. import RootSet
    from ._plan import Plan

__all__ = ["DEFAULT_MAX_MESSAGE_BYTES", "Options"]

DEFAULT_MAX_MESSAGE_BYTES = 32 * 1024 * 1024
"""The longest message (one line, in bytes) taken from either peer; a longer one is dropped with a warning
and never held whole."""


@dataclass(frozen=True)
class Options:
    """The operator's bounds for one wrap."""

    plan: Plan
    ceiling: RootSet
    fallback: RootSet | None = None  # --roots, clipped; None: a client without roots is refused
    write: bool = True
    network: bool = True
    drain: float = 5.0  # seconds an old child keeps its in-flight calls after the roots change
    start_timeout: float = 30.0  # seconds a new child has to answer initialize
    max_in_flight: int = 64
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    restart_interval: float = 0.1  # the least time between two child starts (a flapping client's bound)
    roots_timeout: float = 10.0  # how long a call waits for the client's roots
    ask_timeout: float | None = None  # --ask: a host without roots is asked for folders (None: never)
