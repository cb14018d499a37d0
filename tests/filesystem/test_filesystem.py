"""`mcp-roots serve` end to end: every tool, through the official Python client and the official TypeScript
SDK client, over stdio and streamable HTTP, on a real tree with real symlinks.

Each scenario is one table of (tool, arguments, check) run in one session; the same table and checks serve
every client and transport, so a case costs one line.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mcp_roots.filesystem import READ_ONLY_TOOLS, WRITE_TOOLS
from tests.kit import FsTree, py_session, serve_http, stdio_serve_command, ts_session
from tests.kit import text_of as text

Check = Callable[[dict[str, Any]], None]
Case = tuple[str, dict[str, Any], Check]

CLIENTS = ["stdio", "http"]


def ok(expected: str) -> Check:
    def check(result: dict[str, Any]) -> None:
        assert not result["isError"], text(result)
        assert text(result) == expected
        assert result["structured"] == {"content": expected}

    return check


def ok_that(predicate: Callable[[str], bool]) -> Check:
    def check(result: dict[str, Any]) -> None:
        assert not result["isError"], text(result)
        assert predicate(text(result)), text(result)

    return check


def refused(*words: str) -> Check:
    def check(result: dict[str, Any]) -> None:
        assert result["isError"], text(result)
        message = text(result)
        assert "TOP SECRET" not in message
        assert "Traceback" not in message
        for word in words:
            assert word in message, message

    return check


def expected_diff(path: Path) -> str:
    return (
        "```diff\n"
        f"Index: {path}\n"
        "===================================================================\n"
        f"--- {path}\toriginal\n"
        f"+++ {path}\tmodified\n"
        "@@ -1,3 +1,3 @@\n"
        " alpha\n"
        "-beta\n"
        "+BETA\n"
        " gamma\n"
        "```\n\n"
    )


def tree_names(result: dict[str, Any]) -> list[Any]:
    def names(entries: list[dict[str, Any]]) -> list[Any]:
        return [(e["name"], names(e["children"])) if "children" in e else e["name"] for e in entries]

    return names(json.loads(text(result)))


def full_session(t: FsTree) -> list[Case]:
    r, out = t.root, t.outside
    OUTSIDE = "outside the allowed roots"
    png = base64.b64encode((r / "pic.png").read_bytes()).decode()

    def media(result: dict[str, Any]) -> None:
        assert not result["isError"], text(result)
        assert result["content"] == [{"type": "image", "data": png, "mimeType": "image/png"}]

    def several(result: dict[str, Any]) -> None:
        assert not result["isError"]
        body = text(result)
        assert body.startswith(f"{r / 'abc.txt'}:\na\nb\nc\n\n---\n{out / 'secret.txt'}: Error - ")
        assert "TOP SECRET" not in body

    search_expected = sorted(
        str(r / p)
        for p in ["abc.txt", "lines.txt", "edit.txt", "sub/xy.txt", ".hidden/h.txt", "inner_link.txt"]
    )
    return [
        ("list_allowed_directories", {}, ok(f"Allowed directories:\n{r}")),
        # reading, inside
        ("read_text_file", {"path": str(r / "abc.txt")}, ok("a\nb\nc")),
        ("read_text_file", {"path": "abc.txt"}, ok("a\nb\nc")),  # relative: to the first root
        ("read_text_file", {"path": str(r / "abc.txt"), "head": 2}, ok("a\nb")),
        ("read_text_file", {"path": str(r / "abc.txt"), "tail": 2}, ok("b\nc")),
        ("read_text_file", {"path": str(r / "abc.txt"), "tail": 9}, ok("a\nb\nc")),
        ("read_text_file", {"path": str(r / "lines.txt"), "head": 2}, ok("1\n2")),
        ("read_text_file", {"path": str(r / "lines.txt"), "tail": 2}, ok("4\n5\n")),
        (
            "read_text_file",
            {"path": str(r / "lines.txt"), "head": 1, "tail": 1},
            refused("both head and tail"),
        ),
        ("read_file", {"path": str(r / "abc.txt")}, ok("a\nb\nc")),
        ("read_text_file", {"path": str(r / "inner_link.txt")}, ok("x\ny\n")),
        ("read_text_file", {"path": str(r / "bin.dat")}, refused("binary", "read_media_file")),
        ("read_media_file", {"path": str(r / "pic.png")}, media),
        ("read_multiple_files", {"paths": [str(r / "abc.txt"), str(out / "secret.txt")]}, several),
        # reading, outside: plainly, through '..', through a symlinked file and a symlinked directory
        ("read_text_file", {"path": str(out / "secret.txt")}, refused(OUTSIDE)),
        ("read_text_file", {"path": f"{r}/../outside/secret.txt"}, refused("Access denied")),
        ("read_text_file", {"path": str(r / "escape.txt")}, refused(OUTSIDE)),
        ("read_text_file", {"path": str(r / "escape_dir" / "secret.txt")}, refused(OUTSIDE)),
        ("read_text_file", {"path": str(r / "escape.txt"), "head": 1}, refused(OUTSIDE)),
        ("read_media_file", {"path": str(r / "escape.txt")}, refused(OUTSIDE)),
        ("get_file_info", {"path": str(r / "escape.txt")}, refused(OUTSIDE)),
        ("list_directory", {"path": str(out)}, refused(OUTSIDE)),
        ("list_directory", {"path": str(r / "escape_dir")}, refused(OUTSIDE)),
        ("directory_tree", {"path": str(r / "escape_dir")}, refused(OUTSIDE)),
        ("search_files", {"path": str(out), "pattern": "**"}, refused(OUTSIDE)),
        # listing
        ("list_directory", {"path": str(r / "sub")}, ok("[DIR] deep\n[FILE] xy.txt")),
        (
            "list_directory_with_sizes",
            {"path": str(r / "sub"), "sortBy": "size"},
            ok(
                f"[DIR] {'deep':<30} \n[FILE] {'xy.txt':<30} {'4 B':>10}\n\n"
                "Total: 1 files, 1 directories\nCombined size: 4 B"
            ),
        ),
        (
            "directory_tree",
            {"path": str(r / "sub")},
            ok(
                json.dumps(
                    [
                        {"name": "deep", "type": "directory", "children": [{"name": "z.py", "type": "file"}]},
                        {"name": "xy.txt", "type": "file"},
                    ],
                    indent=2,
                )
            ),
        ),
        (
            "directory_tree",
            {"path": str(r), "excludePatterns": ["node_modules", "many", ".hidden", "*.txt", "**/*.py"]},
            lambda res: assert_equal(
                tree_names(res),
                # '*.txt' has a '*': it matches at the top only, as minimatch does; 'many' at any depth
                [
                    "bin.dat",
                    "code.js",
                    ("empty", []),
                    "escape_dir",
                    "pic.png",
                    ("sub", [("deep", []), "xy.txt"]),
                ],
            ),
        ),
        (
            "search_files",
            {"path": str(r), "pattern": "**/*.txt", "excludePatterns": ["many/**", "many"]},
            ok_that(lambda body: sorted(body.splitlines()) == search_expected),
        ),
        ("search_files", {"path": str(r), "pattern": "*.py"}, ok("No matches found")),
        ("search_files", {"path": str(r), "pattern": "**/*.py"}, ok(str(r / "sub" / "deep" / "z.py"))),
        (
            "get_file_info",
            {"path": str(r / "abc.txt")},
            ok_that(
                lambda body: "size: 5" in body and "isFile: true" in body and "isDirectory: false" in body
            ),
        ),
        # writing
        (
            "edit_file",
            {"path": str(r / "edit.txt"), "edits": [{"oldText": "beta", "newText": "BETA"}], "dryRun": True},
            ok(expected_diff(r / "edit.txt")),
        ),
        (
            "read_text_file",
            {"path": str(r / "edit.txt")},
            ok("alpha\nbeta\ngamma\n"),
        ),  # dryRun changed nothing
        (
            "edit_file",
            {"path": str(r / "edit.txt"), "edits": [{"oldText": "beta", "newText": "BETA"}]},
            ok(expected_diff(r / "edit.txt")),
        ),
        ("read_text_file", {"path": str(r / "edit.txt")}, ok("alpha\nBETA\ngamma\n")),
        (
            "edit_file",
            {"path": str(r / "edit.txt"), "edits": [{"oldText": "nowhere", "newText": "x"}]},
            refused("Could not find exact match"),
        ),
        (
            "edit_file",
            {"path": str(r / "escape.txt"), "edits": [{"oldText": "TOP", "newText": "x"}]},
            refused(OUTSIDE),
        ),
        (
            "write_file",
            {"path": str(r / "new.txt"), "content": "hello"},
            ok(f"Successfully wrote to {r / 'new.txt'}"),
        ),
        ("read_text_file", {"path": str(r / "new.txt")}, ok("hello")),
        ("write_file", {"path": str(out / "planted.txt"), "content": "x"}, refused(OUTSIDE)),
        ("write_file", {"path": str(r / "escape.txt"), "content": "pwned"}, refused(OUTSIDE)),
        ("write_file", {"path": str(r / "escape_dir" / "planted.txt"), "content": "x"}, refused(OUTSIDE)),
        (
            "create_directory",
            {"path": str(r / "made" / "a" / "b")},
            ok(f"Successfully created directory {r / 'made' / 'a' / 'b'}"),
        ),
        ("create_directory", {"path": str(r / "escape_dir" / "made")}, refused(OUTSIDE)),
        (
            "move_file",
            {"source": str(r / "new.txt"), "destination": str(r / "made" / "new.txt")},
            ok(f"Successfully moved {r / 'new.txt'} to {r / 'made' / 'new.txt'}"),
        ),
        (
            "move_file",
            {"source": str(r / "abc.txt"), "destination": str(r / "lines.txt")},
            refused("Destination already exists"),
        ),
        (
            "move_file",
            {"source": str(r / "made" / "new.txt"), "destination": str(out / "stolen.txt")},
            refused(OUTSIDE),
        ),
        (
            "move_file",
            {"source": str(out / "secret.txt"), "destination": str(r / "got.txt")},
            refused(OUTSIDE),
        ),
        ("read_text_file", {"path": str(r / "lines.txt")}, ok("1\n2\n3\n4\n5\n")),
    ]


def assert_equal(actual: object, expected: object) -> None:
    assert actual == expected


def check_full(summary: dict[str, Any], t: FsTree, cases: list[Case]) -> None:
    names = {tool["name"] for tool in summary["tools"]}
    assert names == set(READ_ONLY_TOOLS) | set(WRITE_TOOLS)
    for tool in summary["tools"]:
        hints = tool["annotations"]
        assert hints["openWorldHint"] is False
        assert hints["readOnlyHint"] is (tool["name"] in READ_ONLY_TOOLS), tool["name"]
    assert len(summary["results"]) == len(cases)
    for (name, args, check), result in zip(cases, summary["results"], strict=True):
        try:
            check(result)
        except AssertionError as exc:
            raise AssertionError(f"{name}({args}): {exc}") from None
    # Nothing outside was read, written, planted or moved.
    assert sorted(p.name for p in t.outside.iterdir()) == ["secret.txt"]
    assert (t.outside / "secret.txt").read_text() == "TOP SECRET"
    assert (t.root / "escape.txt").is_symlink()


def read_only_cases(t: FsTree) -> list[Case]:
    return [
        ("read_text_file", {"path": str(t.root / "abc.txt")}, ok("a\nb\nc")),
        ("write_file", {"path": str(t.root / "new.txt"), "content": "x"}, refused()),
        ("create_directory", {"path": str(t.root / "made")}, refused()),
    ]


def check_read_only(summary: dict[str, Any], t: FsTree) -> None:
    assert {tool["name"] for tool in summary["tools"]} == set(READ_ONLY_TOOLS)
    for (_, _, check), result in zip(read_only_cases(t), summary["results"], strict=True):
        check(result)
    assert not (t.root / "new.txt").exists()
    assert not (t.root / "made").exists()


def ceiling_cases(t: FsTree) -> list[Case]:
    return [
        ("list_allowed_directories", {}, ok(f"Allowed directories:\n{t.root / 'sub'}")),
        ("read_text_file", {"path": str(t.root / "sub" / "xy.txt")}, ok("x\ny\n")),
        ("read_text_file", {"path": str(t.root / "abc.txt")}, refused("outside the allowed roots")),
        ("read_text_file", {"path": str(t.outside / "secret.txt")}, refused("outside the allowed roots")),
    ]


def cap_cases(t: FsTree) -> list[Case]:
    def capped_search(result: dict[str, Any]) -> None:
        assert not result["isError"]
        lines = text(result).splitlines()
        assert len(lines) == 6
        assert lines[-1].startswith("[truncated: more than 5 results")
        assert all(line.startswith(str(t.root)) for line in lines[:5])

    def capped_tree(result: dict[str, Any]) -> None:
        assert not result["isError"]
        body, marker = text(result).rsplit("\n", 1)
        assert marker.startswith("[truncated: more than 5 results")
        assert len(json.loads(body)) <= 5

    def capped_listing(result: dict[str, Any]) -> None:
        assert not result["isError"]
        lines = text(result).splitlines()
        assert all(line.startswith("[FILE] f") for line in lines[:5])  # 5 of the 12, in name order
        assert len(lines) == 6
        assert lines[-1].startswith("[truncated: the directory has more than 5 entries")

    return [
        ("list_directory", {"path": str(t.root / "many")}, capped_listing),
        ("list_directory", {"path": str(t.root / "sub")}, ok("[DIR] deep\n[FILE] xy.txt")),  # under the cap
        ("search_files", {"path": str(t.root), "pattern": "**/*.txt"}, capped_search),
        ("directory_tree", {"path": str(t.root)}, capped_tree),
        (
            "search_files",
            # exactly 5 matches: at the cap, not over it
            {"path": str(t.root), "pattern": "**/*.txt", "excludePatterns": ["many", ".hidden"]},
            ok_that(lambda body: "truncated" not in body),
        ),
    ]


def calls(cases: list[Case]) -> list[tuple[str, dict[str, Any]]]:
    return [(name, args) for name, args, _ in cases]


# --- the Python client (asyncio and trio) -------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("transport", CLIENTS)
async def test_every_tool_python_client(tmp_path: Path, transport: str) -> None:
    t = FsTree.make(tmp_path)
    cases = full_session(t)
    if transport == "stdio":
        summary = await py_session(stdio_serve_command(str(t.root)), calls(cases))
    else:
        with serve_http(str(t.root)) as server:
            summary = await py_session(server, calls(cases))
    check_full(summary, t, cases)


@pytest.mark.anyio
@pytest.mark.parametrize("transport", CLIENTS)
async def test_read_only_python_client(tmp_path: Path, transport: str) -> None:
    t = FsTree.make(tmp_path)
    if transport == "stdio":
        summary = await py_session(stdio_serve_command("--read-only", str(t.root)), calls(read_only_cases(t)))
    else:
        with serve_http("--read-only", str(t.root)) as server:
            summary = await py_session(server, calls(read_only_cases(t)))
    check_read_only(summary, t)


@pytest.mark.anyio
@pytest.mark.parametrize("transport", CLIENTS)
async def test_client_roots_narrow_and_never_widen_python_client(tmp_path: Path, transport: str) -> None:
    t = FsTree.make(tmp_path)
    roots = [t.root / "sub", t.outside]  # one inside the ceiling, one outside it
    cases = ceiling_cases(t)
    if transport == "stdio":
        summary = await py_session(stdio_serve_command(str(t.root)), calls(cases), roots)
    else:
        with serve_http(str(t.root)) as server:
            summary = await py_session(server, calls(cases), roots)
    for (_, _, check), result in zip(cases, summary["results"], strict=True):
        check(result)


@pytest.mark.anyio
async def test_search_and_tree_are_capped_python_client(tmp_path: Path) -> None:
    t = FsTree.make(tmp_path)
    cases = cap_cases(t)
    summary = await py_session(stdio_serve_command("--max-results", "5", str(t.root)), calls(cases))
    for (_, _, check), result in zip(cases, summary["results"], strict=True):
        check(result)


# --- the TypeScript SDK client ------------------------------------------------------------------------


@pytest.mark.parametrize("transport", CLIENTS)
def test_every_tool_typescript_client(tmp_path: Path, transport: str) -> None:
    t = FsTree.make(tmp_path)
    cases = full_session(t)
    if transport == "stdio":
        summary = ts_session(stdio_serve_command(str(t.root)), calls(cases))
    else:
        with serve_http(str(t.root)) as server:
            summary = ts_session(server, calls(cases))
    check_full(summary, t, cases)


@pytest.mark.parametrize("transport", CLIENTS)
def test_read_only_typescript_client(tmp_path: Path, transport: str) -> None:
    t = FsTree.make(tmp_path)
    if transport == "stdio":
        summary = ts_session(stdio_serve_command("--read-only", str(t.root)), calls(read_only_cases(t)))
    else:
        with serve_http("--read-only", str(t.root)) as server:
            summary = ts_session(server, calls(read_only_cases(t)))
    check_read_only(summary, t)


@pytest.mark.parametrize("transport", CLIENTS)
def test_client_roots_narrow_and_never_widen_typescript_client(tmp_path: Path, transport: str) -> None:
    t = FsTree.make(tmp_path)
    roots = [t.root / "sub", t.outside]
    cases = ceiling_cases(t)
    if transport == "stdio":
        summary = ts_session(stdio_serve_command(str(t.root)), calls(cases), roots)
    else:
        with serve_http(str(t.root)) as server:
            summary = ts_session(server, calls(cases), roots)
    for (_, _, check), result in zip(cases, summary["results"], strict=True):
        check(result)


def test_search_and_tree_are_capped_typescript_client(tmp_path: Path) -> None:
    t = FsTree.make(tmp_path)
    cases = cap_cases(t)
    summary = ts_session(stdio_serve_command("--max-results", "5", str(t.root)), calls(cases))
    for (_, _, check), result in zip(cases, summary["results"], strict=True):
        check(result)


# --- the command line -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "needs the directories it may serve"),
        (["--roots", ","], "names no directories"),
        (["{root}", "--max-results", "0"], "--max-results must be at least 1"),
        (["{root}", "--max-message-bytes", "0"], "--max-message-bytes must be at least 1"),
        (["{root}/does-not-exist"], "does not exist"),
        (["{root}/abc.txt"], "'{root}/abc.txt' is not a directory: mcp-roots serve serves directories"),
        ([str(Path.home())], "pass --allow-home (allow_home=True in Python) if you really mean it"),
        (["{root}", "--timeout", "0"], "--timeout must be a positive number of seconds, not 0"),
        (["{root}", "--timeout", "-1"], "--timeout must be a positive number of seconds, not -1"),
        (["{root}", "--timeout", "inf"], "--timeout must be a positive number of seconds, not inf"),
        (["{root}", "--timeout", "nan"], "--timeout must be a positive number of seconds, not nan"),
        (["{root}", "--state-key-file", "{root}/no.key"], "state key file {root}/no.key: cannot read it"),
        (["{root}", "--state-key-file", "{root}/sub"], "state key file {root}/sub: cannot read it"),
        (["{root}", "--state-key-file", "{root}/abc.txt"], "the key must be at least 32 bytes"),
    ],
)
def test_serve_refuses_to_start_with_a_clear_error(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
    message: str,
) -> None:
    from mcp_roots.cli import main

    monkeypatch.delenv("MCP_ROOTS", raising=False)
    monkeypatch.chdir(tmp_path)
    t = FsTree.make(tmp_path)
    code = main(["serve", *(a.replace("{root}", str(t.root)) for a in args)])
    err = capsys.readouterr().err
    assert code == 2
    assert message.replace("{root}", str(t.root)) in err
    assert len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err


def test_serve_confine_serves_inside_and_refuses_outside(tmp_path: Path) -> None:
    # The process is confined by Landlock to the served directory (tests/sandbox/ shows the kernel
    # refusing an unguarded read); here the guarded tools keep working under that confinement.
    t = FsTree.make(tmp_path)
    cases = [
        ("read_text_file", {"path": str(t.root / "abc.txt")}, ok("a\nb\nc")),
        ("read_text_file", {"path": str(t.outside / "secret.txt")}, refused("outside the allowed roots")),
    ]
    summary = ts_session(stdio_serve_command("--confine", str(t.root)), calls(cases))
    for (_, _, check), result in zip(cases, summary["results"], strict=True):
        check(result)


@pytest.mark.anyio
async def test_serve_reads_a_tilde_path_beneath_the_home_directory_and_refuses_one_outside_stdio(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Models write '~/...': serve expands it to the home directory before the check, as the official server
    does (it was refused as a relative name), and the expanded path is still refused outside the roots."""
    home = tmp_path / "home"
    (home / "project").mkdir(parents=True)
    (home / "project" / "notes.txt").write_text("from home")
    (home / "secret.txt").write_text("SECRET")
    monkeypatch.setenv("HOME", str(home))
    cases = [
        ("read_text_file", {"path": "~/project/notes.txt"}, ok("from home")),
        ("read_text_file", {"path": "~/secret.txt"}, refused("outside the allowed roots")),
        ("read_text_file", {"path": "~/project/../secret.txt"}, refused("outside the allowed roots")),
    ]
    summary = await py_session(stdio_serve_command(str(home / "project")), calls(cases))
    for (_, _, check), result in zip(cases, summary["results"], strict=True):
        check(result)
        assert "SECRET" not in str(result)
