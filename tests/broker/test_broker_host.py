"""The finer rules of the host side (FileBroker), driven through its request handler with real files, and
the server-side checks of files(ctx) with a real in-memory Client and MCPServer."""

from __future__ import annotations

import base64
import logging
import os
from pathlib import Path

import anyio
import mcp_types
import pytest
from mcp import Client
from mcp.client.context import ClientRequestContext
from mcp.server import MCPServer
from mcp.server.mcpserver import Context

from mcp_roots import BrokerError, BrokeringUnavailable, RootSet, RootsProvider
from mcp_roots.broker import ConsentItem, FileBroker, FileConsentRequest, _sdk, enable_brokering, files
from tests.kit import b64, broker_refusal

pytestmark = pytest.mark.anyio


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "root"
    path.mkdir()
    (path / "a.txt").write_text("alpha")
    return path


# --- modes and limits ----------------------------------------------------------------------------------


async def test_read_only_refuses_every_change_and_still_reads(root: Path) -> None:
    broker = FileBroker(RootSet.from_paths([root]), read_only=True)
    assert (await broker.handle("files/read", {"path": "a.txt", "encoding": "utf-8"}))["content"] == "alpha"
    for method, params in [
        ("files/write", {"path": "a.txt", "content": b64(b"x")}),
        ("files/create", {"path": "new", "type": "directory"}),
        ("files/delete", {"path": "a.txt"}),
        ("files/rename", {"path": "a.txt", "newPath": "b.txt"}),
    ]:
        error = await broker_refusal(broker, method, params)
        assert error.reason == "PERMISSION_DENIED"
        assert "read-only" in error.message
    assert sorted(os.listdir(root)) == ["a.txt"]
    assert (root / "a.txt").read_text() == "alpha"


async def test_reads_are_clamped_to_the_chunk_limit_and_larger_write_chunks_are_refused(root: Path) -> None:
    (root / "big.bin").write_bytes(b"z" * 1000)
    broker = FileBroker(RootSet.from_paths([root]), max_chunk=100)
    first = await broker.handle("files/read", {"path": "big.bin", "length": 500})
    assert first["bytesRead"] == 100
    assert first["size"] == 1000
    assert first["eof"] is False
    error = await broker_refusal(broker, "files/write", {"path": "c.bin", "content": b64(b"y" * 101)})
    assert error.reason == "QUOTA_EXCEEDED"
    assert error.data["kind"] == "chunk"
    assert not (root / "c.bin").exists()


async def test_the_rate_limit_says_when_to_retry(root: Path) -> None:
    broker = FileBroker(RootSet.from_paths([root]), rate=(2, 10.0))
    await broker.handle("files/stat", {"path": "a.txt"})
    await broker.handle("files/stat", {"path": "a.txt"})
    error = await broker_refusal(broker, "files/stat", {"path": "a.txt"})
    assert error.reason == "QUOTA_EXCEEDED"
    assert error.data["kind"] == "rate"
    assert 0 < int(error.data["retryAfterMs"]) <= 5001  # type: ignore[call-overload]


async def test_a_slow_consent_prompt_times_out(root: Path) -> None:
    async def never(request: FileConsentRequest) -> bool:
        await anyio.sleep(30)
        return True

    broker = FileBroker(RootSet.from_paths([root]), consent=never, timeout=0.2)
    with anyio.fail_after(5):
        error = await broker_refusal(broker, "files/read", {"path": "a.txt"})
    assert error.reason == "TIMEOUT"


async def test_a_fifo_is_refused_without_blocking(root: Path) -> None:
    os.mkfifo(root / "pipe")
    broker = FileBroker(RootSet.from_paths([root]))
    with anyio.fail_after(5):
        error = await broker_refusal(broker, "files/read", {"path": "pipe"})
    assert error.reason == "INVALID_PATH"


# --- chunked, atomic writes ----------------------------------------------------------------------------


async def test_a_chunked_upload_replaces_the_file_only_after_the_last_chunk(root: Path) -> None:
    broker = FileBroker(RootSet.from_paths([root]))
    first = await broker.handle("files/write", {"path": "a.txt", "content": b64(b"new "), "more": True})
    assert first["bytesWritten"] == 4
    assert (root / "a.txt").read_text() == "alpha"  # not yet
    second = {"uploadId": first["uploadId"], "offset": 4, "content": b64(b"content")}
    done = await broker.handle("files/write", second)
    assert done["size"] == 11
    assert (root / "a.txt").read_text() == "new content"
    assert sorted(os.listdir(root)) == ["a.txt"]  # no staging file left
    stat = await broker.handle("files/stat", {"path": "a.txt"})
    assert stat["etag"] == done["etag"]


