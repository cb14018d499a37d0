"""`mcp-roots probe` as a user runs it: a real subprocess probing real stdio servers. mcp-roots serve shows
no way out; a broken server is caught and the technique named; without the SDK it says what to install;
a real SIGINT mid-run leaves no server process and no scratch file behind.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mcp_roots.cli import main
from tests.adapters.test_no_sdk import run_without_sdk
from tests.kit import launch_http, write_token

BROKEN = Path(__file__).resolve().parents[1] / "broken_servers" / "broken_server.py"
MCP_ROOTS = [sys.executable, "-m", "mcp_roots.cli"]
SERVE = [*MCP_ROOTS, "serve", "{root}"]


def probe(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*MCP_ROOTS, "probe", *args], capture_output=True, text=True, timeout=timeout)


def test_mcp_roots_serve_shows_no_way_out() -> None:
    """Every tool and technique, one connection (the full four-connection run is measured in the README)."""
    done = probe(
        "--json", "--era", "legacy", "--client-roots", "declared", "--race-attempts", "8", "--", *SERVE
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["escapes"] == 0
    assert report["findings"] == 0
    assert (
        len({a.split(".")[0] for a in report["arguments"]}) == 13
    )  # every tool but list_allowed_directories
    outcomes = {(r["tool"], r["technique"]): r["outcome"] for r in report["rows"]}
    assert outcomes[("read_text_file", "swap-race")] == "held"
    assert outcomes[("edit_file", "symlink-final")] == "held"  # the edit's inside control went through
    assert outcomes[("read_text_file", "hard-link")] == "noted"  # a hard link is no path check's to stop


def test_a_broken_server_is_caught_and_the_technique_named(tmp_path: Path) -> None:
    done = probe(
        "--era", "legacy", "--client-roots", "none", "--technique", "absolute-outside",
        "--technique", "sibling-prefix", "--scratch-dir", str(tmp_path),
        "--", sys.executable, str(BROKEN), "prefix", "{root}",
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    line = next(x for x in done.stdout.splitlines() if "sibling-prefix" in x and "ESCAPED" in x)
    assert line.split()[:4] == ["read_file", "path", "sibling-prefix", "CVE-2025-53110"], line
    assert "ESCAPED [legacy] content of 'root_evil/secret.txt'" in line
    assert "techniques that got through: sibling-prefix" in done.stdout
    assert "classes: CVE-2025-53110 sibling prefix (CWE-22)" in done.stdout
    assert list(tmp_path.iterdir()) == []  # the scratch tree is gone


def test_a_server_over_streamable_http_is_started_probed_and_stopped(tmp_path: Path) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    token_file, _ = write_token(tmp_path)
    done = probe(
        "--json", "--technique", "dotdot", "--technique", "symlink-final", "--scratch-dir", str(scratch),
        "--http", "http://127.0.0.1:{port}/mcp", "--http-token-file", str(token_file),
        "--", *MCP_ROOTS, "serve", "--http", "{port}", "--token-file", str(token_file), "{root}",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["connections"] == {
        "legacy": "2025-11-25",
        "legacy+roots": "2025-11-25",
        "modern": "2026-07-28",
        "modern+roots": "2026-07-28",
    }
    assert report["escapes"] == 0
    assert {r["outcome"] for r in report["rows"]} == {"held"}
    assert list(scratch.iterdir()) == []
    assert _processes_naming(str(scratch)) == []  # the server's process group is gone


def test_a_running_http_server_is_probed_through_declared_roots(tmp_path: Path) -> None:
    """--http URL alone: the user started the server (here on tmp_path); the probe declares the scratch root
    inside it, so every canary is inside what the server may serve but outside what the client granted."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    token_file, token = write_token(tmp_path)
    with launch_http([*MCP_ROOTS, "serve"], str(tmp_path), "--token-file", str(token_file)) as server:
        done = probe(
            "--json", "--era", "legacy", "--technique", "sibling-prefix", "--technique", "symlink-dir",
            "--scratch-dir", str(scratch), "--http", server.url,
            "--http-header", f"Authorization: Bearer {token}",
        )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert list(report["connections"]) == ["legacy+roots"]
    assert report["escapes"] == 0
    assert {r["outcome"] for r in report["rows"]} == {"held"}


def test_a_server_that_dies_is_a_crash() -> None:
    done = probe(
        "--era", "legacy", "--client-roots", "none", "--technique", "control-chars", "--technique", "dotdot",
        "--findings-only", "--", sys.executable, str(BROKEN), "crash", "{root}",
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    line = next(x for x in done.stdout.splitlines() if "CRASHED" in x)
    assert line.split()[:3] == ["read_file", "path", "control-chars"], line
    assert "CWE-158 control characters  CRASHED [legacy] the connection ended" in line
    assert "FAILED: legacy: the server went away" in done.stdout


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ((), "needs a server command after '--'"),
        (("--technique", "nope", "--", "true"), "unknown technique(s) nope"),
        (("--deadline", "0", "--", "true"), "--deadline must be a positive number"),
        (("--race-attempts", "0", "--", "true"), "must be at least 1"),
        (("--no-such-option", "--", "true"), "unrecognized arguments: --no-such-option"),
        (("--era", "old", "--", "true"), "argument --era: invalid choice: 'old'"),
    ],
)
def test_usage_errors_are_one_line(
    args: tuple[str, ...], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["probe", *args]) == 2
    err = capsys.readouterr().err
    assert expected in err
    assert len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err


def test_a_server_that_cannot_start_is_an_error_naming_it(capsys: pytest.CaptureFixture[str]) -> None:
    code = "import sys; print('no such config', file=sys.stderr); sys.exit(3)"
    argv = ["probe", "--era", "legacy", "--client-roots", "none", "--", sys.executable, "-c", code]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "could not connect" in err
    assert "(server stderr: no such config)" in err  # the server's own last words
    assert "Traceback" not in err


def test_without_the_sdk_it_says_what_to_install(tmp_path: Path) -> None:
    code = (
        "import sys\nfrom mcp_roots.cli import main\n"
        "sys.exit(main(['probe', '--', 'mcp-roots', 'serve', '{root}']))"
    )
    done = run_without_sdk(code, tmp_path)
    assert done.returncode == 2, done.stderr
    assert "pip install 'mcp-roots[mcp]'" in done.stderr
    assert "Traceback" not in done.stderr


def _processes_naming(text: str) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                cmdline = Path(f"/proc/{name}/cmdline").read_bytes()
            except OSError:
                continue
            if text.encode() in cmdline:
                found.append(int(name))
    return found


def test_ctrl_c_leaves_no_process_and_no_scratch_file(tmp_path: Path) -> None:
    """A real SIGINT while the server hangs on the FIFO (the probe is waiting on its deadline)."""
    proc = subprocess.Popen(
        [*MCP_ROOTS, "probe", "--era", "legacy", "--client-roots", "none", "--technique", "fifo",
         "--deadline", "60", "--scratch-dir", str(tmp_path),
         "--", sys.executable, str(BROKEN), "prefix", "{root}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        servers: list[int] = []
        while time.monotonic() < deadline and not servers:
            time.sleep(0.2)
            servers = [p for p in _processes_naming(str(tmp_path)) if p != proc.pid]
        assert servers, "the server never started"
        time.sleep(1.5)  # into the FIFO call
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "interrupted" in err
    assert "Traceback" not in err
    assert list(tmp_path.iterdir()) == []
    assert [p for p in servers if Path(f"/proc/{p}").exists()] == []
