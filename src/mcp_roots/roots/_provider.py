"""RootsProvider: the client-side duties of roots.
For a Python MCP host built on the ``mcp`` SDK (2.x or 1.x).
"""

# It holds the directories the user chose, exposes only those that exist, are directories and can be read,
# asks for consent before a server first sees them, and tells attached servers when the exposed set changes.

from __future__ import annotations

import inspect
import logging
import os
import stat
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeAlias
from weakref import WeakKeyDictionary

import anyio
from mcp import types as mcp_types  # mcp 2.x re-exports mcp_types here; mcp 1.x defines its types here
from mcp.client.session import ClientSession

if TYPE_CHECKING:
    from mcp import Client
    from mcp.client.context import ClientRequestContext

from ..errors import InvalidPath, InvalidRootURI
from ..paths._rootset import Root, RootSet
from ..paths._uri import path_to_uri, uri_to_path
from ._clock import Clock, LoopClock
from ._owned import OwnedTaskGroup

__all__ = ["Attachment", "ConsentRequest", "RootsProvider"]

logger = logging.getLogger("mcp_roots")

ChosenPath: TypeAlias = "str | os.PathLike[str]"


@dataclass(frozen=True)
class ConsentRequest:
    """What a consent callback is asked: may ``server`` see ``roots``?

    Args:
        server: The server's ``Implementation`` from its initialize result (name, version, title), or None
            when the session has no initialize result (a 2026-07-28 connection that sent no server info).
        roots: The roots it would see.
    """

    server: mcp_types.Implementation | None
    roots: tuple[Root, ...]

    @property
    def server_name(self) -> str:
        """A short label for prompts: ``name version`` or ``an unidentified server``."""
        if self.server is None:
            return "an unidentified server"
        version = f" {self.server.version}" if self.server.version else ""
        return f"{self.server.name}{version}"


ConsentAnswer: TypeAlias = "bool | Collection[Root | str | os.PathLike[str]]"
"""True (all), False (none), or the subset of the offered roots (as Roots or paths) the user approved."""

ConsentCallback: TypeAlias = Callable[[ConsentRequest], "ConsentAnswer | Awaitable[ConsentAnswer]"]


@dataclass
class _SessionState:
    """What one server connection has been allowed and told."""

    approved: set[Path] = field(default_factory=set)
    denied: set[Path] = field(default_factory=set)
    consent_lock: anyio.Lock | None = None
    # The roots this server saw in its last answer or was last notified about; None until either.
    last_seen: tuple[Root, ...] | None = None
    wakeup: anyio.Event | None = None


@dataclass(frozen=True)
class _Examination:
    exposed: tuple[Root, ...]
    refused: dict[str, str]


