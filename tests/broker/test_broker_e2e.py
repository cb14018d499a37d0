"""Client-brokered file access end to end: the real examples/brokered_server.py as a stdio subprocess, a
real mcp Client with a RootsProvider and a FileBroker installed, real files.

Each test is one scenario on one server process (starting Python with mcp costs about a second), and runs
on asyncio only: the stdio path is the same on trio, whose behaviour test_broker_host.py covers in
memory.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from mcp_roots import RootsProvider
from mcp_roots.broker import ConsentItem, FileBroker, FileConsentRequest
from tests import forkserver

pytestmark = pytest.mark.anyio

SERVER = Path(__file__).resolve().parents[2] / "examples" / "brokered_server.py"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def server_params() -> StdioServerParameters:
    command = forkserver.command(str(SERVER))  # a real process, forked warm
    return StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))


@asynccontextmanager
async def connected(provider: RootsProvider, broker: FileBroker | None) -> AsyncIterator[Client]:
    client = Client(server_params(), mode="legacy", list_roots_callback=provider)
    if broker is None:
        async with client:
            yield client
        return
    broker.install(client)
    async with client, broker:
        yield client


class Outcome:
    def __init__(self, result: mcp_types.CallToolResult) -> None:
        self.error = bool(result.is_error)
        block = result.content[0] if result.content else None
        self.text = block.text if isinstance(block, mcp_types.TextContent) else ""
        structured = result.structured_content or {}
        self.value: Any = structured.get("result", structured) if len(structured) == 1 else structured

    @property
    def reason(self) -> str | None:
        """The broker's reason from a refused tool call ("... PERMISSION_DENIED: ...")."""
        if not self.error:
            return None
        for reason in (
            "PERMISSION_DENIED",
            "INVALID_PATH",
            "FILE_NOT_FOUND",
            "QUOTA_EXCEEDED",
            "CONCURRENCY_CONFLICT",
            "TIMEOUT",
            "IO_ERROR",
            "INVALID_PARAMS",
            "UNAVAILABLE",
        ):
            if f"{reason}:" in self.text:
                return reason
        return "?"


async def call(client: Client, tool: str, **args: Any) -> Outcome:
    with anyio.fail_after(30):
        return Outcome(await client.call_tool(tool, args))


async def until(condition: Callable[[], bool], seconds: float = 10) -> None:
    """Wait for a condition of host state that has no event to wait on."""
    with anyio.fail_after(seconds):
        while not condition():  # noqa: ASYNC110 - polling FileBroker state from outside
            await anyio.sleep(0.02)


def tree(path: Path) -> dict[str, bytes | str]:
    """Every entry under ``path`` with its content (files) or link target, to prove nothing changed."""
    found: dict[str, bytes | str] = {}
    for dirpath, dirnames, filenames in os.walk(path):
        for name in dirnames + filenames:
            full = Path(dirpath) / name
            rel = str(full.relative_to(path))
            if full.is_symlink():
                found[rel] = "-> " + os.readlink(full)
            elif full.is_file():
                found[rel] = full.read_bytes()
            else:
                found[rel] = "dir"
    return found


# --- reading, writing and the directory operations -----------------------------------------------------


