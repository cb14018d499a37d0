"""What an adapter reports about one request.
The decision of which roots it gets reads them; this module decides nothing.
"""

# What an adapter reports about one request, for the decision of which roots it gets: the facts of the
# port (era, the client's capability, the connection, the roots the request carried, how to send
# ``roots/list``, the kind of request), and the two signals the decision can answer with besides a RootSet:
# ask the client (:class:`NeedRoots`), and a connection that ended under a ``roots/list``
# (:class:`ConnectionEnded`). It decides nothing and imports no SDK.

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

__all__ = [
    "CONSENT_INPUT_KEY",
    "HANDLER",
    "PROMPT",
    "READ",
    "TOOL",
    "ConnectionEnded",
    "NeedRoots",
    "RequestFacts",
    "SendRootsList",
]

TOOL, PROMPT, READ, HANDLER = "tool", "prompt", "read", "handler"
"""The kinds of request: a ``tools/call``, a ``prompts/get``, a ``resources/read``, and a hand-written
handler's ``guard.roots(ctx)`` outside a guarded call."""

CONSENT_INPUT_KEY = "mcp_roots.consent"
"""The key of the guard's consent question in a 2026-07-28 ``InputRequiredResult``."""

SendRootsList = Callable[[Any, Sequence[Any]], Awaitable[object]]
"""How an adapter sends ``roots/list`` on a legacy connection: ``send(connection, waiting)`` returns the
raw answer (the cache judges each entry), where ``waiting`` holds the ``request`` of the calls waiting for
it, newest last (on streamable HTTP the request rides a waiting call's response stream); it raises
:class:`ConnectionEnded` when the SDK says the connection closed, anything else for a failed answer."""


class NeedRoots(Exception):
    """This request's roots must be asked of the client (2026-07-28: by an input request); the port
    answers the request with that question. A port may raise a subclass of its own (one its framework
    lets through a tool runner)."""


class ConnectionEnded(Exception):
    """The connection closed under a ``roots/list`` (its task group is about to cancel the refresh)."""


class RequestFacts:
    """One request as its adapter knows it. ``request`` is the adapter's own object for it (the
    algorithm only hands it back to the port); the rest is what the decision reads.

    - ``kind``: :data:`TOOL`, ``PROMPT``, ``READ`` or ``HANDLER``.
    - ``modern``: the request speaks 2026-07-28 (roots come with each request).
    - ``declared``: the client declared the roots capability; None where the SDK saw no handshake on the
      connection (stateless HTTP). ``list_changed``: and its ``listChanged``.
    - ``connection``: the legacy connection's key (an object that lives as long as the connection).
    - ``seen``: whether this guard's adapter saw the connection's own messages: True (it may open the
      connection's roots lifecycle now), False (it certainly did not: the guard is not installed there),
      None (it cannot tell).
    - ``answer``, ``stream``: the roots the request carried (2026-07-28, the raw ``{"roots": [...]}``)
      and the client channel it came on (compared by identity), or None.
    - ``cannot_ask``: why this request cannot be answered with a question for the roots, or None.
    - ``send``: how to send ``roots/list`` on the connection (:data:`SendRootsList`), where the lifecycle
      may be opened from a request (``seen`` True).
    - ``elicit``: the client can be asked a form question (it declared elicitation in form mode) and this
      port can carry one (legacy: ``elicitation/create``; 2026-07-28: an input request).
    - ``principal``: the authenticated caller (HTTP), or None.
    - ``consent_answer``, ``request_state``: a 2026-07-28 retry's answer to the guard's consent question
      (the raw ``ElicitResult``) and its echoed ``requestState``, or None.
    """

    __slots__ = (
        "answer",
        "cannot_ask",
        "connection",
        "consent_answer",
        "declared",
        "elicit",
        "kind",
        "list_changed",
        "modern",
        "principal",
        "request",
        "request_state",
        "seen",
        "send",
        "stream",
    )

    def __init__(
        self,
        request: Any,
        kind: str,
        *,
        modern: bool,
        declared: bool | None,
        connection: object | None,
        seen: bool | None = None,
        list_changed: bool = False,
        answer: object | None = None,
        stream: object | None = None,
        cannot_ask: str | None = None,
        send: SendRootsList | None = None,
        elicit: bool = False,
        principal: str | None = None,
        consent_answer: object | None = None,
        request_state: object | None = None,
    ) -> None:
        self.request = request
        self.kind = kind
        self.modern = modern
        self.declared = declared
        self.connection = connection
        self.seen = seen
        self.list_changed = list_changed
        self.answer = answer
        self.stream = stream
        self.cannot_ask = cannot_ask
        self.send = send
        self.elicit = elicit
        self.principal = principal
        self.consent_answer = consent_answer
        self.request_state = request_state

    def __repr__(self) -> str:
        era = "2026-07-28" if self.modern else "legacy"
        return f"<RequestFacts {self.kind} {era} declared={self.declared} seen={self.seen}>"
