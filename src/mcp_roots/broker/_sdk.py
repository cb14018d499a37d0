"""The two places where files/* meets the ``mcp`` 2.3 SDK.
Isolated here and pinned by tests.
"""

# Server side: send a custom request to the client over the legacy back-channel (public API, one cast).
# Client side: answer custom request methods and advertise ``roots.filesystemBrokering`` (private seams:
# the SDK routes only the methods it knows and drops unknown capability keys).

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping, Set
from typing import Any, cast

import mcp_types
from mcp import Client
from mcp.client.session import ClientSession
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPError, NoBackChannelError
from mcp.shared.message import ServerMessageMetadata
from pydantic import BaseModel, ConfigDict

from ..adapters.mcp2_sdk import connection_of  # the one ServerSession._connection seam
from ..errors import BrokerError, BrokeringUnavailable, SDKChanged
from ._protocol import CAPABILITY, error_from_response

__all__ = [
    "FilesRequestHandler",
    "advertise_and_route",
    "connection_of",
    "hook_client",
    "send_files_notification",
    "send_files_request",
]

logger = logging.getLogger("mcp_roots")

FilesRequestHandler = Callable[[str, Mapping[str, Any] | None], Awaitable[dict[str, Any]]]
"""``(method, params) -> result``; raise :class:`BrokerError` to answer a JSON-RPC error."""


# --- Server side: a custom request over the back-channel ------------------------------------------------


class _FilesRequest(BaseModel):
    """Just enough of an ``mcp_types.Request`` for ``ServerSession.send_request``: it dumps ``method``
    and ``params`` and reads ``.method``."""

    method: str
    params: dict[str, Any] | None = None


class _RawResult(BaseModel):
    """Accepts any result object and keeps every key (``model_extra``)."""

    model_config = ConfigDict(extra="allow")


async def send_files_request(
    ctx: Context | ServerRequestContext[Any, Any],
    method: str,
    params: Mapping[str, Any] | None,
    *,
    timeout: float | None,
) -> dict[str, Any]:
    """Send ``method`` to the client of the request ``ctx`` belongs to; return the raw result.

    Goes through the public ``ServerSession.send_request`` tied to the current request
    (``related_request_id``), so on streamable HTTP it rides that request's stream. The SDK validates
    results only for methods it knows; an unknown ``files/*`` result comes back as a dict. A JSON-RPC
    error becomes :class:`BrokerError` (the SDK's own timeout, -32001, becomes reason ``TIMEOUT``); no
    back-channel becomes :class:`BrokeringUnavailable`.
    """
    request_ctx = ctx.request_context if isinstance(ctx, Context) else ctx
    request = _FilesRequest(method=method, params=dict(params) if params is not None else None)
    try:
        result = await request_ctx.session.send_request(
            cast(mcp_types.ServerRequest, request),  # the SDK types this as its closed union only
            _RawResult,
            request_read_timeout_seconds=timeout,
            metadata=ServerMessageMetadata(related_request_id=request_ctx.request_id),
        )
    except NoBackChannelError as exc:
        raise BrokeringUnavailable(
            f"cannot send {method}: this connection has no back-channel for server-to-client requests "
            "(client-brokered file access needs the legacy protocol era over stdio or stateful HTTP)"
        ) from exc
    except MCPError as exc:
        if exc.error.code == mcp_types.REQUEST_TIMEOUT:
            raise BrokerError(
                f"{method} timed out after {timeout}s", reason="TIMEOUT", code=-31105, data={"method": method}
            ) from exc
        raise error_from_response(exc.error.code, exc.error.message, exc.error.data) from exc
    return dict(result.model_extra or {})


# --- Client side: route files/* to a handler and advertise the capability ------------------------------