class RootsProvider:
    """The roots a Python MCP client exposes, validated, consented and watched.

    Pass it as ``list_roots_callback`` (it is the callback) and attach it to the connected client so it
    can tell the server about changes::

        provider = RootsProvider(["~/project"], consent=ask_user)
        async with Client(params, mode="legacy", list_roots_callback=provider) as client:
            async with provider.attach(client):
                ...

    A chosen directory that does not exist, is not a directory, cannot be read (``os.access`` R_OK|X_OK)
    or whose ``file:`` URI does not survive a round trip is kept in the chosen list but not exposed;
    :attr:`refused` says why. The chosen list is re-examined before every ``roots/list`` answer and every
    ``poll_interval`` seconds while attached; a change sends one ``notifications/roots/list_changed``
    after ``debounce`` seconds (trailing edge: changes inside the window coalesce, and a change that is
    undone inside it sends nothing).

    ``consent`` (sync or async) is asked, per server connection, before that server first sees a root;
    it may approve all, none, or a subset. A root it denied is never shown to that server; a root
    added later is asked about when the server next lists roots. A refusal answers an empty list, not
    an error: an empty list means "no roots" and a careful server fails closed on it, whereas an error
    makes servers fall back to their own configured roots. Without ``consent``, choosing a directory
    is taken as consent to share it.

    ``enabled=False`` answers every ``roots/list`` with -32601 (method not found), as a client without
    roots does; better still, do not pass the provider as ``list_roots_callback`` at all then, so the
    capability is not declared.

    ``clock`` is where the poller and the debounce wait (default: the event loop's clock; tests pass a
    manual one, as for :class:`RootsCache`). Call :meth:`add` / :meth:`remove` and set :attr:`enabled`
    from the event loop's thread.

    Args:
        roots: The directories the user chose: paths, or ``(path, display name)`` pairs.
        consent: Asked before a server first sees a root (sync or async); ``None``: choosing is consent.
        enabled: ``False`` answers every ``roots/list`` with -32601, as a client without roots does.
        poll_interval: Seconds between looks at the chosen directories while attached.
        debounce: Seconds a change waits before its ``list_changed`` goes out.
        send_timeout: Seconds to wait for a ``list_changed`` to be written.
        clock: Where the poller and the debounce wait (default: the event loop's clock).
    """

    def __init__(
        self,
        roots: Iterable[ChosenPath | tuple[ChosenPath, str | None]] = (),
        *,
        consent: ConsentCallback | None = None,
        enabled: bool = True,
        poll_interval: float = 1.0,
        debounce: float = 0.05,
        send_timeout: float = 5.0,
        clock: Clock | None = None,
    ) -> None:
        if poll_interval <= 0 or debounce < 0 or send_timeout <= 0:
            raise ValueError(
                f"poll_interval ({poll_interval}) and send_timeout ({send_timeout}) must be positive and "
                f"debounce ({debounce}) not negative"
            )
        self._consent = consent
        self._enabled = enabled
        self.poll_interval = poll_interval
        self.debounce = debounce
        self.send_timeout = send_timeout
        self._clock: Clock = clock if clock is not None else LoopClock()
        self._chosen: dict[str, str | None] = {}
        self._exposed: tuple[Root, ...] = ()
        self._refused: dict[str, str] = {}
        self._sessions: WeakKeyDictionary[ClientSession, _SessionState] = WeakKeyDictionary()
        for entry in roots:
            path, name = entry if isinstance(entry, tuple) else (entry, None)
            self._chosen[_absolute(path)] = name
        self.check()

    # -- the user's choices --

    @property
    def chosen(self) -> tuple[str, ...]:
        """Every directory the user chose, exposed or not, as absolute paths in the order chosen."""
        return tuple(self._chosen)

    @property
    def roots(self) -> tuple[Root, ...]:
        """The roots currently exposed (before per-server consent), as of the last examination."""
        return self._exposed

    @property
    def refused(self) -> dict[str, str]:
        """Chosen paths that are not exposed, each with the reason."""
        return dict(self._refused)

    @property
    def enabled(self) -> bool:
        """Whether roots are offered at all; False answers ``roots/list`` with -32601."""
        return self._enabled

    @enabled.setter
    def enabled(self, value: bool) -> None:
        if value != self._enabled:
            self._enabled = value
            self._signal()

    def add(self, path: ChosenPath, name: str | None = None) -> Root | None:
        """Choose a directory; either way it stays chosen and is re-examined on every check.

        Args:
            path: The directory.
            name: Its display name, if any.

        Returns:
            Its Root if it is exposed now, or None if refused (see :attr:`refused`).
        """
        key = _absolute(path)
        self._chosen[key] = name
        self.check()
        if key in self._refused:
            return None
        target = Path(os.path.realpath(key))
        return next((r for r in self._exposed if r.path == target), None)

    def remove(self, path: ChosenPath) -> bool:
        """Stop offering a chosen directory.

        Args:
            path: The directory, as chosen.

        Returns:
            False if it was not chosen.
        """
        key = _absolute(path)
        if key not in self._chosen:
            return False
        del self._chosen[key]
        self.check()
        return True

    def reset_consent(self) -> None:
        """Forget every server's consent decisions (to revoke a grant, or to ask again after a refusal)
        and tell attached servers to list roots again; the consent callback is asked on their next
        ``roots/list``."""
        for state in list(self._sessions.values()):
            state.approved.clear()
            state.denied.clear()
            state.last_seen = None
        self._signal()

    # -- examination --

    def check(self) -> bool:
        """Re-examine every chosen directory now (blocking I/O). Returns True if the exposed set changed."""
        return self._apply(_examine(dict(self._chosen)))

    async def acheck(self) -> bool:
        """:meth:`check` with the file system I/O in a worker thread."""
        chosen = dict(self._chosen)
        # abandon_on_cancel: a stat stuck on a dead network mount must not hold up detaching or a
        # cancelled request; the abandoned result is simply never applied.
        found = await anyio.to_thread.run_sync(_examine, chosen, abandon_on_cancel=True)
        if chosen != self._chosen:  # add/remove ran meanwhile; their own check is newer
            return False
        return self._apply(found)

    def _apply(self, found: _Examination) -> bool:
        for path, reason in found.refused.items():
            if self._refused.get(path) != reason:
                logger.warning("not exposing root %s: %s", path, reason)
        changed = found.exposed != self._exposed
        self._exposed = found.exposed
        self._refused = found.refused
        if changed:
            self._signal()
        return changed

    def _signal(self) -> None:
        for state in list(self._sessions.values()):
            if state.wakeup is not None:
                state.wakeup.set()

    def _state(self, session: ClientSession) -> _SessionState:
        state = self._sessions.get(session)
        if state is None:
            state = self._sessions[session] = _SessionState()
        return state

    def _visible(self, state: _SessionState) -> tuple[Root, ...]:
        if not self._enabled:
            return ()
        return tuple(r for r in self._exposed if r.path not in state.denied)

    # -- the list_roots_callback --

    async def __call__(
        self, context: ClientRequestContext
    ) -> mcp_types.ListRootsResult | mcp_types.ErrorData:
        """Answer a server's ``roots/list``."""
        if not self._enabled:
            return mcp_types.ErrorData(
                code=mcp_types.METHOD_NOT_FOUND, message="Roots are switched off on this client"
            )
        await self.acheck()
        session = context.session
        answer = await self.approved_roots(session)
        state = self._state(session)
        state.last_seen = self._visible(state)
        return mcp_types.ListRootsResult(
            roots=[mcp_types.Root.model_validate({"uri": r.uri, "name": r.name}) for r in answer],
        )

    async def approved_roots(self, session: ClientSession) -> tuple[Root, ...]:
        """The exposed roots a server may use, asking the consent callback about any not asked about yet.

        This is the decision ``roots/list`` answers with, and the one that gates client-brokered ``files/*``
        access (FileBroker), so a server that never lists roots cannot skip it. Empty while :attr:`enabled`
        is False.

        Args:
            session: The server's connection.
        """
        if not self._enabled:
            return ()
        state = self._state(session)
        if state.consent_lock is None:
            state.consent_lock = anyio.Lock()
        async with state.consent_lock:  # concurrent requests share one consent prompt
            offered = tuple(r for r in self._exposed if r.path not in state.approved | state.denied)
            if offered:
                approved = await self._ask_consent(_server_info(session), offered)
                for root in offered:
                    (state.approved if root.path in approved else state.denied).add(root.path)
        return tuple(r for r in self._exposed if r.path in state.approved)

    async def _ask_consent(
        self, server: mcp_types.Implementation | None, offered: tuple[Root, ...]
    ) -> set[Path]:
        if self._consent is None:
            return {r.path for r in offered}
        request = ConsentRequest(server, offered)
        try:
            answer = self._consent(request)
            if inspect.isawaitable(answer):
                answer = await answer
        except Exception:
            logger.exception("the roots consent callback raised; treating it as a refusal")
            return set()
        if answer is True:
            return {r.path for r in offered}
        if answer is False or answer is None:
            logger.info("consent refused: %s may not see %s", request.server_name, _describe(offered))
            return set()
        if isinstance(answer, (str, os.PathLike)) or not isinstance(answer, Collection):
            logger.error(
                "the roots consent callback returned %r (want a bool or a collection of roots); refusing",
                answer,
            )
            return set()
        wanted = {_canonical_key(a) for a in answer}
        approved = {r.path for r in offered if r.path in wanted}
        logger.info(
            "consent for %s: %d of %d roots approved", request.server_name, len(approved), len(offered)
        )
        return approved

    # -- telling servers about changes --

    def attach(self, client: Client | ClientSession) -> Attachment:
        """An async context manager that watches the roots while it is open.

        Args:
            client: A connected ``Client`` or ``ClientSession``, sent ``notifications/roots/list_changed``.
        """
        return Attachment(self, client)


