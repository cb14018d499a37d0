"""Asking the user for a folder, for any port: which path needs a question, the legacy round trip on the
clock, the 2026-07-28 sealed question and its answer, and what a grant makes of the roots.
"""

# Used by the guarded call (``guard._consent``, for the SDK ports) and by an application with no SDK (wrap,
# through the roots face). The question, its strict reading and the ledger are ``_consent``'s (pure); this
# module canonicalizes paths, reads the clock and decides what each answer means. Every outcome is either
# roots to go on with or a refusal message written for the client.

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import anyio

from ..errors import PathOutsideRoots, RootsError
from ..paths._rootset import RootSet
from ._consent import (
    ACCEPT,
    CANCEL,
    DECLINE,
    READ,
    TOOLS_CALL,
    Grant,
    Question,
    access_choices,
    folder_choices,
    read_answer,
    shown,
)
from ._facts import RequestFacts
from ._policy import GuardPolicy
from ._sources import home_dirs, lexically_within

__all__ = ["CANNOT", "Asked", "ask_legacy", "consent_question", "modern_answer", "modern_question", "settle"]

logger = logging.getLogger("mcp_roots")

CANNOT = (
    "this client cannot be asked for a folder (it declared no elicitation capability, or this server "
    "cannot ask on its connection); use a client that supports elicitation, or ask the operator to grant "
    "the folder"
)


@dataclass(frozen=True)
class Asked:
    """What :func:`consent_question` found: a ``question`` to ask, or a ``refusal`` (a message), or
    neither (the call goes on: no path needs one, or the check proper will refuse it in its own words)."""

    question: Question | None = None
    refusal: str | None = None


def _read_only_grant(roots: RootSet, canonical: str, grants: Sequence[Grant]) -> bool:
    root = roots.root_above(canonical)
    return root is not None and any(g.folder == str(root.path) and g.access == READ for g in grants)


def _existing_folder(canonical: str) -> str:
    folder = canonical
    while not os.path.isdir(folder) and folder != "/":
        folder = os.path.dirname(folder)
    return folder


def consent_question(
    policy: GuardPolicy,
    facts: RequestFacts,
    paths: Sequence[str],
    roots: RootSet,
    *,
    tool: str,
    writes: bool,
    server: str | None = None,
    method: str = TOOLS_CALL,
) -> Asked:
    """The question for the first of ``paths`` (absolute, as the call wrote them) that ``roots`` refuse (or
    that a read grant holds while the tool ``writes``) inside the ceiling: its folder and ancestors up to
    the ceiling entry; a refusal when the user declined that folder already or cannot be asked. ``tool``
    and ``method`` name the request (for a ``resources/read``, ``tool`` is the resource's URI)."""
    ledger, ceiling = policy.consent, policy.ceiling
    if ledger is None or ceiling is None:
        return Asked()
    key = policy.consent_key(facts)
    grants = ledger.grants(key) if key is not None else ()
    for path in paths:
        if not os.path.isabs(path) or not lexically_within(ceiling, path):
            continue
        try:  # refused: the question; allowed: none, unless a read grant holds it and the tool writes
            resolved = roots.resolve_text(path)
            if not (writes and _read_only_grant(roots, resolved, grants)):
                continue
        except PathOutsideRoots:
            pass
        except RootsError:
            continue
        try:
            canonical = ceiling.resolve_text(path)
        except RootsError:
            return Asked()  # it leaves the ceiling once resolved: the check proper refuses it
        entry = ceiling.root_above(canonical)
        allow_home = ledger.config.allow_home
        homes = () if allow_home else tuple(str(home) for home in home_dirs(os.environ))
        top = str(entry.path) if entry is not None else "/"
        folders = folder_choices(_existing_folder(canonical), top, homes=homes, allow_home=allow_home)
        if not folders:
            return Asked()
        if not facts.elicit:
            return Asked(refusal=f"{path!r} is in no folder granted here, and {CANNOT}")
        if key is not None and ledger.declined(key, folders[0]):
            return Asked(
                refusal=f"the user declined access to {folders[0]!r} in this session (not asked again)"
            )
        name = server or ledger.config.server
        return Asked(Question(name, tool, path, folders, access_choices(writes), method))
    return Asked()