def advertise_and_route(session: ClientSession, methods: Set[str], handler: FilesRequestHandler) -> None:
    """Make a not-yet-entered ``ClientSession`` answer ``methods`` with ``handler`` and declare
    ``capabilities.roots.filesystemBrokering: true`` in its ``initialize``.

    The two private seams of mcp 2.3 (checked here, so an SDK change fails loudly, not silently):

    * ``ClientSession.__aenter__`` hands ``self._on_request`` to ``Dispatcher.run``; that handler parses
      every method against the spec's tables and answers -32601 for the rest. An instance attribute of
      the same name, set before entering, runs first and passes unknown methods on.
    * ``initialize`` is built from the typed ``RootsCapability``, which drops unknown keys, and sent
      through ``self._dispatcher.send_raw_request``; a proxy around the dispatcher adds the key to the
      raw params of that one request.
    """
    if "_on_request" in vars(session):
        raise RuntimeError("this ClientSession already has a files/* handler")
    original = getattr(session, "_on_request", None)
    dispatcher = getattr(session, "_dispatcher", None)
    if not inspect.ismethod(original) or list(inspect.signature(original).parameters) != [
        "dctx",
        "method",
        "params",
    ]:
        raise SDKChanged("mcp's ClientSession._on_request(dctx, method, params) is gone or changed")
    if dispatcher is None or not callable(getattr(dispatcher, "send_raw_request", None)):
        raise SDKChanged("mcp's ClientSession._dispatcher.send_raw_request is gone")
    if getattr(session, "_task_group", None) is not None:
        raise RuntimeError("install the files/* handler before the ClientSession is entered")

    async def on_request(dctx: Any, method: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
        if method not in methods:
            answer: dict[str, Any] = await original(dctx, method, params)
            return answer
        try:
            return await handler(method, params)
        except BrokerError as exc:
            raise MCPError(code=exc.code, message=exc.message, data=exc.data) from None

    session._on_request = on_request  # type: ignore[method-assign]
    session._dispatcher = _AdvertisingDispatcher(dispatcher)


class _AdvertisingDispatcher:
    """Delegates everything to the SDK's dispatcher; adds ``roots.filesystemBrokering`` to initialize."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def send_raw_request(
        self, method: str, params: Mapping[str, Any] | None, opts: Any = None
    ) -> dict[str, Any]:
        if method == "initialize" and params is not None:
            capabilities = dict(params.get("capabilities") or {})
            roots = capabilities.get("roots")
            if not isinstance(roots, Mapping):
                raise SDKChanged(
                    "the client's initialize declares no roots capability; give the Client a "
                    "list_roots_callback (a RootsProvider) before offering files/*"
                )
            capabilities["roots"] = {**roots, CAPABILITY: True}
            params = {**params, "capabilities": capabilities}
        result: dict[str, Any] = await self._inner.send_raw_request(method, params, opts)
        return result


def hook_client(client: Client, hook: Callable[[ClientSession], None]) -> None:
    """Run ``hook`` on the ``ClientSession`` a not-yet-entered ``Client`` builds, before it is entered.

    mcp 2.3's ``Client.__aenter__`` builds its session with the private ``_build_session`` and enters it
    at once; wrapping that method on the instance is the only point in between.
    """
    if getattr(client, "_entered", False):
        raise RuntimeError("hook the Client before entering it")
    if "_build_session" in vars(client):
        raise RuntimeError("this Client is already hooked")
    original = getattr(client, "_build_session", None)
    if not inspect.ismethod(original) or list(inspect.signature(original).parameters) != ["exit_stack"]:
        raise SDKChanged("mcp's Client._build_session(exit_stack) is gone or changed")

    async def build_session(exit_stack: Any) -> ClientSession:
        session = await original(exit_stack)
        if not isinstance(session, ClientSession):
            raise SDKChanged(f"Client._build_session returned {type(session).__name__}, not ClientSession")
        hook(session)
        return session

    object.__setattr__(client, "_build_session", build_session)


class _FilesNotification(BaseModel):
    """Just enough of an ``mcp_types`` notification for ``ClientSession.send_notification``."""

    method: str
    params: dict[str, Any] | None = None


async def send_files_notification(session: ClientSession, method: str, params: Mapping[str, Any]) -> None:
    """Send a custom notification (``notifications/files/changed``) from the client to the server.

    ``ClientSession.send_notification`` (public) dumps ``method`` and ``params`` by alias and hands them to
    the dispatcher; it is typed with the spec's closed union, hence the cast.
    """
    notification = _FilesNotification(method=method, params=dict(params))
    await session.send_notification(cast(mcp_types.ClientNotification, notification))
