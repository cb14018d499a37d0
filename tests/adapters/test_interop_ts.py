"""The reference server against a client nobody on this project wrote: the official TypeScript SDK.

tests/interop/ts_client.mjs (``@modelcontextprotocol/sdk``, pinned in tests/interop/package-lock.json,
installed by ``make test``) plays a scenario over stdio or streamable HTTP and prints a JSON summary; these
tests run it as a subprocess with bounded time and assert on what it saw.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.kit import FILE_SERVER, REPO, Dirs, HttpServer, launch_file_server

INTEROP = REPO / "tests" / "interop"
SCRIPT = INTEROP / "ts_client.mjs"
BURST = 1000
# The guard's default max_wait: a steady stream of list_changed may cause one roots/list per max_wait.
MAX_WAIT = 0.1


def _node() -> str:
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not installed; the TypeScript interop tests need Node >= 20")
    if not (INTEROP / "node_modules" / "@modelcontextprotocol" / "sdk").is_dir():
        pytest.fail(
            "tests/interop/node_modules is missing: run `make test` (or npm ci --prefix tests/interop)"
        )
    return node


def run_ts_client(*args: str, timeout: float = 60.0) -> dict[str, Any]:
    """Run the TS client; return its JSON summary. Fails the test with its stderr on any error."""
    deadline = timeout - 5
    proc = subprocess.run(
        [_node(), str(SCRIPT), "--deadline", str(deadline), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=INTEROP,
    )
    lines = proc.stdout.strip().splitlines()
    try:
        summary: dict[str, Any] = json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        pytest.fail(
            f"no JSON summary (exit {proc.returncode}).\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
        )
    if proc.returncode != 0 or "error" in summary:
        pytest.fail(
            f"ts_client failed (exit {proc.returncode}): {summary.get('error')}\nstderr:\n{proc.stderr}"
        )
    return summary


def stdio_args(*extra: str) -> list[str]:
    return ["--transport", "stdio", "--python", sys.executable, "--server", str(FILE_SERVER), *extra]


def dir_args(dirs: Dirs) -> list[str]:
    return [
        "--root-a", str(dirs.a), "--root-b", str(dirs.b), "--root-c", str(dirs.c),
        "--fallback", str(dirs.fallback), "--outside", str(dirs.outside),
    ]  # fmt: skip


@pytest.fixture
def dirs(tmp_path: Path) -> Dirs:
    return Dirs.make(tmp_path)


@pytest.fixture(scope="module")
def shared_dirs(tmp_path_factory: pytest.TempPathFactory) -> Dirs:
    return Dirs.make(tmp_path_factory.mktemp("ts-http"))


@pytest.fixture(scope="module")
def stateful_http(shared_dirs: Dirs) -> Iterator[HttpServer]:
    # One stateful HTTP server for the HTTP tests (a server start costs more than a scenario); each client
    # is its own session, so nothing carries over from one test to the next but the directories.
    with launch_file_server("--roots", str(shared_dirs.fallback)) as server:
        yield server
        assert server.proc.poll() is None, server.stderr()


def assert_content(result: dict[str, Any], text: str) -> None:
    assert result["isError"] is False, result
    assert result["text"] == text


def assert_refused(result: dict[str, Any], path: Path) -> None:
    assert result["isError"] is True, result
    assert result["text"].startswith("Access denied: "), result
    assert str(path) in result["text"]
    assert "TOP SECRET" not in result["text"]


def assert_roots_scenario(summary: dict[str, Any], dirs: Dirs) -> None:
    # The very first call, right after connecting, already sees the client's roots. Over streamable HTTP
    # that needs the server's first roots/list to ride the call's own response stream: the client's GET
    # stream may not exist yet, and a request sent there is lost (the call would wait out the timeout and
    # get the fallback roots).
    assert_content(summary["immediate"], "alpha")
    assert summary["roots_in_force_after_seconds"] < 5.0  # one list_roots call, generous for a loaded CI

    first = summary["first"]
    assert_content(first["inside"], "alpha")
    assert_refused(first["other_root"], dirs.b / "b.txt")
    assert_refused(first["outside"], dirs.outside / "secret.txt")
    assert first["traversal"]["isError"] is True
    assert "TOP SECRET" not in first["traversal"]["text"]
    assert first["roots"] == [str(dirs.a)]
    assert first["write_inside"]["isError"] is False, first["write_inside"]
    assert (dirs.a / "from-ts.txt").read_text() == "ts"
    assert_refused(first["write_outside"], dirs.outside / "from-ts.txt")
    assert not (dirs.outside / "from-ts.txt").exists()
    assert first["list_dir"]["isError"] is False
    assert "a.txt" in first["list_dir"]["text"]

    # The first call after list_changed already sees the new boundary: no stale read of the old root.
    changed = summary["changed"]
    assert_content(changed["new_root"], "beta")
    assert_refused(changed["old_root"], dirs.a / "a.txt")
    assert changed["roots"] == [str(dirs.b)]

    burst = summary["burst"]
    assert burst["notifications"] == BURST
    after = burst["after"]
    assert_content(after["root_c"], "gamma")
    assert_refused(after["root_a"], dirs.a / "a.txt")
    assert_refused(after["root_b"], dirs.b / "b.txt")
    assert after["roots"] == [str(dirs.c)]
    # A burst costs a handful of roots/list requests: the debounce coalesces it, and while a steady stream
    # lasts (HTTP sends each notification as its own POST), at most about one request per max_wait.
    allowed = 10 + int(burst["send_seconds"] / MAX_WAIT)
    assert 1 <= burst["roots_list_requests"] <= allowed, burst


def test_ts_client_over_stdio_roots_change_and_burst(dirs: Dirs) -> None:
    summary = run_ts_client(*stdio_args(), *dir_args(dirs), "--burst", str(BURST))
    assert summary["server"] == "mcp-roots-file-server"
    assert_roots_scenario(summary, dirs)


def test_ts_client_over_http_roots_change_and_burst(shared_dirs: Dirs, stateful_http: HttpServer) -> None:
    url = stateful_http.url
    summary = run_ts_client(
        "--transport", "http", "--url", url, *dir_args(shared_dirs), "--burst", str(BURST)
    )
    assert summary["protocol_version"] == "2025-11-25"
    assert_roots_scenario(summary, shared_dirs)


def assert_fallback_scenario(summary: dict[str, Any], dirs: Dirs) -> None:
    assert_content(summary["fallback_read"], "from the fallback root")
    assert_refused(summary["root_a_read"], dirs.a / "a.txt")
    assert_refused(summary["outside_read"], dirs.outside / "secret.txt")
    assert summary["roots"] == [str(dirs.fallback)]


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_ts_client_without_roots_capability_gets_fallback_roots(
    dirs: Dirs, shared_dirs: Dirs, stateful_http: HttpServer, transport: str
) -> None:
    if transport == "stdio":
        summary = run_ts_client(*stdio_args(), *dir_args(dirs), "--scenario", "fallback", "--no-roots")
    else:
        dirs = shared_dirs
        args = [*dir_args(dirs), "--scenario", "fallback", "--no-roots"]
        summary = run_ts_client("--transport", "http", "--url", stateful_http.url, *args)
    assert summary["roots_capability"] is False
    assert_fallback_scenario(summary, dirs)


def test_ts_client_with_roots_on_stateless_http_gets_fallback_roots(dirs: Dirs) -> None:
    # Stateless HTTP has no back-channel: the server cannot ask for the client's roots, so the operator's
    # fallback roots apply even though the client declared the capability (and it is never asked).
    with launch_file_server("--stateless", "--roots", str(dirs.fallback)) as server:
        summary = run_ts_client(
            "--transport", "http", "--url", server.url, *dir_args(dirs), "--scenario", "fallback"
        )
    assert summary["roots_capability"] is True
    assert_fallback_scenario(summary, dirs)
    assert summary["roots_list_requests_total"] == 0
