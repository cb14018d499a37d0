"""RootsGuard: the public facade over the policy, the guarded call and the audit.
It picks the adapter of a server's framework and installs it.
"""

# RootsGuard: the public facade over the policy (``roots._policy``), the guarded call (``guard._calls``) and
# the audit (``guard._audit``); it picks the adapter of a server's framework and installs it. It sits above
# the adapters and the broker, and imports either only when a server of theirs is installed (no SDK is loaded
# by importing it).

from __future__ import annotations

import logging
import os
import sys
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from ._types import SupportedContext, SupportedServer
from .adapters import adapter_for_context, adapter_for_server, refusal
from .errors import ConfigError, RootsError, RootsUnavailable
from .guard._audit import EXEMPT_ATTRIBUTE, AuditRow, audit_handlers, format_audit
from .guard._calls import current_call, current_roots, guard_function
from .guard._consent import list_grants, revoke_grant
from .guard._port import SdkPort
from .paths._rootset import RootSet
from .roots._consent import ConsentConfig
from .roots._policy import NOT_INSTALLED, GuardPolicy, shown_to_client
from .roots._sources import SOURCE_UNCONFIGURED, clip_to_ceiling, fallback_roots, how_to_configure

if TYPE_CHECKING:
    import subprocess

    from .adapters import CallToolResult, Mcp2Context
    from .broker import BrokeredFiles

__all__ = ["RootsGuard", "audit_server", "format_audit"]

logger = logging.getLogger("mcp_roots")

F = TypeVar("F", bound=Callable[..., Any])


def audit_server(server: SupportedServer) -> list[AuditRow]:
    """The audit of any supported server, whichever guards are installed on it (``mcp-roots audit``)."""
    adapter: SdkPort = adapter_for_server(server)(None)
    return audit_handlers(adapter.handlers(server), adapter.installed(server))