async def test_a_chunk_at_the_wrong_offset_discards_the_upload_and_keeps_the_file(root: Path) -> None:
    broker = FileBroker(RootSet.from_paths([root]))
    first = await broker.handle("files/write", {"path": "a.txt", "content": b64(b"1234"), "more": True})
    error = await broker_refusal(
        broker, "files/write", {"uploadId": first["uploadId"], "offset": 2, "content": b64(b"x")}
    )
    assert error.reason == "INVALID_PARAMS"
    assert sorted(os.listdir(root)) == ["a.txt"]
    assert (root / "a.txt").read_text() == "alpha"
    gone = await broker_refusal(
        broker, "files/write", {"uploadId": first["uploadId"], "offset": 4, "content": ""}
    )
    assert gone.reason == "INVALID_PARAMS"


async def test_the_file_limit_stops_an_upload_midway_and_removes_the_staging_file(root: Path) -> None:
    broker = FileBroker(RootSet.from_paths([root]), max_file=6)
    first = await broker.handle("files/write", {"path": "n.bin", "content": b64(b"1234"), "more": True})
    error = await broker_refusal(
        broker, "files/write", {"uploadId": first["uploadId"], "offset": 4, "content": b64(b"567")}
    )
    assert error.reason == "QUOTA_EXCEEDED"
    assert error.data["kind"] == "file"
    assert sorted(os.listdir(root)) == ["a.txt"]


async def test_if_match_and_create_only_turn_a_concurrent_change_into_a_conflict(root: Path) -> None:
    broker = FileBroker(RootSet.from_paths([root]))
    etag = (await broker.handle("files/stat", {"path": "a.txt"}))["etag"]
    exists = await broker_refusal(
        broker, "files/write", {"path": "a.txt", "content": b64(b"x"), "createOnly": True}
    )
    assert exists.reason == "CONCURRENCY_CONFLICT"
    first = await broker.handle(
        "files/write", {"path": "a.txt", "content": b64(b"mine"), "ifMatch": etag, "more": True}
    )
    (root / "a.txt").write_text("theirs")  # someone else writes while the upload is in flight
    late = await broker_refusal(
        broker, "files/write", {"uploadId": first["uploadId"], "offset": 4, "content": ""}
    )
    assert late.reason == "CONCURRENCY_CONFLICT"
    assert (root / "a.txt").read_text() == "theirs"
    stale = await broker_refusal(broker, "files/delete", {"path": "a.txt", "ifMatch": etag})
    assert stale.reason == "CONCURRENCY_CONFLICT"
    assert (root / "a.txt").exists()
    assert sorted(os.listdir(root)) == ["a.txt"]


async def test_a_write_to_a_symlink_replaces_the_link_never_its_target(tmp_path: Path, root: Path) -> None:
    (root / "target.txt").write_text("target")
    (root / "link.txt").symlink_to("target.txt")
    broker = FileBroker(RootSet.from_paths([root]))
    await broker.handle("files/write", {"path": "link.txt", "content": b64(b"via link")})
    assert not (root / "link.txt").is_symlink()
    assert (root / "link.txt").read_text() == "via link"
    assert (root / "target.txt").read_text() == "target"


# --- listing -------------------------------------------------------------------------------------------


async def test_list_pages_and_shows_symlinks_as_symlinks(tmp_path: Path, root: Path) -> None:
    for i in range(1005):
        (root / f"f{i:04}").touch()
    (root / "out").symlink_to(tmp_path)
    broker = FileBroker(RootSet.from_paths([root]), rate=None)
    page = await broker.handle("files/list", {"path": ""})
    assert len(page["entries"]) == 1000
    rest = await broker.handle("files/list", {"path": "", "cursor": page["nextCursor"]})
    assert "nextCursor" not in rest
    names = {e["name"]: e["type"] for e in page["entries"] + rest["entries"]}
    assert len(names) == 1007
    assert names["out"] == "symlink"
    assert names["a.txt"] == "file"


