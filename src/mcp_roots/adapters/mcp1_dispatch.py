"""What the mcp 1.x port does at the low-level server's dispatch and run, beside the SDK's corners
(``mcp1_sdk``): the stand-in for a request the SDK has not yet given a context, answering a request without
its handler, and tasks that live as long as a connection.
"""

from __future__ import annotations

import contextvars
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

import anyio
import mcp.types as types
from anyio.abc import TaskGroup

from .mcp1_sdk import lowlevel_of

__all__ = ["DispatchRequest", "ErrorAnswer", "answer", "for_the_connection", "keep_tasks_with_runs"]

# Set on a low-level server whose run keep_tasks_with_runs wrapped (an attribute of our own).
_RUNS = "_mcp_roots_runs"
#: The task group of the connection whose run is in progress (seen by the tasks its messages start).
_CONNECTION: contextvars.ContextVar[TaskGroup | None] = contextvars.ContextVar("mcp_roots_run", default=None)


@dataclass(frozen=True)
class ErrorAnswer:
    """A request refused before its handler ran, answered at the dispatch with this error."""

    message: str


@dataclass(frozen=True)
class DispatchRequest:
    """A request seen at the dispatch, before the SDK made its ``RequestContext``."""

    session: Any
    request_id: Any


async def answer(responder: Any, outcome: str | types.CallToolResult) -> None:
    """Answer the request of the dispatch's ``responder`` (a ``RequestResponder``) without its handler: an
    error carrying ``outcome``'s text, or the tool result ``outcome``."""
    with responder:
        if isinstance(outcome, str):
            await responder.respond(types.ErrorData(code=types.INVALID_PARAMS, message=outcome))
        else:
            await responder.respond(types.ServerResult(outcome))


def keep_tasks_with_runs(server: object) -> None:
    """Wrap the low-level server's ``run`` (one connection's life) once, so that :func:`for_the_connection`
    can start a task that ends with the connection. mcp 1.26 (unlike 1.30) waits, when the client goes, for
    every message's task to finish: a task that lives as long as the connection must not be one of them,
    or a stdio server never ends on EOF."""
    low = lowlevel_of(server)
    if getattr(low, _RUNS, False):
        return
    run: Callable[..., Awaitable[Any]] = low.run

    async def run_connection(*args: Any, **kwargs: Any) -> Any:
        async with anyio.create_task_group() as group:
            token = _CONNECTION.set(group)
            try:
                return await run(*args, **kwargs)
            finally:
                _CONNECTION.reset(token)
                group.cancel_scope.cancel()

    low.run = run_connection  # type: ignore[method-assign]
    setattr(low, _RUNS, True)


async def for_the_connection(serve: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Run ``serve()`` for as long as the connection lives: in its run's own task group where ``run`` is
    wrapped (:func:`keep_tasks_with_runs`), else here, in the message's task."""
    group = _CONNECTION.get()
    if group is None:
        await serve()
    else:
        group.start_soon(serve)
