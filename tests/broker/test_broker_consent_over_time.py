"""The brokered files keep the user's consent over time. Watches, stat, a conflict's etag and
listings are judged like reads (a descriptor opened beneath the root, fenced against the grants and the
revocations by name and identity); an upload's staging file is private until its commit; the upload cap is
reserved before the first await; a default file limit. Each attack is first shown working on the code as
it was (the unfenced look the old code took, the old staging mode, the old order of check and count),
then held. Real files, symlinks and hard links, a real in-memory Client and MCPServer, the real kernel; the
other-user test runs as root and drops to ``nobody``."""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import tempfile
import threading
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.server import MCPServer
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext

from mcp_roots import BrokerError, RootSet, RootsProvider
from mcp_roots.broker import (
    DEFAULT_MAX_FILE,
    ConsentItem,
    FileBroker,
    FileConsentRequest,
    enable_brokering,
)
from mcp_roots.broker import _hostops as ops
from mcp_roots.broker import _protocol as p
from mcp_roots.broker import _uploads as up
from mcp_roots.broker._grants import Grants
from mcp_roots.broker._protocol import NOTIFICATION_CHANGED
from mcp_roots.broker._watch import snapshot
from tests.kit import b64, broker_refusal

pytestmark = pytest.mark.anyio


async def until(condition: Callable[[], bool], seconds: float = 10) -> None:
    with anyio.fail_after(seconds):
        while not condition():  # noqa: ASYNC110 - host state has no event to wait on
            await anyio.sleep(0.02)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "root"
    (path / "work").mkdir(parents=True)
    (path / "private").mkdir()
    (path / "private" / "s.txt").write_text("secret")
    (path / "work" / "x").write_text("x")
    return path


# --- watches: what a server was told about, on the wire -----------------------------------------------


class Recorder:
    """Server middleware that records every ``notifications/files/changed`` the server receives, as sent."""

    def __init__(self) -> None:
        self.seen: list[Mapping[str, Any]] = []

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method == NOTIFICATION_CHANGED:
            self.seen.append(dict(ctx.params or {}))
        return await call_next(ctx)

    def paths(self) -> list[str]:
        return [c["path"] for n in self.seen for c in n.get("changes", [])]

    def ended(self) -> list[str | None]:
        return [n.get("reason") for n in self.seen if n.get("ended")]


@contextlib.asynccontextmanager
async def watched(broker: FileBroker, provider: RootsProvider) -> AsyncIterator[Recorder]:
    recorder = Recorder()
    server = MCPServer("watcher")
    server.middleware.append(recorder)
    enable_brokering(server)
    client = Client(server, mode="legacy", list_roots_callback=provider)
    broker.install(client)
    async with client, broker:
        yield recorder


def unfenced(root: Path, rel: str) -> set[str]:
    """The naive control: the look every watch snapshot took before (open by name, walk, no fence)."""
    return set(snapshot(RootSet.from_paths([root]), f"{root}/{rel}", recursive=True, limit=10_000))


async def test_a_symlink_renamed_over_a_watched_file_ends_the_watch_without_a_name_inside(root: Path) -> None:
    """The server watches work/x, then renames an ordinary user symlink work/shortcut -> ../private over it
    (allowed: a symlink is renamed itself). The old look follows work/x into the revoked folder and walks
    it; the watch instead ends with reason "revoked" and reports no name inside it."""
    (root / "work" / "shortcut").symlink_to("../private")
    provider = RootsProvider([root])
    broker = FileBroker(provider, watch_interval=0.05, watch_backend="poll", rate=None)
    broker.revoke([root / "private"])
    async with watched(broker, provider) as recorder:
        await broker.handle("files/watch", {"path": "work/x", "recursive": True})
        await broker.handle("files/rename", {"path": "work/shortcut", "newPath": "work/x", "overwrite": True})
        control = unfenced(root, "work/x")
        (root / "private" / "later.txt").write_text("later")  # a later change inside the revoked folder
        await until(lambda: bool(recorder.ended()))
        listed = await broker_refusal(broker, "files/list", {"path": "work/x"})
        read = await broker_refusal(broker, "files/read", {"path": "work/x/s.txt"})
        stat = await broker_refusal(broker, "files/stat", {"path": "work/x/s.txt"})
    assert "s.txt" in control  # the attack: the old look walks the revoked folder by the watched name
    assert recorder.ended() == ["revoked"]
    assert not [x for x in recorder.paths() if x.startswith("work/x/")], recorder.paths()
    assert broker.watching == ()
    assert {listed.reason, read.reason, stat.reason} == {"PERMISSION_DENIED"}


