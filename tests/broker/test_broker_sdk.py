"""The SDK seams of files/*, end to end in memory with the real mcp 2.3 Client and MCPServer.

A server tool sends custom requests (files/ping, files/fail) to the client; the client answers them
through the hooked ClientSession. The contract tests at the bottom fail loudly if the SDK changes shape.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import mcp_types
import pytest
from mcp import Client
from mcp.client.session import ClientSession
from mcp.server import MCPServer
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Context

from mcp_roots import BrokerError, RootsProvider, SDKChanged
from mcp_roots.broker import _sdk
from mcp_roots.broker._protocol import broker_error, offers_brokering

pytestmark = pytest.mark.anyio

METHODS = frozenset({"files/ping", "files/fail", "files/slow"})


class Probe:
    def __init__(self) -> None:
        self.initialize_params: Mapping[str, Any] | None = None
        self.typed_roots: mcp_types.RootsCapability | None = None

        async def record_initialize(
            ctx: ServerRequestContext[Any, Any], call_next: CallNext
        ) -> HandlerResult:
            if ctx.method == "initialize":
                self.initialize_params = ctx.params
            return await call_next(ctx)

        self.server = MCPServer("files-probe", middleware=[record_initialize])

        @self.server.tool()
        async def send(method: str, params: dict[str, Any], wait: float, ctx: Context) -> str:
            caps = ctx.request_context.session.client_capabilities
            self.typed_roots = caps.roots if caps is not None else None
            try:
                result = await _sdk.send_files_request(ctx, method, params, timeout=wait)
            except BrokerError as exc:
                return json.dumps(
                    {"code": exc.code, "reason": exc.reason, "message": exc.message, "data": exc.data}
                )
            return json.dumps({"result": result})

    async def send(self, client: Client, method: str, params: dict[str, Any], wait: float = 5.0) -> Any:
        result = await client.call_tool("send", {"method": method, "params": params, "wait": wait})
        block = result.content[0]
        assert isinstance(block, mcp_types.TextContent), result
        return json.loads(block.text)


async def answer(method: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
    if method == "files/ping":
        return {"echo": dict(params or {}), "bytes": "AAEC"}
    if method == "files/slow":
        await anyio.sleep(30)
    raise broker_error("FILE_NOT_FOUND", "no such file: 'gone.txt'", path="gone.txt")


def hooked(probe: Probe, provider: RootsProvider) -> Client:
    client = Client(probe.server, mode="legacy", list_roots_callback=provider)
    _sdk.hook_client(client, lambda session: _sdk.advertise_and_route(session, METHODS, answer))
    return client


async def test_a_server_tool_sends_a_custom_request_and_the_hooked_client_answers(tmp_path: Path) -> None:
    probe = Probe()
    async with hooked(probe, RootsProvider([tmp_path])) as client:
        reply = await probe.send(client, "files/ping", {"path": "a.txt", "n": 3})
    assert reply == {"result": {"echo": {"path": "a.txt", "n": 3}, "bytes": "AAEC"}}


async def test_a_broker_error_reaches_the_server_with_code_reason_and_data(tmp_path: Path) -> None:
    probe = Probe()
    async with hooked(probe, RootsProvider([tmp_path])) as client:
        reply = await probe.send(client, "files/fail", {})
    assert reply == {
        "code": -31101,
        "reason": "FILE_NOT_FOUND",
        "message": "no such file: 'gone.txt'",
        "data": {"reason": "FILE_NOT_FOUND", "path": "gone.txt"},
    }


async def test_a_slow_answer_is_a_timeout_on_the_server(tmp_path: Path) -> None:
    probe = Probe()
    async with hooked(probe, RootsProvider([tmp_path])) as client:
        with anyio.fail_after(10):
            reply = await probe.send(client, "files/slow", {}, wait=0.2)
    assert reply["reason"] == "TIMEOUT"
    assert reply["code"] == -31105


async def test_the_capability_reaches_the_server_raw_but_not_in_the_typed_model(tmp_path: Path) -> None:
    probe = Probe()
    async with hooked(probe, RootsProvider([tmp_path])) as client:
        await probe.send(client, "files/ping", {})
    assert probe.initialize_params is not None
    raw_caps = probe.initialize_params["capabilities"]
    assert raw_caps["roots"] == {"listChanged": True, "filesystemBrokering": True}
    assert offers_brokering(raw_caps)
    # The SDK's typed RootsCapability drops the key: servers must read the raw initialize params.
    assert probe.typed_roots is not None
    assert probe.typed_roots.model_dump(by_alias=True, exclude_none=True) == {"listChanged": True}


async def test_standard_requests_still_reach_the_sdk_callbacks(tmp_path: Path) -> None:
    probe = Probe()
    provider = RootsProvider([tmp_path])
    async with hooked(probe, provider) as client:
        reply = await probe.send(client, "roots/list", {})
    assert [r["uri"] for r in reply["result"]["roots"]] == [provider.roots[0].uri]


async def test_without_the_hook_the_sdk_refuses_custom_methods(tmp_path: Path) -> None:
    """The reason the seam exists. If this starts failing, the SDK routes custom methods itself: switch
    to its public way and drop the private seam."""
    probe = Probe()
    async with Client(probe.server, mode="legacy", list_roots_callback=RootsProvider([tmp_path])) as client:
        reply = await probe.send(client, "files/ping", {})
    assert reply["code"] == mcp_types.METHOD_NOT_FOUND
    assert probe.initialize_params is not None
    assert not offers_brokering(probe.initialize_params["capabilities"])


async def test_a_client_without_roots_cannot_offer_brokering() -> None:
    probe = Probe()
    client = Client(probe.server, mode="legacy")
    _sdk.hook_client(client, lambda session: _sdk.advertise_and_route(session, METHODS, answer))
    caught: BaseException | None = None
    try:
        async with client:
            pass
    except BaseException as exc:  # the SDK wraps it in (nested) exception groups
        caught = exc
    while caught is not None and getattr(caught, "exceptions", None):
        caught = caught.exceptions[0]  # type: ignore[attr-defined]
    assert isinstance(caught, SDKChanged)
    assert "declares no roots capability" in str(caught)


async def test_hooks_refuse_an_entered_session_or_client(tmp_path: Path) -> None:
    probe = Probe()
    async with hooked(probe, RootsProvider([tmp_path])) as client:
        with pytest.raises(RuntimeError, match="before entering"):
            _sdk.hook_client(client, lambda session: None)
        with pytest.raises(RuntimeError, match="already has a files/\\* handler"):
            _sdk.advertise_and_route(client.session, METHODS, answer)
    fresh = Client(probe.server, mode="legacy")
    _sdk.hook_client(fresh, lambda session: None)
    with pytest.raises(RuntimeError, match="already hooked"):
        _sdk.hook_client(fresh, lambda session: None)
    async with Client(probe.server, mode="legacy") as client:
        with pytest.raises(RuntimeError, match="before the ClientSession is entered"):
            _sdk.advertise_and_route(client.session, METHODS, answer)


# --- contract: the private shapes the seams rely on -----------------------------------------------------


def test_sdk_private_shapes_the_seams_rely_on_are_still_there() -> None:
    assert list(inspect.signature(ClientSession._on_request).parameters) == [
        "self",
        "dctx",
        "method",
        "params",
    ]
    assert list(inspect.signature(Client._build_session).parameters) == ["self", "exit_stack"]
    source = inspect.getsource(ClientSession.__aenter__)
    assert "self._on_request" in source, "ClientSession.__aenter__ no longer hands self._on_request to run()"
    assert "self._dispatcher.send_raw_request" in inspect.getsource(ClientSession.send_request)
    assert "extra" not in mcp_types.RootsCapability.model_config, (
        "RootsCapability now keeps extra keys: the initialize patch may no longer be needed"
    )
