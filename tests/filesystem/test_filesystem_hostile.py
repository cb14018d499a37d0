"""`mcp-roots serve` against hostile input: glob patterns built to make a backtracking
matcher run for minutes, excludePatterns in bulk, a character range written backwards; each is answered at
once, over a real stdio connection to the real command, and over `--http` another client is not held up.

The "well under a second" of the issue is checked per call with a one-second bound: the old matcher took
1.7 s for 8 repeats of ``*a`` and 16 s for 10, and the 12-repeat pattern below takes minutes there.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from mcp_roots import RootSet
from mcp_roots.filesystem import Limits
from mcp_roots.filesystem._globs import MAX_EXCLUDE_CHARS, MAX_EXCLUDE_PATTERNS, compile_glob
from mcp_roots.filesystem._walk import search, tree
from tests.kit import serve_command, serve_http

pytestmark = pytest.mark.anyio

STARS = "*a" * 12 + "*b"  # the first pattern: 12 repeats of '*a', then 'b'
GLOBSTARS = "**/" * 12 + "zz"  # the second, on a 200-level tree
NAME40 = "a" * 40


def hostile_tree(base: Path) -> Path:
    root = base / "root"
    root.mkdir()
    for i in range(20):
        (root / f"{NAME40[: 40 - len(str(i))]}{i}").write_text("x")
    (root / ("a" * 255)).write_text("x")
    deep = root / "/".join(["d"] * 200)
    deep.mkdir(parents=True)
    (deep / NAME40).write_text("x")
    (root / "loop").symlink_to(".")  # a directory symlink loop under a '**' walk
    (root / "d" / "up").symlink_to("..")
    return root


def hostile_cases(root: Path) -> list[tuple[str, dict[str, Any], Callable[[bool, str], bool]]]:
    r = str(root)

    def answered(is_error: bool, text: str) -> bool:
        return not is_error and "Traceback" not in text

    def no_loop(is_error: bool, text: str) -> bool:
        return not is_error and "/loop/" not in text and "/up/" not in text and text.count("\n") < 300

    def refused(*words: str) -> Callable[[bool, str], bool]:
        def check(is_error: bool, text: str) -> bool:
            return is_error and "Error executing tool" not in text and all(w in text for w in words)

        return check

    many_stars = "*?" * 300 + "b"
    huge_class = "[" + "".join(chr(c) for c in range(0x100, 0x100 + 1000)) + "]*b"
    brace_bomb = "{*a,*b}" * 8 + "c"  # 256 alternatives of 16 stars each: at the cap
    return [
        ("search_files", {"path": r, "pattern": STARS}, answered),
        ("search_files", {"path": r, "pattern": "**/" + STARS}, answered),
        ("directory_tree", {"path": r, "excludePatterns": [STARS]}, answered),
        ("search_files", {"path": r, "pattern": GLOBSTARS}, answered),
        ("directory_tree", {"path": r, "excludePatterns": [GLOBSTARS]}, answered),
        ("search_files", {"path": r, "pattern": "**/a/**/a/**/a/**/a/**/b"}, answered),
        ("search_files", {"path": r, "pattern": "**/d/**/d/**/d/**/d/**/" + STARS}, answered),
        ("search_files", {"path": r, "pattern": many_stars}, answered),
        ("search_files", {"path": r, "pattern": "**/" + huge_class}, answered),
        ("search_files", {"path": r, "pattern": "**/" + brace_bomb}, answered),
        ("search_files", {"path": r, "pattern": "{a,b}" * 9}, refused("more than 256 alternatives")),
        ("search_files", {"path": r, "pattern": "**/loop/**"}, no_loop),
        ("search_files", {"path": r, "pattern": "**/*up*/**"}, no_loop),
        # a backwards range is the client's mistake, said as one line
        ("search_files", {"path": r, "pattern": "[z-a]"}, refused("[z-a]", "z-a", "backwards")),
        ("directory_tree", {"path": r, "excludePatterns": ["[z-a]*"]}, refused("excludePatterns", "z-a")),
        # many large excludePatterns (24 within the old length and brace caps: ~23 KB)
        (
            "directory_tree",
            {"path": r, "excludePatterns": ["*a" * 200 + "{x,y}" * 8 + "*" * 40 for _ in range(24)]},
            refused(f"at most {MAX_EXCLUDE_CHARS} characters"),
        ),
        (
            "search_files",
            {
                "path": r,
                "pattern": "**",
                "excludePatterns": [f"x{i}" for i in range(MAX_EXCLUDE_PATTERNS + 1)],
            },
            refused(f"at most {MAX_EXCLUDE_PATTERNS} patterns"),
        ),
        (
            "directory_tree",
            {
                "path": r,
                "excludePatterns": ["*a" * 60 + "{x,y}" * 5 + "*q" for _ in range(MAX_EXCLUDE_PATTERNS)],
            },
            lambda is_error, text: "Traceback" not in text,  # answered at once, served or refused
        ),
    ]


def result_text(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


@pytest.mark.parametrize("path", ["sdk", "lean"])
async def test_hostile_patterns_are_answered_at_once(tmp_path: Path, path: str) -> None:
    """On the SDK path (a first start) and the lean path (a later one, its start-up answers recorded)."""
    root = hostile_tree(tmp_path)
    cases = hostile_cases(root)
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    params = StdioServerParameters(
        command=serve_command(str(root))[0], args=serve_command(str(root))[1:], env=env
    )
    if path == "lean":
        async with Client(params, mode="legacy") as client:
            await client.list_tools()  # recorded: the next start serves the calls on the lean path
        assert list((tmp_path / "cache" / "mcp-roots" / "serve").glob("*.json"))
    slow: list[str] = []
    wrong: list[str] = []
    with anyio.fail_after(120):
        async with Client(params, mode="legacy") as client:
            await client.call_tool("list_allowed_directories", {})
            for name, args, check in cases:
                started = time.perf_counter()
                with anyio.fail_after(20):  # the old matcher: minutes; fail here instead of hanging
                    result = await client.call_tool(name, args)
                took = time.perf_counter() - started
                label = f"{name}({str(args)[:80]})"
                if took >= 1.0:
                    slow.append(f"{label}: {took:.2f} s")
                if not check(bool(result.is_error), result_text(result)):
                    wrong.append(f"{label}: {result_text(result)[:300]}")
    assert not slow, slow
    assert not wrong, wrong


def test_the_matcher_takes_the_hostile_patterns_in_linear_time() -> None:
    # The pure matcher, without a server: each pattern against the names that make a backtracking
    # matcher try every way of splitting them; 1,000 matches of each well under a second.
    cases = [
        (STARS, NAME40),
        (GLOBSTARS, "/".join(["d"] * 200)),
        ("**/a/**/a/**/a/**/a/**/b", "/".join(["a"] * 200)),
        ("*?" * 300 + "b", "a" * 255),
        ("*" + "a" * 200 + "b", "a" * 255),
        ("{*a,*b}" * 8 + "c", "a" * 255),
    ]
    for pattern, path in cases:
        glob = compile_glob(pattern)
        started = time.perf_counter()
        for _ in range(10 if "{" in pattern or "**" in pattern else 1000):
            assert not glob.fullmatch(path)
        assert time.perf_counter() - started < 1.0, pattern


class StepClock:
    """A clock that moves ``step`` seconds each time it is read: the walk's deadline without waiting."""

    def __init__(self, step: float) -> None:
        self.now = 0.0
        self.step = step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def test_a_walk_stops_at_its_deadline_and_says_so(tmp_path: Path) -> None:
    for i in range(2000):
        (tmp_path / f"f{i:04d}").write_text("")
    limits = Limits(max_seconds=30)
    with RootSet.from_paths([tmp_path]) as roots:
        on_time = search(roots, str(tmp_path), compile_glob("**"), None, limits, clock=StepClock(0.001))
        assert on_time.truncated is None
        assert len(on_time.matches) == 2000
        late = search(roots, str(tmp_path), compile_glob("**"), None, limits, clock=StepClock(10))
        assert late.truncated is not None
        assert "stopped after 30 seconds" in late.truncated
        assert 0 < len(late.matches) < 2000
        cut = tree(roots, str(tmp_path), None, limits, clock=StepClock(10))
        assert cut.truncated is not None
        assert "stopped after 30 seconds" in cut.truncated
        stop = threading.Event()
        stop.set()
        cancelled = search(roots, str(tmp_path), compile_glob("**"), None, limits, stop=stop)
        assert cancelled.truncated == "the call was cancelled"


