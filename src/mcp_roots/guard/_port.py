"""The SDK port: the core port (``roots._port.RootsPort``) plus what a framework's adapter adds.
How it installs, which handlers it reads and wraps, the exceptions its runner wraps.
"""

# The guarded call (``_calls``) and the facade talk to this type only.

from __future__ import annotations

import logging
from abc import abstractmethod
from typing import Any

from ..roots._facts import NeedRoots
from ..roots._policy import GuardPolicy
from ..roots._port import PolicyArgument, RootsPort, missing_operations
from ._argcheck import GuardedCall
from ._audit import Handler, audit_handlers, guarded_function_of, warn_unguarded

__all__ = ["PolicyArgument", "SdkPort", "missing_operations", "own_spec", "swap_in_wrapper"]

logger = logging.getLogger("mcp_roots")


def own_spec(fn: object, policy: GuardPolicy) -> GuardedCall | None:
    """The guarded-call record of ``fn`` when ``policy``'s guard decorated it (a function guarded by another
    RootsGuard is that guard's business: its wrapper refuses every call if that guard was never installed)."""
    spec = guarded_function_of(fn)
    return spec if isinstance(spec, GuardedCall) and spec.policy is policy else None


def swap_in_wrapper(component: object, policy: GuardPolicy) -> tuple[object, GuardedCall | None]:
    """The function a registered tool, template or prompt runs (its ``fn``) and its guarded-call record;
    where @guard.paths stood above the framework's decorator (it registered the bare function), the
    guard's wrapper is put in its place first."""
    fn = getattr(component, "fn", None)
    spec = own_spec(fn, policy)
    if spec is not None and spec.wrapper is not None and fn is not spec.wrapper:
        component.fn = fn = spec.wrapper  # type: ignore[attr-defined]
    return fn, spec


class SdkPort(RootsPort, abstract=True):
    """One guard's port into one framework's servers (see the module docstring)."""

    brokering = False
    """Whether the broker's ``files/*`` server side can be enabled on this framework's servers."""
    framework_errors: tuple[type[BaseException], ...] = ()
    """The exceptions in which the framework wraps what a tool body raised (unwrapped to one line)."""
    need_roots: type[NeedRoots] = NeedRoots

    def __init__(self, policy: PolicyArgument) -> None:
        super().__init__(policy)
        self._audited: set[int] = set()
        #: the name of the server this port was last installed on, shown in a consent question
        self.server_name: str | None = None

    # -- what the framework's adapter supplies besides the core port --

    @abstractmethod
    def install(self, server: Any) -> None:
        """Wire the guard into ``server`` (idempotent); raise ``SDKChanged`` if a private corner moved."""

    @abstractmethod
    def handlers(self, server: Any) -> list[Handler]:
        """Every tool, resource template and prompt ``server`` has registered now, for the audit (an empty
        list where handlers are not registered functions, as on a low-level server)."""

    @abstractmethod
    def ports_on(self, server: Any) -> list[SdkPort]:
        """The ports (of any guard) installed on ``server``."""

    # -- written once --

    def installed(self, server: Any) -> list[GuardPolicy]:
        """The policies of the guards installed on ``server``."""
        return [port.policy for port in self.ports_on(server)]

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
