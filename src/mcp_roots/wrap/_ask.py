"""wrap's questions to the user (``--ask``): a tool call or a read naming a path inside the ceiling in no
folder granted asks a host without roots that declared elicitation; the folder joins the child's roots.
"""

# Which call needs a question, the question, its bounds and what an answer grants are the roots layer's
# (``consent_question``, ``ask_legacy``, on the port's policy: the one decision table); this module is wrap's
# side of it: the call as a question names it (the child's server name, the tool or the URI read, whether
# the tool may write: not marked ``readOnlyHint`` in the child's tools/list, never a read, never under
# --read-only), and the round trip to the host (``elicitation/create``; on 2026-07-28 an input request).

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from .. import RootSet, uri_to_path
from ..errors import InvalidPath, InvalidRootURI, RootsError
from ..roots import JsonRpcPort, ask_legacy, consent_question, modern_answer, modern_question
from ._child import Child
from ._wire import Message

__all__ = ["ASKED", "AskHost", "Call", "call_of", "settle", "settle_modern"]

ASKED = frozenset({"tools/call", "resources/read"})
"""The requests whose paths may ask the user a question."""

AskHost = Callable[[str, Mapping[str, Any]], Awaitable[Message]]
"""How wrap sends a request to the host and gets its answer (a result or an error message, no id)."""
Call = tuple[str, str, bool]
"""A request as a question names it: the server's name, the tool's (a read: the URI), whether it may write."""


async def settle(
    port: JsonRpcPort, message: Message, call: Call, paths: list[str], ask_host: AskHost, *, write: bool
) -> str | None:
    """Ask the user about the first of ``paths`` (the ``message``'s, as the child's schema finds them, or a
    read's ``file:`` URI; ``call`` as :func:`call_of` names it) that the roots in force refuse inside the
    ceiling; None when there is none or the user granted it (the roots in force hold it now), else the
    refusal."""
    roots = port.in_force()
    facts = port.facts(message, port.kind_of(message))
    if port.policy.consent is None or roots is None or facts.declared is not False:
        return None  # a host that declared roots is the only authority for its folders: never asked
    paths = [_written(value) for value in paths]
    server, tool, writes = call
    method = str(message.get("method"))
    writes = writes and write
    asked = consent_question(
        port.policy, facts, paths, roots, tool=tool, writes=writes, server=server, method=method
    )
    if asked.refusal is not None:
        return f"Access denied: {asked.refusal}"
    if asked.question is None:
        return None  # no path needs a question: the check before forwarding refuses the others

    async def send(params: dict[str, object]) -> object:
        answer = await ask_host("elicitation/create", params)
        if "result" not in answer:
            problem = answer.get("error")
            text = problem.get("message") if isinstance(problem, Mapping) else None
            raise RootsError(str(text or "no result")[:500])
        return answer["result"]

    granted, why = await ask_legacy(port.policy, facts, asked.question, send, writes=writes)
    return None if granted is not None else f"Access denied: {why}"


def settle_modern(
    port: JsonRpcPort, message: Message, call: Call, paths: list[str], roots: RootSet, *, write: bool
) -> RootSet | dict[str, Any] | None:
    """2026-07-28: the question travels inside the call (an ``elicitation/create`` input request, its
    ``requestState`` sealed) and its answer comes back in the client's retry. The roots with the folder the
    retry's answer granted, or the answer to send instead (the question, or a refusal), or None (no
    question: ``roots``, the request's, stand)."""
    policy = port.policy
    facts = port.facts(message, port.kind_of(message))
    if policy.consent is None or facts.declared is not False:
        return None
    server, tool, writes = call
    method = str(message.get("method"))
    writes = writes and write
    written = [_written(value) for value in paths]
    asked = consent_question(
        policy, facts, written, roots, tool=tool, writes=writes, server=server, method=method
    )
    if asked.refusal is not None:
        return port.refuse(facts, f"Access denied: {asked.refusal}")
    if asked.question is None:
        return None
    if facts.consent_answer is not None:
        granted, why = modern_answer(policy, facts, asked.question, writes=writes)
        return granted if granted is not None else port.refuse(facts, f"Access denied: {why}")
    state, why = modern_question(policy, facts, asked.question)
    if state is None:
        return port.refuse(facts, f"Access denied: {why}")
    return port.ask_consent(facts, asked.question.params(), state)


def _written(value: str) -> str:
    """A path argument as a path: a ``file:`` URI's path, ``~/...`` expanded (else as written)."""
    try:
        if value[:5].lower() == "file:":
            return str(uri_to_path(value))
    except (InvalidRootURI, InvalidPath):
        return value
    return os.path.expanduser(value) if value.startswith("~") else value


def call_of(child: Child, message: Message) -> Call:
    """The ``tools/call`` or ``resources/read`` ``message`` as a question names it: the child's server name,
    the tool (a read: its URI), whether it may write (a tool not marked ``readOnlyHint`` in the child's
    tools/list; a read never)."""
    info = (child.init_result or {}).get("serverInfo")
    name = info.get("name") if isinstance(info, Mapping) else None
    server = name if isinstance(name, str) and name else "the wrapped server"
    params = message.get("params")
    if message.get("method") == "resources/read":
        uri = params.get("uri") if isinstance(params, Mapping) else None
        return server, uri if isinstance(uri, str) else "?", False
    tool = params.get("name") if isinstance(params, Mapping) else None
    tool = tool if isinstance(tool, str) else "?"
    return server, tool, tool not in child.read_only_tools
