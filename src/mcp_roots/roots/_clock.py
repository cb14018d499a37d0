"""Where a RootsCache (and the client-side provider) reads the time and waits for it: the event loop's clock,
or a test's manual one (``tests/kit.py``), so that timing logic is tested on a mock clock.
"""

from __future__ import annotations

from typing import Protocol

import anyio

__all__ = ["Clock", "LoopClock"]


class Clock(Protocol):
    """Where the cache reads the time and waits for it: the event loop's clock, or a test's manual one."""

    def now(self) -> float: ...

    async def sleep_until(self, deadline: float) -> None: ...

    async def wait_until(self, event: anyio.Event, deadline: float) -> None:
        """Return when ``event`` is set or ``deadline`` has passed, whichever comes first."""
        ...


class LoopClock:
    """The event loop's clock (``anyio.current_time``); under trio's MockClock that is the mock."""

    def now(self) -> float:
        return anyio.current_time()

    async def sleep_until(self, deadline: float) -> None:
        await anyio.sleep_until(deadline)

    async def wait_until(self, event: anyio.Event, deadline: float) -> None:
        with anyio.move_on_after(deadline - anyio.current_time()):
            await event.wait()
