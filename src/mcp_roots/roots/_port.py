"""The core port: what every consumer of the roots layer implements whole, an SDK adapter or wrap's raw
JSON-RPC port. Facts in, two round trips, one refusal; the legacy lifecycle and ``roots(ctx)`` are written
once on top. A subclass that leaves an operation out fails when it is defined.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from typing import Any, TypeAlias

from ..errors import RootsUnavailable
from ..paths._rootset import RootSet
from ._facts import HANDLER, NeedRoots, RequestFacts
from ._policy import GuardPolicy

__all__ = ["PolicyArgument", "RootsPort", "missing_operations"]

PolicyArgument: TypeAlias = "GuardPolicy | None"
"""What a port is built with: its guard's policy, or None for a port that only reads a server
(``mcp-roots audit``), never installs or serves."""


def missing_operations(cls: type) -> list[str]:
    """The abstract operations ``cls`` leaves out (its own or inherited), by name."""
    return sorted(
        name for name in dir(cls) if getattr(getattr(cls, name, None), "__isabstractmethod__", False)
    )


class RootsPort:
    """One consumer of the roots layer (see the module docstring). A subclass implements every operation
    marked abstract below, or says ``abstract=True`` in its class line (a base for other ports): an
    operation left out is a ``TypeError`` when the class is defined, not when it is first used."""

    need_roots: type[NeedRoots] = NeedRoots
    """The signal that the request must ask the client for an input (its roots); a port may name a
    subclass its framework lets through a tool runner."""

    def __init_subclass__(cls, *, abstract: bool = False, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        missing = [] if abstract else missing_operations(cls)
        if missing:
            raise TypeError(f"{cls.__qualname__} does not implement {', '.join(missing)} (RootsPort)")

    def __init__(self, policy: PolicyArgument) -> None:
        self.policy: GuardPolicy = policy  # type: ignore[assignment]

    # -- facts in --

    @abstractmethod
    def facts(self, ctx: Any, kind: str) -> RequestFacts:
        """The facts of the request ``ctx`` (the consumer's own object for it) of ``kind``
        (``roots._facts``: TOOL, PROMPT, READ, HANDLER); ``facts.request`` is what the consumer hands on."""

    # -- the round trips --

    @abstractmethod
    async def send_roots_list(self, connection: Any, waiting: Sequence[Any]) -> object:
        """Ask the client for its roots on the legacy ``connection``: send ``roots/list`` and return the raw
        answer (``roots._facts.SendRootsList``)."""

    @abstractmethod
    def ask(self, facts: RequestFacts) -> Any:
        """Ask the client for an input: the answer to the request that carries an input request (2026-07-28;
        today the client's roots), which the client answers in its retry of the request."""

    # -- asking the user (consent); a port that cannot never reports ``facts.elicit`` --

    async def elicit(self, facts: RequestFacts, params: dict[str, object]) -> object:
        """Send ``elicitation/create`` with ``params`` on the legacy connection of ``facts`` and return the
        client's raw answer (an ``ElicitResult`` as JSON); raise anything for a failed question."""
        raise RootsUnavailable("this server's port cannot ask the user a question")

    def ask_consent(self, facts: RequestFacts, params: dict[str, object], state: str) -> Any:
        """The answer to a 2026-07-28 request that carries the guard's consent question: an
        ``InputRequiredResult`` with one ``elicitation/create`` input request under ``CONSENT_INPUT_KEY``
        and ``state`` as its ``requestState``."""
        raise RootsUnavailable("this server's port cannot ask the user a question")

    # -- refusing --

    @abstractmethod
    def refuse(self, facts: RequestFacts, message: str, in_body: bool = False) -> Any:
        """The consumer's refusal of the request carrying ``message`` (an ``isError`` tool result, or the
        error a prompt or a resource read raises); ``in_body``: said from inside the framework's runner
        (the wrapper of a guarded function), where a returned result may not pass (then it raises)."""

    # -- written once: the roots of a request outside a guarded call --

    async def roots(self, ctx: Any) -> RootSet:
        """The roots in force for the request ``ctx``, outside a guarded call (``guard.roots(ctx)``); on a
        request whose roots must be asked of the client, this port's :attr:`need_roots` signal."""
        try:
            return await self.policy.roots_for(self.facts(ctx, HANDLER))
        except NeedRoots:
            raise self.need_roots() from None

    # -- written once: the lifecycle of a legacy connection (``connection``: its key) --

    def initialize_seen(self, connection: object, *, declared: bool, list_changed: bool) -> bool:
        """``initialize`` on ``connection``, with the roots capability the client declared; True when this
        opened the connection's roots (False: a repeat, ignored). Records only; never awaits the client
        (initialize runs inline: that would deadlock)."""
        connections = self.policy.connections
        if connections.get(connection) is not None:
            return False
        connections.open(connection, self.send_roots_list, declared=declared, list_changed=list_changed)
        return True

    def initialized_seen_before(self, connection: object) -> bool:
        """Whether ``notifications/initialized`` was handled on ``connection`` already (a repeat is
        ignored)."""
        state = self.policy.connections.get(connection)
        return state is not None and state.served

    async def initialized(self, connection: object, *, cannot_ask: str | None, send_now: bool) -> None:
        """``notifications/initialized`` on ``connection``: its roots are kept fresh for as long as it lives
        (run in a task the consumer cancels when the connection ends; see ``LegacyConnections.serve``)."""
        await self.policy.connections.serve(connection, cannot_ask=cannot_ask, send_now=send_now)

    def roots_changed(self, connection: object) -> None:
        """``notifications/roots/list_changed`` on ``connection``."""
        self.policy.connections.changed(connection)

    async def connection_closed(self, connection: object) -> None:
        """``connection`` ended: its roots (and the folders its user granted) are forgotten."""
        if self.policy.consent is not None:
            self.policy.consent.forget(connection)
        await self.policy.connections.close(connection)
