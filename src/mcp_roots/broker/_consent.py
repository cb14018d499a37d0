"""What a files/* consent prompt is asked and answers (the host's callback types), and the two small rules
every consent decision uses: the token bucket that rate limits prompts and operations, and ``under``.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypeAlias

import mcp_types

from ..paths._rootset import Root

__all__ = [
    "Access",
    "ConsentItem",
    "FileConsentCallback",
    "FileConsentRequest",
    "FileGrant",
    "TokenBucket",
    "under",
]

Access: TypeAlias = Literal["read", "write"]


@dataclass(frozen=True)
class ConsentItem:
    """One thing a server asks to reach: ``path`` beneath ``root``.

    Args:
        root: One of the client's own roots.
        path: Relative, '' for the whole root. Server-controlled text (the server named it; it passed the
            wire's path rules, which refuse C0 controls, DEL and backslashes but allow any other Unicode,
            bidi overrides and C1 controls included): a host escapes it before showing it.
    """

    root: Root
    path: str

    @property
    def location(self) -> Path:
        """The local path this item names (for display; operations never open it by name)."""
        return self.root.path / self.path if self.path else self.root.path


@dataclass(frozen=True)
class FileConsentRequest:
    """What a FileBroker consent callback is asked: may ``server`` have ``access`` to ``items``?

    Answer True (all), False (none), or the subset of ``items`` the user approved. Server-controlled text
    is marked below: a host must escape it before showing it (newlines, bidi overrides such as U+202E, C1
    controls, look-alike characters; and bound its length).

    Args:
        server: The server's self-declared ``Implementation`` (server-controlled: ``name``, ``version`` and
            every other field; a server may call itself anything), so :attr:`server_name` too.
        message: The server's own words for an explicit ``files/consent`` (server-controlled: any string
            it sent); for an operation that arrives without consent the broker writes it, quoting the
            path the server named.
        items: What is asked for; each ``path`` is server-controlled, each ``root`` the client's own.
        access: ``"read"`` or ``"write"`` (host-controlled).
        explicit: The server asked with ``files/consent`` (host-controlled).
    """

    server: mcp_types.Implementation | None
    message: str
    items: tuple[ConsentItem, ...]
    access: Access
    explicit: bool

    @property
    def server_name(self) -> str:
        """The server's self-declared name and version (server-controlled text: escape it to show it)."""
        if self.server is None:
            return "an unidentified server"
        return f"{self.server.name} {self.server.version}".strip()


FileGrant: TypeAlias = "bool | Collection[ConsentItem]"
FileConsentCallback: TypeAlias = Callable[[FileConsentRequest], "FileGrant | Awaitable[FileGrant]"]


class TokenBucket:
    """``capacity`` events at once, refilled at ``capacity / window`` per second of ``clock``."""

    def __init__(self, capacity: int, window: float, clock: Callable[[], float] = time.monotonic) -> None:
        if capacity <= 0 or window <= 0:
            raise ValueError(f"a rate must be (events > 0, seconds > 0), not ({capacity}, {window})")
        self.capacity = capacity
        self.window = window
        self.per_second = capacity / window
        self.tokens = float(capacity)
        self._clock = clock
        self.stamp = clock()

    def take(self) -> float:
        """0 when an event may happen now (and it is counted), else the seconds until one may."""
        now = self._clock()
        self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.per_second)
        self.stamp = now
        if self.tokens >= 1:
            self.tokens -= 1
            return 0.0
        return (1 - self.tokens) / self.per_second


def under(path: Path, base: Path) -> bool:
    """``path`` is ``base`` or lies beneath it (lexically: both are canonical absolute paths)."""
    return path == base or base in path.parents
