"""The probe earns each verdict: a file tool that refused every inside path is not reached (exit 3), never a
pass; a write into another declared root is no escape; a working folder whose effect no canary sees is "no
observable effect", not "held"; a git server that opens any repository is caught; one missing check is one
cause, reported first."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mcp_roots.probe import Report, Row
from mcp_roots.probe._scratch import TWIN_NFD, Scratch
from tests.kit import REPO

BROKEN = Path(__file__).resolve().parents[1] / "broken_servers" / "broken_server.py"
GIT_SERVER = REPO / ".venv-git-server" / "bin" / "mcp-server-git"
MCP_ROOTS = [sys.executable, "-m", "mcp_roots.cli"]


def probe(*args: str) -> tuple[int, dict[str, Any], str]:
    done = subprocess.run(
        [*MCP_ROOTS, "probe", "--json", "--era", "legacy", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    report: dict[str, Any] = json.loads(done.stdout) if done.stdout.strip() else {}
    return done.returncode, report, done.stderr[-3000:]


def broken(bug: str) -> list[str]:
    return ["--", sys.executable, str(BROKEN), bug, "{root}"]


def test_a_file_tool_that_refuses_every_inside_path_is_not_reached_and_exits_3() -> None:
    code, report, stderr = probe("--client-roots", "none", "--technique", "dotdot", *broken("deny"))
    assert code == 3, stderr
    assert report["findings"] == 0
    assert {"read_file", "write_file", "list_directory"} <= set(report["unreached_file_tools"])
    why = report["unreached"]["read_file.path"]
    assert why.startswith("the tool refused every inside path the probe gave it: "), why
    assert "Access denied" in why
    assert {r["outcome"] for r in report["rows"] if r["tool"] == "read_file"} == {"untested"}


def test_the_scratch_tree_counts_changes_in_another_declared_root_as_inside(tmp_path: Path) -> None:
    scratch = Scratch.create(str(tmp_path))
    try:
        (scratch.twin_root / "new.txt").write_text("x")
        (scratch.percent_root / "new.txt").write_text("x")
        # Without the client's roots declared these are outside the root the server was given.
        assert len(scratch.outside_changes()) == 4  # two files, two folders changed
        assert scratch.outside_changes(declared=True) == []
        # The outside twin (NFD) and the percent root's parent are outside either way.
        (scratch.twin_root.parent / TWIN_NFD / "new.txt").write_text("x")
        (scratch.percent_root.parent / "new.txt").write_text("x")
        assert len(scratch.outside_changes(declared=True)) == 4
    finally:
        scratch.remove()
    assert os.listdir(tmp_path) == []


def test_a_write_folded_into_another_declared_root_is_no_finding() -> None:
    # The server folds paths to NFC as the official filesystem server 2.0.1 does: the write sent to the
    # outside twin 'twi\u0308n' lands in the declared root 'tw\u00efn'.
    args = ("--client-roots", "declared", "--technique", "unicode-twin", "--tool", "write_file")
    code, report, stderr = probe(*args, *broken("fold"))
    assert code == 0, (stderr, report.get("rows"))
    assert report["findings"] == 0
    assert {r["outcome"] for r in report["rows"] if r["technique"] == "unicode-twin"} == {"held"}


def test_a_working_folder_whose_effect_no_canary_sees_is_no_observable_effect() -> None:
    args = ("--client-roots", "none", "--technique", "absolute-outside", "--technique", "dotdot")
    code, report, stderr = probe(*args, "--tool", "run_command", "--tool", "read_file", *broken("workdir"))
    assert code == 3, stderr  # a file tool of which no verdict is earned fails the run, as an unreached one
    assert report["unobserved_file_tools"] == ["run_command"]
    outcomes = {(r["tool"], r["technique"]): r["outcome"] for r in report["rows"]}
    assert outcomes[("run_command", "absolute-outside")] == "no observable effect"
    assert outcomes[("run_command", "dotdot")] == "no observable effect"
    assert outcomes[("read_file", "dotdot")] == "held"  # the inside control showed the file: a real 'held'
    assert list(report["unobserved"]) == ["run_command.working_dir"]


def test_one_missing_check_is_one_cause_first() -> None:
    args = ("--client-roots", "none", "--technique", "absolute-outside", "--technique", "dotdot")
    code, report, stderr = probe(*args, "--technique", "symlink-final", *broken("none"))
    assert code == 1, stderr
    assert [c["technique"] for c in report["causes"]] == ["absolute-outside"]
    cause = report["causes"][0]
    assert sorted(cause["places"]) == ["list_directory path", "read_file path", "write_file path"]
    assert cause["following"] == report["findings"] - 3
    text = subprocess.run(
        [*MCP_ROOTS, "probe", "--era", "legacy", *args, "--technique", "symlink-final", *broken("none")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    ).stdout.splitlines()
    first = next(i for i, line in enumerate(text) if "ESCAPED" in line or "CAUSE" in line)
    assert text[first].startswith("CAUSE: no boundary check at all"), text[first]


def test_causes_keep_apart_what_does_not_follow() -> None:
    report = Report("t")
    for technique in ("dotdot", "parent", "symlink-final", "symlink-chain", "sibling-prefix"):
        report.rows.append(Row("legacy", "read_file", "path", technique, "ESCAPED"))
    report.rows.append(Row("legacy", "write_file", "path", "symlink-dir", "ESCAPED"))
    report.rows.append(Row("legacy", "read_file", "path", "fifo", "HANG"))  # inside the root: no way out
    causes = {c.technique: (c.places, c.following) for c in report.causes()}
    # '..' explains 'parent'; the symlink findings are a second cause (one, in two tools); sibling-prefix
    # follows from neither.
    assert causes == {
        "dotdot": (["read_file path"], 1),
        "symlink-final": (["read_file path", "write_file path"], 1),
    }


@pytest.mark.skipif(not GIT_SERVER.exists(), reason="make .venv-git-server/.installed (make test does)")
def test_the_official_git_server_without_a_repository_is_caught() -> None:
    args = ("--client-roots", "declared", "--technique", "absolute-outside", "--technique", "dotdot")
    code, report, stderr = probe(*args, "--", str(GIT_SERVER))
    assert code == 1, stderr
    escaped = {r["tool"] for r in report["rows"] if r["outcome"] == "ESCAPED"}
    assert {"git_status", "git_log", "git_show"} <= escaped, report["rows"]
    assert report["causes"][0]["technique"] == "absolute-outside"


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_stat_tool_that_reaches_outside_shows_by_the_size_drawn() -> None:
    from mcp.server import MCPServer

    from mcp_roots.testing import assert_confined

    server = MCPServer("naive-stat")

    @server.tool()
    def get_file_info(path: str) -> str:
        """Size of a file."""
        return f"size: {os.stat(path).st_size}\nisFile: {os.path.isfile(path)}"

    with pytest.raises(AssertionError) as caught:
        await assert_confined(server, techniques=["absolute-outside"], eras=["legacy"], declare_roots=[False])
    lines = str(caught.value).splitlines()
    cause = "no boundary check at all: a plain path outside the root got out (absolute-outside)"
    assert lines[1] == f"  cause: {cause} in get_file_info path", lines  # the cause first, then its findings
    assert any("get_file_info path: absolute-outside ESCAPED" in line and "size of" in line for line in lines)