class Attachment:
    """What :meth:`RootsProvider.attach` returns: one attached client, a task group with the poller and
    the debounced notifier, closed on exit."""

    def __init__(self, provider: RootsProvider, client: Client | ClientSession) -> None:
        self._provider = provider
        self._client = client
        self._tasks = OwnedTaskGroup("this attachment")
        self.notifications_sent = 0

    async def __aenter__(self) -> Attachment:
        if self._tasks.is_open:
            raise RuntimeError("this attachment is already open")
        session = _session_of(self._client)
        state = self._provider._state(session)
        if state.wakeup is not None:
            raise RuntimeError("the provider is already attached to this client session")
        state.wakeup = anyio.Event()
        if state.last_seen is None:
            state.last_seen = self._provider._visible(state)
        task_group = await self._tasks.open()
        task_group.start_soon(self._poll)
        task_group.start_soon(self._notify, session, state)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        try:
            return await self._tasks.close(exc_type, exc, tb)
        finally:
            session = _session_of(self._client)
            state = self._provider._sessions.get(session)
            if state is not None:
                state.wakeup = None

    async def _poll(self) -> None:
        provider = self._provider
        while True:
            await provider._clock.sleep_until(provider._clock.now() + provider.poll_interval)
            await provider.acheck()

    async def _notify(self, session: ClientSession, state: _SessionState) -> None:
        provider = self._provider
        while True:
            assert state.wakeup is not None
            await state.wakeup.wait()
            await provider._clock.sleep_until(provider._clock.now() + provider.debounce)
            state.wakeup = anyio.Event()
            visible = provider._visible(state)
            if visible == state.last_seen:
                continue
            state.last_seen = visible
            # send_notification, not the deprecated send_roots_list_changed(): same message, and no
            # process-wide warnings filter has to be swapped around an await.
            with anyio.move_on_after(provider.send_timeout) as scope:
                await session.send_notification(_list_changed())
            if scope.cancelled_caught:
                logger.warning("notifications/roots/list_changed not sent within %ss", provider.send_timeout)
            else:
                self.notifications_sent += 1
                logger.debug("sent notifications/roots/list_changed (%d roots visible)", len(visible))


