"""The swap race: a directory inside the root swapped for a link out (``renameat2(RENAME_EXCHANGE)``) as fast
as the kernel allows while the probe's calls run, through a descriptor of the race directory opened without
following a link.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator

from ._scratch import Scratch

__all__ = ["can_swap", "swapping"]


def can_swap(scratch: Scratch) -> bool:
    """Whether this kernel swaps two names atomically (swapped twice: the tree is as it was)."""
    from .._sys import linux

    race = scratch.root / scratch.n("race")
    d, x = scratch.n("d"), scratch.n("x")
    try:
        fd = os.open(race, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        for _ in range(2):
            linux.renameat2(fd, d, fd, x, linux.RENAME_EXCHANGE)
    except OSError:
        return False
    finally:
        os.close(fd)
    return True


@contextlib.contextmanager
def swapping(scratch: Scratch) -> Iterator[None]:
    """Swap root/race/d (a directory) with root/race/x (a link out) as fast as the kernel allows."""
    from .._sys import linux

    race = scratch.root / scratch.n("race")
    d, x = scratch.n("d"), scratch.n("x")
    stop = threading.Event()
    fd = os.open(race, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)

    def swap() -> None:
        while not stop.is_set():
            try:
                linux.renameat2(fd, d, fd, x, linux.RENAME_EXCHANGE)
            except OSError:
                return

    thread = threading.Thread(target=swap, name="mcp-roots-probe-swap", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(5)
        with contextlib.suppress(OSError):
            if os.path.islink(race / d):
                linux.renameat2(fd, d, fd, x, linux.RENAME_EXCHANGE)
        os.close(fd)
