"""A manual clock for RootsCache's timing tests: time moves only when the test says, on asyncio and trio.

The cache reads the time and waits through its ``clock`` (mcp_roots.roots._cache.Clock); this one never moves
on its own, so a test of "after 3 x timeout" takes no wall-clock time and no margin a loaded machine breaks.
"""

from __future__ import annotations

import asyncio

import anyio
import anyio.lowlevel


class ManualClock:
    """Time that only :meth:`advance` moves; sleepers wake in deadline order as it passes them."""

    def __init__(self, start: float = 1000.0) -> None:
        self._now = start
        self._sleepers: list[tuple[float, anyio.Event]] = []

    def now(self) -> float:
        return self._now

    async def sleep_until(self, deadline: float) -> None:
        if deadline <= self._now:
            await anyio.lowlevel.checkpoint()
            return
        entry = (deadline, anyio.Event())
        self._sleepers.append(entry)
        try:
            await entry[1].wait()
        finally:
            if entry in self._sleepers:
                self._sleepers.remove(entry)

    async def wait_until(self, event: anyio.Event, deadline: float) -> None:
        if event.is_set():
            await anyio.lowlevel.checkpoint()
            return
        async with anyio.create_task_group() as group:

            async def alarm() -> None:
                await self.sleep_until(deadline)
                group.cancel_scope.cancel()

            group.start_soon(alarm)
            await event.wait()
            group.cancel_scope.cancel()

    async def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds``, stopping at each sleeper's deadline on the way and letting
        every task that can run, run (until all are blocked) before moving on."""
        target = self._now + seconds
        while True:
            await _settle()
            due = [deadline for deadline, _ in self._sleepers if deadline <= target]
            self._now = max(self._now, min(due) if due else target)
            for deadline, event in list(self._sleepers):
                if deadline <= self._now:
                    event.set()
            await _settle()
            if self._now >= target and not any(d <= self._now for d, _ in self._sleepers):
                return


async def _settle() -> None:
    # Until every other task is blocked. On asyncio, anyio's wait_all_tasks_blocked() sleeps 0.1 s of
    # real time whenever it finds a task that can run (one just woken by a worker thread, or by an SDK
    # stream); a few checkpoints first let such tasks run, so it usually finds none and returns at once.
    # (trio's own wait_all_tasks_blocked() knows at once, without sleeping.)
    if _on_asyncio():
        for _ in range(5):
            await anyio.lowlevel.checkpoint()
    await anyio.wait_all_tasks_blocked()


def _on_asyncio() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
