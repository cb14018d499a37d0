"""The consent step of the guarded call: a path refused inside the ceiling asks the user for a folder.
Through the port: ``elicitation/create`` on a legacy connection, an input request on 2026-07-28.
"""

# The step runs after the call's roots are known (GuardPolicy.roots_for: the fallback plus the key's grants)
# and before the body, for a client that declared no roots: the first absolute guarded path that the roots
# refuse (or that a read grant holds while the tool writes) and that lies inside the ceiling is asked about:
# its folder and ancestors up to the ceiling entry, the access the tool needs. The question, its answer and
# the ledger are ``roots._consent``'s; this module does the I/O (canonical paths, the round trip, the clock).

from __future__ import annotations

import logging
import os
import typing
from collections.abc import Mapping
from typing import Any

import anyio

from ..errors import PathOutsideRoots, RootsError
from ..paths._rootset import RootSet
from ..roots._consent import (
    ACCEPT,
    CANCEL,
    DECLINE,
    READ,
    ConsentLedger,
    Grant,
    Question,
    access_choices,
    folder_choices,
    read_answer,
    shown,
)
from ..roots._facts import RequestFacts
from ..roots._sources import home_dirs
from ._argcheck import GuardedCall, lexically_within
from ._port import SdkPort

__all__ = ["GO", "consent_step", "tool_writes"]

logger = logging.getLogger("mcp_roots")

GO: Any = object()
"""The step's outcome when the call goes on (with the roots it returns)."""


def tool_writes(component: object) -> bool:
    """Whether a registered tool may write: all but one annotated ``readOnlyHint: true``."""
    annotations = getattr(component, "annotations", None)
    if isinstance(annotations, Mapping):
        hint = annotations.get("readOnlyHint")
    else:
        hint = getattr(annotations, "read_only_hint", None)
    return hint is not True


class _Collector:
    """Stands for a RootSet in a target's check, to list the paths it would resolve, as written."""

    paths = ()

    def __init__(self) -> None:
        self.found: list[str] = []

    def resolve_text(self, value: object) -> object:
        if isinstance(value, str):
            self.found.append(value)
        return value


def _absolute_paths(spec: GuardedCall, values: Mapping[str, Any]) -> list[str]:
    collector = _Collector()
    for target in spec.targets:
        if target.param in values:
            try:
                target.check(
                    typing.cast(RootSet, collector), values[target.param], expand_user=spec.policy.expand_user
                )
            except (RootsError, TypeError, ValueError):
                continue  # the check proper refuses it, in its own words
    return [path for path in collector.found if os.path.isabs(path)]


def _read_only_grant(roots: RootSet, canonical: str, grants: tuple[Grant, ...]) -> bool:
    root = roots.root_above(canonical)
    return root is not None and any(g.folder == str(root.path) and g.access == READ for g in grants)


def _existing_folder(canonical: str) -> str:
    folder = canonical
    while not os.path.isdir(folder) and folder != "/":
        folder = os.path.dirname(folder)
    return folder


async def consent_step(
    port: SdkPort,
    facts: RequestFacts,
    spec: GuardedCall,
    arguments: Mapping[str, Any],
    roots: RootSet,
    *,
    name: str,
    writes: bool,
) -> tuple[RootSet, Any]:
    """The call's roots and :data:`GO`, or its roots and the port's answer (a refusal, or a 2026-07-28
    question): asks the user about the first guarded path the roots refuse inside the ceiling."""
    policy = port.policy
    ledger, ceiling = policy.consent, policy.ceiling
    if ledger is None or ceiling is None:
        return roots, GO
    key = policy.consent_key(facts)
    grants = ledger.grants(key) if key is not None else ()
    path = canonical = None
    for candidate in _absolute_paths(spec, spec.raw_values(arguments)):
        if not lexically_within(ceiling, candidate):
            continue
        try:
            resolved = roots.resolve_text(candidate)
            if writes and _read_only_grant(roots, resolved, grants):
                path = candidate
        except PathOutsideRoots:
            path = candidate
        except RootsError:
            continue
        if path is not None:
            try:
                canonical = ceiling.resolve_text(path)
            except RootsError:
                return roots, GO  # it leaves the ceiling once resolved: the check proper refuses it
            break
    if path is None or canonical is None:
        return roots, GO
    entry = ceiling.root_above(canonical)
    allow_home = ledger.config.allow_home
    homes = () if allow_home else tuple(str(home) for home in home_dirs(os.environ))
    folders = folder_choices(
        _existing_folder(canonical), str(entry.path) if entry else "/", homes=homes, allow_home=allow_home
    )
    if not folders:
        return roots, GO
    if not facts.elicit:
        return roots, _refuse(
            port, facts, name, f"{path!r} is in no folder granted to this session, and {CANNOT}"
        )
    question = Question(port.server_name or ledger.config.server, name, path, folders, access_choices(writes))
    if key is not None and ledger.declined(key, folders[0]):
        return roots, _refuse(
            port, facts, name, f"the user declined access to {folders[0]!r} in this session (not asked again)"
        )
    if facts.modern:
        return await _modern(port, facts, question, key, ledger, roots, writes)
    return await _legacy(port, facts, question, key, ledger, roots, writes)