class RootsGuard:
    """Keeps an MCP server's file tools inside the roots the client granted (or the operator configured).

    The fallback roots apply only to clients that cannot send roots (see :func:`mcp_roots.fallback_roots`);
    with nothing configured, those clients are refused. Client roots narrow access, never widen it.

    Args:
        roots: Fallback roots: a path, or a sequence of paths or ``file:`` URIs (the CLI's ``--roots``); a
            ``RootSet`` is taken as it is.
        project_root: The project's folder: its ``mcp-roots.json``, or the folder itself, as fallback.
        ceiling: Bounds every client root and the fallback roots: a RootSet, a path or paths.
        environ: Where ``MCP_ROOTS`` and ``MCP_ROOTS_CONFIG`` are read (default ``os.environ``).
        user_config_dir: Where the user's ``mcp-roots.json`` lives (default: the platform's config folder).
        debounce: Seconds to wait after a ``roots/list_changed`` before asking again.
        max_wait: The longest a burst of changes may delay that question, in seconds.
        timeout: Seconds a tool call waits for the client's roots.
        first_answer_timeout: Seconds to wait for the first answer (default ``timeout``).
        strict: Refuse every call of a tool whose path-like parameters are neither guarded nor exempt.
        expand_user: Expand ``~`` and ``file://`` path arguments instead of refusing them.
        confine: Confine this process with Landlock to the ceiling (or to the fallback roots).
        allow_home: Accept the home folder itself as a fallback root.
        fallback_until_roots: A client's empty roots list keeps the fallback roots until it has sent a
            non-empty one; after that an empty list revokes every root (the official filesystem server's
            rule).
        consent: Folders by the user's consent (needs a ``ceiling``): a client that declared no roots but can
            be asked (elicitation) is asked, when a guarded path inside the ceiling lies in no granted
            folder, which folder (the path's or an ancestor, up to the ceiling entry) and which access this
            session may use; the fallback roots are granted up front.
        consent_timeout: Seconds a question waits for the user's answer before the call is refused.
        consent_per_minute: Questions a minute per connection (or principal), whatever the model does.
        consent_lifetime: Seconds a grant lasts on 2026-07-28 (kept per principal or per process); legacy
            grants end with the connection.
    """

    def __init__(
        self,
        roots: RootSet | str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None = None,
        *,
        project_root: str | os.PathLike[str] | None = None,
        ceiling: RootSet | str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None = None,
        environ: Mapping[str, str] | None = None,
        user_config_dir: str | os.PathLike[str] | None = None,
        debounce: float = 0.02,
        max_wait: float = 0.1,
        timeout: float = 5.0,
        first_answer_timeout: float | None = None,
        strict: bool = False,
        expand_user: bool = False,
        confine: bool = False,
        allow_home: bool = False,
        fallback_until_roots: bool = False,
        consent: bool = False,
        consent_timeout: float = 120.0,
        consent_per_minute: int = 3,
        consent_lifetime: float = 8 * 3600.0,
    ) -> None:
        if isinstance(ceiling, (str, os.PathLike)):
            ceiling = [ceiling]  # one path, not a sequence of one-character paths
        if ceiling is not None and not isinstance(ceiling, RootSet):
            ceiling = RootSet.from_paths(list(ceiling), source="ceiling")
        # A RootSet is the fallback already worked out (serve's: it is its ceiling too); else the sources.
        fallback = (
            roots
            if isinstance(roots, RootSet)
            else fallback_roots(
                roots,
                project_root=project_root,
                environ=environ,
                user_config_dir=user_config_dir,
                allow_home=allow_home,
            )
        )
        advice = how_to_configure(environ, user_config_dir, flags=False)
        if fallback.source == SOURCE_UNCONFIGURED:
            # The official filesystem server refuses to start here; a guard still serves clients that send
            # roots, and refuses the others per call. Said once, at startup.
            logger.warning("%s; until then, clients that send none are refused", advice)
        if ceiling is not None and ceiling is not fallback:
            fallback = clip_to_ceiling(fallback, ceiling)
        if confine:
            ceiling = self._confine_process(ceiling, fallback)
        options = None
        if consent:
            if ceiling is None:
                raise ConfigError(
                    "RootsGuard(consent=True) needs a ceiling: the folders the user may be asked for"
                )
            try:
                options = ConsentConfig(
                    timeout=consent_timeout,
                    per_minute=consent_per_minute,
                    lifetime=consent_lifetime,
                    allow_home=allow_home,
                )
            except ValueError as exc:
                raise ConfigError(f"RootsGuard: {exc}") from None
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
            consent=options,
        )
        # One adapter per framework this guard was installed on (a guard may serve several servers).
        self._adapters: dict[type, SdkPort] = {}

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

    async def run(
        self, ctx: SupportedContext, argv: str | Sequence[str], **options: Any
    ) -> subprocess.CompletedProcess[bytes]:
        """Run a command confined by the kernel to the roots in force for this tool call.

        It is ``await roots.run_async(argv, **options)`` (see :meth:`RootSet.run_async`).

        Args:
            ctx: The tool's request context.
            argv: The command: a shell line, or a program and its arguments.
            **options: ``RootSet.run_async``'s options (``write=``, ``network=``, ``cwd=``...).
        """
        roots = await self.roots(ctx)
        return await roots.run_async(argv, **options)

    # -- installation --

    def install(self, server: SupportedServer) -> None:
        """Wire the guard into a server; idempotent.

        On an ``mcp`` 2.x server this also enables the client-brokered ``files/*`` methods (:meth:`files`).

        Args:
            server: An ``mcp`` 2.x ``MCPServer`` or low-level ``Server``, a ``fastmcp`` 4.x ``FastMCP``, or an
                ``mcp`` 1.x ``FastMCP`` or low-level ``Server``. Anything else is a ``TypeError``.
        """
        adapter = self._adapter(adapter_for_server(server))
        adapter.install(server)
        if adapter.brokering:
            from .broker import enable_brokering  # the broker's registration (it loads the mcp SDK)

            enable_brokering(typing.cast(Any, server))  # brokering: an mcp 2.x server, by its adapter

    def _adapter(self, adapter_type: type) -> SdkPort:
        adapter = self._adapters.get(adapter_type)
        if adapter is None:
            adapter = self._adapters[adapter_type] = adapter_type(self._policy)
        return adapter

    # -- roots for handlers --

    async def roots(self, ctx: SupportedContext) -> RootSet:
        """The roots in force for this request.

        They are the client's (fresh, clipped to the ceiling) or the fallback roots.

        Args:
            ctx: The framework's request context: a tool's ``Context``, the low-level
                ``ServerRequestContext``...
        """
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

        Before the body runs, each named argument is resolved against the roots in force, as the body
        would receive it (an omitted one as its default). A refused one returns a tool result with
        ``isError: true``, and the body never runs. The body receives canonical paths (``str``, or ``Path``
        where annotated so). The tool's input schema is unchanged. ``await guard.roots(ctx)`` inside the
        body returns the same RootSet.

        Args:
            *names: The parameters to check: a name (a path, or a list of paths), or a locator of a part
                of one (``job.path``, ``items[].file_path``).
        """

        def decorate(fn: F) -> F:
            # The decorating frame's names, so that string annotations (``from __future__ import
            # annotations``) of a tool defined inside a function resolve.
            caller_locals = dict(sys._getframe(1).f_locals)
            return typing.cast(F, guard_function(self._policy, fn, names, caller_locals))

        return decorate

    # -- folders by consent: seen and withdrawn --

    def consent_tools(self, server: SupportedServer) -> None:
        """Register two tools on ``server`` (opt-in, with ``consent=True``): ``list_granted_folders``
        (the folders in force for the caller's session, with their access and who granted them) and
        ``revoke_granted_folder`` (withdraw a folder the user granted; the next call asks again).

        Args:
            server: An ``mcp`` 2.x ``MCPServer`` or a ``fastmcp`` 4.x ``FastMCP`` (anything with a ``tool``
                decorator taking ``name`` and ``description``), this guard installed on it.
        """
        if self._policy.consent is None:
            raise ConfigError("consent_tools(server): this guard does not ask for folders (consent=False)")
        # async: they read the ledger's clock, the event loop's (a sync tool runs in a worker thread)

        def call() -> tuple[GuardPolicy, Any]:
            found = current_call()
            if found is None or found[0] is not self._policy:
                raise shown_to_client(RootsUnavailable(NOT_INSTALLED))
            return found

        async def list_granted_folders() -> str:
            return list_grants(*call())

        async def revoke_granted_folder(folder: str) -> str:
            return revoke_grant(*call(), folder)

        reason = "the folder named is withdrawn from the session's grants, never opened"
        setattr(revoke_granted_folder, EXEMPT_ATTRIBUTE, reason)
        tool = typing.cast(Any, server).tool
        listing = "The folders this session may use, each with its access and who granted it."
        revoking = "Withdraw a folder the user granted in this session (its path); its next use asks again."
        tool(name="list_granted_folders", description=listing)(list_granted_folders)
        tool(name="revoke_granted_folder", description=revoking)(revoke_granted_folder)

    # -- the audit --

    @staticmethod
    def exempt(reason: str) -> Callable[[F], F]:
        """Mark a tool whose path-like parameters are not paths here, or are checked by the tool itself.

        The audit and ``strict=True`` then accept it.

        Args:
            reason: Why, in words: the audit shows it.
        """
        if not isinstance(reason, str) or not reason.strip():
            raise TypeError("@guard.exempt(reason): give the reason as a non-empty string")

        def decorate(fn: F) -> F:
            setattr(fn, EXEMPT_ATTRIBUTE, reason)
            return fn

        return decorate

    def audit(self, server: SupportedServer) -> list[AuditRow]:
        """Every tool and resource template of a server, with the parameters that look like paths.

        Each row says whether it is guarded; :func:`format_audit` prints the table ``mcp-roots audit`` shows.

        Args:
            server: Any supported server (see :meth:`install`).
        """
        adapter = self._adapter(adapter_for_server(server))
        return audit_handlers(adapter.handlers(server), adapter.installed(server))

    # -- client-brokered file access --

    async def files(
        self,
        ctx: Mcp2Context,
        *,
        timeout: float | None = None,
        chunk_size: int | None = None,
        max_read: int | None = None,
        max_entries: int | None = None,
    ) -> BrokeredFiles:
        """The client's files, operated by the client for this tool call (``files/*``).

        See ``docs/brokering.md``.

        ``fs = await guard.files(ctx)``, then ``await fs.read_text("notes/a.md")``. Raises
        :class:`BrokeringUnavailable` when the client does not offer it, or on a 2026-07-28 connection.

        Args:
            ctx: The tool's ``Context`` (``mcp`` 2.x).
            timeout: Seconds to wait for each answer (default: :func:`mcp_roots.broker.files`').
            chunk_size: Bytes per read or write request.
            max_read: The most bytes one ``read()`` holds.
            max_entries: The most entries one ``list()`` holds.
        """
        from .broker import files  # loads the mcp SDK

        given: dict[str, Any] = {"timeout": timeout, "chunk_size": chunk_size}
        given.update(max_read=max_read, max_entries=max_entries)
        return await files(ctx, **{name: value for name, value in given.items() if value is not None})

    # -- errors as tool results, for hand-written handlers --

    @staticmethod
    def refusal(exc: RootsError | str) -> CallToolResult:
        """A tool result with ``isError: true`` carrying a message, for hand-written handlers.

        It is a ``CallToolResult`` of the ``mcp`` SDK that is installed, 2.x or 1.x.

        Args:
            exc: The refusal, or its message.
        """
        return refusal(str(exc))
