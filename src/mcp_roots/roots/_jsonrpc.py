"""The raw JSON-RPC port: the core port for a consumer with no SDK (``mcp-roots wrap``), over one host
connection's messages as plain dicts. Its roots come from the one decision table, as an SDK adapter's do.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from ..errors import RootsError, RootsUnavailable
from ..paths._rootset import RootSet
from ._consent import ConsentConfig
from ._facts import CONSENT_INPUT_KEY, HANDLER, READ, TOOL, NeedRoots, RequestFacts
from ._policy import GuardPolicy
from ._port import RootsPort
from ._sources import SOURCE_UNCONFIGURED

__all__ = ["INVALID_PARAMS", "JsonRpcPort"]

INVALID_PARAMS = -32602
MODERN = "2026-07-28"
PROTOCOL_VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
CLIENT_CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities"


def _meta(message: Mapping[str, Any]) -> Mapping[str, Any]:
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, Mapping) else None
    return meta if isinstance(meta, Mapping) else {}


def _form(elicitation: object) -> bool:
    """A client's ``elicitation`` capability takes a form (``{}`` is form mode, the 2025-06-18 shape; a
    client that names only URL mode cannot take one)."""
    return isinstance(elicitation, Mapping) and ("form" in elicitation or "url" not in elicitation)


class _Host:
    """The key of the one host connection (held weakly by the policy: it lives as long as the port)."""


class JsonRpcPort(RootsPort):
    """One host connection's port. ``ask_host()`` sends ``roots/list`` to the host and returns its raw
    result; ``input_key`` names this port's ``roots/list`` input request (2026-07-28)."""

    def __init__(
        self, policy: GuardPolicy, ask_host: Callable[[], Awaitable[object]], input_key: str
    ) -> None:
        super().__init__(policy)
        self.host = _Host()
        self.modern = False
        """The connection speaks 2026-07-28 (the consumer reads the era off the wire and says so)."""
        self._ask_host = ask_host
        self._input_key = input_key
        self._declared: bool | None = None
        self._elicit = False  # the host declared form elicitation (consent may ask its user)

    @classmethod
    def serving(
        cls,
        *,
        fallback: RootSet | None,
        ceiling: RootSet,
        timeout: float,
        ask_host: Callable[[], Awaitable[object]],
        input_key: str,
        consent_timeout: float | None = None,
    ) -> JsonRpcPort:
        """The port of an operator's bounds: ``fallback`` (None: a client that sends no roots is refused)
        and ``ceiling``, with a guard's defaults; ``timeout`` bounds a call's wait for the client's roots.
        ``consent_timeout`` (None: off) turns on folders by the user's consent: a host without roots that
        declared elicitation gets the fallback and its user's grants, each question answered within it."""
        consent = None if consent_timeout is None else ConsentConfig(timeout=consent_timeout)
        policy = GuardPolicy(
            fallback=fallback if fallback is not None else RootSet.empty(source=SOURCE_UNCONFIGURED),
            ceiling=ceiling,
            debounce=0.02,
            max_wait=0.1,
            timeout=timeout,
            first_answer_timeout=timeout,
            consent=consent,
        )
        return cls(policy, ask_host, input_key)

    # -- the legacy lifecycle, from the host's messages --

    def open(self, params: Mapping[str, Any]) -> None:
        """The host's ``initialize`` (its ``params``): the connection's roots follow the capability it
        declared."""
        capabilities = params.get("capabilities")
        roots = capabilities.get("roots") if isinstance(capabilities, Mapping) else None
        self._declared = isinstance(roots, Mapping)
        self._elicit = _form(capabilities.get("elicitation") if isinstance(capabilities, Mapping) else None)
        list_changed = isinstance(roots, Mapping) and bool(roots.get("listChanged"))
        self.initialize_seen(self.host, declared=self._declared, list_changed=list_changed)

    def watch(self, callback: Callable[[RootSet | None, RootSet | None], None]) -> None:
        """Call ``callback(old, new)`` whenever the connection's roots in force change (after
        :meth:`open`), and now with the roots already in force."""
        state = self.policy.connections.get(self.host)
        if state is None:
            return
        state.cache.on_change(callback)
        now = self.in_force()
        if now is not None:
            callback(None, now)

    def in_force(self) -> RootSet | None:
        """The connection's roots in force now (``RootsCache.current``; with consent, for a host that
        declared no roots, the fallback and its user's grants), None while none are; nothing is waited for."""
        if self.policy.consent is not None and self._declared is False:
            return self.policy.consent_roots(self.facts({}, TOOL))  # the fallback and the grants
        state = self.policy.connections.get(self.host)
        try:
            return state.cache.current() if state is not None else None
        except RootsUnavailable:
            return None

    def refresh_due(self) -> bool:
        """A refresh of the connection's roots is under way (a ``list_changed`` not answered yet)."""
        state = self.policy.connections.get(self.host)
        return state is not None and state.cache.fresh_now() is None

    # -- a request's roots --

    @staticmethod
    def kind_of(message: Mapping[str, Any]) -> str:
        """A ``tools/call`` is a tool's request; any other request that needs roots reads (a resource)."""
        return TOOL if message.get("method") == "tools/call" else READ

    async def decide(self, message: Mapping[str, Any]) -> RootSet | dict[str, Any]:
        """The roots of the host's request ``message`` (the decision table's), or the answer to send
        instead (without ``id``): the question for the client's roots, or the refusal."""
        facts = self.facts(message, self.kind_of(message))
        try:
            return await self.policy.roots_for(facts)
        except NeedRoots:
            return {"result": self.ask(facts)}
        except RootsError as exc:
            self.policy.log_refusal(str(message.get("method")), exc)
            return self.refuse(facts, str(exc))

    async def settle(self, message: Mapping[str, Any]) -> None:
        """Wait (bounded, as a call does) for the refresh under way of the connection's roots, whatever it
        brings: the host's request ``message`` needs no roots of its own, only none that were revoked."""
        with contextlib.suppress(RootsError):
            await self.policy.roots_for(self.facts(message, HANDLER))

    def refusal(self, message: Mapping[str, Any], text: str) -> dict[str, Any]:
        """The answer (without ``id``) that refuses the host's request ``message`` with ``text``."""
        return self.refuse(self.facts(message, self.kind_of(message)), text)

    # -- the core port --

    def facts(self, ctx: Any, kind: str) -> RequestFacts:
        """The facts of the host's request ``ctx`` (a JSON-RPC message) of ``kind``."""
        if self.modern:
            meta = _meta(ctx)
            capabilities = meta.get(CLIENT_CAPABILITIES_KEY)
            params = ctx.get("params")
            params = params if isinstance(params, Mapping) else {}
            responses = params.get("inputResponses")
            responses = responses if isinstance(responses, Mapping) else {}
            consent = responses.get(CONSENT_INPUT_KEY)
            return RequestFacts(
                ctx,
                kind,
                modern=True,
                declared=isinstance(capabilities, Mapping) and isinstance(capabilities.get("roots"), Mapping),
                connection=None,
                answer=responses.get(self._input_key),
                stream=self.host,
                elicit=_form(capabilities.get("elicitation") if isinstance(capabilities, Mapping) else None),
                consent_answer=consent,
                request_state=params.get("requestState") if consent is not None else None,
            )
        return RequestFacts(
            ctx,
            kind,
            modern=False,
            declared=self._declared,
            connection=self.host if self._declared is not None else None,
            seen=True,
            send=self.send_roots_list,
            elicit=self._elicit,
        )

    async def send_roots_list(self, connection: Any, waiting: Sequence[Any]) -> object:
        return await self._ask_host()

    def ask(self, facts: RequestFacts) -> dict[str, Any]:
        """The result that asks the client for its roots (it retries the request with them)."""
        return {
            "resultType": "input_required",
            "inputRequests": {self._input_key: {"method": "roots/list", "params": {}}},
        }

    def ask_consent(self, facts: RequestFacts, params: dict[str, object], state: str) -> dict[str, Any]:
        """The answer (without ``id``) that asks the user a consent question on 2026-07-28: one
        ``elicitation/create`` input request, and ``state`` to echo (the client retries with the answer)."""
        question = {"method": "elicitation/create", "params": params}
        inputs = {CONSENT_INPUT_KEY: question}
        return {"result": {"resultType": "input_required", "inputRequests": inputs, "requestState": state}}

    def refuse(self, facts: RequestFacts, message: str, in_body: bool = False) -> dict[str, Any]:
        """The answer (without ``id``) that refuses the request: an ``isError`` result for a tool call, a
        JSON-RPC error for the others."""
        if facts.kind == TOOL:
            return {"result": {"content": [{"type": "text", "text": message}], "isError": True}}
        return {"error": {"code": INVALID_PARAMS, "message": message}}