# --- roots and consent ---------------------------------------------------------------------------------


async def test_a_root_that_is_not_the_clients_is_refused(tmp_path: Path, root: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "x").write_text("x")
    broker = FileBroker(RootSet.from_paths([root]))
    error = await broker_refusal(broker, "files/read", {"root": other.as_uri(), "path": "x"})
    assert error.reason == "PERMISSION_DENIED"
    ok = await broker.handle("files/read", {"root": root.as_uri(), "path": "a.txt", "encoding": "utf-8"})
    assert ok["content"] == "alpha"


async def test_a_root_deleted_on_disk_is_a_protocol_error_not_a_crash(tmp_path: Path) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    roots = RootSet.from_paths([gone])
    gone.rmdir()
    broker = FileBroker(roots)
    for method in ("files/read", "files/list", "files/write"):
        error = await broker_refusal(broker, method, {"path": "a", "content": ""})
        assert error.reason in {"FILE_NOT_FOUND", "INVALID_PATH"}, (method, error.message)
        assert str(tmp_path) not in error.message


async def test_implicit_consent_asks_once_and_remembers_a_refusal(root: Path) -> None:
    asked: list[FileConsentRequest] = []

    def consent(request: FileConsentRequest) -> bool:
        asked.append(request)
        return False

    broker = FileBroker(RootSet.from_paths([root]), consent=consent)
    for _ in range(3):
        error = await broker_refusal(broker, "files/read", {"path": "a.txt"})
        assert error.data["consent"] == "denied"
    assert len(asked) == 1
    assert not asked[0].explicit
    assert asked[0].items == (ConsentItem(RootSet.from_paths([root]).roots[0], "a.txt"),)


async def test_a_symlink_does_not_carry_a_grant_to_a_path_the_user_did_not_approve(root: Path) -> None:
    (root / "public").mkdir()
    (root / "private").mkdir()
    (root / "private" / "secret.txt").write_text("TOPSECRET")
    (root / "public" / "shortcut").symlink_to("../private/secret.txt")
    (root / "public" / "fine.txt").write_text("fine")
    asked: list[str] = []

    def consent(request: FileConsentRequest) -> bool:
        asked.extend(item.path for item in request.items)
        return request.explicit

    broker = FileBroker(RootSet.from_paths([root]), consent=consent)
    await broker.handle("files/consent", {"message": "m", "paths": [{"path": "public"}]})
    assert (await broker.handle("files/read", {"path": "public/fine.txt"}))["bytesRead"] == 4
    error = await broker_refusal(broker, "files/read", {"path": "public/shortcut"})
    assert error.reason == "PERMISSION_DENIED"
    assert "private" not in error.message
    assert asked == ["public", "private/secret.txt"]  # the user was asked about the real target


async def test_a_raising_consent_callback_is_a_refusal(root: Path) -> None:
    def consent(request: FileConsentRequest) -> bool:
        raise RuntimeError("dialog crashed")

    broker = FileBroker(RootSet.from_paths([root]), consent=consent)
    assert (await broker_refusal(broker, "files/read", {"path": "a.txt"})).reason == "PERMISSION_DENIED"


async def test_revoking_one_folder_keeps_the_others(root: Path) -> None:
    (root / "keep").mkdir()
    (root / "drop").mkdir()
    (root / "keep" / "k").write_text("k")
    (root / "drop" / "d").write_text("d")
    broker = FileBroker(RootSet.from_paths([root]), consent=lambda request: True)
    grant = await broker.handle(
        "files/consent", {"message": "m", "paths": [{"path": "keep"}, {"path": "drop"}]}
    )
    assert [g["path"] for g in grant["granted"]] == ["keep", "drop"]
    broker.revoke([root / "drop"])
    assert (await broker.handle("files/read", {"path": "keep/k"}))["bytesRead"] == 1
    error = await broker_refusal(broker, "files/read", {"path": "drop/d"})
    assert error.data["consent"] == "revoked"
    # A new explicit consent lifts the revocation.
    await broker.handle("files/consent", {"message": "again", "paths": [{"path": "drop"}]})
    assert (await broker.handle("files/read", {"path": "drop/d"}))["bytesRead"] == 1


