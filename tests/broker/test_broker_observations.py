"""What a hostile server (or a hostile host) did to files/*, and what must happen instead, one test each.
Each test failed on the code before the fix."""

from __future__ import annotations

import base64
import contextlib
import ctypes
import logging
import os
import resource
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping
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
from mcp_roots.broker import ConsentItem, FileBroker, FileConsentRequest, _sdk, enable_brokering, files
from mcp_roots.broker._watch import MAX_DEPTH, snapshot
from tests.kit import broker_refusal

pytestmark = pytest.mark.anyio


@pytest.fixture
def root(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "root"
    (path / "docs" / "private").mkdir(parents=True)
    (path / "docs" / "private" / "s.txt").write_text("secret")
    (path / "docs" / "open.txt").write_text("open")
    yield path
    # Some tests leave trees 2,000 levels deep, which pytest's recursive cleanup cannot remove; rm can.
    subprocess.run(["rm", "-rf", str(path)], check=True)


# --- 1. revocation by identity; a wider grant never overrides it ---------------------------------------


async def test_a_wider_consent_does_not_lift_a_revocation_without_a_callback(root: Path) -> None:
    broker = FileBroker(RootSet.from_paths([root]))
    broker.revoke([root / "docs" / "private"])
    await broker.handle("files/consent", {"message": "everything please", "paths": [{"path": ""}]})
    error = await broker_refusal(broker, "files/read", {"path": "docs/private/s.txt"})
    assert error.reason == "PERMISSION_DENIED"
    assert error.data["consent"] == "revoked"
    assert (await broker.handle("files/read", {"path": "docs/open.txt"}))["bytesRead"] == 4


async def test_a_revoked_folder_stays_revoked_when_its_ancestor_is_renamed(root: Path) -> None:
    broker = FileBroker(RootSet.from_paths([root]))
    broker.revoke([root / "docs" / "private"])
    os.rename(root / "docs", root / "d2")  # by another program, or the user
    error = await broker_refusal(broker, "files/read", {"path": "d2/private/s.txt"})
    assert error.reason == "PERMISSION_DENIED"
    assert error.data["consent"] == "revoked"


async def test_the_server_cannot_rename_or_delete_an_ancestor_of_a_revoked_folder(root: Path) -> None:
    broker = FileBroker(RootSet.from_paths([root]))
    broker.revoke([root / "docs" / "private"])
    renamed = await broker_refusal(broker, "files/rename", {"path": "docs", "newPath": "d2"})
    deleted = await broker_refusal(broker, "files/delete", {"path": "docs", "recursive": True})
    assert (renamed.reason, deleted.reason) == ("PERMISSION_DENIED", "PERMISSION_DENIED")
    assert (root / "docs" / "private" / "s.txt").read_text() == "secret"


# --- 2. watches are bounded ----------------------------------------------------------------------------


def test_a_watch_walk_of_3000_folders_needs_few_descriptors(root: Path) -> None:
    """With only 40 spare descriptors, a recursive watch walk of 3,000 sibling folders still sees all of
    them: it closes as it goes (the old walk held one descriptor per folder and skipped the rest)."""
    wide = root / "wide"
    wide.mkdir()
    for i in range(3000):
        (wide / f"d{i:04}").mkdir()
        (wide / f"d{i:04}" / "f").write_text("")
    rootset = RootSet.from_paths([root])
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    in_use = len(os.listdir("/proc/self/fd"))
    resource.setrlimit(resource.RLIMIT_NOFILE, (in_use + 40, hard))
    try:
        seen = snapshot(rootset, str(wide), recursive=True, limit=10_000)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert len(seen) == 6000


def test_a_watch_walk_of_60_nested_folders_holds_two_descriptors(root: Path) -> None:
    """With only 8 spare descriptors, a recursive watch walk of a tree 60 folders deep sees all of it (the
    path layer's walk goes back up through '..'; os.fwalk held one descriptor per level and failed)."""
    deep = root / "deep"
    level = deep
    for i in range(60):
        level = level / f"l{i}"
    level.mkdir(parents=True)
    (level / "f").write_text("")
    rootset = RootSet.from_paths([root])
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    in_use = len(os.listdir("/proc/self/fd"))
    resource.setrlimit(resource.RLIMIT_NOFILE, (in_use + 8, hard))
    try:
        seen = snapshot(rootset, str(deep), recursive=True, limit=10_000)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert len(seen) == 61
    assert "/".join(f"l{i}" for i in range(60)) + "/f" in seen


async def test_watches_per_connection_and_entries_per_watch_are_capped(root: Path) -> None:
    for i in range(20):
        (root / f"f{i}").write_text("x")
    broker = FileBroker(RootSet.from_paths([root]), max_watches=3, max_watch_entries=10)
    server = MCPServer("watcher")
    enable_brokering(server)
    client = Client(server, mode="legacy", list_roots_callback=RootsProvider([root]))
    broker.install(client)
    async with client, broker:
        too_big = await broker_refusal(broker, "files/watch", {"path": ""})
        assert too_big.reason == "QUOTA_EXCEEDED"
        assert too_big.data["kind"] == "watch-entries"
        for _ in range(3):
            await broker.handle("files/watch", {"path": "docs"})
        fourth = await broker_refusal(broker, "files/watch", {"path": "docs"})
        assert fourth.reason == "QUOTA_EXCEEDED"
        assert fourth.data["kind"] == "watches"
        assert len(broker.watching) == 3


# --- 3. the server side bounds what it asks for and holds ----------------------------------------------


def hostile_host(answer: Any) -> tuple[Client, list[Mapping[str, Any]]]:
    """A real Client whose files/* answers come from ``answer(method, params)``; every request is kept."""
    provider = RootsProvider([])
    seen: list[Mapping[str, Any]] = []

    async def handler(method: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
        seen.append({"method": method, **(params or {})})
        if len(seen) > 200:  # the old reader would go on for ever; stop the test, not the machine
            raise BrokerError("enough", reason="IO_ERROR", code=-31104)
        result: dict[str, Any] = answer(method, params or {})
        return result

    server = MCPServer("reader")
    enable_brokering(server)

    @server.tool()
    async def read(ctx: Context) -> str:
        fs = await files(ctx, chunk_size=1024)
        try:
            return str(len(await fs.read("big.bin")))
        except BrokerError as exc:
            return f"{exc.reason}: {exc.message}"

    @server.tool()
    async def listing(ctx: Context) -> str:
        fs = await files(ctx)
        try:
            return str(len(await fs.list("")))
        except BrokerError as exc:
            return f"{exc.reason}: {exc.message}"

    client = Client(server, mode="legacy", list_roots_callback=provider)

    def hook(session: ClientSession) -> None:
        _sdk.advertise_and_route(session, {"files/read", "files/list"}, handler)

    _sdk.hook_client(client, hook)
    return client, seen


async def test_a_forged_size_does_not_schedule_a_request_per_chunk() -> None:
    chunk = base64.b64encode(b"x" * 1024).decode()

    def answer(method: str, params: Mapping[str, Any]) -> dict[str, Any]:
        offset = int(params.get("offset", 0))
        return {
            "content": chunk,
            "encoding": "base64",
            "offset": offset,
            "bytesRead": 1024,
            "size": 2**35,
            "eof": False,
            "etag": "e",
            "mtime": 0.0,
        }

    client, seen = hostile_host(answer)
    async with client:
        result = await client.call_tool("read", {})
    assert isinstance(result.content[0], mcp_types.TextContent)
    assert result.content[0].text.startswith("QUOTA_EXCEEDED")
    assert len(seen) == 1  # the first answer already says more than the reader will hold


async def test_a_long_read_keeps_at_most_in_flight_requests_outstanding() -> None:
    """100 chunks of an honest 100 KiB file: read() runs two workers, never a task per chunk."""
    payload = os.urandom(100 * 1024)
    outstanding = [0, 0]  # now, most

    async def handler(method: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
        assert params is not None
        outstanding[0] += 1
        outstanding[1] = max(outstanding[1], outstanding[0])
        await anyio.sleep(0.005)
        outstanding[0] -= 1
        offset, length = int(params["offset"]), int(params["length"])
        data = payload[offset : offset + length]
        return {
            "content": base64.b64encode(data).decode(),
            "offset": offset,
            "bytesRead": len(data),
            "size": len(payload),
            "eof": offset + len(data) >= len(payload),
            "etag": "e",
            "mtime": 0.0,
        }

    server = MCPServer("reader")
    enable_brokering(server)

    @server.tool()
    async def read(ctx: Context) -> int:
        fs = await files(ctx, chunk_size=1024)
        return len(await fs.read("big.bin", in_flight=2))

    client = Client(server, mode="legacy", list_roots_callback=RootsProvider([]))
    _sdk.hook_client(client, lambda session: _sdk.advertise_and_route(session, {"files/read"}, handler))
    async with client:
        result = await client.call_tool("read", {})
    assert result.structured_content == {"result": len(payload)}
    assert outstanding[1] == 2


async def test_a_list_that_never_ends_is_cut_at_the_entry_limit() -> None:
    page = [{"name": f"n{i}", "type": "file", "size": 1, "mtime": 0.0} for i in range(1000)]

    def answer(method: str, params: Mapping[str, Any]) -> dict[str, Any]:
        return {"entries": page, "nextCursor": str(int(params.get("cursor", "0")) + 1000)}

    client, seen = hostile_host(answer)
    async with client:
        result = await client.call_tool("listing", {})
    assert isinstance(result.content[0], mcp_types.TextContent)
    assert result.content[0].text.startswith("QUOTA_EXCEEDED")
    assert len(seen) <= 101  # 100,000 entries by default, then it stops


async def test_a_cursor_that_repeats_is_a_contradiction() -> None:
    page = [{"name": "n", "type": "file", "size": 1, "mtime": 0.0}]

    def answer(method: str, params: Mapping[str, Any]) -> dict[str, Any]:
        return {"entries": page, "nextCursor": "same"}

    client, seen = hostile_host(answer)
    async with client:
        result = await client.call_tool("listing", {})
    assert isinstance(result.content[0], mcp_types.TextContent)
    assert result.content[0].text.startswith("IO_ERROR")
    assert len(seen) == 2


# --- 4. no raw exception escapes handle ----------------------------------------------------------------


def _deep(base: Path, depth: int) -> str:
    """A chain of ``depth`` nested folders named 'a', made without recursion; returns its relative path."""
    fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir("a", dir_fd=fd)
            inner = os.open("a", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = inner
    finally:
        os.close(fd)
    return "/".join(["a"] * depth)


@pytest.mark.parametrize(
    ("method", "params", "expected"),
    [
        ("files/list", {"path": "docs", "cursor": "²"}, "INVALID_PARAMS"),
        ("files/list", {"path": "docs", "cursor": "9" * 5000}, "INVALID_PARAMS"),
        ("files/read", {"path": "docs/open.txt", "offset": 2**64}, "INVALID_PARAMS"),
        ("files/read", {"path": "docs/open.txt", "length": 2**64}, "INVALID_PARAMS"),
        ("files/read", {"path": "docs/open.txt", "offset": 2**63 - 1}, "ok"),
        ("files/create", {"path": "/".join(["c"] * 2000), "type": "directory", "parents": True}, "ok"),
    ],
)
async def test_hostile_numbers_and_depths_get_a_protocol_error(
    root: Path, method: str, params: dict[str, Any], expected: str
) -> None:
    broker = FileBroker(RootSet.from_paths([root]), rate=None)
    assert await outcome(broker, method, params) == expected


async def test_a_deep_recursive_delete_is_an_answer_not_a_raw_exception(root: Path) -> None:
    _deep(root / "docs", 1500)
    broker = FileBroker(RootSet.from_paths([root]), rate=None)
    assert await outcome(broker, "files/delete", {"path": "docs/a", "recursive": True}) in ("ok", "IO_ERROR")


async def outcome(broker: FileBroker, method: str, params: dict[str, Any]) -> str:
    """ "ok" or the reason of the BrokerError; any other exception fails the test."""
    try:
        await broker.handle(method, params)
    except BrokerError as exc:
        return exc.reason
    return "ok"


# --- 5. prompts: a refusal covers what lies beneath; a rate limit per connection ----------------------


async def test_a_refusal_covers_everything_beneath_it(root: Path) -> None:
    asked: list[str] = []

    def consent(request: FileConsentRequest) -> bool:
        asked.extend(i.path for i in request.items)
        return False

    broker = FileBroker(RootSet.from_paths([root]), consent=consent, rate=None)
    await broker.handle("files/consent", {"message": "m", "paths": [{"path": "docs"}]})
    for name in ("open.txt", "private/s.txt", "x", "y"):
        assert (await broker_refusal(broker, "files/read", {"path": f"docs/{name}"})).data[
            "consent"
        ] == "denied"
    assert asked == ["docs"]


async def test_prompts_are_rate_limited_per_connection(root: Path) -> None:
    asked: list[str] = []

    def consent(request: FileConsentRequest) -> bool:
        asked.extend(i.path for i in request.items)
        return False

    now = [0.0]  # a mock clock: the bucket's refill is checked exactly, not against a loaded machine
    broker = FileBroker(
        RootSet.from_paths([root]), consent=consent, rate=None, prompts=(5, 60.0), clock=lambda: now[0]
    )
    outcomes = [
        (await broker_refusal(broker, "files/read", {"path": f"docs/n{i}"})).data.get("consent")
        for i in range(299)
    ]
    assert len(asked) == 5
    assert outcomes.count("rate-limited") == 294
    now[0] += 11.9  # 5 prompts per 60 s: the next one is allowed 12 s later, not before
    assert (await broker_refusal(broker, "files/read", {"path": "docs/late"})).data[
        "consent"
    ] == "rate-limited"
    now[0] += 0.2
    assert (await broker_refusal(broker, "files/read", {"path": "docs/later"})).data["consent"] == "denied"
    assert len(asked) == 6


# --- 6. the provider's consent gates brokered access ---------------------------------------------------


async def test_the_providers_consent_gates_brokered_access(root: Path) -> None:
    asked: list[int] = []

    def provider_consent(request: Any) -> bool:
        asked.append(len(request.roots))
        return False

    provider = RootsProvider([root], consent=provider_consent)
    server = MCPServer("reader")
    enable_brokering(server)

    @server.tool()
    async def read(path: str, ctx: Context) -> str:
        fs = await files(ctx)
        try:
            return await fs.read_text(path)
        except BrokerError as exc:
            return f"{exc.reason}: {exc.message}"

    broker = FileBroker(provider)
    client = Client(server, mode="legacy", list_roots_callback=provider)
    broker.install(client)
    async with client, broker:
        result = await client.call_tool("read", {"path": "docs/open.txt"})  # never listed roots
    assert isinstance(result.content[0], mcp_types.TextContent)
    assert result.content[0].text.startswith("PERMISSION_DENIED")
    assert asked == [1]


# --- 7. the audit log cannot be forged ------------------------------------------------------------------


async def test_a_newline_in_a_path_cannot_forge_an_audit_line(
    root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="mcp_roots.audit")
    broker = FileBroker(RootSet.from_paths([root]))
    forged = "x\nfiles/delete server=probe root=r path=docs outcome=ok"
    await broker_refusal(broker, "files/read", {"path": forged})
    await broker_refusal(broker, "files/read", {"root": forged, "path": "a"})
    broker.revoke([root / "docs\nrevoke paths=*"])
    records = [r for r in caplog.records if r.name == "mcp_roots.audit"]
    assert records
    for record in records:
        assert "\n" not in record.getMessage()


# --- watching: woken by the kernel where it can, by a timer otherwise ----------------------------------


def watching_server() -> MCPServer:
    server = MCPServer("watcher")
    enable_brokering(server)

    @server.tool()
    async def first_change(path: str, ctx: Context) -> str:
        fs = await files(ctx)
        async with fs.watch(path, recursive=True) as changes:
            async for change in changes:
                return f"{change.kind} {change.path}"
        return "ended"

    return server


@pytest.mark.parametrize("backend", ["events", "poll"])
async def test_a_change_deep_in_a_watched_tree_arrives_by_either_backend(root: Path, backend: str) -> None:
    provider = RootsProvider([root])
    broker = FileBroker(provider, watch_interval=0.05, watch_backend=backend)  # type: ignore[arg-type]
    client = Client(watching_server(), mode="legacy", list_roots_callback=provider)
    broker.install(client)
    results: list[Any] = []
    async with client, broker:

        async def watch() -> None:
            results.append(await client.call_tool("first_change", {"path": "docs"}))

        with anyio.fail_after(20):
            async with anyio.create_task_group() as task_group:
                task_group.start_soon(watch)
                while not broker.watching:  # noqa: ASYNC110 - host state has no event to wait on
                    await anyio.sleep(0.01)
                (root / "docs" / "private" / "new.txt").write_text("n")
    assert results[0].structured_content == {"result": "created docs/private/new.txt"}


# --- revocation under a race: the open is checked too ----------------------------------------------------


def _exchange(a: Path, b: Path, stop: threading.Event) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    while not stop.is_set():
        libc.renameat2(-100, os.fsencode(a), -100, os.fsencode(b), 2)  # 2: RENAME_EXCHANGE


async def test_a_revoked_folder_swapped_in_by_name_is_never_read(root: Path) -> None:
    """A local program swaps the revoked folder and a granted one back and forth while the server reads the
    granted name: no read returns the revoked file (the control, which skips the broker, does)."""
    public = root / "docs" / "public"
    public.mkdir()
    (public / "s.txt").write_text("public")
    broker = FileBroker(RootSet.from_paths([root]), rate=None)
    broker.revoke([root / "docs" / "private"])
    stop = threading.Event()
    swapper = threading.Thread(target=_exchange, args=(root / "docs" / "private", public, stop))
    swapper.start()
    leaked, control_leaks = 0, 0
    reasons: list[str] = []
    try:
        for _ in range(300):
            try:
                answer = await broker.handle("files/read", {"path": "docs/public/s.txt", "encoding": "utf-8"})
            except BrokerError as exc:
                reasons.append(exc.reason)
            else:
                leaked += answer["content"] == "secret"
        for _ in range(2000):  # the naive control: read the granted name directly
            with contextlib.suppress(OSError):
                control_leaks += (public / "s.txt").read_text() == "secret"
            if control_leaks:
                break
    finally:
        stop.set()
        swapper.join()
    assert control_leaks > 0  # the swap does put the revoked file under the granted name
    assert leaked == 0
    assert "PERMISSION_DENIED" in reasons
    assert set(reasons) <= {"PERMISSION_DENIED", "FILE_NOT_FOUND"}


async def test_a_tree_too_deep_to_watch_whole_is_refused_not_partly_watched(root: Path) -> None:
    _deep(root / "docs", MAX_DEPTH + 5)
    provider = RootsProvider([root])
    broker = FileBroker(provider)
    server = MCPServer("watcher")
    enable_brokering(server)
    client = Client(server, mode="legacy", list_roots_callback=provider)
    broker.install(client)
    async with client, broker:
        error = await broker_refusal(broker, "files/watch", {"path": "docs", "recursive": True})
        shallow = await broker.handle("files/watch", {"path": "docs", "recursive": False})
    assert (error.reason, error.message) == ("IO_ERROR", "'docs' is nested too deeply")
    assert shallow["watchId"]


async def test_a_watch_that_outgrows_its_entry_limit_ends_visibly(root: Path) -> None:
    provider = RootsProvider([root])
    broker = FileBroker(provider, watch_interval=0.05, max_watch_entries=5, watch_backend="poll")
    client = Client(watching_server(), mode="legacy", list_roots_callback=provider)
    broker.install(client)
    results: list[Any] = []
    async with client, broker:

        async def watch() -> None:
            results.append(await client.call_tool("first_change", {"path": "docs"}))

        with anyio.fail_after(20):
            async with anyio.create_task_group() as task_group:
                task_group.start_soon(watch)
                while not broker.watching:  # noqa: ASYNC110 - host state has no event to wait on
                    await anyio.sleep(0.01)
                bulk = root / "staging"
                bulk.mkdir()
                for i in range(10):
                    (bulk / f"n{i}").write_text("n")
                os.rename(bulk, root / "docs" / "bulk")  # 11 entries at once: no snapshot sees a part
        assert not broker.watching
    assert results[0].structured_content == {"result": "ended"}


async def test_the_user_re_approving_a_revoked_folder_gives_it_back(root: Path) -> None:
    approve = [False]
    broker = FileBroker(RootSet.from_paths([root]), consent=lambda request: approve[0], rate=None)
    await broker.handle("files/consent", {"message": "m", "paths": [{"path": ""}], "access": "write"})
    broker.revoke([root / "docs" / "private"])
    approve[0] = True
    # A wider approval by the user does not lift the narrower revocation...
    await broker.handle("files/consent", {"message": "all", "paths": [{"path": ""}], "access": "write"})
    assert (await broker_refusal(broker, "files/read", {"path": "docs/private/s.txt"})).data[
        "consent"
    ] == "revoked"
    assert (await broker_refusal(broker, "files/delete", {"path": "docs", "recursive": True})).reason == (
        "PERMISSION_DENIED"
    )
    # ...approving the revoked folder itself does, for reads and for deleting what holds it.
    await broker.handle(
        "files/consent", {"message": "private", "paths": [{"path": "docs/private"}], "access": "write"}
    )
    assert (await broker.handle("files/read", {"path": "docs/private/s.txt"}))["bytesRead"] == 6
    await broker.handle("files/delete", {"path": "docs", "recursive": True})
    assert not (root / "docs").exists()


async def test_restore_gives_back_what_revoke_took_without_a_callback(root: Path) -> None:
    broker = FileBroker(RootSet.from_paths([root]))
    broker.revoke()
    assert (await broker_refusal(broker, "files/stat", {"path": "docs"})).data["consent"] == "revoked"
    broker.restore()
    assert (await broker.handle("files/stat", {"path": "docs"}))["type"] == "directory"


# --- name and path lengths are bytes, never characters ------------------------------------------------------

CLEF = "\U0001d11e"  # four bytes in UTF-8


@pytest.mark.parametrize(
    ("name", "accepted"),
    [
        (CLEF * 63, True),  # 252 bytes: a legal name of 63 characters
        ("a" * 255, True),  # NAME_MAX exactly
        (CLEF * 64, False),  # 256 bytes
        ("a" * 256, False),
    ],
    ids=["252-byte-multibyte", "255-byte-ascii", "256-byte-multibyte", "256-byte-ascii"],
)
async def test_a_name_is_measured_in_bytes(root: Path, name: str, accepted: bool) -> None:
    broker = FileBroker(RootSet.from_paths([root]), rate=None)
    params = {"path": f"docs/{name}", "content": base64.b64encode(b"data").decode()}
    if accepted:
        done = await broker.handle("files/write", params)
        assert done["size"] == 4
        assert (root / "docs" / name).read_bytes() == b"data"
    else:
        error = await broker_refusal(broker, "files/write", params)
        assert error.reason == "INVALID_PATH"
        assert "too long" in error.message
    assert sorted(os.listdir(root / "docs")) == sorted(["private", "open.txt", *([name] if accepted else [])])


def test_a_wire_path_is_measured_in_bytes() -> None:
    from mcp_roots.broker._protocol import check_relative_path

    names = [CLEF * 63] * 16  # 16 names of 252 bytes and 15 slashes: 4047 bytes, 1023 characters
    assert check_relative_path("/".join(names)) == "/".join(names)
    longer = "/".join(names) + "/" + "a" * (4095 - 4047 - 1)  # 4095 bytes: the longest path
    assert check_relative_path(longer) == longer
    with pytest.raises(BrokerError) as caught:
        check_relative_path(longer + "a")  # 4096 bytes
    assert caught.value.reason == "INVALID_PATH"


# --- changes go through the descriptor that was checked -----------------------------------------------------


def _effects(folder: int, before: set[str]) -> tuple[int, int, int]:
    """(files written, files created, files deleted) in the folder open as ``folder``, by identity."""
    now = set(os.listdir(folder))
    return (
        sum(n.startswith("w") for n in now - before),
        sum(n.startswith("c") for n in now - before),
        sum(n.startswith("d") for n in before - now),
    )


async def test_a_revoked_folder_swapped_in_by_name_gets_no_change(root: Path) -> None:
    """A local program swaps the revoked folder and a consented one back and forth (RENAME_EXCHANGE) while
    the server writes, creates and deletes under the consented name: nothing is written, created or
    deleted in the revoked folder. The control, which checks the name and then acts by name as the broker
    did before, puts changes there."""
    public, private = root / "docs" / "public", root / "docs" / "private"
    public.mkdir()
    rounds = 200
    for folder in (public, private):
        for i in range(rounds):
            (folder / f"d{i}").write_text("keep")
            (folder / f"dc{i}").write_text("keep")
    revoked = os.open(private, os.O_RDONLY | os.O_DIRECTORY)  # the revoked folder, whatever its name
    before = set(os.listdir(revoked))
    broker = FileBroker(RootSet.from_paths([root]), rate=None)
    broker.revoke([private])
    stop = threading.Event()
    swapper = threading.Thread(target=_exchange, args=(private, public, stop))
    swapper.start()
    outcomes: list[str] = []
    control = (0, 0, 0)
    try:
        for i in range(rounds):
            for method, params in [
                ("files/write", {"path": f"docs/public/w{i}", "content": base64.b64encode(b"x").decode()}),
                ("files/create", {"path": f"docs/public/c{i}", "type": "file"}),
                ("files/delete", {"path": f"docs/public/d{i}"}),
            ]:
                try:
                    await broker.handle(method, params)
                    outcomes.append("ok")
                except BrokerError as exc:
                    outcomes.append(exc.reason)
        broker_effects = _effects(revoked, before)
        seen = set(os.listdir(revoked))
        for i in range(20_000):  # the naive control, until the swap shows: check the name, act by name
            target = public / f"wc{i}"
            if not str(target).startswith(str(private) + "/"):
                with contextlib.suppress(OSError):
                    target.write_text("x")
            with contextlib.suppress(OSError):
                (public / f"dc{i % rounds}").unlink()
            if i % 100 == 99:
                control = _effects(revoked, seen)
                if control[0] + control[2]:
                    break
    finally:
        stop.set()
        swapper.join()
        os.close(revoked)
    assert control[0] + control[2] > 0  # the swap does carry a by-name change into the revoked folder
    assert broker_effects == (0, 0, 0)
    assert outcomes.count("ok") > 0  # not a broker that refuses everything
    assert set(outcomes) <= {"ok", "PERMISSION_DENIED", "FILE_NOT_FOUND", "CONCURRENCY_CONFLICT"}
    leftovers = [n for f in (public, private) for n in os.listdir(f) if n.startswith(".")]
    assert leftovers == []  # no staging file or renamed-aside victim survives


# --- a rewrite never carries set-user-id bits, never changes the owner --------------------------------------


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file another user's uid needs root")
async def test_another_users_setuid_file_keeps_its_owner_and_loses_its_setuid_bits(root: Path) -> None:
    """As root: another user's 6755 file, rewritten through the broker, stays that user's file, with its
    permission bits but no set-user-id / set-group-id bit (before: a root-owned 6755 file with the server's
    content)."""
    target = root / "docs" / "tool"
    target.write_bytes(b"#!/bin/sh\necho old\n")
    os.chown(target, 12345, 23456)
    os.chmod(target, 0o6755)
    assert target.stat().st_mode & 0o7777 == 0o6755
    broker = FileBroker(RootSet.from_paths([root]), rate=None)
    content = base64.b64encode(b"#!/bin/sh\necho new\n").decode()
    await broker.handle("files/write", {"path": "docs/tool", "content": content})
    st = target.stat()
    assert target.read_bytes() == b"#!/bin/sh\necho new\n"
    assert (st.st_uid, st.st_gid) == (12345, 23456)
    assert st.st_mode & 0o7777 == 0o755


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file another user's uid needs root")
def test_where_the_owner_cannot_be_kept_files_write_is_permission_denied(tmp_path: Path) -> None:
    """A broker that is not root (a forked child that dropped to another uid) may replace a file in a
    world-writable folder, but cannot give the new file its owner: PERMISSION_DENIED (the path layer's
    keep_metadata refuses), the file and the folder as they were, no staging file left."""
    top = Path(tempfile.mkdtemp())  # not under pytest's 0700 basetemp: the child must reach it
    try:
        os.chmod(top, 0o755)
        shared = top / "shared"
        shared.mkdir()
        os.chmod(shared, 0o777)
        victim = shared / "notes"
        victim.write_bytes(b"theirs")
        os.chown(victim, 4321, 4322)
        os.chmod(victim, 0o666)
        said = _as_another_user(lambda: _write_through_broker(shared, "notes", b"mine now"))
        assert said == "PERMISSION_DENIED", said
        st = victim.stat()
        assert victim.read_bytes() == b"theirs"
        assert (st.st_uid, st.st_gid) == (4321, 4322)
        assert sorted(p.name for p in shared.iterdir()) == ["notes"], "a staging file was left"
    finally:
        shutil.rmtree(top)


def _write_through_broker(root: Path, rel: str, data: bytes) -> str:
    async def write() -> str:
        broker = FileBroker(RootSet.from_paths([root]), rate=None)
        try:
            await broker.handle("files/write", {"path": rel, "content": base64.b64encode(data).decode()})
        except BrokerError as exc:
            return exc.reason
        return "written"

    return anyio.run(write)


def _as_another_user(body: Callable[[], str]) -> str:
    """``body()``'s answer, run in a forked child that dropped root for uid/gid 4322/4323."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        os.close(read)
        try:
            os.setgroups([])
            os.setresgid(4323, 4323, 4323)
            os.setresuid(4322, 4322, 4322)
            answer = body()
        except BaseException as exc:
            answer = f"other: {exc!r}"
        os.write(write, answer.encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        said = pipe.read().decode()
    os.waitpid(pid, 0)
    return said


@pytest.mark.parametrize("mode", [0o4755, 0o2750, 0o1644])
async def test_a_rewrite_keeps_the_permission_bits_but_never_a_setid_or_sticky_bit(
    root: Path, mode: int
) -> None:
    target = root / "docs" / "own"
    target.write_bytes(b"old")
    os.chmod(target, mode)
    broker = FileBroker(RootSet.from_paths([root]), rate=None)
    await broker.handle("files/write", {"path": "docs/own", "content": base64.b64encode(b"new").decode()})
    st = target.stat()
    assert target.read_bytes() == b"new"
    assert st.st_mode & 0o7777 == mode & 0o777
    assert (st.st_uid, st.st_gid) == (os.geteuid(), os.getegid())


async def test_a_symlink_swapped_in_for_a_consented_folder_gets_no_change(root: Path) -> None:
    """The user consented to docs/public only; a local program swaps that folder with a symlink to
    docs/other back and forth. Changes under docs/public never land in docs/other: the directory a change
    goes through is checked where it is (the control, checking the name and acting by name, writes there)."""
    public, other = root / "docs" / "public", root / "docs" / "other"
    public.mkdir()
    other.mkdir()
    link = root / "docs" / "link"
    link.symlink_to("other")

    def only_public(request: FileConsentRequest) -> set[ConsentItem]:
        return {i for i in request.items if i.path == "docs/public" or i.path.startswith("docs/public/")}

    broker = FileBroker(RootSet.from_paths([root]), consent=only_public, prompts=None, rate=None)
    message = {"message": "m", "paths": [{"path": "docs/public"}], "access": "write"}
    assert (await broker.handle("files/consent", message))["granted"]
    stop = threading.Event()
    swapper = threading.Thread(target=_exchange, args=(public, link, stop))
    swapper.start()
    outcomes: list[str] = []
    try:
        for i in range(200):
            for method, params in [
                ("files/write", {"path": f"docs/public/w{i}", "content": base64.b64encode(b"x").decode()}),
                ("files/create", {"path": f"docs/public/c{i}", "type": "directory"}),
            ]:
                try:
                    await broker.handle(method, params)
                    outcomes.append("ok")
                except BrokerError as exc:
                    outcomes.append(exc.reason)
        broker_effects = sorted(os.listdir(other))
        control: list[str] = []
        for i in range(20_000):  # the naive control, until the swap shows
            target = public / f"wc{i}"
            if str(target).startswith(str(public) + "/"):
                with contextlib.suppress(OSError):
                    target.write_text("x")
            if i % 100 == 99:
                control = sorted(set(os.listdir(other)) - set(broker_effects))
                if control:
                    break
    finally:
        stop.set()
        swapper.join()
    assert control  # the swap does carry a by-name write into docs/other
    assert broker_effects == []
    assert outcomes.count("ok") > 0
    assert set(outcomes) <= {"ok", "PERMISSION_DENIED", "FILE_NOT_FOUND", "CONCURRENCY_CONFLICT"}


async def test_a_revoked_folder_swapped_in_for_a_deleted_one_keeps_its_files(root: Path) -> None:
    """The revoked folder is swapped back and forth with docs/public/victim while the server deletes that
    folder recursively (and the victim is made again after each delete): no file of the revoked folder is
    deleted. The control, checking the name and then removing the tree by name, deletes some."""
    private, victim = root / "docs" / "private", root / "docs" / "public" / "victim"
    victim.parent.mkdir()
    for i in range(50):
        (private / f"r{i}").write_text("keep")
    revoked = os.open(private, os.O_RDONLY | os.O_DIRECTORY)
    before = set(os.listdir(revoked))
    broker = FileBroker(RootSet.from_paths([root]), rate=None)
    broker.revoke([private])
    stop = threading.Event()
    swapper = threading.Thread(target=_exchange, args=(private, victim, stop))
    outcomes: list[str] = []
    control_lost = 0
    try:
        swapper.start()
        for _ in range(200):
            with contextlib.suppress(OSError):
                victim.mkdir()
                (victim / "v").write_text("v")
            try:
                await broker.handle("files/delete", {"path": "docs/public/victim", "recursive": True})
                outcomes.append("ok")
            except BrokerError as exc:
                outcomes.append(exc.reason)
        broker_lost = len(before - set(os.listdir(revoked)))
        for _ in range(20_000):  # the naive control, until the swap shows: check the name, remove by name
            with contextlib.suppress(OSError):
                victim.mkdir()
            if not str(victim).startswith(str(private) + "/"):
                with contextlib.suppress(OSError):
                    shutil.rmtree(victim)
            control_lost = len(before - set(os.listdir(revoked)))
            if control_lost:
                break
    finally:
        stop.set()
        swapper.join()
        os.close(revoked)
    assert control_lost > 0
    assert broker_lost == 0
    assert outcomes.count("ok") > 0
    assert set(outcomes) <= {"ok", "PERMISSION_DENIED", "FILE_NOT_FOUND", "CONCURRENCY_CONFLICT", "IO_ERROR"}
