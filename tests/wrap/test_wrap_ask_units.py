"""wrap's question step on its real port (``JsonRpcPort`` with consent) and the kit's manual clock: no answer,
the question budget, hosts never asked, sealed 2026-07-28 answers; the host is a coroutine answering
``elicitation/create``. And wrap's command line for ``--ask``."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcp_roots import RootSet
from mcp_roots.roots import JsonRpcPort
from mcp_roots.wrap._ask import settle, settle_modern
from tests.kit import ManualClock

pytestmark = pytest.mark.anyio

TIMEOUT = 120.0


class Host:
    """The host's side of ``elicitation/create``: ``answer`` (an ``ElicitResult`` as JSON), or never."""

    def __init__(self, answer: dict[str, Any] | None) -> None:
        self.answer = answer
        self.asked: list[Mapping[str, Any]] = []

    async def __call__(self, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
        assert method == "elicitation/create"
        self.asked.append(params)
        if self.answer is None:
            await anyio.sleep_forever()
        return {"result": self.answer}


def port_for(ceiling: Path, capabilities: dict[str, Any], clock: ManualClock) -> JsonRpcPort:
    async def no_roots() -> object:
        raise AssertionError("wrap asked for roots")

    port = JsonRpcPort.serving(
        fallback=None,
        ceiling=RootSet.from_paths([ceiling], source="ceiling"),
        timeout=5.0,
        ask_host=no_roots,
        input_key="mcp_roots.roots",
        consent_timeout=TIMEOUT,
    )
    assert port.policy.consent is not None
    port.policy.consent.clock = clock
    port.open({"protocolVersion": "2025-11-25", "capabilities": capabilities})
    return port


def message(path: Path) -> dict[str, Any]:
    return {
        "id": 1,
        "method": "tools/call",
        "params": {"name": "read_path", "arguments": {"path": str(path)}},
    }


async def ask(port: JsonRpcPort, path: Path, host: Host) -> str | None:
    call = ("hostile", "read_path", False)
    return await settle(port, message(path), call, [str(path)], host, write=True)


@pytest.fixture
def ceiling(tmp_path: Path) -> Path:
    for i in range(10):
        (tmp_path / f"f{i}").mkdir()
    return tmp_path


async def test_a_question_no_one_answers_is_refused_at_the_bound(ceiling: Path) -> None:
    clock = ManualClock()
    port = port_for(ceiling, {"elicitation": {}}, clock)
    host = Host(None)
    refusals: list[str | None] = []
    async with anyio.create_task_group() as group:

        async def call() -> None:
            refusals.append(await ask(port, ceiling / "f0" / "x.txt", host))

        group.start_soon(call)
        await clock.advance(TIMEOUT - 1)
        assert refusals == []  # still waiting for the user
        await clock.advance(2)
    (refusal,) = refusals
    assert refusal is not None
    assert "did not answer" in refusal
    assert len(host.asked) == 1
    in_force = port.in_force()
    assert in_force is not None
    assert not in_force.paths  # nothing granted


async def test_a_model_calling_in_a_loop_gets_at_most_the_stated_number_of_questions(ceiling: Path) -> None:
    clock = ManualClock()
    port = port_for(ceiling, {"elicitation": {"form": {}}}, clock)
    host = Host({"action": "cancel"})
    refusals = [await ask(port, ceiling / f"f{i}" / "x.txt", host) for i in range(10)]
    assert len(host.asked) == 3  # ConsentConfig's per_minute
    assert all(r is not None and "dismissed" in r for r in refusals[:3])
    assert all(r is not None and "questions a minute" in r for r in refusals[3:])
    await clock.advance(20)  # one question's worth of the minute
    await ask(port, ceiling / "f9" / "x.txt", host)
    assert len(host.asked) == 4


async def test_an_accepted_folder_is_in_the_roots_in_force_with_its_access(ceiling: Path) -> None:
    port = port_for(ceiling, {"elicitation": {}}, ManualClock())
    host = Host({"action": "accept", "content": {"folder": str(ceiling / "f1"), "access": "read"}})
    assert await ask(port, ceiling / "f1" / "x.txt", host) is None
    roots = port.in_force()
    assert roots is not None
    assert [(str(r.path), r.access) for r in roots] == [(str(ceiling / "f1"), "read")]
    assert await ask(port, ceiling / "f1" / "y.txt", host) is None
    assert len(host.asked) == 1  # granted: not asked again


@pytest.mark.parametrize(
    "capabilities",
    [
        {"roots": {"listChanged": True}, "elicitation": {}},  # roots: the host's are the only authority
        {"elicitation": {"url": {}}},  # URL mode only: a folder question is a form
        {},
    ],
)
async def test_a_host_that_cannot_or_need_not_be_asked_is_never_asked(
    ceiling: Path, capabilities: dict[str, Any]
) -> None:
    port = port_for(ceiling, capabilities, ManualClock())
    host = Host({"action": "accept", "content": {"folder": str(ceiling / "f1"), "access": "read"}})
    refusal = await ask(port, ceiling / "f1" / "x.txt", host)
    assert host.asked == []
    if "roots" not in capabilities:
        assert refusal is not None
        assert "elicitation" in refusal


async def test_on_2026_07_28_a_forged_or_replayed_request_state_grants_nothing(ceiling: Path) -> None:
    port = port_for(ceiling, {}, ManualClock())
    port.modern = True
    path = ceiling / "f1" / "x.txt"
    call = ("hostile", "read_path", False)
    nothing = RootSet.empty(source="nothing granted")

    def request(state: object = None, answer: bool = True) -> dict[str, Any]:
        meta: dict[str, Any] = {"io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}
        params: dict[str, Any] = {"name": "read_path", "arguments": {"path": str(path)}, "_meta": meta}
        if answer:  # the client's retry: the user's answer, and the state it was given
            accept = {"action": "accept", "content": {"folder": str(ceiling / "f1"), "access": "read"}}
            params.update(inputResponses={"mcp_roots.consent": accept}, requestState=state)
        return {"id": 2, "method": "tools/call", "params": params}

    asked = settle_modern(port, request(answer=False), call, [str(path)], nothing, write=True)
    assert isinstance(asked, dict)
    assert asked["result"]["resultType"] == "input_required"
    state = asked["result"]["requestState"]
    for forged in (None, "forged", state[:-4] + "0000"):
        refused = settle_modern(port, request(forged), call, [str(path)], nothing, write=True)
        assert isinstance(refused, dict)
        assert refused["result"]["isError"]
    granted = settle_modern(port, request(state), call, [str(path)], nothing, write=True)
    assert isinstance(granted, RootSet)
    assert [str(p) for p in granted.paths] == [str(ceiling / "f1")]
    ledger = port.policy.consent
    assert ledger is not None
    ledger.revoke(port.policy.consent_key(port.facts(request(state), "tool")))
    replayed = settle_modern(port, request(state), call, [str(path)], nothing, write=True)
    assert isinstance(replayed, dict)
    assert "used already" in replayed["result"]["content"][0]["text"]


@pytest.mark.parametrize("value", ["0", "-1", "inf", "nan"])
def test_wrap_refuses_an_ask_timeout_that_is_no_bound_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    from mcp_roots.wrap import command

    code = command.main(["--ceiling", str(tmp_path), "--ask", "--ask-timeout", value, "--", "true"])
    err = capsys.readouterr().err
    assert code == 2
    assert "--ask-timeout must be a number of seconds > 0" in err
    assert len(err.strip().splitlines()) == 1, err


def test_print_policy_says_the_user_is_asked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from mcp_roots.wrap import command

    assert command.main(["--ceiling", str(tmp_path), "--ask", "--print-policy", "--", "true"]) == 0
    assert "folders by the user's consent (--ask)" in capsys.readouterr().out
