"""The broker table: hostile files/* requests as rows, each run through every method against the host
(FileBroker.handle with real files), and hostile answers as rows run through the server side
(BrokeredFiles over a real in-memory connection). A new case costs one line.

Each table has controls: a row that must succeed (so a row failing for the wrong reason is caught) and a
row that always fails.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import anyio
import mcp_types
import pytest
from mcp import Client
from mcp.client.session import ClientSession
from mcp.server import MCPServer
from mcp.server.mcpserver import Context

from mcp_roots import BrokerError, RootSet, RootsProvider
from mcp_roots.broker import FileBroker, _sdk, enable_brokering, files

pytestmark = pytest.mark.anyio

OK = "ok"

# --- host side: every method, every path form ----------------------------------------------------------

# (label, path value, expected reason; OK = the control that must work). MISSING leaves the field out.
MISSING = object()
PATH_ROWS: list[tuple[str, object, str]] = [
    ("control: a plain name", "dir/f.txt", OK),
    ("control: always fails", "../f.txt", "INVALID_PATH"),
    ("dotdot inside", "dir/../../f.txt", "INVALID_PATH"),
    ("absolute", "/etc/passwd", "INVALID_PATH"),
    ("backslash", "dir\\f.txt", "INVALID_PATH"),
    ("drive", "C:/f.txt", "INVALID_PATH"),
    ("drive relative", "c:f.txt", "INVALID_PATH"),
    ("UNC", "//server/share", "INVALID_PATH"),
    ("NUL", "dir/f\x00.txt", "INVALID_PATH"),
    ("newline", "dir/f\n.txt", "INVALID_PATH"),
    ("DEL", "dir/f\x7f", "INVALID_PATH"),
    ("too long", "a/" * 2100, "INVALID_PATH"),
    ("not a string", 5, "INVALID_PATH"),
    ("a list", ["dir"], "INVALID_PATH"),
    ("missing", MISSING, "INVALID_PATH"),
    ("symlink out of the root", "out/f.txt", "PERMISSION_DENIED"),
    ("symlink to the outside file", "outfile", "PERMISSION_DENIED"),
]

# Where a method acts on the final name itself (never following it), a link to the outside is an entry
# like any other: delete and rename move or remove the link, create finds the name taken. The outside file
# is untouched either way (the test checks it).
ACTS_ON_THE_LINK = {"files/delete": OK, "files/rename": OK, "files/create": "CONCURRENCY_CONFLICT"}


def _params(method: str, path: object) -> dict[str, Any]:
    """The smallest valid params of ``method`` whose target is ``path`` (the row's value)."""
    base: dict[str, Any] = {} if path is MISSING else {"path": path}
    extra: dict[str, dict[str, Any]] = {
        "files/read": {},
        "files/stat": {},
        "files/list": {},
        "files/write": {"content": base64.b64encode(b"new").decode()},
        "files/create": {"type": "file"},
        "files/delete": {},
        "files/rename": {"newPath": "dir/renamed.txt"},
        "files/watch": {},
    }
    return {**base, **extra[method]}


PATH_METHODS = [
    "files/read",
    "files/stat",
    "files/list",
    "files/write",
    "files/create",
    "files/delete",
    "files/rename",
    "files/watch",
]


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    (root / "dir").mkdir(parents=True)
    (root / "dir" / "f.txt").write_text("inside")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f.txt").write_text("OUTSIDE")
    (root / "out").symlink_to(outside)
    (root / "outfile").symlink_to(outside / "f.txt")
    return root


def _ok_for(method: str, path: object) -> bool:
    """The control row's target suits every method but two: list and watch need a folder, create a new
    name; those get their folder / new name instead (the control must succeed)."""
    return path == "dir/f.txt"


async def _run_host(broker: FileBroker, method: str, params: dict[str, Any]) -> str:
    try:
        await broker.handle(method, params)
    except BrokerError as exc:
        return exc.reason
    return OK


@pytest.mark.parametrize("method", PATH_METHODS)
@pytest.mark.parametrize(("label", "path", "expected"), PATH_ROWS, ids=[r[0] for r in PATH_ROWS])
async def test_every_path_form_through_every_method(
    tree: Path, method: str, label: str, path: object, expected: str
) -> None:
    if expected == OK and method in ("files/list", "files/watch"):
        path = "dir"
    if expected == OK and method == "files/create":
        path = "dir/new.txt"
    if path == "outfile":
        expected = ACTS_ON_THE_LINK.get(method, expected)
    server = MCPServer("table")
    enable_brokering(server)
    broker = FileBroker(RootSet.from_paths([tree]), rate=None)
    client = Client(server, mode="legacy", list_roots_callback=RootsProvider([tree]))
    broker.install(client)
    async with client, broker:  # a real connection, so files/watch can run too
        outcome = await _run_host(broker, method, _params(method, path))
    assert outcome == expected, f"{label} through {method}"
    assert (tree.parent / "outside" / "f.txt").read_text() == "OUTSIDE"
    assert sorted(p.name for p in (tree.parent / "outside").iterdir()) == ["f.txt"]


# (label, method, params, expected reason)
PARAM_ROWS: list[tuple[str, str, dict[str, Any], str]] = [
    ("control: read", "files/read", {"path": "dir/f.txt", "offset": 1, "length": 2}, OK),
    ("control: always fails", "files/read", {"path": "../x"}, "INVALID_PATH"),
    ("negative offset", "files/read", {"path": "dir/f.txt", "offset": -1}, "INVALID_PARAMS"),
    ("offset 2**64", "files/read", {"path": "dir/f.txt", "offset": 2**64}, "INVALID_PARAMS"),
    ("offset 2**63-1 (past the end)", "files/read", {"path": "dir/f.txt", "offset": 2**63 - 1}, OK),
    ("offset as text", "files/read", {"path": "dir/f.txt", "offset": "1"}, "INVALID_PARAMS"),
    ("offset as bool", "files/read", {"path": "dir/f.txt", "offset": True}, "INVALID_PARAMS"),
    ("offset as float", "files/read", {"path": "dir/f.txt", "offset": 1.5}, "INVALID_PARAMS"),
    ("length 2**64", "files/read", {"path": "dir/f.txt", "length": 2**64}, "INVALID_PARAMS"),
    ("unknown encoding", "files/read", {"path": "dir/f.txt", "encoding": "utf-16"}, "INVALID_PARAMS"),
    ("encoding as number", "files/read", {"path": "dir/f.txt", "encoding": 8}, "INVALID_PARAMS"),
    ("cursor superscript two", "files/list", {"path": "dir", "cursor": "²"}, "INVALID_PARAMS"),
    ("cursor of 5,000 digits", "files/list", {"path": "dir", "cursor": "9" * 5000}, "INVALID_PARAMS"),
    ("cursor negative", "files/list", {"path": "dir", "cursor": "-1"}, "INVALID_PARAMS"),
    ("cursor as number", "files/list", {"path": "dir", "cursor": 1000}, "INVALID_PARAMS"),
    ("cursor past the end", "files/list", {"path": "dir", "cursor": "999999999999"}, OK),
    ("content not base64", "files/write", {"path": "dir/w", "content": "not base64!"}, "INVALID_PARAMS"),
    ("content with whitespace", "files/write", {"path": "dir/w", "content": "bmV3\n"}, "INVALID_PARAMS"),
    ("content as number", "files/write", {"path": "dir/w", "content": 5}, "INVALID_PARAMS"),
    ("content too big", "files/write", {"path": "dir/w", "content": "QUFB" * 400}, "QUOTA_EXCEEDED"),
    (
        "lone surrogate text",
        "files/write",
        {"path": "dir/w", "content": "\ud800", "encoding": "utf-8"},
        "INVALID_PARAMS",
    ),
    ("unknown upload", "files/write", {"uploadId": "nope", "offset": 0, "content": ""}, "INVALID_PARAMS"),
    ("neither path nor upload", "files/write", {"content": ""}, "INVALID_PATH"),
    ("more as text", "files/write", {"path": "dir/w", "content": "", "more": "yes"}, "INVALID_PARAMS"),
    ("create of a bad type", "files/create", {"path": "dir/n", "type": "fifo"}, "INVALID_PARAMS"),
    (
        "create 2,000 levels deep",
        "files/create",
        {"path": "/".join(["c"] * 2000), "type": "directory", "parents": True},
        OK,
    ),
    ("rename onto a bad path", "files/rename", {"path": "dir/f.txt", "newPath": "../x"}, "INVALID_PATH"),
    (
        "rename to another root",
        "files/rename",
        {"path": "dir/f.txt", "newPath": "x", "newRoot": "file:///etc"},
        "PERMISSION_DENIED",
    ),
    ("root not a string", "files/stat", {"path": "dir", "root": 5}, "INVALID_PARAMS"),
    ("root not the client's", "files/stat", {"path": "dir", "root": "file:///etc"}, "PERMISSION_DENIED"),
    ("unwatch unknown", "files/unwatch", {"watchId": "nope"}, "INVALID_PARAMS"),
    ("unwatch without id", "files/unwatch", {}, "INVALID_PARAMS"),
    ("consent without message", "files/consent", {"message": ""}, "INVALID_PARAMS"),
    ("consent paths not a list", "files/consent", {"message": "m", "paths": "dir"}, "INVALID_PARAMS"),
    (
        "consent of 5,000 paths",
        "files/consent",
        {"message": "m", "paths": [{"path": "dir"}] * 5000},
        "INVALID_PARAMS",
    ),
    ("consent access admin", "files/consent", {"message": "m", "access": "admin"}, "INVALID_PARAMS"),
    (
        "consent of bad items",
        "files/consent",
        {"message": "m", "paths": [{"path": "../x"}, {"path": 5}, {"root": 7, "path": "a"}]},
        OK,
    ),
    ("unknown method", "files/chmod", {"path": "dir"}, "INVALID_PARAMS"),
]


@pytest.mark.parametrize(
    ("label", "method", "params", "expected"), PARAM_ROWS, ids=[r[0] for r in PARAM_ROWS]
)
async def test_hostile_params_get_the_named_reason(
    tree: Path, label: str, method: str, params: dict[str, Any], expected: str
) -> None:
    broker = FileBroker(RootSet.from_paths([tree]), rate=None, max_chunk=1000)
    try:
        outcome = await _run_host(broker, method, params)
    finally:
        if method == "files/create":  # pytest's own cleanup recurses; remove the deep chain first
            await anyio.run_process(["rm", "-rf", str(tree / "c")])
    assert outcome == expected, label
    assert (tree / "dir" / "f.txt").read_text() == "inside"


async def test_bad_consent_items_are_denied_not_granted(tree: Path) -> None:
    broker = FileBroker(RootSet.from_paths([tree]))
    answer = await broker.handle(
        "files/consent", {"message": "m", "paths": [{"path": "../x"}, {"path": 5}, {"path": "dir"}]}
    )
    assert [g["path"] for g in answer["granted"]] == ["dir"]
    assert [d["path"] for d in answer["denied"]] == ["../x", "5"]


# --- server side: hostile answers through BrokeredFiles ------------------------------------------------

GOOD_READ = {
    "content": base64.b64encode(b"abc").decode(),
    "encoding": "base64",
    "offset": 0,
    "bytesRead": 3,
    "size": 3,
    "eof": True,
    "etag": "e",
    "mtime": 0.0,
}
GOOD_LIST = {"entries": [{"name": "a", "type": "file", "size": 1, "mtime": 0.0}]}

# (label, method the tool calls, the host's answer, expected: the tool's result or a reason)
ANSWER_ROWS: list[tuple[str, str, Mapping[str, Any], str]] = [
    ("control: a good read", "read", GOOD_READ, "3"),
    ("control: always fails", "read", {}, "IO_ERROR"),
    ("bytesRead larger than the content", "read", {**GOOD_READ, "bytesRead": 4, "size": 4}, "IO_ERROR"),
    ("offset not the one asked", "read", {**GOOD_READ, "offset": 7, "size": 10}, "IO_ERROR"),
    ("negative size", "read", {**GOOD_READ, "size": -1}, "IO_ERROR"),
    ("eof before the size", "read", {**GOOD_READ, "size": 10}, "IO_ERROR"),
    ("size 2**35", "read", {**GOOD_READ, "size": 2**35, "eof": False}, "QUOTA_EXCEEDED"),
    ("content not base64", "read", {**GOOD_READ, "content": "!!"}, "INVALID_PARAMS"),
    ("size as text", "read", {**GOOD_READ, "size": "3"}, "IO_ERROR"),
    ("etag missing", "read", {k: v for k, v in GOOD_READ.items() if k != "etag"}, "IO_ERROR"),
    ("control: a good list", "list", GOOD_LIST, "1"),
    ("entry of an unknown type", "list", {"entries": [{**GOOD_LIST["entries"][0], "type": "x"}]}, "IO_ERROR"),
    ("entries not a list", "list", {"entries": "a"}, "IO_ERROR"),
    ("empty page with a cursor", "list", {"entries": [], "nextCursor": "1"}, "IO_ERROR"),
    ("control: a good stat", "stat", {"type": "file", "size": 1, "mtime": 0.0, "etag": "e"}, "file"),
    ("stat of a negative size", "stat", {"type": "file", "size": -5, "mtime": 0.0, "etag": "e"}, "IO_ERROR"),
    ("watch without an id", "watch", {}, "IO_ERROR"),
    ("consent granting a number", "consent", {"granted": [5], "denied": [], "access": "read"}, "IO_ERROR"),
    ("write without uploadId midway", "write", {"bytesWritten": 1024}, "IO_ERROR"),
    ("write counting wrong", "write", {"bytesWritten": 7, "uploadId": "u"}, "IO_ERROR"),
]


def answering_host(answer: Mapping[str, Any]) -> Client:
    async def handler(method: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
        return dict(answer)

    server = MCPServer("table")
    enable_brokering(server)
    calls: dict[str, Callable[[Any], Any]] = {
        "read": lambda fs: fs.read("f"),
        "list": lambda fs: fs.list(""),
        "stat": lambda fs: fs.stat("f"),
        "consent": lambda fs: fs.consent("m", ["f"]),
        "write": lambda fs: fs.write("f", b"x" * 2000),
    }

    @server.tool()
    async def call(method: str, ctx: Context) -> str:
        fs = await files(ctx, chunk_size=1024)
        try:
            if method == "watch":
                async with fs.watch("f"):
                    return "watching"
            result = await calls[method](fs)
        except BrokerError as exc:
            return exc.reason
        return str(len(result)) if isinstance(result, (bytes, list)) else str(getattr(result, "type", result))

    client = Client(server, mode="legacy", list_roots_callback=RootsProvider([]))

    def hook(session: ClientSession) -> None:
        _sdk.advertise_and_route(session, {"files/" + m for m in (*calls, "watch", "unwatch")}, handler)

    _sdk.hook_client(client, hook)
    return client


@pytest.mark.parametrize(
    ("label", "method", "answer", "expected"), ANSWER_ROWS, ids=[r[0] for r in ANSWER_ROWS]
)
async def test_hostile_answers_are_refused_by_the_server_side(
    label: str, method: str, answer: Mapping[str, Any], expected: str
) -> None:
    async with answering_host(answer) as client:
        result = await client.call_tool("call", {"method": method})
    assert isinstance(result.content[0], mcp_types.TextContent)
    assert result.content[0].text == expected, label
