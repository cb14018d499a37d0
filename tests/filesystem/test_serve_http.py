"""`mcp-roots serve --http` lets in only the holders of its token: every method of the endpoint, a process of
another user, a token rotated by rewriting its file; its readiness endpoint says nothing else; errors before
serving are one line and exit 2; the access log follows --log-level. Each attack is first shown working on a
server run open (--allow-unauthenticated), then held.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import secrets
import shutil
import socket
import subprocess
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from tests.kit import HttpServer, launch_http, serve_command, serve_http, write_token

MODERN = "2026-07-28"
_META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
}


def modern_call(tool: str, arguments: dict[str, object]) -> tuple[dict[str, str], bytes]:
    """A stateless 2026-07-28 tools/call (no roots capability: the server's fallback roots apply)."""
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "tools/call",
        "Mcp-Name": tool,
    }
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments, "_meta": _META},
    }
    return headers, json.dumps(body).encode()


def call(url: str, tool: str, arguments: dict[str, object], extra: dict[str, str]) -> httpx2.Response:
    headers, body = modern_call(tool, arguments)
    return httpx2.post(url, headers={**headers, **extra}, content=body, timeout=30)


def _tree(base: Path) -> Path:
    root = base / "served"
    root.mkdir()
    (root / "note.txt").write_text("the operator's note")
    return root


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return _tree(tmp_path)


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    """One server for the tests that only read through it."""
    with serve_http(str(_tree(tmp_path_factory.mktemp("guarded")))) as server:
        yield server


def test_run_open_anyone_reads_the_files(tree: Path) -> None:
    """The control: without a token, any local process reads through the server, with every method."""
    with launch_http(serve_command("--allow-unauthenticated"), str(tree)) as server:
        answer = call(server.url, "read_text_file", {"path": "note.txt"}, {})
        assert answer.status_code == 200
        assert "the operator's note" in answer.text
        for method in ("GET", "DELETE"):  # not refused for want of a token (405 or 400: no session)
            assert httpx2.request(method, server.url, timeout=30).status_code != 401


@pytest.mark.parametrize("method", ["POST", "GET", "DELETE"])
@pytest.mark.parametrize("token", [None, "wrong", "short"])
def test_every_method_needs_the_token(guarded: HttpServer, method: str, token: str | None) -> None:
    headers, body = modern_call("read_text_file", {"path": "note.txt"})
    if token == "wrong":
        headers["Authorization"] = "Bearer " + "x" * 43
    elif token == "short":
        headers["Authorization"] = guarded.headers["Authorization"][:-1]
    answer = httpx2.request(method, guarded.url, headers=headers, content=body, timeout=30)
    assert answer.status_code == 401
    assert "the operator's note" not in answer.text
    assert answer.headers["www-authenticate"].startswith("Bearer ")


def test_the_token_lets_the_call_in(guarded: HttpServer) -> None:
    answer = call(guarded.url, "read_text_file", {"path": "note.txt"}, guarded.headers)
    assert answer.status_code == 200, answer.text
    assert "the operator's note" in answer.text


def test_readiness_needs_no_token_and_says_nothing(guarded: HttpServer) -> None:
    answer = httpx2.get(f"http://127.0.0.1:{guarded.port}/ready", timeout=30)
    assert answer.status_code == 200
    assert answer.content == b""
    assert httpx2.post(f"http://127.0.0.1:{guarded.port}/ready", timeout=30).status_code == 503


def test_a_rotated_token_replaces_the_old_one(tree: Path, tmp_path: Path) -> None:
    token_file, old = write_token(tmp_path)
    with launch_http(serve_command("--token-file", str(token_file)), str(tree)) as server:
        assert call(server.url, "list_allowed_directories", {}, {"Authorization": f"Bearer {old}"}).is_success
        (tmp_path / "new").mkdir()
        new_file, new = write_token(tmp_path / "new")  # a new token, written aside and moved over the old
        os.replace(new_file, token_file)
        refused = call(server.url, "list_allowed_directories", {}, {"Authorization": f"Bearer {old}"})
        assert refused.status_code == 401
        assert call(server.url, "list_allowed_directories", {}, {"Authorization": f"Bearer {new}"}).is_success


def test_a_missing_token_file_is_made_private(tree: Path, tmp_path: Path) -> None:
    token_file = tmp_path / "config" / "http-token"
    with launch_http(serve_command("--token-file", str(token_file)), str(tree)) as server:
        token = token_file.read_text().strip()
        assert len(token) >= 32
        assert token_file.stat().st_mode & 0o777 == 0o600
        assert f"wrote a new bearer token to {token_file}" in server.stderr()
        assert token not in server.stderr()
        assert call(
            server.url, "list_allowed_directories", {}, {"Authorization": f"Bearer {token}"}
        ).is_success


