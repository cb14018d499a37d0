"""The consent step of the guarded call: a path refused inside the ceiling asks the user for a folder.
Through the port: ``elicitation/create`` on a legacy connection, an input request on 2026-07-28.
"""

# The step runs after the call's roots are known (GuardPolicy.roots_for: the fallback plus the key's grants)
# and before the body, for a client that declared no roots. Which path needs a question, the round trips'
# rules and what an answer means are the roots layer's (``roots._asking``, shared with wrap); this module
# lists the guarded paths a call names and says each outcome through the SDK port.

from __future__ import annotations

import os
import typing
from collections.abc import Mapping
from typing import Any

from ..errors import RootsError
from ..paths._rootset import RootSet
from ..roots._asking import ask_legacy, consent_question, modern_answer, modern_question
from ..roots._consent import PROMPTS_GET, RESOURCES_READ, TOOLS_CALL, shown
from ..roots._facts import PROMPT, READ, RequestFacts
from ..roots._policy import GuardPolicy
from ._argcheck import GuardedCall
from ._port import SdkPort

__all__ = ["GO", "consent_step", "guarded_paths", "list_grants", "revoke_grant", "tool_writes"]

GO: Any = object()
"""The step's outcome when the call goes on (with the roots it returns)."""


def tool_writes(component: object) -> bool:
    """Whether a registered tool may write: all but one annotated ``readOnlyHint: true``."""
    annotations = getattr(component, "annotations", None)
    if isinstance(annotations, Mapping):
        hint = annotations.get("readOnlyHint")
    elif hasattr(annotations, "read_only_hint"):  # mcp 2.x and fastmcp (their old name warns)
        hint = getattr(annotations, "read_only_hint")  # noqa: B009
    else:  # mcp 1.x names it as on the wire
        hint = getattr(annotations, "readOnlyHint", None)
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


def guarded_paths(spec: GuardedCall, values: Mapping[str, Any]) -> list[str]:
    """The absolute paths a call's raw guarded ``values`` name (``~`` and ``file:`` as the guard reads
    them); a value the checks refuse is left to them."""
    collector = _Collector()
    for target in spec.targets:
        if target.param in values:
            try:
                target.check(
                    typing.cast(RootSet, collector), values[target.param], expand_user=spec.policy.expand_user
                )
            except (RootsError, TypeError, ValueError):
                continue
    return [path for path in collector.found if os.path.isabs(path)]


_METHODS = {PROMPT: PROMPTS_GET, READ: RESOURCES_READ}


async def consent_step(
    port: SdkPort,
    facts: RequestFacts,
    paths: list[str],
    roots: RootSet,
    *,
    name: str,
    writes: bool,
) -> tuple[RootSet, Any]:
    """The call's roots and :data:`GO`, or its roots and the port's answer (a refusal, or a 2026-07-28
    question): asks the user about the first of ``paths`` (absolute, as written: a tool's guarded paths,
    :func:`guarded_paths`, or a read's ``file:`` path) the roots refuse inside the ceiling. ``name``: the
    tool or prompt, or the URI read (``facts.kind`` says which request, and binds a 2026-07-28 answer)."""
    policy = port.policy
    method = _METHODS.get(facts.kind, TOOLS_CALL)
    asked = consent_question(
        policy, facts, paths, roots, tool=name, writes=writes, server=port.server_name, method=method
    )
    question = asked.question
    granted: RootSet | None = None
    refusal = asked.refusal
    if question is not None:
        if not facts.modern:
            granted, refusal = await ask_legacy(
                policy, facts, question, lambda params: port.elicit(facts, params), writes=writes
            )
        elif facts.consent_answer is not None:
            granted, refusal = modern_answer(policy, facts, question, writes=writes)
        else:
            state, refusal = modern_question(policy, facts, question)
            if state is not None:
                return roots, port.ask_consent(facts, question.params(), state)
    if refusal is not None:
        policy.log_refusal(method if facts.kind == READ else name, PermissionError(refusal), refusal)
        return roots, port.refuse(facts, refusal)
    return (granted if granted is not None else roots), GO


def list_grants(policy: GuardPolicy, facts: RequestFacts) -> str:
    """The folders in force for the caller's session, one a line with its access and whether the operator
    or the user granted it (the text of the guard's ``list_granted_folders`` tool)."""
    if policy.consent is None:
        return "this server does not ask for folders"
    roots = policy.consent_roots(facts)
    key = policy.consent_key(facts)
    by_user = {grant.folder for grant in policy.consent.grants(key)} if key is not None else set()
    who = {True: "granted by the user", False: "set up by the operator"}
    lines = [f"{shown(str(root.path))} ({root.access}, {who[str(root.path) in by_user]})" for root in roots]
    return "\n".join(lines) if lines else "no folders are granted in this session"


def revoke_grant(policy: GuardPolicy, facts: RequestFacts, folder: str) -> str:
    """Withdraw the user's grant of ``folder`` for the caller's session (the guard's
    ``revoke_granted_folder`` tool); the next call sees it."""
    key = policy.consent_key(facts)
    if policy.consent is None or key is None:
        return "no folder granted in this session can be withdrawn"
    canonical = os.path.realpath(folder) if os.path.isabs(folder) else folder
    withdrawn = policy.consent.revoke(key, canonical) or policy.consent.revoke(key, folder)
    if not withdrawn:
        return f"{shown(folder)} is not a folder the user granted in this session"
    return f"withdrew {shown(canonical)}; asking again before it is used"
