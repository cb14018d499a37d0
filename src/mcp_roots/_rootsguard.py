"""RootsGuard: the public facade over the policy (``roots._policy``), the guarded call (``guard._calls``) and
the audit (``guard._audit``); it picks the adapter of a server's framework and installs it. It sits above
the adapters and the broker, and imports either only when a server of theirs is installed (no SDK is loaded
by importing it).
"""

from __future__ import annotations

import logging
import os
import sys
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from .adapters import adapter_for_context, adapter_for_server, refusal
from .errors import ConfigError, RootsError
from .guard._audit import EXEMPT_ATTRIBUTE, AuditRow, Handler, audit_handlers, format_audit
from .guard._calls import current_roots, guard_function
from .paths._rootset import RootSet
from .roots._policy import GuardPolicy, shown_to_client
from .roots._sources import SOURCE_UNCONFIGURED, clip_to_ceiling, fallback_roots, how_to_configure

if TYPE_CHECKING:
    import subprocess

    from .broker import BrokeredFiles

__all__ = ["Adapter", "RootsGuard", "audit_server", "format_audit"]

logger = logging.getLogger("mcp_roots")

F = TypeVar("F", bound=Callable[..., Any])


class Adapter(Protocol):
    """What one framework's adapter offers the facade (built as ``Adapter(policy)``, or ``Adapter(None)``
    to read a server only); its per-call part is a :class:`mcp_roots.guard._calls.CallPort`."""

    brokering: bool
    """Whether the broker's ``files/*`` server side can be enabled on this framework's servers."""

    def install(self, server: Any) -> None:
        """Wire the guard into ``server`` (idempotent); raise ``SDKChanged`` if a private corner moved."""

    async def roots(self, ctx: Any) -> RootSet:
        """The roots in force for the request ``ctx`` (the framework's context object), outside a
        guarded call."""
        ...

    def handlers(self, server: Any) -> list[Handler]:
        """Every tool, resource template and prompt ``server`` has registered now, for the audit (an empty
        list where handlers are not registered functions, as on a low-level server)."""
        ...

    def installed(self, server: Any) -> list[GuardPolicy]:
        """The policies of the guards installed on ``server``."""
        ...


def audit_server(server: Any) -> list[AuditRow]:
    """The audit of any supported server, whichever guards are installed on it (``mcp-roots audit``)."""
    adapter: Adapter = adapter_for_server(server)(None)
    return audit_handlers(adapter.handlers(server), adapter.installed(server))


