"""serve's lean path (``filesystem/_lean``) gives every answer the SDK path gives, and hands the session to
the SDK at the first message it does not own, with nothing lost or answered twice.

Each test runs the real command over real pipes with a cache folder a first start filled (the lean path
serves only then); ``MCP_ROOTS_SERVE_LEAN=0`` is the same server with every message going to the SDK.
The differential tests drive both through the official Python client and compare the results.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters

from mcp_roots.filesystem._lean import MAX_IN_FLIGHT
from tests.filesystem.test_serve_startup import (
    INITIALIZED,
    Serve,
    call,
    initialize,
    poison,
    record,
    tools_list,
)
from tests.kit import RootsCallback, stdio_serve_command

pytestmark = pytest.mark.anyio

LEAN_OFF = {"MCP_ROOTS_SERVE_LEAN": "0"}
#: What the lean session logs (at debug) when it serves a session, and when it hands it over.
SERVING = "lean path: serving"
HANDED = "lean path: handed to the SDK"


def build_tree(base: Path) -> tuple[Path, Path]:
    """The served folder and a folder outside it, built the same way for every run."""
    if base.exists():
        shutil.rmtree(base)
    served, outside = base / "served", base / "outside"
    (served / "sub").mkdir(parents=True)
    outside.mkdir()
    (served / "note.txt").write_text("one\ntwo\nthree\n")
    (served / "sub" / "deep.txt").write_text("deep\n")
    (served / "pixel.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(64)))
    (served / "binary.dat").write_bytes(b"a\0b")
    (served / "keep.txt").write_text("kept\n")
    (outside / "secret.txt").write_text("secret\n")
    (served / "out").symlink_to(outside)  # a symlink out of the roots
    (served / "out.txt").symlink_to(outside / "secret.txt")
    return served, outside


TWO = {"oldText": "two", "newText": "2"}


def calls(served: Path, outside: Path) -> list[tuple[str, dict[str, Any]]]:
    """Every tool with good and bad arguments, and the refusal paths (outside, a symlink out)."""
    s, o = str(served), str(outside)
    return [
        ("read_text_file", {"path": f"{s}/note.txt"}),
        ("read_text_file", {"path": f"{s}/note.txt", "head": 2}),
        ("read_text_file", {"path": f"{s}/note.txt", "tail": 1}),
        ("read_text_file", {"path": f"{s}/note.txt", "head": 1, "tail": 1}),
        ("read_text_file", {"path": f"{s}/note.txt", "head": 1.5}),
        ("read_text_file", {"path": "note.txt"}),
        ("read_text_file", {"path": 5}),
        ("read_text_file", {}),
        ("read_text_file", {"path": f"{o}/secret.txt"}),
        ("read_text_file", {"path": f"{s}/out.txt"}),
        ("read_text_file", {"path": f"{s}/out/secret.txt"}),
        ("read_text_file", {"path": f"{s}/missing.txt"}),
        ("read_text_file", {"path": f"{s}/binary.dat"}),
        ("read_text_file", {"path": f"{s}/note.txt", "extra": True}),
        ("read_file", {"path": f"{s}/note.txt"}),
        ("read_file", {"path": f"{o}/secret.txt"}),
        ("read_media_file", {"path": f"{s}/pixel.png"}),
        ("read_media_file", {"path": f"{s}/note.txt"}),
        ("read_media_file", {"path": f"{s}/out.txt"}),
        ("read_multiple_files", {"paths": [f"{s}/note.txt", f"{o}/secret.txt", f"{s}/missing.txt"]}),
        ("read_multiple_files", {"paths": [f"{s}/out.txt", f"{s}/binary.dat"]}),
        ("read_multiple_files", {"paths": []}),
        ("read_multiple_files", {"paths": "note.txt"}),
        ("list_directory", {"path": s}),
        ("list_directory", {"path": o}),
        ("list_directory", {"path": f"{s}/out"}),
        ("list_directory_with_sizes", {"path": s, "sortBy": "size"}),
        ("list_directory_with_sizes", {"path": s, "sortBy": "colour"}),
        ("directory_tree", {"path": s}),
        ("directory_tree", {"path": s, "excludePatterns": ["sub"]}),
        ("directory_tree", {"path": s, "excludePatterns": [1]}),
        ("directory_tree", {"path": o}),
        ("search_files", {"path": s, "pattern": "**/*.txt"}),
        ("search_files", {"path": s, "pattern": "[z-a]"}),
        ("search_files", {"path": s, "pattern": 7}),
        ("search_files", {"path": f"{s}/out", "pattern": "*"}),
        ("get_file_info", {"path": f"{s}/sub"}),
        ("get_file_info", {"path": f"{s}/out.txt"}),
        ("list_allowed_directories", {}),
        ("write_file", {"path": f"{s}/new.txt", "content": "new\n"}),
        ("write_file", {"path": f"{o}/new.txt", "content": "x"}),
        ("write_file", {"path": f"{s}/out/new.txt", "content": "x"}),
        ("write_file", {"path": f"{s}/new2.txt"}),
        (
            "edit_file",
            {"path": f"{s}/note.txt", "edits": [{"oldText": "two", "newText": "2"}], "dryRun": True},
        ),
        ("edit_file", {"path": f"{s}/note.txt", "edits": [{"oldText": "two", "newText": "2"}]}),
        ("edit_file", {"path": f"{s}/note.txt", "edits": [{"oldText": "absent", "newText": "x"}]}),
        ("edit_file", {"path": f"{s}/note.txt", "edits": [{"oldText": "one"}]}),
        ("edit_file", {"path": f"{s}/out.txt", "edits": [{"oldText": "secret", "newText": "x"}]}),
        ("create_directory", {"path": f"{s}/made/deeper"}),
        ("create_directory", {"path": f"{o}/made"}),
        ("move_file", {"source": f"{s}/new.txt", "destination": f"{s}/moved.txt"}),
        ("move_file", {"source": f"{s}/moved.txt", "destination": f"{s}/keep.txt"}),
        ("move_file", {"source": f"{o}/secret.txt", "destination": f"{s}/stolen.txt"}),
        ("move_file", {"source": f"{s}/keep.txt", "destination": f"{o}/kept.txt"}),
        ("move_file", {"source": f"{s}/keep.txt"}),
    ]


#: The calls of a client whose roots all lie outside the ceiling: nothing is left to serve.
def no_roots_calls(served: Path) -> list[tuple[str, dict[str, Any]]]:
    s = str(served)
    return [
        ("read_text_file", {"path": f"{s}/note.txt"}),
        ("read_multiple_files", {"paths": [f"{s}/note.txt"]}),
        ("list_allowed_directories", {}),
        ("move_file", {"source": f"{s}/note.txt", "destination": f"{s}/n.txt"}),
        ("write_file", {"path": f"{s}/n.txt", "content": "x"}),
    ]


def comparable(name: str, result: dict[str, Any]) -> dict[str, Any]:
    """A result as compared: get_file_info's times are the run's own (the tree is built anew each run)."""
    if name == "get_file_info" and not result.get("isError"):
        text = result["content"][0]["text"]
        kept = "\n".join(
            line for line in text.splitlines() if not line.startswith(("created", "accessed", "modified"))
        )
        result = {**result, "content": [{**result["content"][0], "text": kept}], "structuredContent": None}
    return result


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    return tmp_path / "cache"


def params(served: Path, cache: Path, log: Path, env: dict[str, str], *extra: str) -> StdioServerParameters:
    """serve over stdio, its stderr (at debug) appended to ``log``."""
    command = stdio_serve_command("--log-level", "DEBUG", *extra, str(served))
    shell = ["-c", 'exec "$@" 2>>"$LEAN_LOG"', "sh", *command]
    environment = {**os.environ, "XDG_CACHE_HOME": str(cache), "LEAN_LOG": str(log), **env}
    return StdioServerParameters(command="sh", args=shell, env=environment)


async def session(
    server: StdioServerParameters, mode: str, roots: list[Path], todo: list[tuple[str, dict[str, Any]]]
) -> list[dict[str, Any]]:
    """The results of ``todo`` through the official Python client, as JSON."""
    results = []
    with anyio.fail_after(120):
        async with Client(server, mode=mode, list_roots_callback=RootsCallback(*roots)) as client:
            await client.list_tools()  # as a host does; the first start records it
            for name, arguments in todo:
                result = await client.call_tool(name, arguments)
                results.append(comparable(name, result.model_dump(mode="json", by_alias=True)))
    return results


async def fill(served: Path, cache: Path, log: Path) -> None:
    """A first start, which records the answers the lean path needs."""
    await session(params(served, cache, log, LEAN_OFF), "legacy", [served], [])
    assert recorded(cache), said(log)


def said(log: Path) -> str:
    return log.read_text()


def recorded(cache: Path) -> list[Path]:
    return list((cache / "mcp-roots" / "serve").glob("*.json"))


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_every_tool_answers_alike_on_the_lean_path_and_the_sdks(
    tmp_path: Path, cache: Path, mode: str
) -> None:
    """Every tool, good and bad arguments, outside paths and symlinks out: equal results on both paths.
    On the legacy era the lean path serves every call (no hand-over); 2026-07-28, which has no
    ``initialize``, goes to the SDK at its first request."""
    base = tmp_path / "tree"
    served, outside = build_tree(base)
    await fill(served, cache, tmp_path / "fill.log")
    runs = {}
    for path, env in (("sdk", LEAN_OFF), ("lean", {})):
        served, outside = build_tree(base)
        log = tmp_path / f"{path}.log"
        runs[path] = await session(params(served, cache, log, env), mode, [served], calls(served, outside))
        said = log.read_text()
        assert "Traceback" not in said, said
        if path == "lean":
            assert (SERVING in said, HANDED in said) == ((True, False) if mode == "legacy" else (False, True))
    todo = calls(served, outside)
    for (name, arguments), sdk, lean in zip(todo, runs["sdk"], runs["lean"], strict=True):
        assert lean == sdk, (name, arguments)
    refused = [r for r in runs["lean"] if r["isError"]]
    assert len(refused) > 25  # the refusal paths were reached, not answered alike by luck
    assert not (outside / "new.txt").exists()
    assert (outside / "secret.txt").read_text() == "secret\n"


async def test_a_client_whose_roots_are_all_outside_is_refused_alike(tmp_path: Path, cache: Path) -> None:
    """No roots left inside the ceiling: every tool, guarded or exempt, refused in the same words."""
    served, outside = build_tree(tmp_path / "tree")
    await fill(served, cache, tmp_path / "fill.log")
    runs = {}
    for path, env in (("sdk", LEAN_OFF), ("lean", {})):
        log = tmp_path / f"{path}.log"
        runs[path] = await session(
            params(served, cache, log, env), "legacy", [outside], no_roots_calls(served)
        )
        if path == "lean":
            assert SERVING in log.read_text()
            assert HANDED not in log.read_text()
    assert runs["lean"] == runs["sdk"]
    said = [result["content"][0]["text"] for result in runs["lean"]]
    assert all("(no roots)" in text or text == "Allowed directories:\n" for text in said), said


# --- the hand-over, line by line as a host sends ------------------------------------------------------------


def raw_start(served: Path, cache: Path, env: dict[str, str]) -> Serve:
    """serve at debug, initialized, its tools listed (the lean path's start when ``env`` leaves it on)."""
    server = Serve([str(served)], cache, log_level="DEBUG", env=env)
    server.send(initialize())
    server.answer(0, [str(served)])
    server.send(INITIALIZED, tools_list(1))
    server.answer(1, [str(served)])
    return server


def finish(server: Serve) -> tuple[dict[Any, dict[str, Any]], str]:
    """Close stdin; every answer left is read (a second answer to an id fails), with the server's log."""
    assert server.proc.stdin is not None
    assert server.proc.stdout is not None
    server.proc.stdin.close()
    for line in server.proc.stdout:
        message = json.loads(line)
        if "method" not in message:
            assert message["id"] not in server.answers, f"a second answer to {message['id']}"
            server.answers[message["id"]] = message
    assert server.proc.wait(timeout=60) == 0
    assert server.proc.stderr is not None
    return server.answers, server.proc.stderr.read().decode(errors="replace")


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A tree and a cache a first start of serve on it filled, shared by the raw tests (each builds the
    tree anew: the command line, and so the recorded answers, stay the same)."""
    base = tmp_path_factory.mktemp("lean")
    served, _ = build_tree(base / "tree")
    cache = base / "cache"
    finish(raw_start(served, cache, LEAN_OFF))
    assert recorded(cache)
    return base / "tree", cache


MODERN_META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}
#: What a client may send mid-session that the lean path does not own.
MID_SESSION: dict[str, dict[str, Any]] = {
    "prompts/get": {"method": "prompts/get", "params": {"name": "summarize"}},
    "resources/read": {"method": "resources/read", "params": {"uri": "file:///etc/passwd"}},
    "an unknown method": {"method": "vendor/unknown", "params": {}},
    "a 2026-07-28 request": {"method": "tools/list", "params": {"_meta": MODERN_META}},
}


def burst(served: Path, first: int, what: str) -> list[dict[str, Any]]:
    """Calls before and after the message ``what``, back to back with it, from id ``first`` on."""
    read = {"path": str(served / "note.txt")}
    written = str(served / f"w{first}.txt")
    return [
        call(first, "read_text_file", read),
        {"jsonrpc": "2.0", "id": first + 1, **MID_SESSION[what]},
        call(first + 2, "list_directory", {"path": str(served / "sub")}),
        {"jsonrpc": "2.0", "id": first + 3, "method": "ping"},
        call(first + 4, "write_file", {"path": written, "content": written}),
        call(first + 5, "read_text_file", {"path": written}),
    ]


def run_bursts(
    served: Path, cache: Path, env: dict[str, str], whats: list[tuple[int, str]]
) -> tuple[dict[Any, Any], str]:
    """One session: each burst (its first id, its message), answered before the next is sent."""
    server = raw_start(served, cache, env)
    try:
        for first, what in whats:
            messages = burst(served, first, what)
            server.send(*messages[:5])  # the read of the file written waits for the write's answer
            for ident in range(first, first + 5):
                server.answer(ident, [str(served)])
            server.send(messages[5])
            server.answer(first + 5, [str(served)])
        return finish(server)
    finally:
        server.proc.kill()


def test_a_message_the_lean_path_does_not_own_goes_to_the_sdk_with_nothing_lost(
    filled: tuple[Path, Path],
) -> None:
    """prompts/get, resources/read, an unknown method, a 2026-07-28 request, each mid-session on the lean
    path with calls back to back around it: every message answered once, each answer the SDK path's."""
    tree, cache = filled
    bursts = list(zip(range(10, 10 * (len(MID_SESSION) + 1), 10), MID_SESSION, strict=True))
    served, _ = build_tree(tree)
    sdk, _ = run_bursts(served, cache, LEAN_OFF, bursts)  # the SDK path's answers, one session
    for first, what in bursts:
        served, _ = build_tree(tree)
        lean, log = run_bursts(served, cache, {}, [(first, what)])
        assert "Traceback" not in log, log
        assert SERVING in log, log
        assert f"{HANDED} at {MID_SESSION[what]['method']!r}" in log, log
        ids = list(range(first, first + 6))
        assert sorted(lean) == [0, 1, *ids]
        assert [lean[i] for i in ids] == [sdk[i] for i in ids], what
        assert lean[first + 5]["result"]["content"][0]["text"].endswith(f"w{first}.txt")


def test_the_lists_serve_does_not_declare_are_answered_on_the_lean_path(filled: tuple[Path, Path]) -> None:
    """A host that asks for prompts and resources at start (serve declares neither): the lean session
    answers them as the SDK does (-32601, one log line each) and keeps serving, never handing over."""
    tree, cache = filled
    asked = ["prompts/list", "resources/list", "resources/templates/list"]
    answers: dict[str, list[dict[str, Any]]] = {}
    logs: dict[str, str] = {}
    for path, env in (("sdk", LEAN_OFF), ("lean", {})):
        served, _ = build_tree(tree)
        server = raw_start(served, cache, env)
        try:
            server.send(*({"jsonrpc": "2.0", "id": i, "method": m} for i, m in enumerate(asked, 10)))
            server.send(call(20, "read_text_file", {"path": str(served / "note.txt")}))
            answers[path] = [server.answer(i, [str(served)]) for i in (10, 11, 12, 20)]
            _, logs[path] = finish(server)
        finally:
            server.proc.kill()
    assert answers["lean"] == answers["sdk"]
    assert [a["error"]["code"] for a in answers["lean"][:3]] == [-32601] * 3
    assert SERVING in logs["lean"], logs["lean"]
    assert HANDED not in logs["lean"], logs["lean"]
    for method in asked:
        assert sum(f"'{method}'" in line for line in logs["lean"].splitlines() if "WARNING" in line) == 1


@pytest.mark.parametrize("path", ["sdk", "lean"])
def test_an_unknown_method_is_answered_method_not_found_and_logged_once(
    filled: tuple[Path, Path], path: str
) -> None:
    """-32601 for each; one log line per method name, for the first 32 names, then one line for the rest:
    a client cannot flood the log."""
    tree, cache = filled
    served, _ = build_tree(tree)
    server = raw_start(served, cache, LEAN_OFF if path == "sdk" else {})
    try:
        names = [f"vendor/m{i}" for i in range(40)] * 3
        server.send(*({"jsonrpc": "2.0", "id": i, "method": m} for i, m in enumerate(names, 10)))
        for ident in range(10, 10 + len(names)):
            error = server.answer(ident, [str(served)])["error"]
            assert error["code"] == -32601
        _, log = finish(server)
    finally:
        server.proc.kill()
    lines = [line for line in log.splitlines() if "WARNING" in line]
    for i in range(40):
        assert sum(f"'vendor/m{i}'" in line for line in lines) == (1 if i < 32 else 0), log
    assert sum("a method serve does not answer" in line for line in lines) == 32, log
    assert sum("no more are logged" in line for line in lines) == 1, log


def test_a_quiet_lean_session_has_the_sdk_check_the_answers_it_gave(filled: tuple[Path, Path]) -> None:
    """Answers given from a file the SDK disagrees with: once the session is quiet, the SDK checks them in
    the background and the file goes, while the session goes on serving on the lean path."""
    tree, cache = filled
    served, _ = build_tree(tree)
    [file] = recorded(cache)
    kept = file.read_bytes()
    try:
        poison(file)
        server = raw_start(served, cache, {})
        try:
            read = {"path": str(served / "note.txt")}
            server.send(call(2, "read_text_file", read))  # the roots/list asked at start answered on the way
            assert server.answer(2, [str(served)])["result"]["content"][0]["text"] == "one\ntwo\nthree\n"
            deadline = time.monotonic() + 120  # not a timing check: how long a loaded machine may take
            while file.exists():
                assert time.monotonic() < deadline, "the file given from was never checked"
                time.sleep(0.2)
            server.send(call(3, "read_text_file", read))
            assert server.answer(3, [str(served)])["result"]["content"][0]["text"] == "one\ntwo\nthree\n"
            _, log = finish(server)
        finally:
            server.proc.kill()
        assert "the SDK's answer to tools/list differs" in log, log
        assert SERVING in log, log
        assert HANDED not in log, log
    finally:
        file.write_bytes(kept)
        file.chmod(0o600)


def test_an_answer_to_the_lean_paths_roots_request_after_the_hand_over_is_not_the_sdks(
    filled: tuple[Path, Path],
) -> None:
    """The client answers the lean session's roots/list only after a message handed the session over:
    the answer is taken out of the SDK's input (the SDK never sees an answer to a request it did not
    send), and the SDK asks again for itself."""
    tree, cache = filled
    served, _ = build_tree(tree)
    server = Serve([str(served)], cache, log_level="DEBUG")
    assert server.proc.stdout is not None
    try:
        server.send(initialize(), INITIALIZED)
        asked = [json.loads(server.proc.stdout.readline()) for _ in range(2)]
        [lean_request] = [m for m in asked if m.get("method") == "roots/list"]
        assert str(lean_request["id"]).startswith("mcp-roots-lean-")
        server.send(
            {"jsonrpc": "2.0", "id": 1, "method": "prompts/get", "params": {"name": "x"}}
        )  # hand-over
        roots = {"roots": [{"uri": served.as_uri()}]}
        server.send({"jsonrpc": "2.0", "id": lean_request["id"], "result": roots})  # late
        server.send(call(2, "read_text_file", {"path": str(served / "note.txt")}))
        assert server.answer(1, [str(served)])["error"]["code"] == -32601
        assert server.answer(2, [str(served)])["result"]["content"][0]["text"] == "one\ntwo\nthree\n"
        _, log = finish(server)
    finally:
        server.proc.kill()
    assert HANDED in log, log
    assert str(lean_request["id"]) not in log, log  # no one complained of an answer it did not expect


def test_many_calls_back_to_back_are_each_answered_once_on_the_lean_path(filled: tuple[Path, Path]) -> None:
    """More calls at once than the lean session runs at once: they wait their turn, none is lost or
    answered twice, the roots/list answer still gets through."""
    tree, cache = filled
    served, _ = build_tree(tree)
    server = Serve([str(served)], cache, log_level="DEBUG")
    try:
        server.send(initialize(), INITIALIZED)
        count = 3 * MAX_IN_FLIGHT
        server.send(
            *(call(i, "read_text_file", {"path": str(served / "note.txt")}) for i in range(1, count + 1))
        )
        for ident in range(1, count + 1):
            assert server.answer(ident, [str(served)])["result"]["content"][0]["text"] == "one\ntwo\nthree\n"
        _, log = finish(server)
    finally:
        server.proc.kill()
    assert SERVING in log, log
    assert HANDED not in log, log


def test_an_oversize_line_is_dropped_and_the_lean_session_goes_on(tmp_path: Path) -> None:
    """A line over --max-message-bytes never reaches the lean session whole: dropped with a warning, and
    the next call is served on the lean path (the bound is the transport's, shared with the SDK path)."""
    served, _ = build_tree(tmp_path / "tree")
    cache = tmp_path / "cache"
    args = ["--max-message-bytes", "65536", str(served)]
    record(args, cache)
    server = Serve(args, cache, log_level="DEBUG")
    try:
        server.send(initialize(), INITIALIZED)
        huge = {"path": str(served / "big.txt"), "content": "x" * 200_000}
        server.send(
            call(1, "write_file", huge), call(2, "read_text_file", {"path": str(served / "note.txt")})
        )
        assert server.answer(2, [str(served)])["result"]["content"][0]["text"] == "one\ntwo\nthree\n"
        answers, log = finish(server)
    finally:
        server.proc.kill()
    assert 1 not in answers
    assert not (served / "big.txt").exists()
    assert "longer than 65536 bytes" in log, log
    assert SERVING in log, log
    assert HANDED not in log, log
