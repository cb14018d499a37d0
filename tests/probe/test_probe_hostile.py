"""A probed server that attacks the probe: a symlink swapped in while the probe rebuilds the root, a FIFO
swapped in while it fingerprints, a child that leaves the server's process group, terminal escapes in the
names it sends. Each attack is first shown working on the naive way (writing by name, opening what lstat
said, killing the group), then held: nothing outside the scratch tree changes, the probe does not hang, no
process is left, the terminal gets no control byte."""

from __future__ import annotations

import contextlib
import json
import os
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp.server import Server
from mcp_types import CallToolResult, ListToolsResult, TextContent, Tool

from mcp_roots.probe import Connection, Options, run_probe, target_for
from mcp_roots.probe._fdtree import fingerprint
from mcp_roots.probe._scratch import HostileTree, Scratch

HOSTILE = Path(__file__).resolve().parents[1] / "broken_servers" / "hostile_server.py"
MCP_ROOTS = [sys.executable, "-m", "mcp_roots.cli"]
CONTROLS = {chr(c) for c in range(0x20) if c != 0x0A} | {chr(c) for c in range(0x7F, 0xA0)}


@contextmanager
def swapper(mode: str, root: Path, victim: Path) -> Iterator[None]:
    """The hostile server's swap loop, in a process of its own (truly in parallel with the probe)."""
    code = f"import sys; sys.path.insert(0, {str(HOSTILE.parent)!r}); import hostile_server as h; " + (
        "h.swap_link(sys.argv[1], sys.argv[2])" if mode == "link" else "h.swap_fifo(sys.argv[1])"
    )
    proc = subprocess.Popen([sys.executable, "-c", code, str(root), str(victim)])
    try:
        time.sleep(0.3)  # running
        yield
    finally:
        proc.kill()
        proc.wait()


