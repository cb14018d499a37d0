"""``mcp-roots serve --ask`` end to end with clients no one here wrote: the official Python SDK client on both
eras (stdio, HTTP) and the TypeScript SDK client's elicitation handler (``tests/interop/ts_ask.mjs``): grants
with their access, declines, revoking, the ceiling, ``--roots`` up front, a client with roots never asked."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from tests.kit import (
    FormUser,
    HttpServer,
    RootsCallback,
    serve_http,
    stdio_serve_command,
    text_of,
    ts_ask_session,
)

pytestmark = pytest.mark.anyio
SECRET = "OUTSIDE SECRET 90d4"
ERAS = {"legacy": "legacy", "2026-07-28": "auto"}  # the SDK client's mode for each era


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the server runs in a process of its own


@pytest.fixture
def world(tmp_path: Path) -> dict[str, Path]:
    outside, ceiling = tmp_path / "outside", tmp_path / "ceiling"
    for folder in (outside, ceiling / "a" / "deep", ceiling / "b"):
        folder.mkdir(parents=True)
    (outside / "secret.txt").write_text(SECRET)
    (ceiling / "a" / "hello.txt").write_text("hello a")
    (ceiling / "b" / "fixed.txt").write_text("fixed b")
    return {"outside": outside, "ceiling": ceiling, "a": ceiling / "a", "b": ceiling / "b"}


def served(world: dict[str, Path], *options: str) -> StdioServerParameters:
    argv = stdio_serve_command("--ask", "--ceiling", str(world["ceiling"]), *options)
    return StdioServerParameters(command=argv[0], args=argv[1:], env=dict(os.environ))


async def call(client: Client, tool: str, **arguments: str) -> tuple[bool, str]:
    result = await client.call_tool(tool, arguments)
    return bool(result.is_error), text_of(result)


@pytest.mark.parametrize("era", ERAS)
async def test_the_folder_granted_is_served_with_its_access(world: dict[str, Path], era: str) -> None:
    a, ceiling = world["a"], world["ceiling"]
    user = FormUser((str(a), "read"), "cancel", (str(a), "read-write"))
    async with Client(served(world), mode=ERAS[era], elicitation_callback=user) as client:
        assert await call(client, "list_allowed_directories") == (False, "Allowed directories:\n")
        assert await call(client, "read_text_file", path=str(a / "hello.txt")) == (False, "hello a")
        assert user.offered() == ([str(a), str(ceiling)], ["read"])  # read_text_file only reads
        assert await call(client, "list_allowed_directories") == (
            False,
            f"Allowed directories:\n{a} (read-only)",
        )
        assert await call(client, "read_text_file", path=str(world["b"] / "fixed.txt")) != (False, "fixed b")
        # A writing tool under the read grant asks for read and write.
        assert (await call(client, "write_file", path=str(a / "new.txt"), content="new"))[0] is False
        assert user.offered() == ([str(a), str(ceiling)], ["read-write", "read"])
        assert await call(client, "list_allowed_directories") == (False, f"Allowed directories:\n{a}")
    assert (a / "new.txt").read_text() == "new"


@pytest.mark.parametrize("era", ERAS)
async def test_a_decline_refuses_and_is_not_asked_again(world: dict[str, Path], era: str) -> None:
    user = FormUser("decline")
    async with Client(served(world), mode=ERAS[era], elicitation_callback=user) as client:
        for _ in range(2):
            error, text = await call(client, "read_text_file", path=str(world["a"] / "hello.txt"))
            assert error
            assert "declined" in text
    assert len(user.questions) == 1


async def test_a_grant_withdrawn_with_revoke_granted_folder_is_asked_again(world: dict[str, Path]) -> None:
    a = world["a"]
    user = FormUser((str(a), "read"), "decline")
    async with Client(served(world), mode="legacy", elicitation_callback=user) as client:
        assert await call(client, "read_text_file", path=str(a / "hello.txt")) == (False, "hello a")
        assert str(a) in (await call(client, "list_granted_folders"))[1]
        assert (await call(client, "revoke_granted_folder", folder=str(a)))[0] is False
        assert await call(client, "list_allowed_directories") == (False, "Allowed directories:\n")
        error, text = await call(client, "read_text_file", path=str(a / "hello.txt"))
        assert error
        assert "declined" in text
    assert len(user.questions) == 2


async def test_a_start_with_answers_recorded_still_asks(world: dict[str, Path], tmp_path: Path) -> None:
    """serve's second start of a command line answers from its recorded start-up answers; with --ask the
    calls still go where the question is asked (a lean session that cannot ask would refuse them)."""
    params = served(world)
    params.env = {**(params.env or {}), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    for start in range(2):
        user = FormUser((str(world["a"]), "read"))
        async with Client(params, mode="legacy", elicitation_callback=user) as client:
            read = await call(client, "read_text_file", path=str(world["a"] / "hello.txt"))
            assert read == (False, "hello a"), start
        assert len(user.questions) == 1, start
    assert list((tmp_path / "cache" / "mcp-roots" / "serve").glob("*.json")), "nothing was recorded"


async def test_nothing_outside_the_ceiling_is_offered(world: dict[str, Path]) -> None:
    (world["ceiling"] / "link").symlink_to(world["outside"])
    user = FormUser()
    async with Client(served(world), mode="legacy", elicitation_callback=user) as client:
        for path in (world["outside"] / "secret.txt", world["ceiling"] / "link" / "secret.txt"):
            error, text = await call(client, "read_text_file", path=str(path))
            assert error
            assert SECRET not in text
    assert user.questions == []


async def test_roots_are_granted_up_front_and_the_rest_asked(world: dict[str, Path]) -> None:
    user = FormUser("cancel")
    async with Client(
        served(world, "--roots", str(world["b"])), mode="legacy", elicitation_callback=user
    ) as client:
        assert await call(client, "read_text_file", path=str(world["b"] / "fixed.txt")) == (False, "fixed b")
        assert user.questions == []
        error, text = await call(client, "read_text_file", path=str(world["a"] / "hello.txt"))
        assert error
        assert "dismissed" in text
        assert len(user.questions) == 1


async def test_a_client_that_declared_roots_is_never_asked(world: dict[str, Path]) -> None:
    user = FormUser((str(world["a"]), "read"))
    roots = RootsCallback(world["b"])
    async with Client(
        served(world), mode="legacy", elicitation_callback=user, list_roots_callback=roots
    ) as client:
        assert await call(client, "read_text_file", path=str(world["b"] / "fixed.txt")) == (False, "fixed b")
        assert (await call(client, "read_text_file", path=str(world["a"] / "hello.txt")))[0]
    assert user.questions == []


async def http_session(server: HttpServer, mode: str, user: FormUser, path: Path) -> list[tuple[bool, str]]:
    """Two reads of ``path`` in one session of the SDK client over streamable HTTP (the server's token)."""
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    async with httpx2.AsyncClient(headers=server.headers, timeout=httpx2.Timeout(30, read=300)) as http:
        transport = streamable_http_client(server.url, http_client=http)
        async with Client(transport, mode=mode, elicitation_callback=user) as client:
            return [await call(client, "read_text_file", path=str(path)) for _ in range(2)]


@pytest.mark.parametrize("era", ERAS)
async def test_over_http_a_grant_lasts_the_legacy_session_or_the_tokens_lifetime(
    world: dict[str, Path], era: str
) -> None:
    a = world["a"]
    user = FormUser((str(a), "read"), (str(a), "read"))
    with serve_http("--ask", "--ceiling", str(world["ceiling"])) as server:
        assert await http_session(server, ERAS[era], user, a / "hello.txt") == [(False, "hello a")] * 2
        assert len(user.questions) == 1  # the second read is in the folder granted
        assert await http_session(server, ERAS[era], user, a / "hello.txt") == [(False, "hello a")] * 2
    # Legacy: the grant ended with the first session. 2026-07-28: kept for the token's principal.
    assert len(user.questions) == (2 if era == "legacy" else 1)


def test_the_typescript_sdk_clients_elicitation_handler_grants_and_declines(world: dict[str, Path]) -> None:
    a, b = world["a"], world["b"]
    summary = ts_ask_session(
        stdio_serve_command("--ask", "--ceiling", str(world["ceiling"])),
        [{"action": "accept", "content": {"folder": str(a), "access": "read"}}, {"action": "decline"}],
        [
            ("read_text_file", {"path": str(a / "hello.txt")}),
            ("list_allowed_directories", {}),
            ("read_text_file", {"path": str(b / "fixed.txt")}),
            ("read_text_file", {"path": str(b / "fixed.txt")}),
            ("read_text_file", {"path": str(world["outside"] / "secret.txt")}),
        ],
    )
    results = summary["results"]
    assert results[0] == {"isError": False, "text": "hello a"}
    assert results[1] == {"isError": False, "text": f"Allowed directories:\n{a} (read-only)"}
    for declined in results[2:4]:
        assert declined["isError"]
        assert "declined" in declined["text"]
    assert results[4]["isError"]
    assert SECRET not in results[4]["text"]
    assert [q["folders"] for q in summary["questions"]] == [
        [str(a), str(world["ceiling"])],
        [str(b), str(world["ceiling"])],
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--ask", "{root}"], "--ask needs --ceiling DIR"),
        (["{root}", "--ask-timeout", "5"], "--ask-timeout bounds --ask's questions; give --ask too"),
        (["--ask", "--ceiling", "{root}", "--ask-timeout", "0"], "--ask-timeout must be a positive number"),
        (["--ask", "--ceiling", "{root}", "--ask-timeout", "inf"], "--ask-timeout must be a positive number"),
    ],
)
def test_serve_ask_refuses_a_bad_command_line_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    from mcp_roots.cli import main

    code = main(["serve", *(a.replace("{root}", str(tmp_path)) for a in args)])
    err = capsys.readouterr().err
    assert code == 2
    assert message in err
    assert len(err.strip().splitlines()) == 1, err