async def test_text_binary_list_create_delete_rename_through_the_client(tmp_path: Path) -> None:
    root = tmp_path / "project"
    root.mkdir()
    (root / "notes.txt").write_text("héllo wörld\n")
    binary = bytes(range(256)) * 3
    (root / "blob.bin").write_bytes(binary)
    provider = RootsProvider([root])
    async with connected(provider, FileBroker(provider)) as client:
        assert (await call(client, "brokered_read", path="notes.txt")).value == "héllo wörld\n"
        got = await call(client, "brokered_read_base64", path="blob.bin")
        assert base64.b64decode(got.value) == binary
        part = await call(client, "brokered_read_base64", path="blob.bin", offset=250, length=10)
        assert base64.b64decode(part.value) == binary[250:260]

        written = await call(client, "brokered_write", path="out/../new.txt", content="x")
        assert written.reason == "INVALID_PATH"
        written = await call(client, "brokered_write", path="new.txt", content="fresh ✓")
        assert not written.error, written.text
        assert (root / "new.txt").read_text() == "fresh ✓"
        data = bytes([0, 255, 10, 13, 0]) * 100
        await call(client, "brokered_write_base64", path="raw.bin", data=base64.b64encode(data).decode())
        assert (root / "raw.bin").read_bytes() == data

        assert not (await call(client, "brokered_create", path="sub", type="directory")).error
        assert not (await call(client, "brokered_create", path="sub/empty.txt")).error
        assert (root / "sub" / "empty.txt").read_bytes() == b""
        again = await call(client, "brokered_create", path="sub/empty.txt")
        assert again.reason == "CONCURRENCY_CONFLICT"

        listing = (await call(client, "brokered_list")).value
        assert {(e["name"], e["type"]) for e in listing} == {
            ("notes.txt", "file"),
            ("blob.bin", "file"),
            ("new.txt", "file"),
            ("raw.bin", "file"),
            ("sub", "directory"),
        }
        assert [e["name"] for e in (await call(client, "brokered_list", path="sub")).value] == ["empty.txt"]

        assert not (await call(client, "brokered_rename", path="new.txt", new_path="sub/moved.txt")).error
        assert not (root / "new.txt").exists()
        assert (root / "sub" / "moved.txt").read_text() == "fresh ✓"
        clash = await call(client, "brokered_rename", path="raw.bin", new_path="sub/moved.txt")
        assert clash.reason == "CONCURRENCY_CONFLICT"
        assert (root / "raw.bin").exists()

        assert (await call(client, "brokered_delete", path="sub")).reason == "IO_ERROR"  # not empty
        assert not (await call(client, "brokered_delete", path="sub", recursive=True)).error
        assert not (root / "sub").exists()
        assert (await call(client, "brokered_read", path="sub/moved.txt")).reason == "FILE_NOT_FOUND"
    # No staging file is ever left behind.
    assert not [p for p in os.listdir(root) if p.endswith(".upload")]


async def test_a_20_mib_file_travels_in_chunks_both_ways_with_matching_checksums(tmp_path: Path) -> None:
    root = tmp_path / "data"
    root.mkdir()
    payload = os.urandom(20 * 1024 * 1024 + 12345)
    (root / "big.bin").write_bytes(payload)
    provider = RootsProvider([root])
    async with connected(provider, FileBroker(provider, rate=None)) as client:
        read = (await call(client, "brokered_checksum", path="big.bin")).value
        assert read == {"size": len(payload), "sha256": hashlib.sha256(payload).hexdigest(), "chunks": 21}
        wrote = (
            await call(client, "brokered_write_pattern", path="copy.bin", size=20 * 1024 * 1024 + 1)
        ).value
    on_disk = (root / "copy.bin").read_bytes()
    assert len(on_disk) == 20 * 1024 * 1024 + 1
    assert hashlib.sha256(on_disk).hexdigest() == wrote["sha256"]


# --- consent -------------------------------------------------------------------------------------------


async def test_consent_granted_denied_and_partial(tmp_path: Path) -> None:
    root = tmp_path / "home"
    (root / "public").mkdir(parents=True)
    (root / "private").mkdir()
    (root / "public" / "a.txt").write_text("public")
    (root / "private" / "b.txt").write_text("secret")
    asked: list[FileConsentRequest] = []

    def consent(request: FileConsentRequest) -> bool | list[ConsentItem]:
        asked.append(request)
        if request.explicit:  # the user approves only what lies under public/
            return [item for item in request.items if item.path.startswith("public")]
        return False  # and refuses anything the server did not ask for first

    provider = RootsProvider([root])
    async with connected(provider, FileBroker(provider, consent=consent)) as client:
        partial = await call(
            client, "brokered_consent", message="Summarise your notes", paths=["public", "private"]
        )
        assert partial.value == {"granted": ["public"], "denied": ["private"], "access": "read"}
        assert asked[0].message == "Summarise your notes"
        assert [i.path for i in asked[0].items] == ["public", "private"]

        assert (await call(client, "brokered_read", path="public/a.txt")).value == "public"
        denied = await call(client, "brokered_read", path="private/b.txt")
        assert denied.reason == "PERMISSION_DENIED"
        assert "secret" not in denied.text
        # Read consent is not write consent.
        assert (await call(client, "brokered_write", path="public/a.txt", content="x")).reason == (
            "PERMISSION_DENIED"
        )
        assert (root / "public" / "a.txt").read_text() == "public"

        none = await call(client, "brokered_consent", message="Everything please", paths=["private"])
        assert none.value["granted"] == []
        assert none.value["denied"] == ["private"]

        granted = await call(
            client, "brokered_consent", message="Write results", paths=["public"], access="write"
        )
        assert granted.value["granted"] == ["public"]
        assert not (await call(client, "brokered_write", path="public/out.txt", content="done")).error
    assert (root / "public" / "out.txt").read_text() == "done"
    assert (root / "private" / "b.txt").read_text() == "secret"