async def test_revocation_discards_an_upload_in_flight(root: Path) -> None:
    broker = FileBroker(RootSet.from_paths([root]))
    first = await broker.handle("files/write", {"path": "a.txt", "content": b64(b"half"), "more": True})
    broker.revoke()
    error = await broker_refusal(
        broker, "files/write", {"uploadId": first["uploadId"], "offset": 4, "content": ""}
    )
    assert error.reason == "INVALID_PARAMS"
    assert sorted(os.listdir(root)) == ["a.txt"]
    assert (root / "a.txt").read_text() == "alpha"


async def test_a_root_the_user_refused_this_server_is_not_brokered(tmp_path: Path) -> None:
    """With a RootsProvider, roots the user refused a server on roots/list stay out of reach for files/*."""
    shared, private = tmp_path / "shared", tmp_path / "private"
    shared.mkdir()
    private.mkdir()
    (private / "p").write_text("p")
    provider = RootsProvider([shared, private], consent=lambda request: [shared])
    server = MCPServer("probe")
    enable_brokering(server)
    broker = FileBroker(provider)
    client = Client(server, mode="legacy", list_roots_callback=provider)
    broker.install(client)
    async with client, broker:
        await client.session.send_ping()  # the connection is up; now the server lists roots
        listed = await provider(_context(client))
        assert [str(r.uri) for r in listed.roots] == [shared.as_uri()]  # type: ignore[union-attr]
        error = await broker_refusal(broker, "files/read", {"root": private.as_uri(), "path": "p"})
    assert error.reason == "PERMISSION_DENIED"


def _context(client: Client) -> ClientRequestContext:
    return ClientRequestContext(session=client.session, request_id=1, meta=None)


# --- the audit log -------------------------------------------------------------------------------------


async def test_every_operation_is_audited_with_paths_but_never_contents(
    root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="mcp_roots.audit")
    broker = FileBroker(RootSet.from_paths([root]))
    await broker.handle("files/write", {"path": "secret.txt", "content": b64(b"TOPSECRET")})
    await broker.handle("files/read", {"path": "secret.txt"})
    await broker_refusal(broker, "files/read", {"path": "../x"})
    records = [r for r in caplog.records if r.name == "mcp_roots.audit"]
    assert [(r.files_method, r.files_path, r.files_outcome) for r in records] == [  # type: ignore[attr-defined]
        ("files/write", "secret.txt", "ok"),
        ("files/read", "secret.txt", "ok"),
        ("files/read", None, "INVALID_PATH"),
    ]
    assert records[1].files_bytes == 9  # type: ignore[attr-defined]
    text = "\n".join(r.getMessage() for r in records)
    assert "TOPSECRET" not in text
    assert b64(b"TOPSECRET") not in text


# --- server side: files(ctx) ---------------------------------------------------------------------------


def probe_server(enable: bool = True) -> MCPServer:
    server = MCPServer("probe")
    if enable:
        enable_brokering(server)

    @server.tool()
    async def read(path: str, ctx: Context) -> str:
        try:
            fs = await files(ctx)
        except BrokeringUnavailable as exc:
            return f"unavailable: {exc}"
        return await fs.read_text(path)

    return server


async def test_files_works_in_memory_on_the_legacy_era(root: Path) -> None:
    provider = RootsProvider([root])
    broker = FileBroker(provider)
    client = Client(probe_server(), mode="legacy", list_roots_callback=provider)
    broker.install(client)
    async with client, broker:
        result = await client.call_tool("read", {"path": "a.txt"})
    assert isinstance(result.content[0], mcp_types.TextContent)
    assert result.content[0].text == "alpha"


async def test_files_on_a_2026_connection_says_it_needs_the_legacy_era(root: Path) -> None:
    async with Client(probe_server(), list_roots_callback=RootsProvider([root])) as client:
        result = await client.call_tool("read", {"path": "a.txt"})
    assert isinstance(result.content[0], mcp_types.TextContent)
    assert "unavailable: client-brokered file access needs the legacy protocol era" in result.content[0].text
    assert "2026-07-28" in result.content[0].text


async def test_files_without_enable_brokering_says_what_to_call(root: Path) -> None:
    provider = RootsProvider([root])
    broker = FileBroker(provider)
    client = Client(probe_server(enable=False), mode="legacy", list_roots_callback=provider)
    broker.install(client)
    async with client, broker:
        result = await client.call_tool("read", {"path": "a.txt"})
    assert isinstance(result.content[0], mcp_types.TextContent)
    assert "enable_brokering(server)" in result.content[0].text


