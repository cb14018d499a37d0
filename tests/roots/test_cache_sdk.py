"""RootsCache behind the real mcp SDK: a low-level Server and an in-memory legacy-era Client.

This checks the assumptions the cache makes about its seam: the raw roots/list result the SDK returns
parses, list_changed reaches the cache as a notification task, and a client that answers with an error is
refused (never given the fallback) without wedging anything. The guard's wiring (RootsGuard) is tested
on its own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client import Client
from mcp.server import Server, ServerRequestContext
from mcp_types import (
    INTERNAL_ERROR,
    CallToolRequestParams,
    CallToolResult,
    ErrorData,
    ListRootsResult,
    ListToolsResult,
    NotificationParams,
    TextContent,
    Tool,
)

from mcp_roots import RootsCache, RootSet, RootsUnavailable
from tests.kit import RootsCallback

pytestmark = [
    pytest.mark.anyio,
    # The SDK flags every roots call as deprecated (SEP-2577); roots are what this library is about.
    pytest.mark.filterwarnings("ignore:The roots capability is deprecated"),
]


def serve_roots(fallback: RootSet, caches: list[RootsCache], **handlers: Any) -> Server[Any]:
    server: Server[Any] = Server("roots-cache-test", **handlers)

    async def initialized(ctx: ServerRequestContext[Any, Any], params: NotificationParams) -> None:
        connection = ctx.session._connection  # the per-connection object; no public accessor in mcp 2.3
        caps = connection.client_capabilities
        cache = RootsCache(
            lambda: connection.send_raw_request("roots/list", None),
            fallback=fallback,
            timeout=2.0,
            debounce=0.002,
            max_wait=0.02,
        )
        declared = caps is not None and caps.roots is not None
        cache.set_capabilities(roots=declared, list_changed=declared and bool(caps.roots.list_changed))  # type: ignore[union-attr]
        caches.append(cache)
        cache.start()
        await cache.run()

    async def list_changed(ctx: ServerRequestContext[Any, Any], params: NotificationParams) -> None:
        caches[-1].notify_changed()

    server.add_notification_handler("notifications/initialized", NotificationParams, initialized)
    server.add_notification_handler("notifications/roots/list_changed", NotificationParams, list_changed)
    return server


def in_force(cache: RootsCache) -> tuple[Path, ...] | None:
    """The paths in force, or None while calls are refused."""
    try:
        return cache.current().paths
    except RootsUnavailable:
        return None


async def wait_for_cache(caches: list[RootsCache]) -> RootsCache:
    with anyio.fail_after(2):
        while not caches:  # noqa: ASYNC110 - the server creates the cache in its own task
            await anyio.sleep(0.005)
    return caches[-1]


async def test_sdk_roots_list_result_is_applied_and_list_changed_refreshes(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    list_roots = RootsCallback(a.resolve())

    caches: list[RootsCache] = []
    server = serve_roots(RootSet.empty(source="fallback"), caches)
    async with Client(server, mode="legacy", list_roots_callback=list_roots) as client:
        cache = await wait_for_cache(caches)
        roots = await cache.fresh()
        assert list(roots.paths) == [a.resolve()]
        assert roots.roots[0].name == "a"
        list_roots.paths[:] = [b.resolve()]
        await client.send_roots_list_changed()
        with anyio.fail_after(2):
            while cache.current().paths != (b.resolve(),):  # noqa: ASYNC110
                await anyio.sleep(0.005)


async def test_sdk_error_answer_is_refused_not_the_fallback_until_the_client_answers(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    a = tmp_path / "a"
    a.mkdir()
    fallback = RootSet.from_paths([tmp_path], source="fallback")
    answers: list[ListRootsResult | ErrorData] = [
        ErrorData(code=INTERNAL_ERROR, message="roots store locked")
    ]

    list_roots = RootsCallback(a.resolve(), answer=lambda: answers.pop(0) if answers else None)

    caches: list[RootsCache] = []
    server = serve_roots(fallback, caches)
    async with Client(server, mode="legacy", list_roots_callback=list_roots) as client:
        cache = await wait_for_cache(caches)
        with pytest.raises(RootsUnavailable, match="has not sent its roots yet"):
            await cache.fresh()  # the JSON-RPC error: no roots yet, and never the fallback
        warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
        assert any("roots store locked" in w for w in warnings), warnings
        await client.send_roots_list_changed()
        # The client answers the new request: its roots apply. (The notification reaches the server in its
        # own task, so poll what is in force rather than race it with fresh().)
        with anyio.fail_after(5):
            while in_force(cache) != (a.resolve(),):  # noqa: ASYNC110
                await anyio.sleep(0.005)


async def test_sdk_client_without_roots_callback_gets_the_fallback(tmp_path: Path) -> None:
    fallback = RootSet.from_paths([tmp_path], source="fallback")
    caches: list[RootsCache] = []
    async with Client(serve_roots(fallback, caches), mode="legacy") as client:
        cache = await wait_for_cache(caches)
        assert "no roots capability" in repr(cache)
        assert await cache.fresh() == fallback
        await client.send_roots_list_changed()
        await anyio.sleep(0.05)
        assert cache.current() == fallback


async def test_sdk_tool_call_right_after_list_changed_sees_the_new_roots(tmp_path: Path) -> None:
    """Stale-read protection end to end: list_changed then at once a tools/call, 30 times. A tool that
    awaits fresh() never sees the withdrawn root; the control, reading current(), does."""
    dirs = [tmp_path / "d0", tmp_path / "d1"]
    for d in dirs:
        d.mkdir()
    dirs = [d.resolve() for d in dirs]
    turn = 0
    caches: list[RootsCache] = []

    list_roots = RootsCallback(answer=lambda: RootsCallback.result(dirs[turn % 2]))

    async def list_tools(ctx: ServerRequestContext[Any, Any], params: object) -> ListToolsResult:
        schema = {"type": "object", "properties": {"read": {"type": "string"}}}
        return ListToolsResult(tools=[Tool(name="root", input_schema=schema)])

    async def call_tool(ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams) -> CallToolResult:
        cache = caches[-1]
        roots = await cache.fresh() if (params.arguments or {}).get("read") == "fresh" else cache.current()
        return CallToolResult(content=[TextContent(type="text", text=str(roots.paths[0]))])

    stale = {"fresh": 0, "current": 0}
    server = serve_roots(
        RootSet.empty(source="fallback"), caches, on_call_tool=call_tool, on_list_tools=list_tools
    )
    async with Client(server, mode="legacy", list_roots_callback=list_roots) as client:
        cache = await wait_for_cache(caches)
        await cache.fresh()
        for read in ("current", "fresh"):
            for _ in range(30):
                turn += 1
                await client.send_roots_list_changed()
                result = await client.call_tool("root", {"read": read})
                content = result.content[0]
                assert isinstance(content, TextContent)
                stale[read] += content.text != str(dirs[turn % 2])
                await cache.fresh()  # let the control's refresh land before the next round
    assert stale["current"] > 0, "the control never read stale roots: the race was not exercised"
    assert stale["fresh"] == 0, stale