def _serve_fails(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*serve_command(*args)], capture_output=True, text=True, timeout=60, check=False)


def test_a_token_file_others_can_read_is_refused(tree: Path, tmp_path: Path) -> None:
    token_file, _ = write_token(tmp_path)
    token_file.chmod(0o644)
    done = _serve_fails("--http", "0", "--token-file", str(token_file), str(tree))
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"mcp-roots: error: token file {token_file}: other users may read or write it (mode 0644); "
        f"make it private: chmod 600 {token_file}"
    ]


def test_a_bad_port_is_one_line(tree: Path, tmp_path: Path) -> None:
    token_file, _ = write_token(tmp_path)
    done = _serve_fails("--http", "99999", "--token-file", str(token_file), str(tree))
    assert (done.returncode, done.stderr) == (
        2,
        "mcp-roots: error: --http 99999: not a TCP port (0 to 65535)\n",
    )


def test_a_port_in_use_is_one_line(tree: Path, tmp_path: Path) -> None:
    token_file, _ = write_token(tmp_path)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = _serve_fails("--http", str(port), "--token-file", str(token_file), str(tree))
    assert done.returncode == 2
    assert done.stderr == (
        f"mcp-roots: error: --http {port}: cannot listen on 127.0.0.1:{port}: another process listens there\n"
    )


@pytest.mark.parametrize(("level", "logged"), [("WARNING", False), ("INFO", True)])
def test_the_access_log_follows_the_log_level(tree: Path, tmp_path: Path, level: str, logged: bool) -> None:
    token_file, token = write_token(tmp_path)
    args = ("--token-file", str(token_file), "--log-level", level, str(tree))
    with launch_http(serve_command(), *args) as server:
        assert call(
            server.url, "list_allowed_directories", {}, {"Authorization": f"Bearer {token}"}
        ).is_success
        time.sleep(0.2)
        log = server.stderr()
    assert ('"POST /mcp HTTP/1.1" 200' in log) is logged, log
    if not logged:
        assert [line.split(":")[0] for line in log.splitlines()] == ["mcp-roots serve"] * 3, log


# --- a process of another user ---------------------------------------------------------------------------

# Run as `nobody` by the system's Python (the test's own interpreter may sit where nobody can reach it):
# read the operator's 0600 file through the server, and write a file beside it.
_INTRUDER = textwrap.dedent(
    """
    import json, sys, urllib.request, urllib.error
    url, calls = sys.argv[1], json.loads(sys.argv[2])
    for headers, body in calls:
        request = urllib.request.Request(url, data=body.encode(), headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                print(answer.status, answer.read().decode())
        except urllib.error.HTTPError as error:
            print(error.code, error.read().decode())
    """
)


def _as_nobody(url: str, secret: Path) -> str:
    python = shutil.which("python3", path="/usr/bin:/bin")
    if python is None:
        pytest.skip("no system python3 for the other user")
    calls = [
        modern_call("read_text_file", {"path": str(secret)}),
        modern_call("write_file", {"path": str(secret.parent / "planted.txt"), "content": "owned"}),
    ]
    done = subprocess.run(
        [python, "-c", _INTRUDER, url, json.dumps([[headers, body.decode()] for headers, body in calls])],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        user="nobody",
        group="nogroup" if _has_group("nogroup") else "nobody",
        extra_groups=[],
        cwd="/",
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _has_group(name: str) -> bool:
    import grp

    try:
        grp.getgrnam(name)
    except KeyError:
        return False
    return True


@pytest.fixture
def secret(tree: Path) -> Path:
    if os.geteuid() != 0:
        pytest.skip("needs root: the test drops to another user (nobody) for the intruder")
    try:
        pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no user 'nobody' here")
    secret = tree / "secret.txt"
    secret.write_text("root's secret")
    secret.chmod(0o600)
    return secret


def test_another_user_reads_and_writes_through_a_server_run_open(tree: Path, secret: Path) -> None:
    """The control: nobody, refused the 0600 file itself, reads it and writes beside it through the server."""
    with pytest.raises(subprocess.CalledProcessError):
        subprocess.run(["cat", str(secret)], user="nobody", check=True, capture_output=True, timeout=30)
    with launch_http(serve_command("--allow-unauthenticated"), str(tree)) as server:
        out = _as_nobody(server.url, secret)
    assert "root's secret" in out
    assert (tree / "planted.txt").exists()


def test_another_user_gets_nothing_through_the_token(tree: Path, secret: Path) -> None:
    with serve_http(str(tree)) as server:
        out = _as_nobody(server.url, secret)
    assert out.splitlines()[0].startswith("401 ")
    assert out.splitlines()[1].startswith("401 ")
    assert "root's secret" not in out
    assert not (tree / "planted.txt").exists()


# --- a session flood ---------------------------------------------------------------------------------------

_INITIALIZE = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "flood", "version": "1"},
        },
    }
).encode()
_LEGACY_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def initialize(url: str, extra: dict[str, str]) -> httpx2.Response:
    """A legacy-era initialize, never closed: it holds a place in the session table."""
    return httpx2.post(url, headers={**_LEGACY_HEADERS, **extra}, content=_INITIALIZE, timeout=30)