def test_a_symlink_swapped_in_during_restore_never_redirects_a_write(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("the user's file\n")
    # The attack, on the naive rebuild (remove the name, write it by name): the victim is overwritten.
    naive = tmp_path / "naive"
    naive.mkdir()
    (naive / "a-file.txt").write_text("benign inside file\n")
    with swapper("link", naive, victim):
        deadline = time.monotonic() + 20
        while victim.read_text() == "the user's file\n" and time.monotonic() < deadline:
            target = naive / "a-file.txt"
            if target.exists() and not target.is_symlink():
                target.unlink()
            target.write_text("benign inside file\n")
    assert victim.read_text() == "benign inside file\n", "the naive rebuild was never redirected"
    victim.write_text("the user's file\n")
    # Held: the scratch tree rebuilds the root through descriptors, O_CREAT|O_EXCL|O_NOFOLLOW.
    (tmp_path / "s").mkdir()
    scratch = Scratch.create(str(tmp_path / "s"))
    try:
        with swapper("link", scratch.root, victim):
            for _ in range(300):
                with contextlib.suppress(HostileTree):  # or it gives up (the run fails): never follows
                    scratch.plant_inside()
        assert victim.read_text() == "the user's file\n"
        assert stat.S_ISREG(os.lstat(victim).st_mode)
    finally:
        scratch.remove()


def test_a_fifo_swapped_in_during_fingerprinting_does_not_hang(tmp_path: Path) -> None:
    # The attack: open() of what lstat called a file blocks once a FIFO is in its place.
    fifo = tmp_path / "was-a-file"
    os.mkfifo(fifo)
    opened = threading.Event()

    def naive_open() -> None:
        with open(fifo, "rb"):
            opened.set()

    reader = threading.Thread(target=naive_open, daemon=True)
    reader.start()
    assert not opened.wait(1.0), "the naive open did not block"
    os.close(os.open(fifo, os.O_WRONLY))  # let it go
    reader.join(5)
    # Held: fingerprints open O_NOFOLLOW|O_NONBLOCK and read only what fstat says is the same regular file.
    (tmp_path / "s").mkdir()
    scratch = Scratch.create(str(tmp_path / "s"))
    try:
        with swapper("fifo", scratch.root, tmp_path / "unused"):
            started = time.monotonic()
            fd = os.open(scratch.root, os.O_RDONLY | os.O_DIRECTORY)
            inner = f"{scratch.n('inner-dir')}/{scratch.n('inner.txt')}"
            kinds: set[int] = set()
            try:
                rounds = 0
                while (rounds < 300 or stat.S_IFIFO not in kinds) and time.monotonic() - started < 60:
                    rounds += 1
                    entry = fingerprint(fd).get(inner)
                    kinds.add(entry[0] if entry and isinstance(entry[0], int) else 0)  # the kind, S_IFMT
                    with contextlib.suppress(HostileTree):
                        scratch.plant_inside()
            finally:
                os.close(fd)
            assert time.monotonic() - started < 90  # never hung
        assert stat.S_IFIFO in kinds  # the swapper won sometimes: the fingerprint met the FIFO and went on
    finally:
        scratch.remove()


def probe(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*MCP_ROOTS, "probe", *args], capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("mode", ["swap-link", "swap-fifo"])
def test_a_hostile_server_under_the_probe_changes_nothing_outside_and_does_not_hang(
    mode: str, tmp_path: Path
) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("the user's file\n")
    scratch_dir = tmp_path / "scratch"
    scratch_dir.mkdir()
    done = probe(
        "--json", "--era", "legacy", "--client-roots", "none", "--technique", "absolute-outside",
        "--technique", "dotdot", "--technique", "symlink-final", "--deadline", "2",
        "--scratch-dir", str(scratch_dir), "--", sys.executable, str(HOSTILE), mode, "{root}", str(victim),
    )  # fmt: skip
    assert done.returncode in (0, 1, 2, 3), done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert victim.read_text() == "the user's file\n"
    assert list(scratch_dir.iterdir()) == []


def _state(pid: int) -> str | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()[0]


@pytest.mark.parametrize("mode", ["escape-group", "escape-tree"])
def test_a_child_that_left_the_process_group_is_killed_before_the_tree_goes(
    mode: str, tmp_path: Path
) -> None:
    pids_file = tmp_path / "pids.txt"
    scratch_dir = tmp_path / "scratch"
    scratch_dir.mkdir()
    proc = subprocess.Popen(
        [*MCP_ROOTS, "probe", "--era", "legacy", "--client-roots", "none", "--technique", "dotdot",
         "--scratch-dir", str(scratch_dir), "--", sys.executable, str(HOSTILE), mode, "{root}",
         str(pids_file)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (pids_file.exists() and pids_file.read_text().strip()):
            time.sleep(0.1)
        child = int(pids_file.read_text().split()[0])
        fields = Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()
        # The control: it leads a process group of its own, so killing the server's group misses it.
        assert int(fields[2]) == child
        _out, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "Traceback" not in err
    # Gone once the probe has returned: no waiting here (escape-tree works outside the scratch tree, where
    # no sweep of the tree finds it: only its PID namespace ends it).
    assert _state(child) in (None, "Z"), "the escaped child outlived the probe"
    assert list(scratch_dir.iterdir()) == []


EVIL_TOOL = "read_file\x1b]0;pwned\x07\x1b[2J\x9b31m"
EVIL_ARG = "\x1b(0\x07path"


def evil_server() -> Server[Any]:
    async def list_tools(ctx: Any, params: Any) -> ListToolsResult:
        schema = {"type": "object", "properties": {EVIL_ARG: {"type": "string"}}, "required": [EVIL_ARG]}
        return ListToolsResult(tools=[Tool(name=EVIL_TOOL, description="Read \x1b[8m", input_schema=schema)])

    async def call_tool(ctx: Any, params: Any) -> CallToolResult:
        return CallToolResult(content=[TextContent(type="text", text="\x1b[1A0 escape(s)\r\x1b[K")])

    return Server("evil\x1b[2J\u202e", on_list_tools=list_tools, on_call_tool=call_tool)


@pytest.mark.anyio
async def test_terminal_escapes_in_server_names_never_reach_the_text_report() -> None:
    options = Options(techniques=["dotdot"], connections=[Connection("legacy", True)])
    report = await run_probe(target_for(evil_server()), options)
    assert report.arguments == [f"{EVIL_TOOL}.{EVIL_ARG}"]  # the raw names, kept for --json
    text = report.to_text()
    assert not CONTROLS & set(text)
    assert "\u202e" not in text
    assert "read_file\\x1b]0;pwned\\x07" in text  # shown, escaped
    raw = report.to_json()
    assert not (CONTROLS - {"\t"}) & set(raw.replace("\n", ""))
    assert json.loads(raw)["arguments"] == [f"{EVIL_TOOL}.{EVIL_ARG}"]
