"""A method serve does not have (an unknown prompt too): -32601 for the client, one log line for its log."""

from __future__ import annotations

from pathlib import Path

import httpx2
import pytest

from tests.kit import connected, serve_http, stdio_serve_command


def warnings_about(log: Path, word: str) -> list[str]:
    return [line for line in log.read_text().splitlines() if "WARNING" in line and word in line]


@pytest.mark.anyio
async def test_an_unknown_method_or_prompt_is_method_not_found_and_logged_once(tmp_path: Path) -> None:
    log = tmp_path / "stderr"
    with log.open("wb") as stderr:
        async with connected(stdio_serve_command(str(tmp_path)), stderr=stderr) as host:
            await host.initialize(roots=False)
            for _ in range(3):
                for method, params in (("prompts/get", {"name": "nope"}), ("no/such/method", {})):
                    answer = await host.request(method, params)
                    assert answer["error"]["code"] == -32601, answer  # Method not found, never 0
            assert len(warnings_about(log, "'prompts/get'")) == 1, log.read_text()
            assert len(warnings_about(log, "'no/such/method'")) == 1, log.read_text()
            answer = await host.request("x" * 100_000, {})
            assert answer["error"]["code"] == -32601
            assert max(len(line) for line in warnings_about(log, "'xxx")) < 300  # a name is cut, never whole


@pytest.mark.anyio
async def test_a_client_cannot_flood_the_log_with_method_names(tmp_path: Path) -> None:
    log = tmp_path / "stderr"
    with log.open("wb") as stderr:
        async with connected(stdio_serve_command(str(tmp_path)), stderr=stderr) as host:
            await host.initialize(roots=False)
            for n in range(100):
                answer = await host.request(f"flood/{n}\x1b[2J", {})
                assert answer["error"]["code"] == -32601, answer
    lines = warnings_about(log, "a client asked for")
    # One line each for the first 32 names, one saying the rest go unlogged, and nothing for the other 67.
    assert len(lines) == 33, log.read_text()
    assert "no more are logged" in lines[-1]
    assert "\x1b" not in log.read_text()  # a client's control characters are escaped, never written raw
    assert "'flood/0\\x1b[2J'" in lines[0]


def test_over_http_on_2026_07_28_too(tmp_path: Path) -> None:
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
    }
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "prompts/get",
        "Mcp-Name": "nope",
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": "prompts/get", "params": {"name": "nope", "_meta": meta}}
    with serve_http(str(tmp_path)) as server:
        for _ in range(3):
            answer = httpx2.post(server.url, headers={**headers, **server.headers}, json=body, timeout=30)
            assert answer.json()["error"]["code"] == -32601, answer.text
        assert len(warnings_about(server.log, "'prompts/get'")) == 1, server.stderr()