def test_a_session_flood_locks_out_a_client_of_a_server_run_open(tree: Path) -> None:
    """The control: a local process fills the session table, and the next client gets no session."""
    args = ("--allow-unauthenticated", "--max-sessions", "5", str(tree))
    with launch_http(serve_command(), *args) as server:
        for _ in range(5):
            assert initialize(server.url, {}).headers.get("mcp-session-id")
        assert initialize(server.url, {}).status_code == 503


def test_a_session_flood_without_the_token_opens_no_session(tree: Path) -> None:
    with serve_http("--max-sessions", "5", str(tree)) as server:
        for _ in range(50):
            flood = initialize(server.url, {})
            assert flood.status_code == 401
            assert "mcp-session-id" not in flood.headers
        welcome = initialize(server.url, server.headers)
        assert welcome.status_code == 200
        assert welcome.headers.get("mcp-session-id")


def _two_tokens(directory: Path) -> tuple[Path, dict[str, str], dict[str, str]]:
    """A token file with two tokens (two clients), and each one's headers."""
    first, a = write_token(directory)
    (directory / "b").mkdir()
    _, b = write_token(directory / "b")
    first.write_text(f"{a}\n{b}\n")
    return first, {"Authorization": f"Bearer {a}"}, {"Authorization": f"Bearer {b}"}


@pytest.mark.parametrize(
    ("flags", "locked_out"), [(("--max-sessions", "3"), True), (("--max-sessions-per-token", "3"), False)]
)
def test_one_token_filling_its_sessions_does_not_lock_out_another(
    tree: Path, tmp_path: Path, flags: tuple[str, ...], locked_out: bool
) -> None:
    """Client A (one token) opens sessions until refused. With only the table's bound (the control), client B
    (another token) is then refused too; bounded per token, B still gets one, and A gets one again once it
    closes one of its own."""
    token_file, a, b = _two_tokens(tmp_path)
    with launch_http(serve_command("--token-file", str(token_file), *flags), str(tree)) as server:
        opened = [initialize(server.url, a).headers["mcp-session-id"] for _ in range(3)]
        assert initialize(server.url, a).status_code == 503
        assert (initialize(server.url, b).status_code == 503) is locked_out
        if not locked_out:
            closed = httpx2.delete(server.url, headers={**a, "Mcp-Session-Id": opened[0]}, timeout=30)
            assert closed.status_code < 300
            assert initialize(server.url, a).status_code == 200


@pytest.mark.parametrize(
    "extra",
    [
        {"Mcp-Method": "initialize"},
        {"Mcp-Method": "initialize", "MCP-Protocol-Version": "2025-11-25"},
        {"MCP-Protocol-Version": "2025-06-18"},
    ],
    ids=["mcp_method", "mcp_method_and_handshake_version", "handshake_version"],
)
def test_no_header_steps_around_the_per_token_bound(
    tree: Path, tmp_path: Path, extra: dict[str, str]
) -> None:
    """Every request that opens a session counts, as the SDK decides it (by MCP-Protocol-Version): an
    Mcp-Method header, which the SDK does not look at, opens one like any other."""
    token_file, a, b = _two_tokens(tmp_path)
    flags = ("--max-sessions", "12", "--max-sessions-per-token", "3")
    with launch_http(serve_command("--token-file", str(token_file), *flags), str(tree)) as server:
        answers = [initialize(server.url, {**a, **extra}) for _ in range(6)]
        opened = [answer for answer in answers if answer.headers.get("mcp-session-id")]
        assert len(opened) == 3, [answer.status_code for answer in answers]
        assert [answer.status_code for answer in answers[3:]] == [503] * 3
        assert initialize(server.url, b).headers.get("mcp-session-id")


