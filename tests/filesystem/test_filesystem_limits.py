"""`mcp-roots serve`'s tools at their bounds: the read cap holds for head and tail,
edit_file's diff of many equal lines answers at once, a directory_tree is capped in bytes,
read_multiple_files words an outside path the same whatever lies there, and a rewrite never carries
set-user-id bits. Through the SDK's own client, in memory, on the real filesystem."""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client import Client

from mcp_roots import RootsGuard
from mcp_roots.filesystem import Limits, Settings, build_server

pytestmark = pytest.mark.anyio

MIB = 1024 * 1024


async def call(
    root: Path, tool: str, args: dict[str, Any], settings: Settings | None = None
) -> tuple[bool, str]:
    server = build_server(RootsGuard([str(root)], ceiling=[str(root)]), settings or Settings())
    with anyio.fail_after(30):
        async with Client(server, mode="legacy") as client:
            result = await client.call_tool(tool, args)
    return bool(result.is_error), "".join(getattr(b, "text", "") for b in result.content)


# --- item 7: head/tail of a huge count return no more than the read cap -----------------------------------


@pytest.mark.parametrize("which", ["head", "tail"])
async def test_head_and_tail_stay_within_the_read_cap(tmp_path: Path, which: str) -> None:
    big = tmp_path / "big.txt"
    big.write_bytes(b"0123456789abcde\n" * (3 * MIB // 16))  # 3 MiB of short lines
    settings = Settings(max_read_bytes=1 * MIB)
    is_error, text = await call(tmp_path, "read_text_file", {"path": str(big), which: 10**9}, settings)
    assert is_error, f"{len(text):,} characters returned past the 1 MiB cap"
    assert "ask for fewer lines" in text
    assert len(text) < 1000
    # Within the cap, the lines come back as before.
    is_error, text = await call(tmp_path, "read_text_file", {"path": str(big), which: 3}, settings)
    assert not is_error
    assert text.rstrip("\n").split("\n") == ["0123456789abcde"] * 3


async def test_one_huge_line_is_refused_for_head_within_the_cap(tmp_path: Path) -> None:
    line = tmp_path / "line.txt"
    line.write_bytes(b"x" * (3 * MIB))  # no newline at all: the first line is the whole file
    is_error, text = await call(
        tmp_path, "read_text_file", {"path": str(line), "head": 1}, Settings(max_read_bytes=MIB)
    )
    assert is_error
    assert "ask for fewer lines" in text


# --- item 6: edit_file's diff is not quadratic on equal lines ----------------------------------------------


async def test_edit_file_diff_of_48_kb_of_equal_lines_answers_at_once(tmp_path: Path) -> None:
    target = tmp_path / "same.txt"
    original = "first\n" + "x\n" * 24_000 + "last\n"  # 48 KB of identical lines between two edits
    target.write_text(original)
    edits = [{"oldText": "first", "newText": "FIRST"}, {"oldText": "last", "newText": "LAST"}]
    started = time.perf_counter()
    is_error, text = await call(tmp_path, "edit_file", {"path": str(target), "edits": edits, "dryRun": True})
    took = time.perf_counter() - started
    assert not is_error, text
    assert took < 5, f"{took:.1f} s"  # the quadratic matcher gave no answer in 20 s
    # The shortest diff: two hunks of one changed line each, not the whole file.
    assert text.count("\n@@ ") == 2
    assert "-first\n+FIRST\n" in text
    assert "-last\n+LAST\n" in text
    assert target.read_text() == original  # dryRun


# --- item 12: directory_tree is capped in bytes, not only in entries ----------------------------------------


async def test_directory_tree_is_capped_in_bytes(tmp_path: Path) -> None:
    level = tmp_path / "root"
    for depth in range(100):  # deep entries: each is long with its indentation
        level = level / f"d{depth:03d}"
        level.mkdir(parents=True)
        for i in range(10):
            (level / f"f{i}").touch()
    cap = 200_000
    settings = Settings(walk=Limits(max_tree_bytes=cap))
    is_error, text = await call(
        tmp_path / "root", "directory_tree", {"path": str(tmp_path / "root")}, settings
    )
    assert not is_error, text
    body, note = text.rsplit("\n", 1)
    assert note.startswith(f"[truncated: the tree is larger than {cap:,} bytes")
    assert len(body.encode()) <= cap
    assert json.loads(body)[0]["name"] == "d000"  # still valid JSON, the start of the tree
    # Under the cap, the whole tree, as json.dumps(indent=2) writes it.
    is_error, whole = await call(
        tmp_path / "root", "directory_tree", {"path": str(tmp_path / "root" / "d000" / "d001")}
    )
    assert not is_error
    assert whole == json.dumps(json.loads(whole), indent=2, ensure_ascii=False)


# --- item 8: read_multiple_files says the same for every outside path ---------------------------------------


async def test_read_multiple_files_words_outside_paths_alike_whatever_lies_there(tmp_path: Path) -> None:
    root, out = tmp_path / "ROOT", tmp_path / "out"
    root.mkdir()
    (root / "in.txt").write_text("in")
    (out / "probe_dir").mkdir(parents=True)
    (out / "probe_file").write_text("outside")
    probes = ["probe_missing", "probe_dir", "probe_file"]
    answers: dict[str, list[str]] = {}
    for probe in probes:
        paths = [f"{root}/../out/{probe}/../../ROOT/in.txt", f"../out/{probe}/x"]
        is_error, text = await call(root, "read_multiple_files", {"paths": paths})
        assert not is_error
        answers[probe] = [part.replace(probe, "<probe>") for part in text.split("\n---\n")]
    assert answers["probe_missing"] == answers["probe_dir"] == answers["probe_file"], answers
    relative = answers["probe_file"][1]
    assert relative.startswith("../out/<probe>/x: Error - Access denied: '../out/<probe>/x' is outside"), (
        relative
    )


PROBE_KINDS = ("missing", "dir", "file", "symlink", "fifo")


def make_probes(where: Path) -> None:
    """One outside name of each kind under ``where``: what a client must not learn."""
    where.mkdir(parents=True, exist_ok=True)
    (where / "probe_dir").mkdir()
    (where / "probe_file").write_text("outside")
    (where / "probe_symlink").symlink_to("/etc")
    os.mkfifo(where / "probe_fifo")


@pytest.mark.parametrize(
    ("tool", "extra"),
    [
        ("read_text_file", {}),
        ("get_file_info", {}),
        ("list_directory", {}),
        ("write_file", {"content": "w"}),
        ("read_multiple_files", {}),
    ],
)
async def test_every_path_tool_answers_alike_whatever_lies_outside(
    tmp_path: Path, tool: str, extra: dict[str, str]
) -> None:
    """Item 8 on every path tool: ``ROOT/../../<probe>/../../ROOT/in.txt`` and a relative ``../out/<probe>/x``
    get one answer whether ``<probe>`` is missing, a directory, a file, a symlink or a FIFO."""
    root = tmp_path / "a" / "ROOT"
    root.mkdir(parents=True)
    (root / "in.txt").write_text("in")
    make_probes(tmp_path)
    make_probes(tmp_path / "a" / "out")
    forms = [f"{root}/../../{{probe}}/../a/ROOT/in.txt", "../out/{probe}/x"]
    for form in forms:
        answers: dict[str, tuple[bool, str]] = {}
        for kind in PROBE_KINDS:
            probe = f"probe_{kind}"
            value = form.format(probe=probe)
            args: dict[str, Any] = {"paths": [value]} if tool == "read_multiple_files" else {"path": value}
            is_error, text = await call(root, tool, {**args, **extra})
            answers[kind] = (is_error, text.replace(probe, "<probe>"))
        assert len(set(answers.values())) == 1, (tool, form, answers)
        is_error, text = answers["missing"]
        assert "is outside the allowed roots" in text, (tool, form, text)
        assert is_error == (tool != "read_multiple_files")  # it answers each path in its own line
    assert (root / "in.txt").read_text() == "in"


# --- a rewrite never carries set-user-id, set-group-id or sticky bits, nor changes the owner ------------
# serve writes through RootSet.write_text, whose atomic rewrite keeps the owner and drops the set-id bits
# (tests/paths/test_write_metadata.py); this test is serve's end of that promise.


@pytest.mark.parametrize("tool", ["write_file", "edit_file"])
async def test_a_rewrite_drops_set_id_bits_and_keeps_the_owner(tmp_path: Path, tool: str) -> None:
    target = tmp_path / "tool.sh"
    target.write_text("echo old\n")
    os.chmod(target, 0o7755)  # set-user-id, set-group-id and sticky
    other = 65534 if os.geteuid() == 0 else None  # as root: a file of another user (nobody)
    if other is not None:
        os.chown(target, other, other)
    before = target.stat()
    args: dict[str, Any] = (
        {"path": str(target), "content": "echo new\n"}
        if tool == "write_file"
        else {"path": str(target), "edits": [{"oldText": "old", "newText": "new"}]}
    )
    is_error, text = await call(tmp_path, tool, args)
    assert not is_error, text
    after = target.stat()
    assert target.read_text() == "echo new\n"
    assert stat.S_IMODE(after.st_mode) & 0o7000 == 0, oct(after.st_mode)
    assert stat.S_IMODE(after.st_mode) == 0o755
    assert (after.st_uid, after.st_gid) == (before.st_uid, before.st_gid)