async def test_revocation_mid_session_stops_reads_and_watches(tmp_path: Path) -> None:
    root = tmp_path / "r"
    root.mkdir()
    (root / "a.txt").write_text("one")
    provider = RootsProvider([root])
    broker = FileBroker(provider, watch_interval=0.05)
    async with connected(provider, broker) as client:
        assert (await call(client, "brokered_read", path="a.txt")).value == "one"
        outcome: list[Outcome] = []

        async def watch() -> None:
            outcome.append(await call(client, "brokered_watch", events=1, seconds=20))

        with anyio.fail_after(10):  # the tool's own limit is 20 s: the watch must end, not time out
            async with anyio.create_task_group() as tg:
                tg.start_soon(watch)
                await until(lambda: bool(broker.watching))
                broker.revoke()
                assert broker.watching == ()
        assert outcome[0].value == []  # ended by the host's last notification, with no event
        after = await call(client, "brokered_read", path="a.txt")
        assert after.reason == "PERMISSION_DENIED"
        assert "revoked" in after.text
        # Without a consent callback, a revoked broker cannot be re-granted by the server itself.
        again = await call(client, "brokered_consent", message="please", paths=[""])
        assert again.value["granted"] == []
        assert (await call(client, "brokered_read", path="a.txt")).reason == "PERMISSION_DENIED"


# --- watch ---------------------------------------------------------------------------------------------


async def test_watch_sees_a_change_made_on_the_client(tmp_path: Path) -> None:
    root = tmp_path / "w"
    (root / "sub").mkdir(parents=True)
    provider = RootsProvider([root])
    broker = FileBroker(provider, watch_interval=0.05)
    async with connected(provider, broker) as client:
        outcome: list[Outcome] = []

        async def watch() -> None:
            outcome.append(await call(client, "brokered_watch", recursive=True, events=1, seconds=15))

        async with anyio.create_task_group() as tg:
            tg.start_soon(watch)
            await until(lambda: bool(broker.watching))
            (root / "sub" / "new.txt").write_text("hi")
        assert outcome[0].value == [{"path": "sub/new.txt", "kind": "created"}]
        await until(lambda: not broker.watching)  # the server's unwatch arrived


# --- the boundary --------------------------------------------------------------------------------------

ESCAPES: list[tuple[str, set[str]]] = [
    ("../outside/secret.txt", {"INVALID_PATH"}),
    ("/etc/passwd", {"INVALID_PATH"}),
    ("a/../../outside/secret.txt", {"INVALID_PATH"}),
    ("link_out/secret.txt", {"PERMISSION_DENIED"}),
    ("file_link", {"PERMISSION_DENIED"}),
    ("dotdot_link/outside/secret.txt", {"PERMISSION_DENIED"}),
    ("C:/Windows", {"INVALID_PATH"}),
    ("a\\..\\..\\outside", {"INVALID_PATH"}),
]

OPERATIONS: list[tuple[str, Callable[[str], dict[str, Any]]]] = [
    ("brokered_read", lambda p: {"path": p}),
    ("brokered_stat", lambda p: {"path": p}),
    ("brokered_list", lambda p: {"path": p}),
    ("brokered_write", lambda p: {"path": p, "content": "pwned"}),
    ("brokered_create", lambda p: {"path": p + "/new"}),
    ("brokered_delete", lambda p: {"path": p, "recursive": True}),
    ("brokered_rename", lambda p: {"path": p, "new_path": "stolen.txt"}),
    ("brokered_rename", lambda p: {"path": "inside.txt", "new_path": p, "overwrite": True}),
]


def restore_links(root: Path, outside: Path) -> None:
    if (root / "stolen.txt").is_symlink():
        (root / "stolen.txt").rename(root / "file_link")
    if (root / "file_link").exists() and not (root / "file_link").is_symlink():
        (root / "file_link").rename(root / "inside.txt")
    if not (root / "file_link").is_symlink():
        (root / "file_link").symlink_to(outside / "secret.txt")