def test_a_token_rewritten_in_place_with_the_same_size_and_times_is_seen(tree: Path, tmp_path: Path) -> None:
    """cp -p, touch -r, or two writes in one clock tick: same inode, size, mode and mtime, new content."""
    token_file, old = write_token(tmp_path)
    with launch_http(serve_command("--token-file", str(token_file)), str(tree)) as server:
        assert call(server.url, "list_allowed_directories", {}, {"Authorization": f"Bearer {old}"}).is_success
        before = token_file.stat()
        new = secrets.token_urlsafe(32)
        assert len(new) == len(old)
        with token_file.open("r+") as rewrite:
            rewrite.write(new + "\n")
        os.utime(token_file, ns=(before.st_atime_ns, before.st_mtime_ns))
        after = token_file.stat()
        assert (after.st_ino, after.st_size, after.st_mtime_ns) == (
            before.st_ino,
            before.st_size,
            before.st_mtime_ns,
        )
        refused = call(server.url, "list_allowed_directories", {}, {"Authorization": f"Bearer {old}"})
        assert refused.status_code == 401
        assert call(server.url, "list_allowed_directories", {}, {"Authorization": f"Bearer {new}"}).is_success


@pytest.mark.parametrize("how", ["another_owner", "folder_others_can_write", "a_symlink"])
def test_a_token_file_another_user_controls_is_refused_at_start(tree: Path, tmp_path: Path, how: str) -> None:
    folder = tmp_path / "config"
    folder.mkdir(mode=0o700)
    token_file, _ = write_token(folder)
    if how == "another_owner":
        if os.geteuid() != 0:
            pytest.fail("needs root to give the file to another user (the suite runs as root here)")
        os.chown(token_file, 65534, 65534)
        reason = "it belongs to another user (uid 65534); make your own"
    elif how == "folder_others_can_write":
        folder.chmod(0o777)
        reason = f"other users may write its folder {folder} (mode 0777) and so replace it"
    else:
        target = tmp_path / "elsewhere"
        token_file.rename(target)
        token_file.symlink_to(target)
        reason = "it is a symlink; give the file itself"
    done = _serve_fails("--http", "0", "--token-file", str(token_file), str(tree))
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert line.startswith(f"mcp-roots: error: token file {token_file}: {reason}"), line


def test_a_token_file_of_another_user_moved_over_it_lets_nobody_in(tree: Path, tmp_path: Path) -> None:
    """Another user's file (mode 0600, their own token) renamed over the token file: nobody gets in, the
    reason is logged once however many requests come."""
    if os.geteuid() != 0:
        pytest.fail("needs root to make a file of another user (the suite runs as root here)")
    token_file, token = write_token(tmp_path)
    with launch_http(serve_command("--token-file", str(token_file)), str(tree)) as server:
        assert call(
            server.url, "list_allowed_directories", {}, {"Authorization": f"Bearer {token}"}
        ).is_success
        (tmp_path / "theirs").mkdir()
        planted, theirs = write_token(tmp_path / "theirs")
        planted.write_text(f"{token}\n{theirs}\n")
        os.chown(planted, 65534, 65534)
        os.replace(planted, token_file)
        for presented in (token, theirs, token):
            answer = call(
                server.url, "list_allowed_directories", {}, {"Authorization": f"Bearer {presented}"}
            )
            assert answer.status_code == 401
        time.sleep(0.2)
        assert server.stderr().count("belongs to another user") == 1, server.stderr()


def test_serve_says_where_it_listens_its_token_file_and_ready_on_stderr_only(
    tree: Path, tmp_path: Path
) -> None:
    token_file, token = write_token(tmp_path)
    proc = subprocess.Popen(
        serve_command("--http", "0", "--token-file", str(token_file), "--log-level", "INFO", str(tree)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stderr is not None
        said: list[str] = []
        while not said or said[-1] != "mcp-roots serve: ready":
            line = proc.stderr.readline().decode()
            assert line, f"serve ended: {said}"
            if line.startswith("mcp-roots serve: ") and " INFO " not in line[:30]:
                said.append(line.rstrip("\n"))
        url = said[0].removeprefix("mcp-roots serve: serving ")
        assert re.fullmatch(r"http://127\.0\.0\.1:[0-9]+/mcp", url), said
        assert said[1:] == [
            f"mcp-roots serve: token file {token_file} (clients send 'Authorization: Bearer TOKEN' with a "
            "token from it)",
            "mcp-roots serve: ready",
        ]
        assert call(url, "list_allowed_directories", {}, {"Authorization": f"Bearer {token}"}).is_success
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
    assert out == b""