# --- helpers -------------------------------------------------------------------------------------------


def _session_of(client: Client | ClientSession) -> ClientSession:
    """The session of a connected mcp 2.x ``Client``, or the ``ClientSession`` itself (both SDKs)."""
    return client if isinstance(client, ClientSession) else client.session


def _list_changed() -> Any:
    """``notifications/roots/list_changed`` as this SDK sends it: mcp 1.x wraps a client notification in
    its ``ClientNotification`` model, mcp 2.x takes it bare (there ``ClientNotification`` is a union)."""
    notification = mcp_types.RootsListChangedNotification()
    wrapper = vars(mcp_types).get("ClientNotification")
    return wrapper(notification) if isinstance(wrapper, type) else notification


def _absolute(path: object) -> str:
    if isinstance(path, os.PathLike):
        path = os.fspath(path)
    if not isinstance(path, str) or not path or "\x00" in path:
        raise InvalidPath(f"root {path!r} is not a usable path (want a non-empty str or os.PathLike)")
    return os.path.abspath(os.path.expanduser(path))


def _canonical_key(value: Root | str | os.PathLike[str]) -> Path:
    if isinstance(value, Root):
        return value.path
    return Path(os.path.realpath(_absolute(value)))


def _describe(roots: Iterable[Root]) -> str:
    return ", ".join(str(r.path) for r in roots) or "no roots"


def _server_info(session: ClientSession) -> mcp_types.Implementation | None:
    result = getattr(session, "initialize_result", None)
    info = getattr(result, "server_info", None)
    return info if isinstance(info, mcp_types.Implementation) else None


def _examine(chosen: Mapping[str, str | None]) -> _Examination:
    """Decide, for each chosen path, whether it can be exposed (blocking I/O; thread-safe)."""
    exposed: list[Root] = []
    seen: set[Path] = set()
    refused: dict[str, str] = {}
    for path, name in chosen.items():
        try:
            root = _exposable(path, name)
        except (InvalidPath, InvalidRootURI) as exc:
            refused[path] = str(exc)
            continue
        if root.path not in seen:
            seen.add(root.path)
            exposed.append(root)
    return _Examination(tuple(exposed), refused)


def _exposable(path: str, name: str | None) -> Root:
    """The Root for ``path`` if it may be exposed, else InvalidPath / InvalidRootURI saying why."""
    (root,) = RootSet.from_paths([(path, name)], strict=True, source="client").roots
    try:
        st = os.stat(root.path)
    except OSError as exc:  # raced away since RootSet looked
        raise InvalidPath(f"root {path!r} cannot be examined: {exc.strerror or exc}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise InvalidPath(f"root {path!r} is not a directory")
    # The URI must name exactly this directory after the server decodes it, and the SDK's FileUrl must
    # carry it unchanged; anything else would expose a different path than the one checked.
    if Path(uri_to_path(root.uri)) != root.path:
        raise InvalidRootURI(
            f"root {path!r}: its URI {root.uri!r} does not decode back to {str(root.path)!r}"
        )
    if str(mcp_types.Root.model_validate({"uri": root.uri}).uri) != root.uri:
        raise InvalidRootURI(f"root {path!r}: the SDK would rewrite its URI {root.uri!r}")
    if path_to_uri(root.path) != root.uri:  # pragma: no cover - RootSet builds uri with path_to_uri
        raise InvalidRootURI(f"root {path!r}: inconsistent URI {root.uri!r}")
    return root
