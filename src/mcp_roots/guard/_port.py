"""What every adapter's port shares.
A framework costs a seam module and a small port.
"""

# What every adapter's port shares, so that a framework costs a seam module and a small port: the guard's
# policy behind it, the audit on a server's first message, and the lifecycle facts of a legacy connection
# (``initialize`` seen, ``notifications/initialized`` seen, ``roots/list_changed`` seen), handed to the roots
# layer's one lifecycle (``roots/_connections``). An adapter subclasses :class:`GuardPort` and supplies its
# framework's side: ``install``, ``handlers``, the facts of a request, how to send ``roots/list``, and how an
# outcome reads in its framework (``ask``, ``refuse``: the :class:`~mcp_roots.guard._calls.CallPort`).

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, TypeAlias

from ..roots._facts import NeedRoots
from ..roots._policy import GuardPolicy
from ._audit import Handler, audit_handlers, warn_unguarded
from ._calls import swap_in_wrapper

__all__ = ["GuardPort", "PolicyArgument"]

logger = logging.getLogger("mcp_roots")

PolicyArgument: TypeAlias = "GuardPolicy | None"
"""What an adapter is built with: its guard's policy, or None for an adapter that only reads a server
(``mcp-roots audit``), never installs or serves."""


class GuardPort:
    """The part of an adapter every framework shares (see the comment atop this module)."""

    brokering = False
    """Whether the broker's ``files/*`` server side can be enabled on this framework's servers."""
    framework_errors: tuple[type[BaseException], ...] = ()
    """The exceptions in which the framework wraps what a tool body raised (unwrapped to one line)."""
    need_roots: type[NeedRoots] = NeedRoots
    """The signal to ask for the roots as raised inside the framework's runner (one it lets through)."""

    def __init__(self, policy: PolicyArgument) -> None:
        self.policy: GuardPolicy = policy  # type: ignore[assignment]
        self._audited: set[int] = set()

    # -- what the adapter supplies --

    def handlers(self, server: Any) -> list[Handler]:
        """Every tool, resource template and prompt ``server`` has registered now, for the audit."""
        raise NotImplementedError

    async def send_roots_list(self, connection: Any, waiting: Sequence[Any]) -> object:
        """Send ``roots/list`` on the legacy ``connection`` (see ``roots._facts.SendRootsList``)."""
        raise NotImplementedError

    # -- startup --

    def audit_once(self, server: Any, swap: bool = False) -> None:
        """At ``server``'s first message (tools are registered by then; they are often decorated after
        install()), warn once of every unguarded path-like parameter; ``swap``: and put the guard's wrapper
        in place of every bare guarded function registered, so that a call reaching one by a way the port
        does not see refuses instead of running unchecked."""
        if id(server) in self._audited:
            return
        self._audited.add(id(server))
        handlers = self.handlers(server)
        warn_unguarded(audit_handlers(handlers, [self.policy]), strict=self.policy.strict)
        if swap:
            for handler in handlers:
                if handler.component is not None:
                    swap_in_wrapper(handler.component, self.policy)

    # -- the lifecycle facts of a legacy connection (``connection``: its key) --

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
        (run in a task the SDK cancels when the connection ends; see ``LegacyConnections.serve``)."""
        await self.policy.connections.serve(connection, cannot_ask=cannot_ask, send_now=send_now)

    def roots_changed(self, connection: object) -> None:
        """``notifications/roots/list_changed`` on ``connection``."""
        self.policy.connections.changed(connection)

    async def connection_closed(self, connection: object) -> None:
        """``connection`` ended: its roots are forgotten."""
        await self.policy.connections.close(connection)

    # -- the audit of a server --

    def ports_on(self, server: Any) -> list[GuardPort]:
        """The ports (of any guard) installed on ``server``."""
        raise NotImplementedError

    def installed(self, server: Any) -> list[GuardPolicy]:
        """The policies of the guards installed on ``server``."""
        return [port.policy for port in self.ports_on(server)]