class RootsGuard:
    """Keeps an MCP server's file tools inside the roots the client granted (or the operator configured).

    ``roots`` / ``project_root`` / ``environ`` / ``user_config_dir`` / ``allow_home`` select the fallback
    roots (see :func:`mcp_roots.fallback_roots`), which apply only to clients that cannot send roots;
    nothing configured means those clients are refused. ``ceiling`` bounds every client root (client roots
    narrow access, never widen it); ``debounce``, ``max_wait``, ``timeout`` and ``first_answer_timeout``
    tune the roots refresh.
    ``strict=True`` makes a tool with path-like parameters that are neither guarded nor exempted refuse
    every call; ``expand_user=True`` expands ``~`` and ``file://`` path arguments instead of refusing them;
    ``confine=True`` confines the server process itself with Landlock to the ceiling (or the fallback roots).
    ``fallback_until_roots=True``: a client's empty roots list keeps the fallback roots until it has sent a
    non-empty one; after that an empty list revokes every root (the official filesystem server's rule).
    """

    def __init__(
        self,
        roots: Sequence[str | Any] | str | None = None,
        *,
        project_root: str | Any | None = None,
        ceiling: RootSet | str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None = None,
        environ: Mapping[str, str] | None = None,
        user_config_dir: str | Any | None = None,
        debounce: float = 0.02,
        max_wait: float = 0.1,
        timeout: float = 5.0,
        first_answer_timeout: float | None = None,
        strict: bool = False,
        expand_user: bool = False,
        confine: bool = False,
        allow_home: bool = False,
        fallback_until_roots: bool = False,
    ) -> None:
        if isinstance(ceiling, (str, os.PathLike)):
            ceiling = [ceiling]  # one path, not a sequence of one-character paths
        if ceiling is not None and not isinstance(ceiling, RootSet):
            ceiling = RootSet.from_paths(list(ceiling), source="ceiling")
        fallback = fallback_roots(
            roots,
            project_root=project_root,
            environ=environ,
            user_config_dir=user_config_dir,
            allow_home=allow_home,
        )
        advice = how_to_configure(environ, user_config_dir, flags=False)
        if fallback.source == SOURCE_UNCONFIGURED:
            # The official filesystem server refuses to start here; a guard still serves clients that send
            # roots, and refuses the others per call. Said once, at startup.
            logger.warning("%s; until then, clients that send none are refused", advice)
        if ceiling is not None:
            fallback = clip_to_ceiling(fallback, ceiling)
        if confine:
            ceiling = self._confine_process(ceiling, fallback)
        self._policy = GuardPolicy(
            fallback=fallback,
            ceiling=ceiling,
            debounce=debounce,
            max_wait=max_wait,
            timeout=timeout,
            first_answer_timeout=timeout if first_answer_timeout is None else first_answer_timeout,
            strict=strict,
            expand_user=expand_user,
            how_to_configure=advice,
            fallback_until_roots=fallback_until_roots,
        )
        # One adapter per framework this guard was installed on (a guard may serve several servers).
        self._adapters: dict[type, Adapter] = {}

    # -- configuration --

    @property
    def fallback(self) -> RootSet:
        """The roots used where the client sends none (already clipped to the ceiling)."""
        return self._policy.fallback

    @property
    def ceiling(self) -> RootSet | None:
        """The operator's ceiling, or None."""
        return self._policy.ceiling

    # -- confinement by the kernel (Landlock; the bodies live in the sandbox package) --

    @staticmethod
    def _confine_process(ceiling: RootSet | None, fallback: RootSet) -> RootSet:
        # confine=True: the process is confined to the ceiling, or to the fallback roots, which then become
        # the ceiling (client roots can only narrow within it, so the guard never allows what the kernel
        # refuses). Landlock confines only the calling thread and what it starts later, so confine_process
        # refuses (SandboxUnavailable) when other threads already exist.
        from . import sandbox

        if ceiling is None:
            if not fallback:
                raise ConfigError(
                    "RootsGuard(confine=True) needs a ceiling or fallback roots to confine the process to"
                )
            ceiling = fallback
        sandbox.confine_process(ceiling.paths)
        return ceiling

    async def run(self, ctx: object, argv: Any, **options: Any) -> subprocess.CompletedProcess[bytes]:
        """``await roots.run_async(argv, **options)`` with the roots in force for this tool call: the
        command is confined by the kernel to them (see ``RootSet.run_async``)."""
        roots = await self.roots(ctx)
        return await roots.run_async(argv, **options)

    # -- installation --

    def install(self, server: Any) -> None:
        """Wire the guard into a server: ``mcp`` 2.x ``MCPServer`` or low-level ``Server``, ``fastmcp`` 4.x
        ``FastMCP``, ``mcp`` 1.x ``FastMCP`` or low-level ``Server``. Anything else is a ``TypeError``.
        On an ``mcp`` 2.x server this also enables the client-brokered ``files/*`` methods
        (:meth:`files`)."""
        adapter = self._adapter(adapter_for_server(server))
        adapter.install(server)
        if adapter.brokering:
            from .broker import enable_brokering  # the broker's registration (it loads the mcp SDK)

            enable_brokering(server)

    def _adapter(self, adapter_type: type) -> Adapter:
        adapter = self._adapters.get(adapter_type)
        if adapter is None:
            adapter = self._adapters[adapter_type] = adapter_type(self._policy)
        return adapter

    # -- roots for handlers --

    async def roots(self, ctx: object) -> RootSet:
        """The roots in force for this request: the client's (fresh, clipped to the ceiling) or the
        fallback roots. Accepts the framework's request context (MCPServer's ``Context``, the low-level
        ``ServerRequestContext``...)."""
        roots = current_roots()
        if roots is not None:
            return roots
        try:
            return await self._adapter(adapter_for_context(ctx)).roots(ctx)
        except RootsError as exc:  # a tool without @guard.paths: its framework shows the client one line
            raise shown_to_client(exc) from None

    # -- the decorator --

    def paths(self, *names: str) -> Callable[[F], F]:
        """Guard the named path arguments of a tool (or resource template).

        Before the body runs, each named argument (a path, or a list of paths), as the body would receive
        it (an omitted one as its default), is resolved against the roots in force; a refused one returns
        a tool result with ``isError: true`` and the body never runs. The body receives canonical paths
        (``str``, or ``Path`` where annotated so). The tool's input schema is unchanged. ``await
        guard.roots(ctx)`` inside the body returns the same RootSet.
        """

        def decorate(fn: F) -> F:
            # The decorating frame's names, so that string annotations (``from __future__ import
            # annotations``) of a tool defined inside a function resolve.
            caller_locals = dict(sys._getframe(1).f_locals)
            return typing.cast(F, guard_function(self._policy, fn, names, caller_locals))

        return decorate

    # -- the audit --

    @staticmethod
    def exempt(reason: str) -> Callable[[F], F]:
        """Mark a tool whose path-like parameters are not paths on this machine (or are checked by the
        tool itself) so that the audit and ``strict=True`` accept it; ``reason`` is shown in the audit."""
        if not isinstance(reason, str) or not reason.strip():
            raise TypeError("@guard.exempt(reason): give the reason as a non-empty string")

        def decorate(fn: F) -> F:
            setattr(fn, EXEMPT_ATTRIBUTE, reason)
            return fn

        return decorate

    def audit(self, server: Any) -> list[AuditRow]:
        """Every tool and resource template of ``server`` with the parameters that look like paths, and
        whether each is guarded (see :func:`format_audit` for the table ``mcp-roots audit`` prints)."""
        adapter = self._adapter(adapter_for_server(server))
        return audit_handlers(adapter.handlers(server), adapter.installed(server))

    # -- client-brokered file access --

    async def files(self, ctx: Any, **options: Any) -> BrokeredFiles:
        """The client's files, operated by the client for this tool call (the ``files/*`` methods; see
        ``docs/brokering.md``): ``fs = await guard.files(ctx)``, then ``await fs.read_text("notes/a.md")``.

        Raises :class:`BrokeringUnavailable` when the client does not offer it or on a 2026-07-28
        connection. ``options`` go to :func:`mcp_roots.broker.files` (``timeout``, ``chunk_size``).
        """
        from .broker import files  # loads the mcp SDK

        return await files(ctx, **options)

    # -- errors as tool results, for hand-written handlers --

    @staticmethod
    def refusal(exc: RootsError | str) -> Any:
        """A tool result with ``isError: true`` carrying ``exc``'s message, for hand-written handlers
        (a ``CallToolResult`` of the ``mcp`` SDK that is installed, 2.x or 1.x)."""
        return refusal(str(exc))
