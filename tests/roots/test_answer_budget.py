"""The answer budget's rules on its own: per session and per process, a waiter woken by a release, a refusal
after the wait, an answer larger than a session's budget refused at once; the escape count it reserves."""

from __future__ import annotations

import json

import anyio
import pytest

from mcp_roots.filesystem._budget import AnswerBudget, BudgetExceeded, Ledger, answer_bytes, escape_overhead

pytestmark = pytest.mark.anyio


async def test_a_session_holds_at_most_its_budget_and_others_are_not_held_up() -> None:
    budget = AnswerBudget(process_bytes=100, session_bytes=40, wait_seconds=0.05)
    await budget.acquire("a", 30)
    with pytest.raises(BudgetExceeded, match="busy"):
        await budget.acquire("a", 20)  # a's 40 would be exceeded
    await budget.acquire("b", 40)  # another session still gets room
    assert (budget.held, budget.refused) == (70, 1)


async def test_the_process_budget_bounds_all_sessions_together() -> None:
    budget = AnswerBudget(process_bytes=100, session_bytes=60, wait_seconds=0.05)
    for key in "abc":
        if key == "c":
            with pytest.raises(BudgetExceeded):
                await budget.acquire(key, 50)
        else:
            await budget.acquire(key, 50)
    assert budget.peak == 100


async def test_a_waiting_read_goes_on_when_room_is_freed() -> None:
    budget = AnswerBudget(process_bytes=100, session_bytes=100, wait_seconds=30)
    first = Ledger(budget, "a")
    await first.reserve(80)
    done = anyio.Event()

    async def second() -> None:
        await Ledger(budget, "b").reserve(50)
        done.set()

    async with anyio.create_task_group() as group:
        group.start_soon(second)
        await anyio.wait_all_tasks_blocked()
        assert not done.is_set()
        first.release()
        with anyio.fail_after(5):
            await done.wait()
    assert (budget.held, budget.refused) == (50, 0)


async def test_an_answer_larger_than_a_session_may_hold_is_refused_at_once() -> None:
    budget = AnswerBudget(process_bytes=100, session_bytes=40, wait_seconds=30)
    with anyio.fail_after(5), pytest.raises(BudgetExceeded, match="more than the 40 bytes one session"):
        await budget.acquire("a", 41)


def test_escapes_are_what_json_adds() -> None:
    text = 'a "quoted" \\ line\nwith\ttabs and \x01 \x1f controls'
    assert len(text.encode()) + escape_overhead(text) == len(json.dumps(text, ensure_ascii=False)) - 2
    assert answer_bytes(10) == 4 * 10 + 1024