CANNOT = (
    "this client cannot ask its user for a folder (it declared no elicitation capability); use a client "
    "that supports elicitation, or ask the operator to grant the folder"
)


def _refuse(port: SdkPort, facts: RequestFacts, name: str, message: str) -> Any:
    port.policy.log_refusal(name, PermissionError(message), message)
    return port.refuse(facts, message)


async def _legacy(
    port: SdkPort,
    facts: RequestFacts,
    question: Question,
    key: object,
    ledger: ConsentLedger,
    roots: RootSet,
    writes: bool,
) -> tuple[RootSet, Any]:
    why = ledger.may_ask(key)
    if why is not None:
        return roots, _refuse(port, facts, question.tool, f"not asking about {question.path!r}: {why}")
    answered = anyio.Event()
    answer: list[object] = []
    failed: list[BaseException] = []

    async def ask() -> None:
        try:
            answer.append(await port.elicit(facts, question.params()))
        except Exception as exc:  # the client's error, a closed connection: said in the refusal
            failed.append(exc)
        finally:
            answered.set()

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(ask)
            await ledger.clock.wait_until(answered, ledger.clock.now() + ledger.config.timeout)
            group.cancel_scope.cancel()
    finally:
        ledger.done(key)
    if not answered.is_set():
        return roots, _refuse(
            port,
            facts,
            question.tool,
            f"the user did not answer the question about {question.folders[0]!r} within "
            f"{ledger.config.timeout:g} s; the call is refused",
        )
    if failed:
        text = shown(" ".join(str(failed[0]).split()) or type(failed[0]).__name__)
        return roots, _refuse(port, facts, question.tool, f"the client could not ask its user ({text})")
    return _settle(port, facts, question, answer[0], key, ledger, roots, writes)


async def _modern(
    port: SdkPort,
    facts: RequestFacts,
    question: Question,
    key: object,
    ledger: ConsentLedger,
    roots: RootSet,
    writes: bool,
) -> tuple[RootSet, Any]:
    method = f"tools/call {question.tool}"
    if facts.consent_answer is not None:
        why = ledger.open(facts.request_state, question, principal=facts.principal, method=method)
        if why is not None:
            return roots, _refuse(
                port, facts, question.tool, f"the answer for {question.path!r} is refused: {why}"
            )
        return _settle(port, facts, question, facts.consent_answer, key, ledger, roots, writes)
    why = ledger.may_ask(key, hold=False)
    if why is not None:
        return roots, _refuse(port, facts, question.tool, f"not asking about {question.path!r}: {why}")
    state = ledger.seal(question, principal=facts.principal, method=method)
    return roots, port.ask_consent(facts, question.params(), state)


def _settle(
    port: SdkPort,
    facts: RequestFacts,
    question: Question,
    raw: object,
    key: object,
    ledger: ConsentLedger,
    roots: RootSet,
    writes: bool,
) -> tuple[RootSet, Any]:
    answer = read_answer(raw, question)
    tool, narrowest = question.tool, question.folders[0]
    if answer.action == ACCEPT and answer.folder is not None and answer.access is not None:
        policy = port.policy
        if key is not None:
            ledger.grant(key, answer.folder, answer.access, lasting=facts.modern)
            granted = policy.consent_roots(facts)
        else:  # no principal to keep it for: this request only
            granted = policy.consent_roots(facts, Grant(answer.folder, answer.access))
        logger.info("the user granted %s (%s) for %s()", shown(answer.folder), answer.access, shown(tool))
        if writes and answer.access == READ:
            return granted, _refuse(
                port, facts, tool, f"the user granted {answer.folder!r} for reading only, and {tool}() writes"
            )
        return granted, GO
    if answer.action == DECLINE:
        if key is not None:
            ledger.decline(key, narrowest)
        return roots, _refuse(port, facts, tool, f"the user declined access to {narrowest!r}")
    if answer.action == CANCEL:
        return roots, _refuse(port, facts, tool, f"the user dismissed the question about {narrowest!r}")
    return roots, _refuse(port, facts, tool, f"the answer about {narrowest!r} is refused: {answer.why}")