def test_the_server_seam_still_finds_the_connection() -> None:
    """connection_of relies on ServerSession._connection; if this fails the SDK moved it."""
    import inspect

    from mcp.server.session import ServerSession

    assert "self._connection = connection" in inspect.getsource(ServerSession.__init__)
    assert callable(_sdk.connection_of)


# --- server side: reading in pieces, watching ----------------------------------------------------------


def reading_server() -> MCPServer:
    server = MCPServer("reader")
    enable_brokering(server)

    @server.tool()
    async def read_whole(path: str, chunk_size: int, ctx: Context) -> str:
        fs = await files(ctx, chunk_size=chunk_size)
        try:
            data = await fs.read(path)
        except BrokerError as exc:
            return f"{exc.reason}: {exc.message}"
        return base64.b64encode(data).decode("ascii")

    @server.tool()
    async def watch_once(path: str, ctx: Context, recursive: bool = False, events: int = 100) -> list[str]:
        fs = await files(ctx)
        seen: list[str] = []
        with anyio.move_on_after(10):
            async with fs.watch(path, recursive=recursive) as changes:
                async for change in changes:
                    seen.append(f"{change.kind} {change.path}")
                    if len(seen) >= events:
                        break
        return seen

    return server


class RewriteAfterFirstRead(logging.Handler):
    """Rewrites a file right after the broker audited its first files/read: a real concurrent change."""

    def __init__(self, target: Path) -> None:
        super().__init__()
        self.target = target
        self.done = False

    def emit(self, record: logging.LogRecord) -> None:
        if not self.done and getattr(record, "files_method", None) == "files/read":
            self.done = True
            fresh = self.target.with_name("fresh.tmp")
            fresh.write_bytes(b"B" * 5000)
            os.replace(fresh, self.target)  # a new inode: a new etag, whatever the clock's resolution


async def test_read_fetches_many_chunks_in_order_and_refuses_a_file_that_changes(
    root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="mcp_roots.audit")
    payload = os.urandom(10_000)
    (root / "data.bin").write_bytes(payload)
    (root / "moving.bin").write_bytes(b"A" * 5000)
    provider = RootsProvider([root])
    broker = FileBroker(provider, rate=None)
    client = Client(reading_server(), mode="legacy", list_roots_callback=provider)
    broker.install(client)
    audit = logging.getLogger("mcp_roots.audit")
    rewrite = RewriteAfterFirstRead(root / "moving.bin")
    async with client, broker:
        result = await client.call_tool("read_whole", {"path": "data.bin", "chunk_size": 999})
        assert isinstance(result.content[0], mcp_types.TextContent)
        assert base64.b64decode(result.content[0].text) == payload
        audit.addHandler(rewrite)
        try:
            moved = await client.call_tool("read_whole", {"path": "moving.bin", "chunk_size": 1000})
        finally:
            audit.removeHandler(rewrite)
    assert isinstance(moved.content[0], mcp_types.TextContent)
    assert moved.content[0].text.startswith(
        "CONCURRENCY_CONFLICT: 'moving.bin' changed while it was being read"
    )


async def test_a_watched_directory_that_disappears_ends_the_watch_with_deleted(root: Path) -> None:
    (root / "sub").mkdir()
    provider = RootsProvider([root])
    broker = FileBroker(provider, watch_interval=0.02)
    client = Client(reading_server(), mode="legacy", list_roots_callback=provider)
    broker.install(client)
    async with client, broker:
        results: list[mcp_types.CallToolResult] = []

        async def watch() -> None:
            results.append(await client.call_tool("watch_once", {"path": "sub"}))

        with anyio.fail_after(8):  # the tool's own limit is 10 s: the watch must end, not time out
            async with anyio.create_task_group() as task_group:
                task_group.start_soon(watch)
                while not broker.watching:  # noqa: ASYNC110 - host state has no event to wait on
                    await anyio.sleep(0.01)
                (root / "sub").rmdir()
    assert results[0].structured_content == {"result": ["deleted sub"]}


