"""What the ``mcp`` 2.x ports read and send to ask the user (consent): the client's elicitation
capability, the authenticated principal, ``elicitation/create``, and a retry's answer.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import principal_components
from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CONNECTION_CLOSED,
    ElicitRequest,
    ElicitRequestFormParams,
    InputRequiredResult,
)
from pydantic import BaseModel

from ..roots._facts import CONSENT_INPUT_KEY, ConnectionEnded
from .mcp2_sdk import ROOTS_INPUT_KEY, connection_of, request_channel

__all__ = [
    "can_elicit",
    "consent_answer",
    "consent_question",
    "consent_request",
    "principal_of",
    "send_elicitation",
    "split_responses",
]

_OURS = (ROOTS_INPUT_KEY, CONSENT_INPUT_KEY)


def can_elicit(connection: Connection) -> bool:
    """Whether the client declared form elicitation (``{}`` is form, as the 2025-06-18 revision wrote it)."""
    caps = connection.client_capabilities
    elicitation = None if caps is None else caps.elicitation
    return elicitation is not None and (elicitation.form is not None or elicitation.url is None)


def principal_of() -> str | None:
    """The authenticated principal of the request being handled (the SDK's auth middleware), or None."""
    token = get_access_token()
    return None if token is None else json.dumps(principal_components(token))


async def send_elicitation(request_ctx: ServerRequestContext[Any, Any], params: dict[str, object]) -> object:
    """``elicitation/create`` with ``params`` for the request ``request_ctx`` (on its response stream where
    it has one), as the raw result; a closed connection is ``ConnectionEnded``."""
    try:
        if request_ctx.session.can_send_request:
            return await request_channel(request_ctx).send_raw_request("elicitation/create", params)
        return await connection_of(request_ctx).send_raw_request("elicitation/create", params)
    except MCPError as exc:
        if exc.code == CONNECTION_CLOSED:
            raise ConnectionEnded() from exc
        raise


def consent_question(params: dict[str, object], state: str) -> dict[str, Any]:
    """The wire form of an ``InputRequiredResult`` carrying the guard's consent question."""
    question = {"method": "elicitation/create", "params": params}
    return {
        "resultType": "input_required",
        "inputRequests": {CONSENT_INPUT_KEY: question},
        "requestState": state,
    }


def consent_request(params: dict[str, object], state: str) -> InputRequiredResult:
    """The guard's consent question as the SDK's model (for a framework that wants one: fastmcp 4)."""
    request = ElicitRequest(params=ElicitRequestFormParams.model_validate(params))
    return InputRequiredResult(input_requests={CONSENT_INPUT_KEY: request}, request_state=state)


def consent_answer(responses: Mapping[str, Any] | None, state: str | None) -> tuple[object, object]:
    """The raw answer to the guard's consent question among a retry's parsed input responses, and the
    retry's ``requestState`` with it; (None, None) when there is none."""
    sent = responses.get(CONSENT_INPUT_KEY) if responses else None
    if sent is None:
        return None, None
    if isinstance(sent, BaseModel):
        sent = sent.model_dump(mode="json", by_alias=True, exclude_none=True)
    return sent, state


def split_responses(params: Mapping[str, Any] | None) -> tuple[dict[str, Any] | None, object, object, object]:
    """A 2026-07-28 retry's params without the guard's own input responses (None: nothing to take), the
    roots it carried, the consent answer, and (with that answer) the guard's ``requestState``."""
    responses = params.get("inputResponses") if params else None
    if params is None or not isinstance(responses, Mapping) or not any(k in responses for k in _OURS):
        return None, None, None, None
    cleaned = {k: v for k, v in params.items() if k != "inputResponses"}
    consent = responses.get(CONSENT_INPUT_KEY)
    state = cleaned.pop("requestState", None) if consent is not None else None
    rest = {k: v for k, v in responses.items() if k not in _OURS}
    if rest:
        cleaned["inputResponses"] = rest
    return cleaned, responses.get(ROOTS_INPUT_KEY), consent, state
