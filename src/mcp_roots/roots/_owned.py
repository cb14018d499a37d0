"""The task group an object owns while it is open (``async with obj``): opened in ``__aenter__``, closed in
``__aexit__`` with the exception that ends the block, and refused when opened twice. anyio only.
"""

from __future__ import annotations

from types import TracebackType

import anyio
from anyio.abc import TaskGroup

__all__ = ["OwnedTaskGroup"]


class OwnedTaskGroup:
    """One task group held across an ``__aenter__`` / ``__aexit__`` pair; ``what`` names the owner in the
    error raised when it is opened while already open."""

    __slots__ = ("_group", "_what")

    def __init__(self, what: str) -> None:
        self._what = what
        self._group: TaskGroup | None = None

    @property
    def is_open(self) -> bool:
        return self._group is not None

    async def open(self) -> TaskGroup:
        """Enter a new task group and hold it; RuntimeError if one is already held."""
        if self._group is not None:
            raise RuntimeError(f"{self._what} is already running")
        group = anyio.create_task_group()
        await group.__aenter__()
        self._group = group
        return group

    async def close(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
        *,
        cancel: bool = True,
    ) -> bool | None:
        """Leave the held task group (cancelling its tasks first unless ``cancel`` is false: then the owner
        has told them to stop) with the exception of the ``async with`` block; a no-op when none is held."""
        group, self._group = self._group, None
        if group is None:
            return None
        if cancel:
            group.cancel_scope.cancel()
        return await group.__aexit__(exc_type, exc, tb)
