"""The filesystem server's pure parts against the official server's own libraries (minimatch and jsdiff,
from the pinned npm lock), and its walks at their bounds and under a swap race."""

from __future__ import annotations

import io
import json
import os
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest

from mcp_roots import RootSet
from mcp_roots.filesystem import Limits
from mcp_roots.filesystem._globs import compile_glob, excluder
from mcp_roots.filesystem._text import BinaryFile, apply_edits, head_lines, tail_lines, unified_diff
from mcp_roots.filesystem._walk import search, tree
from tests.kit import INTEROP, node


def reference(cases: list[list[Any]]) -> list[Any]:
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(cases, f)
    try:
        proc = subprocess.run(
            [node(), str(INTEROP / "fs_reference.mjs"), f.name],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=INTEROP,
            check=True,
        )
    finally:
        os.unlink(f.name)
    answers: list[Any] = json.loads(proc.stdout)
    return answers


PATHS = [
    "a", "a.txt", "b/a.txt", "b/c/a.txt", ".git", "x/.git/config", "a/b", "src/node_modules/x",
    "node_modules", "a.py", "dir/x.py", "[x].txt", "x.txt", "abc", "ab", "a b.txt", "ü.txt", "a+b(1).txt",
]  # fmt: skip
PATTERNS = [
    "*.txt", "**/*.txt", "**", "a/**", "*", "**/.git/**", ".git", "b/*/a.txt", "?.txt", "[ab]*", "[!a]*",
    "*.{py,txt}", "**/node_modules/**", "b/**/a.txt", "a*c", "**/*", "a b.txt", "*+b(1).txt", "**/?.py",
    "{a,b}/**", "./a.txt",
]  # fmt: skip


def test_globs_match_as_minimatch_does() -> None:
    cases = [["glob", p, q] for p in PATHS for q in PATTERNS]
    expected = reference(cases)
    wrong = [
        (p, q, want)
        for (_, p, q), want in zip(cases, expected, strict=True)
        if bool(compile_glob(q).fullmatch(p)) != want
    ]
    assert not wrong


def test_directory_tree_excludes_a_plain_name_at_any_depth() -> None:
    matcher = excluder(["node_modules"], anywhere=True)
    assert matcher is not None
    assert matcher.fullmatch("node_modules")
    assert matcher.fullmatch("src/node_modules")
    assert matcher.fullmatch("src/node_modules/x/y")
    assert not matcher.fullmatch("src/node_modules_old")
    assert excluder([], anywhere=True) is None


@pytest.mark.parametrize("pattern", ["", "x" * 2000, "{a,b}{c,d}{e,f}{g,h}{i,j}{k,l}{m,n}{o,p}{q,r}"])
def test_unreasonable_patterns_are_refused(pattern: str) -> None:
    with pytest.raises(ValueError, match="glob pattern"):
        compile_glob(pattern)


FORTY = [str(i) for i in range(40)]
DIFFS = [
    ("alpha\nbeta\ngamma\n", "alpha\nBETA\ngamma\n"),
    ("a\nb\nc", "a\nB\nc"),  # no trailing newline
    ("a\nb\nc", "a\nb\nc\n"),  # a newline added at the end
    ("", "new\n"),
    ("only\n", ""),
    ("\n".join(FORTY) + "\n", "\n".join(n for n in FORTY if n not in ("3", "30")) + "\n"),  # two hunks
    ("\n".join(FORTY[:20]) + "\n", "\n".join("x" if n in ("2", "11") else n for n in FORTY[:20]) + "\n"),
    ("a\r\nb\r\n", "a\r\nB\r\n"),
    ("tab\there\n```\ncode\n", "tab\there\n````\ncode\n"),
    ("same\n", "same\n"),
]  # fmt: skip