async def test_a_revoked_folder_moved_into_a_watched_one_is_never_reported(root: Path) -> None:
    """The user moves the revoked private/ into the watched work/ and changes things inside it. The old
    look reports its files; the watch reports neither its name nor anything inside it, now or later, and
    keeps reporting the rest of work/."""
    provider = RootsProvider([root])
    broker = FileBroker(provider, watch_interval=0.05, watch_backend="poll", rate=None)
    broker.revoke([root / "private"])
    async with watched(broker, provider) as recorder:
        await broker.handle("files/watch", {"path": "work", "recursive": True})
        os.rename(root / "private", root / "work" / "private")
        control = unfenced(root, "work")
        (root / "work" / "private" / "new.txt").write_text("n")
        (root / "work" / "marker1").write_text("m")
        await until(lambda: "work/marker1" in recorder.paths())
        (root / "work" / "private" / "newer.txt").write_text("n")
        (root / "work" / "private" / "s.txt").write_text("changed")
        (root / "work" / "marker2").write_text("m")
        await until(lambda: "work/marker2" in recorder.paths())
        listing = await broker.handle("files/list", {"path": "work"})
        read = await broker_refusal(broker, "files/read", {"path": "work/private/s.txt"})
        still = broker.watching
    assert {"private", "private/s.txt"} <= control  # the attack: the old look walks the moved folder
    assert not [x for x in recorder.paths() if x.startswith("work/private")], recorder.paths()
    assert recorder.ended() == []
    assert still == ((provider.roots[0].uri, "work"),)
    assert sorted(e["name"] for e in listing["entries"]) == ["marker1", "marker2", "x"]
    assert read.reason == "PERMISSION_DENIED"


async def test_a_watched_file_replaced_by_a_link_to_an_unconsented_folder_ends_the_watch(root: Path) -> None:
    """Consent is checked over time too: the user approved work/ only; work/x is replaced by a symlink to
    other/ (never approved, never revoked). The old look walks other/; the watch ends instead."""
    (root / "other").mkdir()
    (root / "other" / "o.txt").write_text("o")
    (root / "work" / "link").symlink_to("../other")

    def only_work(request: FileConsentRequest) -> set[ConsentItem]:
        return {i for i in request.items if i.path == "work" or i.path.startswith("work/")}

    provider = RootsProvider([root])
    broker = FileBroker(provider, consent=only_work, prompts=None, watch_interval=0.05, watch_backend="poll")
    async with watched(broker, provider) as recorder:
        await broker.handle("files/watch", {"path": "work/x"})
        os.rename(root / "work" / "link", root / "work" / "x")
        control = unfenced(root, "work/x")
        await until(lambda: bool(recorder.ended()))
    assert "o.txt" in control
    assert recorder.ended() == ["revoked"]
    assert recorder.paths() == []


async def test_a_watched_folder_replaced_by_another_ends_the_watch_with_deleted(root: Path) -> None:
    """A watched folder that is no longer the folder the watch began on (another one renamed over it)
    ends the watch with a last 'deleted'; a watched file rewritten by rename (a new inode, as every
    files/write makes) keeps its watch."""
    (root / "work" / "d").mkdir()
    (root / "work" / "e").mkdir()
    (root / "work" / "e" / "inside").write_text("i")
    provider = RootsProvider([root])
    broker = FileBroker(provider, watch_interval=0.05, watch_backend="poll", rate=None)
    async with watched(broker, provider) as recorder:
        folder = (await broker.handle("files/watch", {"path": "work/d"}))["watchId"]
        file = (await broker.handle("files/watch", {"path": "work/x"}))["watchId"]
        os.rename(root / "work" / "e", root / "work" / "d")
        await broker.handle("files/write", {"path": "work/x", "content": b64(b"rewritten")})
        await until(lambda: bool(recorder.ended()) and "work/x" in recorder.paths())
        ends = {n["watchId"]: n.get("reason") for n in recorder.seen if n.get("ended")}
        alive = [w for _root, w in broker.watching]
    assert ends == {folder: "deleted"}
    assert "work/d/inside" not in recorder.paths()
    assert alive == ["work/x"]
    assert file not in ends


