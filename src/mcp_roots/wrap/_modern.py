"""The 2026-07-28 era toward the host.
Discovery answered, roots asked per request, a small pool of children.
"""

# The 2026-07-28 era toward the host: ``server/discover`` answered for the child, each file request's roots
# asked by multi-round-trip (an ``input_required`` result with a ``roots/list`` input request, answered in the
# client's retry), and a small bounded pool of children keyed by those roots. The children stay legacy: wrap
# initializes them itself.

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ._child import Child

if TYPE_CHECKING:
    from .. import RootSet

__all__ = [
    "MODERN",
    "POOL_SIZE",
    "ROOTS_KEY",
    "Pool",
    "complete",
    "discover_result",
    "init_params",
    "is_modern",
    "to_legacy",
    "without_round_trip",
]

logger = logging.getLogger("mcp_roots.wrap")

MODERN = "2026-07-28"
PROTOCOL_VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
CLIENT_INFO_KEY = "io.modelcontextprotocol/clientInfo"
SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"
#: The key of wrap's roots/list input request (and of the client's answer in its retry).
ROOTS_KEY = "mcp-roots-wrap/roots"
#: The versions wrap speaks to a host: the modern one (per-request roots) and the legacy ones.
SUPPORTED = [MODERN, "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]
#: Children kept at once for distinct roots sets (the least recently used is retired first).
POOL_SIZE = 4
#: The methods whose 2026-07-28 results say how long they may be cached.
CACHEABLE = frozenset(
    {"tools/list", "prompts/list", "resources/list", "resources/templates/list", "resources/read"}
)
#: The legacy version wrap initializes its children with on this era.
CHILD_VERSION = "2025-11-25"


def _meta(params: object) -> Mapping[str, Any]:
    meta = params.get("_meta") if isinstance(params, Mapping) else None
    return meta if isinstance(meta, Mapping) else {}


def is_modern(message: Mapping[str, Any]) -> bool:
    """A 2026-07-28 request: ``server/discover``, or one that names that version in its ``_meta``."""
    return (
        message.get("method") == "server/discover"
        or _meta(message.get("params")).get(PROTOCOL_VERSION_KEY) == MODERN
    )


def init_params(message: Mapping[str, Any]) -> dict[str, Any]:
    """The ``initialize`` parameters wrap gives its legacy children, from a modern request's ``_meta``."""
    info = _meta(message.get("params")).get(CLIENT_INFO_KEY)
    if not isinstance(info, Mapping):
        info = {"name": "mcp-roots-wrap", "version": "0"}
    return {"protocolVersion": CHILD_VERSION, "capabilities": {}, "clientInfo": dict(info)}


def discover_result(child: Child) -> dict[str, Any]:
    init = child.init_result or {}
    result: dict[str, Any] = {
        "supportedVersions": SUPPORTED,
        "capabilities": init.get("capabilities") or {},
        "resultType": "complete",
        "ttlMs": 0,
        "cacheScope": "private",
    }
    if isinstance(init.get("instructions"), str):
        result["instructions"] = init["instructions"]
    if isinstance(init.get("serverInfo"), Mapping):
        result["_meta"] = {SERVER_INFO_KEY: init["serverInfo"]}
    return result


def complete(answer: dict[str, Any], method: str) -> dict[str, Any]:
    """A legacy child's answer as the 2026-07-28 wire needs it: a result says ``resultType``, and a
    cacheable one how long it may be cached (not at all, and only by this client: wrap cannot know more)."""
    value = answer.get("result")
    if not isinstance(value, dict):
        return answer
    extra: dict[str, Any] = {"resultType": "complete"}
    if method in CACHEABLE:
        extra.update(ttlMs=0, cacheScope="private")
    return {**answer, "result": {**extra, **value}}


def without_round_trip(message: dict[str, Any]) -> dict[str, Any]:
    """The request as the child gets it: no input responses or request state (they were wrap's)."""
    params = message.get("params")
    if not isinstance(params, Mapping):
        return message
    kept = {k: v for k, v in params.items() if k not in ("inputResponses", "requestState")}
    return {**message, "params": kept}


class Pool:
    """Children by roots set, at most ``size``; the least recently used leaves first."""

    def __init__(self, size: int = POOL_SIZE) -> None:
        self.size = size
        self._children: OrderedDict[tuple[tuple[str, str], ...], Child] = OrderedDict()

    @staticmethod
    def key(roots: RootSet) -> tuple[tuple[str, str], ...]:
        return tuple((str(root.path), root.access) for root in roots)  # a read grant is another child

    def get(self, roots: RootSet) -> Child | None:
        key = self.key(roots)
        child = self._children.get(key)
        if child is None or not child.alive:
            self._children.pop(key, None)
            return None
        self._children.move_to_end(key)
        return child

    def put(self, child: Child) -> list[Child]:
        """Keep ``child``; the children it pushes out (to be retired)."""
        self._children[self.key(child.roots)] = child
        self._children.move_to_end(self.key(child.roots))
        out: list[Child] = []
        while len(self._children) > self.size:
            out.append(self._children.popitem(last=False)[1])
        return out


#: The prefix of the 2026-07-28 envelope's keys in ``_meta`` (reserved by the specification).
ENVELOPE_PREFIX = "io.modelcontextprotocol/"


def to_legacy(message: dict[str, Any]) -> dict[str, Any]:
    """A 2026-07-28 request or notification as a child initialized on the legacy era takes it: the
    envelope's keys out of ``_meta`` (the rest of ``_meta``, a progress token, kept), never passed raw."""
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, Mapping) else None
    if not isinstance(params, Mapping) or not isinstance(meta, Mapping):
        return message
    kept = {k: v for k, v in meta.items() if not (isinstance(k, str) and k.startswith(ENVELOPE_PREFIX))}
    rest = {k: v for k, v in params.items() if k != "_meta"}
    return {**message, "params": {**rest, "_meta": kept} if kept else rest}
