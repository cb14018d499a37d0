"""``mcp-roots serve`` where users of the official filesystem server look first: an empty roots list as the
official server 2.0.1 takes it, only the capabilities serve has, "Method not found" for what it lacks (no
traceback), its version in serverInfo, and a relative folder taken from the working folder.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.filesystem.test_serve_startup import INITIALIZED, Serve, call, initialize, record


@pytest.fixture
def served(tmp_path: Path) -> Path:
    folder = tmp_path / "served"
    (folder / "sub").mkdir(parents=True)
    (folder / "note.txt").write_text("hello\n")
    (folder / "sub" / "inner.txt").write_text("inner\n")
    return folder


def text(answer: dict[str, Any]) -> str:
    return str(answer["result"]["content"][0]["text"])


def test_an_empty_roots_list_keeps_the_folders_until_the_client_lists_one(
    served: Path, tmp_path: Path
) -> None:
    """The MCP Inspector declares roots and answers an empty list: the command-line folder still serves.
    Once the client has listed a folder, an empty list revokes it, and the refusal says so."""
    server = Serve([str(served)], tmp_path / "cache")
    try:
        server.send(initialize())
        server.answer(0, [])
        server.send(INITIALIZED, call(1, "read_text_file", {"path": str(served / "note.txt")}))
        first = server.answer(1, [])
        assert text(first) == "hello\n", first
        changed = {"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}
        server.send(changed, call(2, "read_text_file", {"path": str(served / "sub" / "inner.txt")}))
        assert text(server.answer(2, [str(served / "sub")])) == "inner\n"
        server.send(call(3, "read_text_file", {"path": str(served / "note.txt")}))
        narrowed = server.answer(3, [str(served / "sub")])
        assert narrowed["result"]["isError"], narrowed
        server.send(changed, call(4, "read_text_file", {"path": str(served / "sub" / "inner.txt")}))
        revoked = server.answer(4, [])
        assert revoked["result"]["isError"], revoked
        assert "revoked every folder" in text(revoked)
        assert server.close() == 0
    finally:
        server.proc.kill()


def test_only_the_tools_capability_and_method_not_found_for_the_rest(served: Path, tmp_path: Path) -> None:
    server = Serve([str(served)], tmp_path / "cache")
    try:
        server.send(initialize())
        init = server.answer(0, [])["result"]
        assert set(init["capabilities"]) == {"tools"}
        assert init["serverInfo"]["version"]
        asked = {
            1: ("prompts/get", {"name": "nothing"}),
            2: ("prompts/list", None),
            3: ("resources/read", {"uri": served.as_uri()}),
            4: ("no/such/method", None),
        }
        server.send(
            INITIALIZED,
            *(
                {"jsonrpc": "2.0", "id": i, "method": m, **({} if p is None else {"params": p})}
                for i, (m, p) in asked.items()
            ),
        )
        for ident in asked:
            assert server.answer(ident, [])["error"]["code"] == -32601
        server.send({"jsonrpc": "2.0", "id": 5, "method": "tools/list"})
        tools = {tool["name"]: tool for tool in server.answer(5, [])["result"]["tools"]}
        # As the official server declares them: head and tail are numbers; read_media_file's content blocks
        # the image/audio/resource union.
        for name in ("head", "tail"):
            assert tools["read_text_file"]["inputSchema"]["properties"][name]["type"] == "number"
        kinds = json.dumps(tools["read_media_file"]["outputSchema"])
        assert '"image"' in kinds
        assert '"resource"' in kinds
        assert '"blob"' in kinds
        assert server.close() == 0
        assert server.proc.stderr is not None
        assert "Traceback" not in server.proc.stderr.read().decode(errors="replace")
    finally:
        server.proc.kill()


def test_a_relative_folder_is_the_working_folders(served: Path, tmp_path: Path) -> None:
    server = Serve(["served"], tmp_path / "cache", cwd=tmp_path)
    try:
        server.send(initialize())
        server.answer(0, [])
        server.send(INITIALIZED, call(1, "list_allowed_directories", {}))
        assert str(served) in text(server.answer(1, []))
        server.send(call(2, "read_text_file", {"path": str(served / "note.txt")}))
        assert text(server.answer(2, [])) == "hello\n"
        assert server.close() == 0
    finally:
        server.proc.kill()


ARGUMENT_ERRORS: list[tuple[str, dict[str, Any], str]] = [
    ("read_text_file", {"path": 5}, "path must be a string, not an integer"),
    ("read_text_file", {"path": "note.txt", "head": "2"}, "head must be a number, not a string"),
    ("read_text_file", {}, "path is required"),
    ("read_text_file", {"path": "note.txt", "head": 1.5}, "head must be a whole number of lines, not 1.5"),
    ("read_multiple_files", {"paths": "note.txt"}, "paths must be an array, not a string"),
    ("read_multiple_files", {"paths": []}, "paths must have at least 1 item"),
    ("edit_file", {"path": "note.txt", "edits": [{"oldText": "a"}]}, "edits[0].newText is required"),
    (
        "search_files",
        {"path": ".", "pattern": "x", "excludePatterns": [1]},
        "excludePatterns[0] must be a string",
    ),
]


#: Where a call is served: the SDK (a first start), or the lean path (a later start: answers recorded).
PATHS = ["sdk", "lean"]


def serving(path: str, served: Path, cache: Path, log_level: str | None = None) -> Serve:
    """serve on ``served``, on the path named (the lean one after a first start recorded its answers)."""
    if path == "lean":
        record([str(served)], cache)
    return Serve([str(served)], cache, log_level=log_level)


@pytest.mark.parametrize("path", PATHS)
def test_argument_errors_are_in_the_schemas_words(served: Path, tmp_path: Path, path: str) -> None:
    """A bad argument is named with the rule its schema states, never a validator's internals (its type
    names, its documentation URL)."""
    server = serving(path, served, tmp_path / "cache")
    try:
        server.send(initialize())
        server.answer(0, [])
        server.send(
            INITIALIZED, *(call(i, name, args) for i, (name, args, _) in enumerate(ARGUMENT_ERRORS, 1))
        )
        for ident, (name, _, words) in enumerate(ARGUMENT_ERRORS, 1):
            said = text(server.answer(ident, [str(served)]))
            assert words in said, said
            assert name in said or "whole number" in said
            for internal in ("http", "pydantic", "validation error", "is a int", "type="):
                assert internal not in said, said
        assert server.close() == 0
    finally:
        server.proc.kill()


@pytest.mark.parametrize("path", PATHS)
def test_control_characters_of_a_clients_path_are_escaped_in_what_serve_writes(
    served: Path, tmp_path: Path, path: str
) -> None:
    """A path with terminal escapes (ESC, BEL, a C1 CSI): every answer naming it shows them as \\xNN."""
    hostile = "a\x1b[31mb\x07c\x9b2J"
    calls = [
        ("write_file", {"path": str(served / f"{hostile}.txt"), "content": "x"}),
        ("create_directory", {"path": str(served / f"{hostile}.d")}),
        (
            "move_file",
            {"source": str(served / f"{hostile}.txt"), "destination": str(served / f"{hostile}.m")},
        ),
        ("read_text_file", {"path": f"/etc/{hostile}"}),
        ("read_text_file", {"path": str(served / f"{hostile}.missing")}),
    ]
    server = serving(path, served, tmp_path / "cache", log_level="DEBUG")
    try:
        server.send(initialize())
        server.answer(0, [])
        server.send(INITIALIZED)
        for ident, (name, args) in enumerate(calls, 1):  # one at a time: the move needs the write done
            server.send(call(ident, name, args))
            said = text(server.answer(ident, [str(served)]))
            assert "\\x1b[31mb\\x07c\\x9b2J" in said, said
            assert not any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in said), said
        assert server.close() == 0
        assert server.proc.stderr is not None
        logged = server.proc.stderr.read().decode(errors="replace")
        assert "\x1b" not in logged
        assert "\x07" not in logged
        assert ("lean path: serving" in logged) == (path == "lean"), logged
    finally:
        server.proc.kill()


@pytest.mark.parametrize("path", PATHS)
def test_a_bidi_override_in_a_clients_path_is_escaped_in_the_failure_that_names_it(
    served: Path, tmp_path: Path, path: str
) -> None:
    """A name whose right-to-left override shows 'invoice.exe.txt' reversed, and a line separator: the failure
    that names it (move_file onto it: it exists) shows both as \\uNNNN, so they cannot reorder the line."""
    hostile = "invoice\u202etxt.exe\u2028"
    (served / hostile).write_text("x")
    server = serving(path, served, tmp_path / "cache")
    try:
        server.send(initialize())
        server.answer(0, [])
        server.send(INITIALIZED)
        move = {"source": str(served / "note.txt"), "destination": str(served / hostile)}
        server.send(call(1, "move_file", move))
        answer = server.answer(1, [str(served)])
        said = text(answer)
        assert answer["result"]["isError"] is True, said
        assert said == f"Destination already exists: {served}/invoice\\u202etxt.exe\\u2028", said
        assert server.close() == 0
    finally:
        server.proc.kill()