# --- stat, a conflict's etag, listings: judged like reads ------------------------------------------------


async def test_a_hard_link_to_a_revoked_file_is_neither_described_nor_listed(root: Path) -> None:
    """A revoked file is revoked by identity: a hard link to it elsewhere in the root (same inode) is not
    described by files/stat, by the etag of a conflict, by a listing or by a watch. The unfenced look
    (what files/stat and the conflict took before) describes it."""
    os.link(root / "private" / "s.txt", root / "work" / "h.txt")
    rootset = RootSet.from_paths([root])
    broker = FileBroker(rootset, rate=None)
    broker.revoke([root / "private" / "s.txt"])
    control = ops.look(rootset, f"{root}/work/h.txt")  # the old, unfenced look
    stat = await broker_refusal(broker, "files/stat", {"path": "work/h.txt"})
    conflict = await broker_refusal(
        broker, "files/write", {"path": "work/h.txt", "content": b64(b"x"), "ifMatch": "v"}
    )
    delete = await broker_refusal(broker, "files/delete", {"path": "work/h.txt", "ifMatch": "v"})
    listing = await broker.handle("files/list", {"path": "work"})
    secret = os.stat(root / "private" / "s.txt")
    assert (control.st_dev, control.st_ino) == (secret.st_dev, secret.st_ino)
    for error in (stat, conflict, delete):
        assert (error.reason, error.data.get("consent")) == ("PERMISSION_DENIED", "revoked")
        assert "etag" not in error.data
    assert [e["name"] for e in listing["entries"]] == ["x"]
    assert (root / "work" / "h.txt").read_text() == "secret"  # nothing written


def _exchange(a: Path, b: Path, stop: threading.Event) -> None:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    while not stop.is_set():
        libc.renameat2(-100, os.fsencode(a), -100, os.fsencode(b), 2)  # 2: RENAME_EXCHANGE


async def test_stat_and_a_conflicts_etag_under_a_swap_race_never_describe_the_revoked_file(
    root: Path,
) -> None:
    """A local program swaps the revoked folder and a granted one back and forth while the server stats,
    and writes with a stale ifMatch to, the granted name: no answer describes the revoked file (its size,
    its etag). The control, which looks by name as files/stat did, does."""
    public, private = root / "work" / "public", root / "private"
    public.mkdir()
    (public / "s.txt").write_text("public")
    (private / "s.txt").write_text("secret, twenty bytes")
    revoked_etag = p.etag_of(os.stat(private / "s.txt"))
    secret = os.open(private / "s.txt", os.O_RDONLY)  # the revoked file, whatever its name after the race
    broker = FileBroker(RootSet.from_paths([root]), rate=None)
    broker.revoke([private])
    stop = threading.Event()
    swapper = threading.Thread(target=_exchange, args=(private, public, stop))
    swapper.start()
    described, reasons, control = [], [], 0
    try:
        for _ in range(300):
            try:
                described.append(await broker.handle("files/stat", {"path": "work/public/s.txt"}))
            except BrokerError as exc:
                reasons.append(exc.reason)
            try:
                await broker.handle(
                    "files/write", {"path": "work/public/s.txt", "content": b64(b"x"), "ifMatch": "stale"}
                )
            except BrokerError as exc:
                reasons.append(exc.reason)
                if "etag" in exc.data:
                    described.append({"etag": exc.data["etag"], "size": -1})
        for _ in range(20_000):  # the naive control: look by name
            with contextlib.suppress(OSError):
                control += os.stat(public / "s.txt").st_size == 20
            if control:
                break
        unchanged = os.pread(secret, 100, 0)
    finally:
        stop.set()
        swapper.join()
        os.close(secret)
    assert control > 0  # the swap does put the revoked file under the granted name
    assert described  # not a broker that refuses everything
    assert not [d for d in described if d["etag"] == revoked_etag or d["size"] == 20]
    assert set(reasons) <= {"PERMISSION_DENIED", "FILE_NOT_FOUND", "CONCURRENCY_CONFLICT"}
    assert unchanged == b"secret, twenty bytes"
    assert [n for n in os.listdir(public) + os.listdir(private) if n.startswith(".")] == []


# --- uploads: private staging, a cap no interleaving exceeds ---------------------------------------------


