"""The failure streak of one RootsCache's ``roots/list`` refreshes.
How many failed, why, when to retry, and what the log says.
"""

# The failure streak of one RootsCache's ``roots/list`` refreshes: how many answers failed since the last
# valid one, why the first answer failed (what a refused call is told), when a retry may go out, and what the
# log says of it all (the first failure a warning, the rest at debug level until a refresh succeeds; a wait
# that timed out said once per streak).

from __future__ import annotations

import logging

from ..paths._rootset import RootSet

__all__ = ["NOT_SENT_YET", "FailureStreak"]

logger = logging.getLogger("mcp_roots")

_STREAK_NOTE = "; later failures are logged at debug level until a refresh succeeds"
NOT_SENT_YET = "the client has not sent its roots yet"


class FailureStreak:
    """The failed refreshes of one cache since its last valid answer (see the comment atop this module)."""

    __slots__ = (
        "failures",
        "first_answer_timeout",
        "last_failure",
        "retry_not_before",
        "said_not_yet",
        "said_stale",
        "timeout",
    )

    def __init__(self, timeout: float, first_answer_timeout: float) -> None:
        self.timeout = timeout
        self.first_answer_timeout = first_answer_timeout
        self.failures = 0
        self.last_failure: str | None = None
        """Why the answers failed while no valid one has come yet (said to a refused call)."""
        self.retry_not_before = 0.0
        self.said_not_yet = False
        self.said_stale = False

    def retry_due(self, now: float) -> bool:
        """Whether a failed refresh may be retried now (at most once per ``timeout`` seconds)."""
        if not self.failures or now < self.retry_not_before:
            return False
        self.retry_not_before = now + self.timeout
        logger.debug("retrying roots/list after %d failed attempt(s)", self.failures)
        return True

    def failed(self, generation: int, why: str, now: float, in_force: RootSet | None) -> None:
        """The answer to ``roots/list`` #``generation`` failed (``why``); ``in_force``: the roots kept."""
        if not self.failures:
            self.retry_not_before = now + self.timeout
        self.failures += 1
        if in_force is None:
            self.last_failure = why
        level = logging.WARNING if self.failures == 1 else logging.DEBUG
        if in_force is None:
            kept = "no roots in force: guarded calls are refused until a valid answer"
        else:
            kept = f"the roots in force ({in_force.describe()})"
        logger.log(
            level,
            "roots/list #%d %s; keeping %s%s",
            generation,
            why,
            kept,
            _STREAK_NOTE if level > logging.DEBUG else "",
        )

    def succeeded(self, generation: int, roots: RootSet) -> None:
        """The answer to ``roots/list`` #``generation`` applied ``roots``: the streak is over."""
        if not roots:
            logger.info("roots/list #%d: the client granted no roots; every path is refused", generation)
        elif self.failures or self.said_not_yet:
            logger.info(
                "roots/list #%d answered after %d failed attempt(s); roots: %s",
                generation,
                self.failures,
                roots.describe(),
            )
        else:
            logger.debug("roots/list #%d applied: %s", generation, roots.describe())
        self.failures = 0
        self.last_failure = None
        self.said_stale = False

    def wait_timed_out(self, in_force: RootSet | None) -> None:
        """A call's wait for an answer ran out; ``in_force``: the client's roots it gets, or None."""
        if in_force is None:
            if not self.said_not_yet:
                self.said_not_yet = True
                logger.warning(
                    "%s (no valid answer to roots/list within %gs); guarded calls are refused until it "
                    "does, never given fallback roots",
                    NOT_SENT_YET,
                    self.first_answer_timeout,
                )
        elif not self.said_stale:
            self.said_stale = True
            logger.info(
                "a roots refresh is still unanswered; answering with the roots in force: %s",
                in_force.describe(),
            )
