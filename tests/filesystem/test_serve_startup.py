"""``mcp-roots serve`` over stdio answers a host's first requests (``initialize``, ``tools/list`` and the
other lists hosts ask at start) from the
answers it recorded on an earlier start while the SDK loads (``filesystem/_early``).

Every test runs the real command over real pipes, with a cache folder of its own. That the answers came
from the file, not from the SDK, is shown by editing the file: the edit reaches the client. That nothing
else changes is shown by comparing a first start's answers with a second's, and by the SDK's own client.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters

from mcp_roots.filesystem._early import LISTS
from tests.kit import LEGACY, serve_command, ts_session

SERVE = serve_command()


class Serve:
    """One ``mcp-roots serve`` process on pipes, spoken to line by line as a host does."""

    def __init__(
        self,
        args: list[str],
        cache: Path,
        cwd: Path | None = None,
        log_level: str | None = None,
        env: dict[str, str] | None = None,
        serve: list[str] = SERVE,
    ) -> None:
        env = {**os.environ, "XDG_CACHE_HOME": str(cache), **(env or {})}
        pipe = subprocess.PIPE
        level = [] if log_level is None else ["--log-level", log_level]
        command = [*serve, *level, *args]
        self.proc = subprocess.Popen(command, stdin=pipe, stdout=pipe, stderr=pipe, env=env, cwd=cwd)
        self.answers: dict[int, dict[str, Any]] = {}

    def send(self, *messages: dict[str, Any]) -> None:
        """Send the messages in one write (a host may send them back to back)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in messages))
        self.proc.stdin.flush()

    def answer(self, ident: int, roots: list[str]) -> dict[str, Any]:
        """Read until the answer to request ``ident``, answering the server's roots/list on the way (the SDK
        answers requests concurrently: other answers are kept for later)."""
        assert self.proc.stdout is not None
        while ident not in self.answers:
            line = self.proc.stdout.readline()
            assert line, f"the server ended: {self.stderr()}"
            message = json.loads(line)
            if message.get("method") == "roots/list":
                listed = [{"uri": Path(r).as_uri()} for r in roots]
                self.send({"jsonrpc": "2.0", "id": message["id"], "result": {"roots": listed}})
                continue
            if "method" in message:
                continue
            assert message["id"] not in self.answers, f"a second answer to {message['id']}"
            self.answers[message["id"]] = message
        return self.answers[ident]

    def close(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        return self.proc.wait(timeout=30)

    def stderr(self) -> str:
        assert self.proc.stderr is not None
        self.proc.kill()
        return self.proc.stderr.read().decode(errors="replace")


def initialize(ident: int = 0, version: str = LEGACY) -> dict[str, Any]:
    params = {"protocolVersion": version, "capabilities": {"roots": {"listChanged": True}}}
    return {"jsonrpc": "2.0", "id": ident, "method": "initialize", "params": {**params, "clientInfo": CLIENT}}


CLIENT = {"name": "host", "version": "1"}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def tools_list(ident: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": ident, "method": "tools/list"}


def call(ident: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    params = {"name": name, "arguments": arguments}
    return {"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": params}


@pytest.fixture
def served(tmp_path: Path) -> Path:
    folder = tmp_path / "served"
    folder.mkdir()
    (folder / "note.txt").write_text("hello\n")
    return folder


def start(served: Path, cache: Path, *extra: str) -> dict[str, Any]:
    """A host's start: initialize, initialized, tools/list, then one read; the answers and the exit."""
    server = Serve([*extra, str(served)], cache)
    try:
        server.send(initialize())
        init = server.answer(0, [str(served)])
        server.send(INITIALIZED, tools_list(1))
        listed = server.answer(1, [str(served)])
        server.send(call(2, "read_text_file", {"path": str(served / "note.txt")}))
        read = server.answer(2, [str(served)])
        code = server.close()
        assert server.proc.stderr is not None
        return {
            "initialize": init["result"],
            "tools/list": listed["result"],
            "read": read,
            "exit": code,
            "stderr": server.proc.stderr.read().decode(errors="replace"),
        }
    except BaseException:
        server.proc.kill()
        raise


def record(args: list[str], cache: Path) -> None:
    """A first start of ``serve ARGS`` with ``cache``: the answers a later start's lean path needs."""
    server = Serve(args, cache)
    try:
        server.send(initialize(), INITIALIZED, tools_list(1))
        server.answer(1, [])
        assert server.close() == 0
    finally:
        server.proc.kill()
    assert recorded(cache)


def recorded(cache: Path) -> list[Path]:
    return sorted((cache / "mcp-roots" / "serve").glob("*.json"))


def edit(file: Path, change: Any) -> None:
    stored = json.loads(file.read_text())
    for answers in stored["answers"].values():
        change(answers)
    file.write_text(json.dumps(stored))


def poison(file: Path) -> None:
    """Edit the first tool's description in the recorded tools/list: who serves it is then plain to see."""

    def poisoned(answers: dict[str, Any]) -> None:
        answers["tools/list"]["tools"][0]["description"] = "poisoned"

    edit(file, poisoned)


def test_a_second_start_gives_the_first_starts_answers_from_the_file(served: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first = start(served, cache)
    [file] = recorded(cache)
    assert file.stat().st_mode & 0o777 == 0o600
    assert file.parent.stat().st_mode & 0o777 == 0o700
    second = start(served, cache)
    assert second["initialize"] == first["initialize"]
    assert second["tools/list"] == first["tools/list"]
    assert len(first["tools/list"]["tools"]) == 14
    for run in (first, second):
        assert run["read"]["result"]["content"][0]["text"] == "hello\n"
        assert run["exit"] == 0
    assert recorded(cache) == [file]


def test_the_answers_come_from_the_file_while_the_sdk_answers_the_calls(served: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    start(served, cache)
    [file] = recorded(cache)

    poison(file)
    second = start(served, cache)
    assert second["tools/list"]["tools"][0]["description"] == "poisoned"
    assert second["read"]["result"]["content"][0]["text"] == "hello\n"
    # The SDK, once in, is asked the list given early; its answer differs, so the file goes.
    assert "the SDK's answer to tools/list differs" in second["stderr"]
    assert not file.exists()
    third = start(served, cache)
    assert third["tools/list"]["tools"][0]["description"] != "poisoned"
    assert recorded(cache) == [file]


def test_an_initialize_the_sdk_answers_otherwise_is_logged_and_the_file_removed(
    served: Path, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    start(served, cache)
    [file] = recorded(cache)

    def other_instructions(answers: dict[str, Any]) -> None:
        answers["initialize"]["instructions"] = "not what the SDK says"

    edit(file, other_instructions)
    server = Serve([str(served)], cache)
    server.send(initialize())
    assert server.answer(0, [str(served)])["result"]["instructions"] == "not what the SDK says"
    server.send(INITIALIZED, call(1, "list_allowed_directories", {}))
    assert "Allowed directories" in server.answer(1, [str(served)])["result"]["content"][0]["text"]
    assert server.close() == 0
    assert server.proc.stderr is not None
    assert "differs from the one recorded" in server.proc.stderr.read().decode()
    assert not file.exists()
    third = start(served, cache)  # records again, from the SDK
    assert third["initialize"]["instructions"] != "not what the SDK says"
    assert recorded(cache) == [file]


@pytest.mark.parametrize("how", ["others_can_write", "a_symlink", "another_owner", "not_json", "another_key"])
def test_a_file_that_is_not_exactly_as_written_is_not_used(served: Path, tmp_path: Path, how: str) -> None:
    cache = tmp_path / "cache"
    start(served, cache)
    [file] = recorded(cache)

    poison(file)
    poisoned = file.read_bytes()
    # The control: as the server writes it, the edited file is used (and then removed, as the SDK differs).
    assert start(served, cache)["tools/list"]["tools"][0]["description"] == "poisoned"
    fd = os.open(file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, poisoned)
    os.close(fd)
    if how == "others_can_write":
        file.chmod(0o622)
    elif how == "a_symlink":
        target = tmp_path / "elsewhere.json"
        file.rename(target)
        file.symlink_to(target)
    elif how == "another_owner":
        if os.geteuid() != 0:
            pytest.fail("needs root to give the file to another user (the suite runs as root here)")
        os.chown(file, 65534, 65534)
    elif how == "not_json":
        file.write_text(file.read_text()[:-10])
    else:
        stored = json.loads(file.read_text())
        stored["key"] = "0" * 64
        file.write_text(json.dumps(stored))
    assert start(served, cache)["tools/list"]["tools"][0]["description"] != "poisoned"


def test_another_command_line_has_its_own_answers(served: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    everything = start(served, cache)
    read_only = start(served, cache, "--read-only")
    assert len(recorded(cache)) == 2
    again = start(served, cache, "--read-only")
    names = [tool["name"] for tool in again["tools/list"]["tools"]]
    assert again["tools/list"] == read_only["tools/list"] != everything["tools/list"]
    assert "write_file" not in names
    assert len(names) == 10


def ask_every_list(served: Path, cache: Path) -> dict[str, Any]:
    """A host that asks for every list at once after initialize (Claude Desktop asks three): the answers
    (their result or error)."""
    server = Serve([str(served)], cache)
    server.send(initialize())
    server.answer(0, [str(served)])
    server.send(INITIALIZED, *({"jsonrpc": "2.0", "id": i, "method": m} for i, m in enumerate(LISTS, 1)))
    answers = {}
    for i, m in enumerate(LISTS, 1):
        answer = server.answer(i, [str(served)])
        answers[m] = answer.get("result", answer.get("error"))
    assert server.close() == 0
    return answers


def test_the_lists_a_host_asks_at_start_are_recorded_and_given(served: Path, tmp_path: Path) -> None:
    """serve has tools only: tools/list is recorded and given from the file; the other lists are "Method not
    found" (serve declares no prompts or resources), from the SDK each time, never recorded."""
    cache = tmp_path / "cache"
    start(served, cache)  # a host that asks for tools/list only
    [file] = recorded(cache)
    first = ask_every_list(served, cache)
    assert set(json.loads(file.read_text())["answers"][LEGACY]) == {"initialize", "tools/list"}
    assert len(first["tools/list"]["tools"]) == 14
    for method in LISTS[1:]:
        assert first[method]["code"] == -32601, first[method]
    assert ask_every_list(served, cache) == first
    assert recorded(cache) == [file]


def test_messages_back_to_back_each_get_one_answer(served: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    start(served, cache)
    server = Serve([str(served)], cache)
    server.send(
        initialize(),
        INITIALIZED,
        tools_list(1),
        call(2, "read_text_file", {"path": str(served / "note.txt")}),
        tools_list(3),
        {"jsonrpc": "2.0", "id": 4, "method": "ping"},
    )
    roots = [str(served)]
    assert server.answer(0, roots)["result"]["protocolVersion"] == LEGACY
    assert len(server.answer(1, roots)["result"]["tools"]) == 14
    assert server.answer(2, roots)["result"]["content"][0]["text"] == "hello\n"
    assert len(server.answer(3, roots)["result"]["tools"]) == 14
    assert server.answer(4, roots)["result"] == {}
    assert server.close() == 0
    assert server.proc.stdout is not None
    assert server.proc.stdout.read() == b""  # nothing more: the replayed initialize's answer was dropped


def test_a_version_not_recorded_and_a_request_first_go_to_the_sdk(served: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    start(served, cache)
    [file] = recorded(cache)

    poison(file)
    # An older version than the one recorded: the SDK answers it (and it is recorded beside the other).
    server = Serve([str(served)], cache)
    server.send(initialize(version="2025-06-18"), INITIALIZED, tools_list(1))
    assert server.answer(0, [str(served)])["result"]["protocolVersion"] == "2025-06-18"
    assert server.answer(1, [str(served)])["result"]["tools"][0]["description"] != "poisoned"
    assert server.close() == 0
    assert set(json.loads(file.read_text())["answers"]) == {LEGACY, "2025-06-18"}
    # A ping before initialize: everything from there is the SDK's.
    server = Serve([str(served)], cache)
    server.send({"jsonrpc": "2.0", "id": 9, "method": "ping"}, initialize(), INITIALIZED, tools_list(1))
    assert server.answer(9, [str(served)])["result"] == {}
    server.answer(0, [str(served)])
    assert server.answer(1, [str(served)])["result"]["tools"][0]["description"] != "poisoned"
    assert server.close() == 0


@pytest.mark.parametrize("recorded_before", [False, True], ids=["first_start", "later_start"])
def test_a_malformed_message_is_left_to_the_sdk_and_the_server_goes_on(
    served: Path, tmp_path: Path, recorded_before: bool
) -> None:
    cache = tmp_path / "cache"
    if recorded_before:
        start(served, cache)
    server = Serve([str(served)], cache)
    # A method that is not a string (no mapping can hold it): the early phase hands over there.
    server.send(initialize(), INITIALIZED, {"jsonrpc": "2.0", "id": 1, "method": ["tools/list"]})
    server.answer(0, [str(served)])
    assert server.proc.stdin is not None
    server.proc.stdin.write(b"[" * 50_000 + b"]" * 50_000 + b"\n")  # deeper than any JSON parser goes
    server.proc.stdin.flush()
    server.send(call(2, "read_text_file", {"path": str(served / "note.txt")}))
    assert server.answer(2, [str(served)])["result"]["content"][0]["text"] == "hello\n"
    assert server.close() == 0


def test_a_host_that_leaves_after_tools_list_ends_the_server(served: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    start(served, cache)
    server = Serve([str(served)], cache)
    server.send(initialize(), INITIALIZED, tools_list(1))
    server.answer(0, [])
    server.answer(1, [])
    assert server.close() == 0


def test_the_typescript_sdks_client_gets_the_recorded_answers(served: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    command = ["env", f"XDG_CACHE_HOME={cache}", *SERVE, str(served)]
    calls = [("read_text_file", {"path": str(served / "note.txt")})]
    first = ts_session(command, calls, [served])
    [file] = recorded(cache)
    poison(file)
    second = ts_session(command, calls, [served])
    assert second["tools"][0]["description"] == "poisoned"
    assert second["tools"][1:] == first["tools"][1:]
    assert second["results"] == first["results"]
    assert first["results"][0]["content"][0]["text"] == "hello\n"


def test_confine_starts_without_the_file(served: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first = start(served, cache, "--confine")
    assert first["read"]["result"]["content"][0]["text"] == "hello\n"
    assert recorded(cache) == []  # the cache folder is outside the roots this process is confined to


@pytest.fixture
def official_client_env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_the_sdks_client_on_both_eras(
    served: Path, official_client_env: dict[str, str], mode: str
) -> None:
    params = StdioServerParameters(command=SERVE[0], args=[*SERVE[1:], str(served)], env=official_client_env)
    for _ in range(2):  # the first start records, the second answers from the file
        with anyio.fail_after(60):
            async with Client(params, mode=mode) as client:
                names = [tool.name for tool in (await client.list_tools()).tools]
                result = await client.call_tool("read_text_file", {"path": str(served / "note.txt")})
        assert len(names) == 14
        assert "hello" in str(result.content[0])


def answers_to(server: Serve, count: int) -> list[dict[str, Any]]:
    """The next ``count`` answers, whatever their ids, the server's roots/list answered on the way."""
    assert server.proc.stdout is not None
    answers: list[dict[str, Any]] = []
    while len(answers) < count:
        message = json.loads(server.proc.stdout.readline())
        if message.get("method") == "roots/list":
            server.send({"jsonrpc": "2.0", "id": message["id"], "result": {"roots": []}})
        elif "method" not in message:
            answers.append(message)
    return answers


def test_a_reused_id_records_nothing(served: Path, tmp_path: Path) -> None:
    """ping and tools/list under one id, before either is answered: which answer is which cannot be told,
    so nothing is recorded, and the next start lists every tool."""
    cache = tmp_path / "cache"
    server = Serve([str(served)], cache)
    server.send(initialize())
    server.answer(0, [])
    server.send(INITIALIZED, {"jsonrpc": "2.0", "id": 1, "method": "ping"}, tools_list(1))
    assert server.proc.stdout is not None
    answers = answers_to(server, 2)
    assert sorted(len(a["result"].get("tools", ())) for a in answers) == [0, 14]
    assert server.close() == 0
    for file in recorded(cache):  # a file may hold initialize; never ping's answer as tools/list
        assert "tools/list" not in json.loads(file.read_text())["answers"][LEGACY]
    later = start(served, cache)
    assert len(later["tools/list"]["tools"]) == 14
    assert len(start(served, cache)["tools/list"]["tools"]) == 14


def test_an_id_the_sdk_may_read_as_another_records_nothing(served: Path, tmp_path: Path) -> None:
    """1.0 and 1: not the same JSON, maybe the same id to the SDK's parser: nothing recorded."""
    cache = tmp_path / "cache"
    server = Serve([str(served)], cache)
    server.send(initialize())
    server.answer(0, [])
    ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
    server.send(INITIALIZED, {"jsonrpc": "2.0", "id": 1.0, "method": "ping"}, tools_list(1), ping)
    server.answer(1, [])  # the SDK answers 1, and drops 1.0 (this one's own parser may not)
    server.answer(2, [])
    assert server.close() == 0
    assert len(start(served, cache)["tools/list"]["tools"]) == 14


VICTIM_FILES = 40


@pytest.mark.parametrize(
    "how", ["serve_is_a_symlink", "mcp_roots_is_a_symlink", "others_can_write", "another_owner"]
)
def test_a_cache_folder_not_the_users_own_is_not_used(served: Path, tmp_path: Path, how: str) -> None:
    """A cache folder another user controls: serve neither writes, renames nor prunes there (the victim's
    files stay, none is added), logs why, and starts without the cache."""
    cache = tmp_path / "cache"
    victim = tmp_path / "victim"
    victim.mkdir()
    for number in range(VICTIM_FILES):
        (victim / f"{number:032x}.json").write_text("{}")
        (victim / f"notes-{number}.json").write_text("{}")
    before = sorted(p.name for p in victim.iterdir())
    (cache / "mcp-roots").mkdir(parents=True)
    if how == "serve_is_a_symlink":
        (cache / "mcp-roots" / "serve").symlink_to(victim)
    elif how == "mcp_roots_is_a_symlink":
        (cache / "mcp-roots").rmdir()
        (victim / "serve").mkdir()
        (cache / "mcp-roots").symlink_to(victim)
        before = sorted(p.name for p in victim.iterdir())
    elif how == "others_can_write":
        (cache / "mcp-roots").chmod(0o777)
    else:
        if os.geteuid() != 0:
            pytest.fail("needs root to give the folder to another user (the suite runs as root here)")
        os.chown(cache / "mcp-roots", 65534, 65534)
    runs = [start(served, cache) for _ in range(2)]
    assert sorted(p.name for p in victim.iterdir()) == before
    for run in runs:
        assert len(run["tools/list"]["tools"]) == 14
        assert run["exit"] == 0
        assert "start-up cache in" in run["stderr"]
        assert "is not used" in run["stderr"]
    assert list((cache / "mcp-roots").glob("**/*.json")) == [] or how == "mcp_roots_is_a_symlink"
    if how == "mcp_roots_is_a_symlink":
        assert list((victim / "serve").iterdir()) == []


def test_serve_prunes_only_its_own_files(served: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    folder = cache / "mcp-roots" / "serve"
    folder.mkdir(parents=True, mode=0o700)
    (cache / "mcp-roots").chmod(0o700)
    for number in range(VICTIM_FILES):
        (folder / f"notes-{number}.json").write_text("{}")
        os.utime(folder / f"notes-{number}.json", (0, 0))
    start(served, cache)
    assert len(list(folder.glob("notes-*.json"))) == VICTIM_FILES