async def test_a_staging_file_is_private_until_the_commit_gives_it_the_kept_mode(tmp_path: Path) -> None:
    """Mid-upload, each staging file is 0600 (the old code made it 0666 less the umask); the commit gives
    an existing file its kept mode and a new file the mode any new file gets."""
    (tmp_path / "secret").write_bytes(b"old")
    os.chmod(tmp_path / "secret", 0o600)
    broker = FileBroker(RootSet.from_paths([tmp_path]), rate=None)
    first = await broker.handle("files/write", {"path": "secret", "content": b64(b"new "), "more": True})
    fresh = await broker.handle("files/write", {"path": "fresh", "content": b64(b"f"), "more": True})
    staged = sorted(n for n in os.listdir(tmp_path) if n.endswith(".upload"))
    modes = [os.stat(tmp_path / n).st_mode & 0o777 for n in staged]
    for upload in (first, fresh):
        chunk = {"uploadId": upload["uploadId"], "offset": upload["bytesWritten"], "content": b64(b"!")}
        await broker.handle("files/write", chunk)
    assert modes == [up.STAGING_MODE] * 2 == [0o600] * 2
    assert os.stat(tmp_path / "secret").st_mode & 0o777 == 0o600
    assert os.stat(tmp_path / "fresh").st_mode & 0o777 == up.new_file_mode() == 0o666 & ~_umask()
    assert (tmp_path / "secret").read_bytes() == b"new !"


def _umask() -> int:
    """The umask, as a child process reports it (this process's is not changed to learn it)."""
    return int(
        subprocess.run(["/bin/sh", "-c", "umask"], capture_output=True, text=True, check=True).stdout, 8
    )


_OPEN_A_STAGING_FILE = r"""
for f in "$1"/.*.upload; do
  if (exec 3<"$f") 2>/dev/null; then exec 3<"$f"; echo opened; read go; cat <&3; exit 0; fi
done
echo refused
"""


