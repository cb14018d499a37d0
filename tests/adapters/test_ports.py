"""The port, declared once: the core port every consumer of the roots layer implements whole (the SDK
adapters and wrap's raw JSON-RPC port), the SDK port on top of it, an operation left out refused when the
class is defined, and wrap's roots decided by the roots layer's rules, not its own.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from mcp_roots import RootSet
from mcp_roots.adapters.fastmcp4 import FastMCP4Adapter
from mcp_roots.adapters.mcp2 import Mcp2Adapter
from mcp_roots.guard._port import SdkPort
from mcp_roots.roots import JsonRpcPort, _answers
from mcp_roots.roots._answers import MAX_ROOTS
from mcp_roots.roots._facts import RequestFacts
from mcp_roots.roots._port import RootsPort, missing_operations
from mcp_roots.roots._sources import NO_FOLDERS

pytestmark = pytest.mark.anyio

WRAP = Path(__file__).resolve().parents[2] / "src" / "mcp_roots" / "wrap"


class _Whole:
    """Every operation of both ports, to copy into a class less one."""

    def facts(self, ctx: Any, kind: str) -> RequestFacts:
        return RequestFacts(ctx, kind, modern=False, declared=None, connection=None)

    async def send_roots_list(self, connection: Any, waiting: Sequence[Any]) -> object:
        return {"roots": []}

    def ask(self, facts: RequestFacts) -> Any:
        return "asked"

    def refuse(self, facts: RequestFacts, message: str, in_body: bool = False) -> Any:
        return message

    def install(self, server: Any) -> None:
        pass

    def handlers(self, server: Any) -> list[Any]:
        return []

    def ports_on(self, server: Any) -> list[Any]:
        return []


CORE = ("ask", "facts", "refuse", "send_roots_list")
SDK = ("handlers", "install", "ports_on")


def _define(base: type, leave_out: str | None) -> type:
    names = CORE if base is RootsPort else CORE + SDK
    body = {name: vars(_Whole)[name] for name in names if name != leave_out}
    return type("Partial", (base,), body)


def test_the_ports_name_their_operations() -> None:
    assert missing_operations(RootsPort) == sorted(CORE)
    assert missing_operations(SdkPort) == sorted(CORE + SDK)


@pytest.mark.parametrize(
    ("base", "left_out"), [(RootsPort, n) for n in CORE] + [(SdkPort, n) for n in CORE + SDK]
)
def test_a_port_missing_one_operation_fails_when_the_class_is_defined(base: type, left_out: str) -> None:
    _define(base, None)  # the control: the whole port is defined
    with pytest.raises(TypeError, match=f"does not implement {left_out}"):
        _define(base, left_out)


def test_a_base_for_other_ports_says_so_in_its_class_line() -> None:
    class Base(SdkPort, abstract=True):
        pass

    with pytest.raises(TypeError, match="does not implement ask, facts"):

        class Whole(Base):  # a subclass of the base is checked again
            def install(self, server: Any) -> None:
                pass


def test_the_four_consumers_implement_the_core_port_and_the_sdk_adapters_the_sdk_port() -> None:
    # mcp 1.x's adapter is checked in tests/mcp1/ (its SDK cannot share this venv).
    for port in (Mcp2Adapter, FastMCP4Adapter, JsonRpcPort):
        assert issubclass(port, RootsPort), port
        assert missing_operations(port) == [], port
        # One spelling: the roots of a request outside a guarded call are the core port's, never redone.
        assert "roots" not in vars(port), port
    for port in (Mcp2Adapter, FastMCP4Adapter):
        assert issubclass(port, SdkPort), port
    assert not issubclass(JsonRpcPort, SdkPort)


def _names_in(folder: Path) -> set[str]:
    """Every name and string constant written in the modules of ``folder``."""
    found: set[str] = set()
    for path in folder.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Name):
                found.add(node.id)
            elif isinstance(node, ast.Attribute):
                found.add(node.attr)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                found.add(node.value)
            elif isinstance(node, ast.alias):
                found.add(node.name)
    return found


def test_wrap_has_no_roots_rule_of_its_own() -> None:
    names = _names_in(WRAP)
    # No entry cap, no answer builder, no cache, no fallback sentinel or wording of its own.
    rules = (
        "MAX_ROOTS",
        "from_uris",
        "RootsCache",
        "no fallback roots",
        "the client sent no roots",
    )
    for rule in rules:
        assert rule not in names, rule
    assert "JsonRpcPort" in names  # its roots come through the raw port


def _port(tmp_path: Path, fallback: RootSet | None = None) -> JsonRpcPort:
    async def never() -> object:
        raise AssertionError("a 2026-07-28 request is never answered by a roots/list request")

    ceiling = RootSet.from_paths([str(tmp_path)], source="ceiling")
    port = JsonRpcPort.serving(fallback=fallback, ceiling=ceiling, timeout=5.0, ask_host=never, input_key="k")
    port.modern = True
    return port


def _request(roots: object = None, *, declared: bool = True) -> dict[str, Any]:
    meta: dict[str, Any] = {"io.modelcontextprotocol/clientCapabilities": {"roots": {}} if declared else {}}
    params: dict[str, Any] = {"name": "peek", "arguments": {}, "_meta": meta}
    if roots is not None:
        params["inputResponses"] = {"k": roots}
    return {"id": 1, "method": "tools/call", "params": params}


async def test_wraps_roots_have_the_guards_entry_cap(tmp_path: Path) -> None:
    ok = [{"uri": tmp_path.as_uri()}]
    assert await _port(tmp_path).decide(_request({"roots": ok})) == RootSet.from_paths([str(tmp_path)])
    refused = await _port(tmp_path).decide(_request({"roots": ok * (MAX_ROOTS + 1)}))
    assert isinstance(refused, dict)
    assert refused["result"]["isError"] is True
    text = refused["result"]["content"][0]["text"]
    assert f"more than the {MAX_ROOTS} accepted" in text, text  # the roots layer's words


async def test_wraps_roots_are_built_on_the_roots_layers_worker_under_its_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    built: list[object] = []
    real = _answers.off_loop

    async def spy(job: Any) -> Any:
        built.append(job)
        return await real(job)

    monkeypatch.setattr(_answers, "off_loop", spy)
    port = _port(tmp_path)
    answer = {"roots": [{"uri": tmp_path.as_uri()}]}
    first = await port.decide(_request(answer))
    assert len(built) == 1
    assert built[0].args[2] == _answers.RESOLUTION_BUDGET  # type: ignore[attr-defined]
    assert await port.decide(_request(answer)) is first  # the same answer on the same stream: not rebuilt
    assert len(built) == 1


async def test_wraps_round_trip_and_fallback_are_the_guards(tmp_path: Path) -> None:
    asked = await _port(tmp_path).decide(_request())
    assert asked == {
        "result": {
            "resultType": "input_required",
            "inputRequests": {"k": {"method": "roots/list", "params": {}}},
        }
    }
    refused = await _port(tmp_path).decide(_request(declared=False))
    assert isinstance(refused, dict)
    assert refused["result"]["content"][0]["text"] == NO_FOLDERS
    fallback = RootSet.from_paths([str(tmp_path)], source="flag")
    assert await _port(tmp_path, fallback).decide(_request(declared=False)) == fallback
