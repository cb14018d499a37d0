"""``wrap --ask`` end to end with the official Python SDK client and the hostile server (it reads and writes
whatever it is told): a grant replaces wrap's child with one confined to the folder granted, read grants read
only in its sandbox; declines, the ceiling, hosts that cannot or need not be asked."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from mcp_roots.sandbox import support
from tests.kit import (
    LEGACY,
    SRT_ENV,
    FormUser,
    RootsCallback,
    connected,
    hostile_argv,
    read_file_uri,
    srt_installed,
    srt_tmp,
    text_of,
    ts_ask_session,
    wrap_argv,
)

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not support().complete, reason="needs Landlock and the seccomp filter"),
]
SECRET = "OUTSIDE SECRET 2b71"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # wrap runs in a process of its own


@pytest.fixture
def world(tmp_path: Path) -> dict[str, Path]:
    return make_world(tmp_path)


def make_world(tmp_path: Path) -> dict[str, Path]:
    outside, ceiling = tmp_path / "outside", tmp_path / "ceiling"
    for folder in (outside, ceiling / "a" / "deep", ceiling / "b"):
        folder.mkdir(parents=True)
    (outside / "secret.txt").write_text(SECRET)
    (ceiling / "a" / "hello.txt").write_text("hello a")
    (ceiling / "a" / "deep" / "note.txt").write_text("deep note")
    (ceiling / "b" / "fixed.txt").write_text("fixed b")
    return {"outside": outside, "ceiling": ceiling, "a": ceiling / "a", "b": ceiling / "b", "tmp": tmp_path}


def wrapped(world: dict[str, Path], *options: str, **env: str) -> StdioServerParameters:
    # The hostile server's "summarize" reads the secret outside, "peek" reads b/fixed.txt and "note" writes
    # a/planted.txt, whatever the call says: only the kernel keeps them in.
    server = hostile_argv(
        world["outside"] / "secret.txt", world["a"] / "planted.txt", world["b"] / "fixed.txt"
    )
    argv = wrap_argv(
        [world["ceiling"]], server, "--cache-dir", str(world["tmp"] / "cache"), "--ask", *options
    )
    return StdioServerParameters(command=argv[0], args=argv[1:], env={**os.environ, **env})


async def call(client: Client, tool: str, **arguments: str) -> tuple[bool, str]:
    result = await client.call_tool(tool, arguments)
    return bool(result.is_error), text_of(result)


def server_pids(world: dict[str, Path]) -> set[int]:
    """The processes running this test's hostile server (its command line names this test's folder)."""
    mark = str(world["outside"] / "secret.txt").encode()
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    line = f.read()
            except OSError:
                continue
            argv = line.split(b"\0")
            if mark in argv and argv[1:2] and argv[1].endswith(b"hostile_stdio_server.py"):
                found.add(int(entry))  # the server itself (not wrap, whose command line holds the server's)
    return found


async def gone(pids: set[int], world: dict[str, Path]) -> bool:
    """Wait (bounded: 30 s, for a loaded machine) until none of ``pids`` runs the server any more."""
    for _ in range(600):
        if not pids & server_pids(world):
            return True
        await anyio.sleep(0.05)
    return False


async def test_a_grant_replaces_the_child_with_one_confined_to_the_folder_granted(
    world: dict[str, Path],
) -> None:
    a, ceiling = world["a"], world["ceiling"]
    user = FormUser((str(a), "read"))
    async with Client(wrapped(world), mode="legacy", elicitation_callback=user) as client:
        before = server_pids(world)  # the child confined to no folder, started with wrap
        assert before
        assert (await call(client, "read_path", path=str(a / "hello.txt"))) == (False, "hello a")
        # The path's folder and its ancestors up to the ceiling entry, narrowest first; read_path is marked
        # readOnlyHint, so reading only is offered.
        assert user.offered() == ([str(a), str(ceiling)], ["read"])
        assert await gone(before, world)
        after = server_pids(world)
        assert after
        assert not after & before
        # The new child reads the folder granted (with no new question) and nothing else.
        assert (await call(client, "read_path", path=str(a / "deep" / "note.txt"))) == (False, "deep note")
        assert "fixed b" not in (await call(client, "peek"))[1]  # b/fixed.txt: in the ceiling, not granted
        assert SECRET not in (await call(client, "summarize", topic="x"))[1]
        # A read grant is read only in the child's sandbox: "note" writes a/planted.txt whatever it is told.
        assert (await call(client, "note", text="planted"))[1].startswith("ERROR")
        assert len(user.questions) == 1
        assert server_pids(world) == after
    assert not (a / "planted.txt").exists()


async def test_a_writing_tool_under_a_read_grant_asks_again_and_read_and_write_lets_the_child_write(
    world: dict[str, Path],
) -> None:
    a = world["a"]
    user = FormUser((str(a), "read"), (str(a), "read-write"))
    async with Client(wrapped(world), mode="legacy", elicitation_callback=user) as client:
        assert await call(client, "read_path", path=str(a / "hello.txt")) == (False, "hello a")
        assert await call(client, "write_path", path=str(a / "new.txt"), text="new") == (False, "written")
        assert user.offered() == ([str(a), str(world["ceiling"])], ["read-write", "read"])  # not annotated
        # The control of the read grant's refusal in the test above: the same write, now allowed.
        assert await call(client, "note", text="planted") == (False, "written")
    assert (a / "new.txt").read_text() == "new"
    assert (a / "planted.txt").read_text() == "planted"


async def test_a_decline_refuses_and_is_not_asked_again_and_a_cancel_refuses(world: dict[str, Path]) -> None:
    user = FormUser("decline", "cancel")
    async with Client(wrapped(world), mode="legacy", elicitation_callback=user) as client:
        for _ in range(2):
            error, text = await call(client, "read_path", path=str(world["a"] / "hello.txt"))
            assert error
            assert "declined" in text
            assert "hello a" not in text
        assert len(user.questions) == 1
        error, text = await call(client, "read_path", path=str(world["b"] / "fixed.txt"))
        assert error
        assert "dismissed" in text
        assert "fixed b" not in text
        assert len(user.questions) == 2


async def test_on_2026_07_28_the_question_travels_inside_the_call(world: dict[str, Path]) -> None:
    a, b = world["a"], world["b"]
    user = FormUser((str(a), "read"), "decline", (str(a), "read-write"))
    async with Client(wrapped(world), elicitation_callback=user) as client:  # mode="auto": 2026-07-28
        assert client.protocol_version == "2026-07-28"
        assert await call(client, "read_path", path=str(a / "hello.txt")) == (False, "hello a")
        assert await call(client, "read_path", path=str(a / "deep" / "note.txt")) == (False, "deep note")
        assert (await call(client, "note", text="planted"))[1].startswith("ERROR")  # read only in the sandbox
        for _ in range(2):
            error, text = await call(client, "read_path", path=str(b / "fixed.txt"))
            assert error
            assert "declined" in text
        assert len(user.questions) == 2
        assert not (a / "planted.txt").exists()
        # The same folder granted read and write is another child: one whose sandbox lets it write there.
        assert await call(client, "write_path", path=str(a / "new.txt"), text="new") == (False, "written")
        assert await call(client, "note", text="planted") == (False, "written")
    assert (a / "planted.txt").read_text() == "planted"


async def test_nothing_outside_the_ceiling_is_ever_offered(world: dict[str, Path]) -> None:
    (world["ceiling"] / "link").symlink_to(world["outside"])  # inside by name, outside once resolved
    user = FormUser()
    async with Client(wrapped(world), mode="legacy", elicitation_callback=user) as client:
        for path in (
            world["outside"] / "secret.txt",
            world["ceiling"] / "link" / "secret.txt",
            Path("/etc/hostname"),
        ):
            error, text = await call(client, "read_path", path=str(path))
            assert error
            assert text.startswith("Access denied")
            assert SECRET not in text
    assert user.questions == []


async def test_a_folder_name_with_control_and_bidi_characters_is_shown_escaped(
    world: dict[str, Path],
) -> None:
    odd = world["ceiling"] / "x\u202ey\x1b[2J"
    odd.mkdir()
    (odd / "f.txt").write_text("odd")
    user = FormUser("decline")
    async with Client(wrapped(world), mode="legacy", elicitation_callback=user) as client:
        assert (await call(client, "read_path", path=str(odd / "f.txt")))[0]
    (question,) = user.questions
    for shown in (question.message, *question.requested_schema["properties"]["folder"]["enumNames"]):
        assert "\u202e" not in shown
        assert "\x1b" not in shown
    assert "\\u202e" in question.message
    assert "\\x1b" in question.message
    assert user.offered()[0][0] == str(odd)  # the value answered is the folder itself


async def test_a_host_without_elicitation_is_refused_in_words_that_say_so(world: dict[str, Path]) -> None:
    async with Client(wrapped(world), mode="legacy") as client:
        error, text = await call(client, "read_path", path=str(world["a"] / "hello.txt"))
        assert error
        assert "declared no elicitation" in text
        assert "hello a" not in text
    # With folders granted up front (--roots), those are served, and the rest is refused in the same words.
    async with Client(wrapped(world, "--roots", str(world["b"])), mode="legacy") as client:
        assert await call(client, "read_path", path=str(world["b"] / "fixed.txt")) == (False, "fixed b")
        error, text = await call(client, "read_path", path=str(world["a"] / "hello.txt"))
        assert error
        assert "declared no elicitation" in text
        assert "hello a" not in text


async def test_a_host_that_declared_roots_is_never_asked(world: dict[str, Path]) -> None:
    user = FormUser((str(world["a"]), "read"))
    roots = RootsCallback(world["b"])
    async with Client(
        wrapped(world), mode="legacy", elicitation_callback=user, list_roots_callback=roots
    ) as client:
        error, text = await call(client, "read_path", path=str(world["a"] / "hello.txt"))
        assert error
        assert "hello a" not in text
        assert await call(client, "read_path", path=str(world["b"] / "fixed.txt")) == (False, "fixed b")
    assert user.questions == []


async def test_under_srt_a_read_grant_is_read_only_in_the_sandbox_too() -> None:
    srt_installed()
    with srt_tmp() as folder:  # srt cannot grant a folder under /dev/shm
        world = make_world(folder)
        a = world["a"]
        user = FormUser((str(a), "read"))
        server = wrapped(world, "--sandbox", "srt", **SRT_ENV)
        async with Client(server, mode="legacy", elicitation_callback=user) as client:
            assert await call(client, "read_path", path=str(a / "hello.txt")) == (False, "hello a")
            assert (await call(client, "note", text="planted"))[1].startswith("ERROR")
            assert SECRET not in (await call(client, "summarize", topic="x"))[1]
        assert not (a / "planted.txt").exists()


async def test_a_question_left_unanswered_is_refused_and_withdrawn_from_the_host(
    world: dict[str, Path],
) -> None:
    # A raw host that takes the question and never answers it (the bound itself is tested on a manual clock
    # in test_wrap_ask_units.py); wrap refuses the call and tells the host it gave the question up.
    params = wrapped(world, "--ask-timeout", "1")
    async with connected([params.command, *params.args]) as host:
        taken = host._take

        async def silent(message: dict[str, Any]) -> None:
            if message.get("method") == "elicitation/create":
                host.requests.append(message)
                return
            await taken(message)

        host._take = silent  # type: ignore[method-assign]
        capabilities: dict[str, Any] = {"elicitation": {}}
        info = {"name": "silent-host", "version": "0"}
        await host.request(
            "initialize", {"protocolVersion": LEGACY, "capabilities": capabilities, "clientInfo": info}
        )
        await host.notify("notifications/initialized")
        text = await host.text("read_path", {"path": str(world["a"] / "hello.txt")})
        assert "did not answer" in text
        assert "hello a" not in text
        (question,) = [m for m in host.requests if m["method"] == "elicitation/create"]
        for _ in range(100):
            if any(n["method"] == "notifications/cancelled" for n in host.notifications):
                break
            await anyio.sleep(0.05)
        cancels = [
            n["params"]["requestId"] for n in host.notifications if n["method"] == "notifications/cancelled"
        ]
        assert cancels == [question["id"]]


def test_the_typescript_sdk_clients_elicitation_handler_through_wrap(world: dict[str, Path]) -> None:
    a, b = world["a"], world["b"]
    params = wrapped(world)
    summary = ts_ask_session(
        [params.command, *params.args],
        [{"action": "accept", "content": {"folder": str(a), "access": "read"}}, {"action": "decline"}],
        [
            ("read_path", {"path": str(a / "hello.txt")}),
            ("note", {"text": "planted"}),
            ("read_path", {"path": str(b / "fixed.txt")}),
        ],
    )
    granted, note, declined = summary["results"]
    assert granted == {"isError": False, "text": "hello a"}
    assert note["text"].startswith("ERROR")  # the read grant is read only in the child's sandbox
    assert declined["isError"]
    assert "declined" in declined["text"]
    assert [q["folders"] for q in summary["questions"]] == [
        [str(a), str(world["ceiling"])],
        [str(b), str(world["ceiling"])],
    ]
    assert not (a / "planted.txt").exists()


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_resources_read_asks_and_the_grant_confines_the_child(
    world: dict[str, Path], mode: str
) -> None:
    a, b, ceiling = world["a"], world["b"], world["ceiling"]
    user = FormUser((str(a), "read"), "decline")
    async with Client(wrapped(world), mode=mode, elicitation_callback=user) as client:
        assert (client.protocol_version == "2026-07-28") is (mode == "auto")
        assert await read_file_uri(client, a / "hello.txt") == (False, "hello a")
        assert user.offered() == ([str(a), str(ceiling)], ["read"])
        assert "resource" in user.questions[0].message
        # the grant serves the next read and a tool call in the folder, with no new question
        assert await read_file_uri(client, a / "deep" / "note.txt") == (False, "deep note")
        assert await call(client, "read_path", path=str(a / "hello.txt")) == (False, "hello a")
        assert (await call(client, "note", text="planted"))[1].startswith("ERROR")  # read only in the sandbox
        assert len(user.questions) == 1
        error, text = await read_file_uri(client, b / "fixed.txt")
        assert error
        assert "declined" in text
        assert "fixed b" not in text
        error, text = await read_file_uri(client, world["outside"] / "secret.txt")
        assert error
        assert SECRET not in text
        assert len(user.questions) == 2
    assert not (a / "planted.txt").exists()