def _as_nobody(top: Path) -> subprocess.Popen[str]:
    """A process of another user (``nobody``) that opens the first staging file it can in ``top``, says
    whether it could, and, told to go on, prints what it reads through that descriptor."""
    nobody = pwd.getpwnam("nobody")
    return subprocess.Popen(
        ["/bin/sh", "-c", _OPEN_A_STAGING_FILE, "sh", str(top)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        user=nobody.pw_uid,
        group=nobody.pw_gid,
        extra_groups=[],
    )


@pytest.mark.skipif(os.geteuid() != 0, reason="running a process as another user (nobody) needs root")
async def test_another_user_cannot_open_an_uploads_staging_file() -> None:
    """The target is root's 0600 file in a folder anyone may list. The control stages as the old code did
    (created 0666 less the umask, given 0600 only at the commit): nobody opens it mid-upload and reads the
    committed secret through that descriptor afterwards. The broker's staging file refuses nobody."""
    top = Path(tempfile.mkdtemp())  # not under pytest's 0700 basetemp: nobody must reach it
    try:
        os.chmod(top, 0o755)
        target = top / "secret"
        target.write_bytes(b"old")
        os.chmod(target, 0o600)
        # the control: the old staging, step by step
        fd = os.open(top / ".secret.old.upload", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)  # 0666 & ~022
        os.write(fd, b"TOP SECRET ")
        spy = _as_nobody(top)
        assert spy.stdout is not None
        opened = await anyio.to_thread.run_sync(spy.stdout.readline)
        os.write(fd, b"CONTROL")
        os.fchmod(fd, 0o600)  # the old commit: the kept mode, then the rename
        os.close(fd)
        os.rename(top / ".secret.old.upload", target)
        leaked, _ = await anyio.to_thread.run_sync(lambda: spy.communicate("go\n", timeout=10))
        assert (opened.strip(), leaked) == ("opened", "TOP SECRET CONTROL")
        # the broker
        broker = FileBroker(RootSet.from_paths([top]), rate=None)
        first = await broker.handle(
            "files/write", {"path": "secret", "content": b64(b"TOP SECRET "), "more": True}
        )
        spy = _as_nobody(top)
        said, _ = await anyio.to_thread.run_sync(lambda: spy.communicate("go\n", timeout=10))
        await broker.handle(
            "files/write",
            {"uploadId": first["uploadId"], "offset": first["bytesWritten"], "content": b64(b"HELD")},
        )
        assert said == "refused\n"
        assert target.read_bytes() == b"TOP SECRET HELD"
        assert target.stat().st_mode & 0o777 == 0o600
    finally:
        shutil.rmtree(top)


async def test_90_concurrent_first_chunks_open_at_most_the_cap(tmp_path: Path) -> None:
    """90 first chunks arrive at once. The control checks the cap, awaits twice (the target's etag, the
    staging file), then counts, as the broker did: more than the cap open. The broker reserves the slot
    before its first await: exactly the cap open, the rest QUOTA_EXCEEDED (kind "uploads")."""
    rootset = RootSet.from_paths([tmp_path])
    root = rootset.roots[0]
    uploads = up.Uploads(anyio.current_time)
    grants = Grants(None, read_only=False, prompts=None, clock=anyio.current_time)

    async def naive(i: int) -> None:
        with contextlib.suppress(BrokerError):
            uploads.check_room()
            full = ops.join(root, f"c{i}")
            await anyio.to_thread.run_sync(ops.check_target, rootset, full, f"c{i}", None, False)
            staged = await anyio.to_thread.run_sync(up.create_staging, rootset, root, f"c{i}", grants)
            uploads.open(root, f"c{i}", staged, None, False)

    async with anyio.create_task_group() as task_group:
        for i in range(90):
            task_group.start_soon(naive, i)
    control = len(uploads)
    uploads.discard(lambda _u: True)

    broker = FileBroker(rootset, rate=None)
    outcomes: list[str] = []

    async def first_chunk(i: int) -> None:
        try:
            await broker.handle("files/write", {"path": f"u{i}", "content": b64(b"x"), "more": True})
            outcomes.append("open")
        except BrokerError as exc:
            outcomes.append(f"{exc.reason} {exc.data.get('kind')}")

    async with anyio.create_task_group() as task_group:
        for i in range(90):
            task_group.start_soon(first_chunk, i)
    staged = [n for n in os.listdir(tmp_path) if n.endswith(".upload")]
    assert control > up.MAX_UPLOADS  # the attack: checked before the awaits, counted after them
    assert outcomes.count("open") == up.MAX_UPLOADS == len(staged)
    assert set(outcomes) == {"open", "QUOTA_EXCEEDED uploads"}


# --- limits and what a host must escape ---------------------------------------------------------------


async def test_a_file_over_the_default_limit_is_refused_and_a_host_can_raise_it(tmp_path: Path) -> None:
    (tmp_path / "big").touch()
    os.truncate(tmp_path / "big", DEFAULT_MAX_FILE + 1)  # sparse: no gigabyte is written
    default = FileBroker(RootSet.from_paths([tmp_path]), rate=None)
    raised = FileBroker(RootSet.from_paths([tmp_path]), rate=None, max_file=2 * DEFAULT_MAX_FILE)
    unlimited = FileBroker(RootSet.from_paths([tmp_path]), rate=None, max_file=None)  # the old default
    error = await broker_refusal(default, "files/read", {"path": "big", "length": 4})
    assert (default.max_file, DEFAULT_MAX_FILE) == (DEFAULT_MAX_FILE, 1 << 30)
    assert (error.reason, error.data["kind"], error.data["limit"]) == (
        "QUOTA_EXCEEDED",
        "file",
        DEFAULT_MAX_FILE,
    )
    for broker in (raised, unlimited):
        assert (await broker.handle("files/read", {"path": "big", "length": 4}))["bytesRead"] == 4


async def test_the_consent_callback_gets_the_servers_text_verbatim_to_escape(tmp_path: Path) -> None:
    """What the docs tell a host to escape does reach it unescaped: a bidi override and a C1 control in
    the message and in a path (the wire's path rules allow both; they refuse C0 controls)."""
    name = "invoice\u202etxt.exe\u0085"
    (tmp_path / name).write_text("x")
    asked: list[FileConsentRequest] = []

    def ask(request: FileConsentRequest) -> bool:
        asked.append(request)
        return False

    broker = FileBroker(RootSet.from_paths([tmp_path]), consent=ask)
    message = "Allow?\u202e\u0085\u009b31m"
    await broker.handle("files/consent", {"message": message, "paths": [{"path": name}]})
    assert (asked[0].message, asked[0].items[0].path) == (message, name)
    for documented in ("message", "path", "server"):
        assert documented in (FileConsentRequest.__doc__ or "")
    assert "escape" in (FileConsentRequest.__doc__ or "")
    assert "escape" in (ConsentItem.__doc__ or "")