def test_unified_diff_is_the_text_jsdiff_writes() -> None:
    expected = reference(
        [["diff", "/p/f.txt", old.replace("\r\n", "\n"), new.replace("\r\n", "\n")] for old, new in DIFFS]
    )
    for (old, new), want in zip(DIFFS, expected, strict=True):
        assert unified_diff(old, new, "/p/f.txt") == want, (old, new)


def test_edits_apply_exactly_then_line_by_line_keeping_indentation() -> None:
    code = "def f():\n    if x:\n        return 1\n    return 2\n"
    assert apply_edits(code, [("return 2", "return 3")]) == code.replace("return 2", "return 3")
    # Indented differently: matched ignoring indentation; the first line takes the file's indentation,
    # later lines the first line's plus their indentation relative to oldText's (the official rule).
    changed = apply_edits(code, [("if x:\n    return 1", "if y:\n    return 4")])
    assert changed == "def f():\n    if y:\n    return 4\n    return 2\n"
    changed = apply_edits(code, [("if x:\n    return 1", "if y:\n        return 4")])
    assert changed == "def f():\n    if y:\n        return 4\n    return 2\n"
    with pytest.raises(ValueError, match="Could not find exact match"):
        apply_edits(code, [("absent", "x")])
    # Edits apply in order, each to the result of the one before; only the first occurrence changes.
    assert apply_edits("a a a", [("a", "b"), ("a", "c")]) == "b c a"


HEAD_TAIL = [
    # (content, n, head, tail)
    (b"a\nb\nc", 2, "a\nb", "b\nc"),
    (b"a\nb\nc\n", 2, "a\nb", "b\nc\n"),
    (b"a\nb\nc", 5, "a\nb\nc", "a\nb\nc"),
    (b"one line", 1, "one line", "one line"),
    (b"", 3, "", ""),
    (b"\n\n\n", 2, "\n", "\n\n"),
    (b"a\r\nb\r\nc\r\n", 2, "a\r\nb\r", "b\nc\n"),
    (b"x" * 200_000 + b"\nlast", 1, "x" * 200_000, "last"),
    ("é\nü\n".encode(), 1, "é", "ü\n"),
]


@pytest.mark.parametrize(("content", "n", "head", "tail"), HEAD_TAIL)
def test_head_and_tail(content: bytes, n: int, head: str, tail: str) -> None:
    assert head_lines(io.BytesIO(content), n) == head
    assert tail_lines(io.BytesIO(content), len(content), n) == tail


def test_head_reads_only_what_it_needs() -> None:
    stream = io.BytesIO(b"first\n" + b"x" * 10_000_000)
    assert head_lines(stream, 1) == "first"
    assert stream.tell() <= 64 * 1024


def test_text_tools_refuse_binary() -> None:
    with pytest.raises(BinaryFile, match="binary"):
        head_lines(io.BytesIO(b"text\n\x00\x01"), 5)
    with pytest.raises(BinaryFile, match="binary"):
        tail_lines(io.BytesIO(b"\x00text\n"), 6, 1)


def make_tree(root: Path, width: int, depth: int) -> None:
    level = root
    for d in range(depth):
        for i in range(width):
            (level / f"f{d}_{i}.txt").write_text("x")
        level = level / f"d{d}"
        level.mkdir()


def test_walks_stop_at_their_caps(tmp_path: Path) -> None:
    make_tree(tmp_path, width=10, depth=5)
    with RootSet.from_paths([tmp_path]) as roots:
        everything = search(roots, str(tmp_path), compile_glob("**"), None, Limits())
        assert everything.truncated is None
        assert len(everything.matches) == 55  # 50 files and 5 directories
        at_cap = search(roots, str(tmp_path), compile_glob("**"), None, Limits(max_results=55))
        assert at_cap.truncated is None
        assert len(at_cap.matches) == 55
        over = search(roots, str(tmp_path), compile_glob("**"), None, Limits(max_results=54))
        assert len(over.matches) == 54
        assert over.truncated is not None
        assert "more than 54 results" in over.truncated
        shallow = tree(roots, str(tmp_path), None, Limits(max_depth=2))
        assert shallow.truncated is not None
        assert "deeper than 2 levels" in shallow.truncated
        d1 = json.loads(shallow.text)[0]["children"][0]
        assert d1["name"] == "d1"
        assert d1["children"] == []  # d0/d1 is shown, not entered
        looked = search(roots, str(tmp_path), compile_glob("**"), None, Limits(max_visited=20))
        assert looked.truncated is not None
        assert "stopped after looking at 20 entries" in looked.truncated