async def test_a_watch_never_follows_a_symlink_out_of_the_root(tmp_path: Path, root: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "link").symlink_to(outside)
    provider = RootsProvider([root])
    broker = FileBroker(provider, watch_interval=0.02)
    client = Client(reading_server(), mode="legacy", list_roots_callback=provider)
    broker.install(client)
    async with client, broker:
        results: list[mcp_types.CallToolResult] = []

        async def watch() -> None:
            results.append(await client.call_tool("watch_once", {"path": "", "recursive": True, "events": 1}))

        with anyio.fail_after(8):
            async with anyio.create_task_group() as task_group:
                task_group.start_soon(watch)
                while not broker.watching:  # noqa: ASYNC110 - host state has no event to wait on
                    await anyio.sleep(0.01)
                (outside / "secret.txt").write_text("x")  # seen only if the watcher followed the link
                await anyio.sleep(0.3)  # many poll intervals
                (root / "inside.txt").write_text("y")
    assert results[0].structured_content == {"result": ["created inside.txt"]}


# --- one rule each ------------------------------------------------------------------------------------------


def test_the_broker_has_no_rename_or_file_kind_rule_of_its_own() -> None:
    """The no-replace rename (with its fallbacks and the forced resolution strategy), NotRegularFile and
    the file-kind table exist once, in the path layer; the broker calls them instead of keeping copies."""
    broker_src = Path(__file__).resolve().parents[2] / "src" / "mcp_roots" / "broker"
    for module in sorted(broker_src.glob("*.py")):
        text = module.read_text()
        assert "renameat2" not in text, module.name
        assert "class NotRegularFile" not in text, module.name
        assert "def kind_of" not in text, module.name  # paths._text.FILE_KINDS
        assert "S_ISLNK" not in text, module.name
        assert "O_PATH" not in text or module.name == "_grants.py", (
            module.name
        )  # dir_fd flags: the path layer's


@pytest.mark.parametrize("strategy", ["openat2", "walk", "walk-no-opath"])
async def test_changes_work_under_every_resolution_strategy(root: Path, strategy: str) -> None:
    from mcp_roots.paths._beneath import forced

    with forced(strategy):
        broker = FileBroker(RootSet.from_paths([root]), rate=None)
        await broker.handle("files/create", {"path": "d/e", "type": "directory", "parents": True})
        await broker.handle("files/write", {"path": "d/e/f.txt", "content": b64(b"one")})
        clash = await broker_refusal(broker, "files/rename", {"path": "a.txt", "newPath": "d/e/f.txt"})
        assert clash.reason == "CONCURRENCY_CONFLICT"
        await broker.handle("files/rename", {"path": "d/e/f.txt", "newPath": "g.txt"})
        await broker.handle("files/delete", {"path": "d", "recursive": True})
    assert sorted(os.listdir(root)) == ["a.txt", "g.txt"]
    assert (root / "g.txt").read_bytes() == b"one"


@pytest.mark.parametrize("strategy", ["openat2", "walk", "walk-no-opath"])
async def test_create_with_parents_checks_the_deepest_folder_that_exists(root: Path, strategy: str) -> None:
    """files/create with parents: the missing folders are made from the deepest folder that exists, after
    it is checked (a revoked one makes nothing), through a symlink that stays inside the root, and a file
    in the way is refused."""
    from mcp_roots.paths._beneath import forced

    (root / "kept" / "deep").mkdir(parents=True)
    (root / "private").mkdir()
    (root / "link").symlink_to("kept")
    with forced(strategy):
        broker = FileBroker(RootSet.from_paths([root]), rate=None)
        broker.revoke([root / "private"])
        denied = await broker_refusal(
            broker, "files/create", {"path": "private/a/b/c.txt", "type": "file", "parents": True}
        )
        assert denied.reason == "PERMISSION_DENIED"
        assert os.listdir(root / "private") == []
        await broker.handle("files/create", {"path": "link/deep/x/y/z.txt", "type": "file", "parents": True})
        assert (root / "kept" / "deep" / "x" / "y" / "z.txt").read_bytes() == b""
        await broker.handle("files/create", {"path": "kept/deep/x/w", "type": "directory", "parents": True})
        assert (root / "kept" / "deep" / "x" / "w").is_dir()
        blocked = await broker_refusal(
            broker, "files/create", {"path": "a.txt/b/c", "type": "directory", "parents": True}
        )
        assert blocked.reason in ("INVALID_PATH", "PERMISSION_DENIED"), blocked
    assert (root / "a.txt").read_text() == "alpha"