async def test_escape_attempts_are_refused_through_every_operation_and_touch_nothing(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("top secret")
    root = tmp_path / "root"
    (root / "a").mkdir(parents=True)
    (root / "inside.txt").write_text("inside")
    (root / "link_out").symlink_to(outside)
    (root / "file_link").symlink_to(outside / "secret.txt")
    (root / "dotdot_link").symlink_to("..")
    before_outside, before_root = tree(tmp_path / "outside"), tree(root)
    provider = RootsProvider([root])
    async with connected(provider, FileBroker(provider, rate=None)) as client:
        for path, reasons in ESCAPES:
            for tool, args in OPERATIONS:
                result = await call(client, tool, **args(path))
                if path == "file_link" and tool in ("brokered_delete", "brokered_rename"):
                    # Deleting, renaming or replacing a symlink acts on the link itself, never on its
                    # target: allowed, and the target stays untouched. Put things back for the next case.
                    assert not result.error, (tool, path, result.text)
                    restore_links(root, outside)
                    continue
                assert result.reason in reasons, (tool, path, result.text)
                assert "top secret" not in result.text
    assert tree(outside) == before_outside
    assert tree(root) == before_root


# --- limits ----------------------------------------------------------------------------------------------


async def test_size_limit_and_rate_limit_answer_quota_exceeded(tmp_path: Path) -> None:
    root = tmp_path / "q"
    root.mkdir()
    (root / "small.txt").write_text("ok")
    (root / "large.bin").write_bytes(b"x" * 5000)
    provider = RootsProvider([root])
    async with connected(provider, FileBroker(provider, max_file=4096, rate=(6, 60.0))) as client:
        assert (await call(client, "brokered_read", path="small.txt")).value == "ok"  # 1 op
        big = await call(client, "brokered_read", path="large.bin")  # 2
        assert big.reason == "QUOTA_EXCEEDED"
        assert "xxxx" not in big.text
        too_big = await call(client, "brokered_write_pattern", path="new.bin", size=5000)  # 3
        assert too_big.reason == "QUOTA_EXCEEDED"
        assert not (root / "new.bin").exists()
        for _ in range(3):  # 4, 5, 6
            assert not (await call(client, "brokered_stat", path="small.txt")).error
        limited = await call(client, "brokered_stat", path="small.txt")  # 7: over the bucket
        assert limited.reason == "QUOTA_EXCEEDED"
        assert "rate limit" in limited.text
    assert not [p for p in os.listdir(root) if p.endswith(".upload")]


# --- conflicts -------------------------------------------------------------------------------------------


async def test_a_write_with_a_stale_etag_is_a_conflict_and_changes_nothing(tmp_path: Path) -> None:
    root = tmp_path / "c"
    root.mkdir()
    target = root / "doc.txt"
    target.write_text("version 1")
    provider = RootsProvider([root])
    async with connected(provider, FileBroker(provider)) as client:
        etag = (await call(client, "brokered_stat", path="doc.txt")).value["etag"]
        target.write_text("version 2 (edited on the client)")
        stale = await call(
            client, "brokered_write", path="doc.txt", content="server's version", if_match=etag
        )
        assert stale.reason == "CONCURRENCY_CONFLICT"
        assert target.read_text() == "version 2 (edited on the client)"
        fresh = (await call(client, "brokered_stat", path="doc.txt")).value["etag"]
        ok = await call(client, "brokered_write", path="doc.txt", content="server's version", if_match=fresh)
        assert not ok.error, ok.text
        assert ok.value["etag"] != fresh
    assert target.read_text() == "server's version"


# --- a client without the protocol -----------------------------------------------------------------------


async def test_a_client_without_the_capability_gets_a_clear_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "n"
    root.mkdir()
    (root / "a.txt").write_text("a")
    caplog.set_level(logging.INFO, logger="mcp_roots.audit")
    async with connected(RootsProvider([root]), None) as client:
        result = await call(client, "brokered_read", path="a.txt")
    assert result.reason == "UNAVAILABLE"
    assert "does not offer client-brokered file access" in result.text
    assert "filesystemBrokering" in result.text
    assert not [r for r in caplog.records if r.name == "mcp_roots.audit"]