async def ask_legacy(
    policy: GuardPolicy,
    facts: RequestFacts,
    question: Question,
    send: Callable[[dict[str, object]], Awaitable[object]],
    *,
    writes: bool,
) -> tuple[RootSet | None, str | None]:
    """Ask on a legacy connection: ``send(params)`` sends ``elicitation/create`` and returns the raw
    answer. One question in flight per key, a few a minute, an answer within the timeout (on the policy's
    clock). (the roots with the grant, None) or (None, a refusal)."""
    ledger = policy.consent
    assert ledger is not None
    key = policy.consent_key(facts)
    why = ledger.may_ask(key)
    if why is not None:
        return None, f"not asking about {question.path!r}: {why}"
    answered = anyio.Event()
    answer: list[object] = []
    failed: list[BaseException] = []

    async def ask() -> None:
        try:
            answer.append(await send(question.params()))
        except Exception as exc:  # the client's error, a closed connection: said in the refusal
            failed.append(exc)
        finally:
            answered.set()

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(ask)
            await ledger.clock.wait_until(answered, ledger.clock.now() + ledger.config.timeout)
            in_time = answered.is_set()
            group.cancel_scope.cancel()
    finally:
        ledger.done(key)
    if not in_time:
        timeout = ledger.config.timeout
        return (
            None,
            f"the user did not answer the question about {question.folders[0]!r} within {timeout:g} s",
        )
    if failed:
        text = shown(" ".join(str(failed[0]).split()) or type(failed[0]).__name__)
        return None, f"the client could not ask its user ({text})"
    return settle(policy, facts, question, answer[0], writes=writes)


def _method(question: Question) -> str:
    return f"{question.method} {question.tool}"


def modern_question(
    policy: GuardPolicy, facts: RequestFacts, question: Question
) -> tuple[str | None, str | None]:
    """A 2026-07-28 question: (its sealed ``requestState``, None), or (None, a refusal: too many)."""
    ledger = policy.consent
    assert ledger is not None
    why = ledger.may_ask(policy.consent_key(facts), hold=False)
    if why is not None:
        return None, f"not asking about {question.path!r}: {why}"
    return ledger.seal(question, principal=facts.principal, method=_method(question)), None


def modern_answer(
    policy: GuardPolicy, facts: RequestFacts, question: Question, *, writes: bool
) -> tuple[RootSet | None, str | None]:
    """A 2026-07-28 retry's answer (``facts.consent_answer``) to ``question``, its ``requestState`` checked
    (made here, for this question, principal and method, fresh, never used before), then :func:`settle`."""
    ledger = policy.consent
    assert ledger is not None
    why = ledger.open(facts.request_state, question, principal=facts.principal, method=_method(question))
    if why is not None:
        return None, f"the answer for {question.path!r} is refused: {why}"
    return settle(policy, facts, question, facts.consent_answer, writes=writes)


def settle(
    policy: GuardPolicy, facts: RequestFacts, question: Question, raw: object, *, writes: bool
) -> tuple[RootSet | None, str | None]:
    """What the user's raw answer makes of the call: accept records the grant (legacy: for the connection;
    2026-07-28: for its lifetime, or this request only without a principal) and gives the roots with it;
    decline (the folder not asked again), cancel, or an answer off the choices: a refusal."""
    ledger = policy.consent
    assert ledger is not None
    key = policy.consent_key(facts)
    answer = read_answer(raw, question)
    tool, narrowest = question.tool, question.folders[0]
    if answer.action == ACCEPT and answer.folder is not None and answer.access is not None:
        if key is not None:
            ledger.grant(key, answer.folder, answer.access, lasting=facts.modern)
            granted = policy.consent_roots(facts)
        else:  # no principal to keep it for: this request only
            granted = policy.consent_roots(facts, Grant(answer.folder, answer.access))
        logger.info(
            "the user granted %s (%s) for %s %s",
            shown(answer.folder),
            answer.access,
            question.method,
            shown(tool),
        )
        if writes and answer.access == READ:
            return None, f"the user granted {answer.folder!r} for reading only, and {tool}() writes"
        return granted, None
    if answer.action == DECLINE:
        if key is not None:
            ledger.decline(key, narrowest)
        return None, f"the user declined access to {narrowest!r}"
    if answer.action == CANCEL:
        return None, f"the user dismissed the question about {narrowest!r}"
    return None, f"the answer about {narrowest!r} is refused: {answer.why}"