def _exchange(a: Path, b: Path, stop: threading.Event) -> None:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    renameat2 = libc.syscall
    at_fdcwd, rename_exchange, sys_renameat2 = -100, 2, 316
    while not stop.is_set():
        renameat2(sys_renameat2, at_fdcwd, bytes(a), at_fdcwd, bytes(b), rename_exchange)


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="renameat2 syscall number is x86_64's")
def test_a_directory_swapped_for_a_symlink_during_a_walk_never_leads_outside(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "inside.txt").write_text("in")
    outside.mkdir()
    (outside / "SECRET.txt").write_text("out")
    (root / "swap").symlink_to(outside)  # 'sub' and 'swap' trade places all the time
    # The control: a walk that follows names (os.walk with followlinks) does see the outside file.
    seen_by_naive = any("SECRET.txt" in files for _, _, files in os.walk(root, followlinks=True))
    assert seen_by_naive
    stop = threading.Event()
    swapper = threading.Thread(target=_exchange, args=(root / "sub", root / "swap", stop))
    swapper.start()
    try:
        with RootSet.from_paths([root]) as roots:
            for _ in range(300):
                found = search(roots, str(root), compile_glob("**"), None, Limits())
                assert not any("SECRET" in m for m in found.matches)
                shown = tree(roots, str(root), None, Limits()).text
                assert "SECRET" not in shown
    finally:
        stop.set()
        swapper.join()


def test_the_audit_finds_every_path_parameter_guarded_or_exempt(tmp_path: Path) -> None:
    # mcp-roots serve must start without "unguarded path parameter" warnings: every tool with a path-like
    # parameter is either under @guard.paths or checks its paths itself through the RootSet operations.
    from mcp_roots import RootsGuard
    from mcp_roots.filesystem import Settings, build_server

    guard = RootsGuard([str(tmp_path)])
    rows = guard.audit(build_server(guard, Settings()))
    assert {row.name for row in rows if row.path_parameters} >= {"read_text_file", "move_file"}
    assert [row for row in rows if row.unguarded] == []
    exempt = {row.name for row in rows if row.exempt is not None}
    assert exempt == {"read_multiple_files", "move_file"}


@pytest.mark.parametrize("given", [["DIR"], ["--roots", "DIR"], []])
def test_serve_works_out_its_fallback_and_ceiling_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, given: list[str]
) -> None:
    import mcp_roots._rootsguard as facade
    from mcp_roots.cli import build_parser
    from mcp_roots.filesystem import _command

    monkeypatch.setenv("MCP_ROOTS", str(tmp_path))  # the source when no directory is given
    calls: list[object] = []
    for module in (_command, facade):
        real = module.fallback_roots

        def counted(*args: object, _real: Any = real, **kwargs: Any) -> RootSet:
            calls.append(args)
            return _real(*args, **kwargs)  # type: ignore[no-any-return]

        monkeypatch.setattr(module, "fallback_roots", counted)
    argv = [str(tmp_path) if arg == "DIR" else arg for arg in given]
    guard = _command._guard(build_parser().parse_args(["serve", *argv]))
    assert len(calls) == 1  # one resolution of the sources, not one here and one in RootsGuard
    assert guard.fallback.paths == (tmp_path.resolve(),)
    assert guard.ceiling is guard.fallback  # the directories given are the ceiling: the same set