# --- over --http: one client's hostile search does not hold up another client ------------------------------


async def _latency(client: Client) -> float:
    started = time.perf_counter()
    result = await client.call_tool("list_allowed_directories", {})
    assert not result.is_error
    return time.perf_counter() - started


async def test_a_hostile_search_does_not_hold_up_another_client_over_http(tmp_path: Path) -> None:
    """Client A sends hostile searches over a 10,000-name tree (a few seconds of work in all); client B's
    list_allowed_directories is measured idle, then while A's searches run. On a machine others share,
    B's own idle figure is the baseline: the median while A searches may exceed it by at most 100 ms,
    and no single call may take a second (the old matcher froze the whole server for minutes)."""
    root = tmp_path / "root"
    for d in range(100):
        folder = root / f"dir{d:03d}"
        folder.mkdir(parents=True)
        for i in range(100):
            (folder / f"{NAME40[:36]}{i:04d}").touch()
    with serve_http(str(root)) as server:
        async with (
            httpx2.AsyncClient(headers=server.headers) as http_a,
            httpx2.AsyncClient(headers=server.headers) as http_b,
            Client(streamable_http_client(server.url, http_client=http_a), mode="legacy") as a,
            Client(streamable_http_client(server.url, http_client=http_b), mode="legacy") as b,
        ):
            for _ in range(5):
                await _latency(b)  # warm up both ends
            idle = [await _latency(b) for _ in range(20)]
            done = anyio.Event()
            answers: list[str] = []

            async def hostile() -> None:
                async with anyio.create_task_group() as group:
                    for pattern in (f"**/{STARS}", f"**/*{STARS}", f"**/{GLOBSTARS}", f"**/{STARS}"):
                        group.start_soon(search_one, pattern)
                done.set()

            async def search_one(pattern: str) -> None:
                result = await a.call_tool("search_files", {"path": str(root), "pattern": pattern})
                answers.append(result_text(result))

            busy: list[float] = []
            with anyio.fail_after(120):
                async with anyio.create_task_group() as group:
                    group.start_soon(hostile)
                    await anyio.sleep(0.05)
                    while not done.is_set():
                        busy.append(await _latency(b))
    assert answers == ["No matches found"] * 4
    assert len(busy) >= 3, f"the searches ended before client B could measure ({busy})"
    baseline = statistics.median(idle)
    delay = statistics.median(busy) - baseline
    assert delay < 0.1, f"idle {baseline * 1000:.1f} ms, while searching {sorted(busy)}"
    assert max(busy) < 1.0, f"idle {baseline * 1000:.1f} ms, while searching {sorted(busy)}"
