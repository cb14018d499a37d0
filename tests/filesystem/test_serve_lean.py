"""serve's lean path (``filesystem/_lean``) gives every answer the SDK path gives, and hands the session to
the SDK at the first message it does not own, with nothing lost or answered twice.

Each test runs the real command over real pipes with a cache folder a first start filled (the lean path
serves only then); ``MCP_ROOTS_SERVE_LEAN=0`` is the same server with every message going to the SDK.
The differential tests drive both through the official Python client and compare the results.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters

from tests.kit import RootsCallback, stdio_serve_command

pytestmark = pytest.mark.anyio

LEAN_OFF = {"MCP_ROOTS_SERVE_LEAN": "0"}
#: What the lean session logs (at debug) when it serves a session, and when it hands it over.
SERVING = "lean path: serving"
HANDED = "lean path: handed to the SDK"


def build_tree(base: Path) -> tuple[Path, Path]:
    """The served folder and a folder outside it, built the same way for every run."""
    if base.exists():
        shutil.rmtree(base)
    served, outside = base / "served", base / "outside"
    (served / "sub").mkdir(parents=True)
    outside.mkdir()
    (served / "note.txt").write_text("one\ntwo\nthree\n")
    (served / "sub" / "deep.txt").write_text("deep\n")
    (served / "pixel.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(64)))
    (served / "binary.dat").write_bytes(b"a\0b")
    (served / "keep.txt").write_text("kept\n")
    (outside / "secret.txt").write_text("secret\n")
    (served / "out").symlink_to(outside)  # a symlink out of the roots
    (served / "out.txt").symlink_to(outside / "secret.txt")
    return served, outside


def calls(served: Path, outside: Path) -> list[tuple[str, dict[str, Any]]]:
    """Every tool with good and bad arguments, and the refusal paths (outside, a symlink out)."""
    s, o = str(served), str(outside)
    return [
        ("read_text_file", {"path": f"{s}/note.txt"}),
        ("read_text_file", {"path": f"{s}/note.txt", "head": 2}),
        ("read_text_file", {"path": f"{s}/note.txt", "tail": 1}),
        ("read_text_file", {"path": f"{s}/note.txt", "head": 1, "tail": 1}),
        ("read_text_file", {"path": f"{s}/note.txt", "head": 1.5}),
        ("read_text_file", {"path": "note.txt"}),
        ("read_text_file", {"path": 5}),
        ("read_text_file", {}),
        ("read_text_file", {"path": f"{o}/secret.txt"}),
        ("read_text_file", {"path": f"{s}/out.txt"}),
        ("read_text_file", {"path": f"{s}/out/secret.txt"}),
        ("read_text_file", {"path": f"{s}/missing.txt"}),
        ("read_text_file", {"path": f"{s}/binary.dat"}),
        ("read_text_file", {"path": f"{s}/note.txt", "extra": True}),
        ("read_file", {"path": f"{s}/note.txt"}),
        ("read_file", {"path": f"{o}/secret.txt"}),
        ("read_media_file", {"path": f"{s}/pixel.png"}),
        ("read_media_file", {"path": f"{s}/note.txt"}),
        ("read_media_file", {"path": f"{s}/out.txt"}),
        ("read_multiple_files", {"paths": [f"{s}/note.txt", f"{o}/secret.txt", f"{s}/missing.txt"]}),
        ("read_multiple_files", {"paths": [f"{s}/out.txt", f"{s}/binary.dat"]}),
        ("read_multiple_files", {"paths": []}),
        ("read_multiple_files", {"paths": "note.txt"}),
        ("list_directory", {"path": s}),
        ("list_directory", {"path": o}),
        ("list_directory", {"path": f"{s}/out"}),
        ("list_directory_with_sizes", {"path": s, "sortBy": "size"}),
        ("list_directory_with_sizes", {"path": s, "sortBy": "colour"}),
        ("directory_tree", {"path": s}),
        ("directory_tree", {"path": s, "excludePatterns": ["sub"]}),
        ("directory_tree", {"path": s, "excludePatterns": [1]}),
        ("directory_tree", {"path": o}),
        ("search_files", {"path": s, "pattern": "**/*.txt"}),
        ("search_files", {"path": s, "pattern": "[z-a]"}),
        ("search_files", {"path": s, "pattern": 7}),
        ("search_files", {"path": f"{s}/out", "pattern": "*"}),
        ("get_file_info", {"path": f"{s}/sub"}),
        ("get_file_info", {"path": f"{s}/out.txt"}),
        ("list_allowed_directories", {}),
        ("write_file", {"path": f"{s}/new.txt", "content": "new\n"}),
        ("write_file", {"path": f"{o}/new.txt", "content": "x"}),
        ("write_file", {"path": f"{s}/out/new.txt", "content": "x"}),
        ("write_file", {"path": f"{s}/new2.txt"}),
        (
            "edit_file",
            {"path": f"{s}/note.txt", "edits": [{"oldText": "two", "newText": "2"}], "dryRun": True},
        ),
        ("edit_file", {"path": f"{s}/note.txt", "edits": [{"oldText": "two", "newText": "2"}]}),
        ("edit_file", {"path": f"{s}/note.txt", "edits": [{"oldText": "absent", "newText": "x"}]}),
        ("edit_file", {"path": f"{s}/note.txt", "edits": [{"oldText": "one"}]}),
        ("edit_file", {"path": f"{s}/out.txt", "edits": [{"oldText": "secret", "newText": "x"}]}),
        ("create_directory", {"path": f"{s}/made/deeper"}),
        ("create_directory", {"path": f"{o}/made"}),
        ("move_file", {"source": f"{s}/new.txt", "destination": f"{s}/moved.txt"}),
        ("move_file", {"source": f"{s}/moved.txt", "destination": f"{s}/keep.txt"}),
        ("move_file", {"source": f"{o}/secret.txt", "destination": f"{s}/stolen.txt"}),
        ("move_file", {"source": f"{s}/keep.txt", "destination": f"{o}/kept.txt"}),
        ("move_file", {"source": f"{s}/keep.txt"}),
    ]


#: The calls of a client whose roots all lie outside the ceiling: nothing is left to serve.
def no_roots_calls(served: Path) -> list[tuple[str, dict[str, Any]]]:
    s = str(served)
    return [
        ("read_text_file", {"path": f"{s}/note.txt"}),
        ("read_multiple_files", {"paths": [f"{s}/note.txt"]}),
        ("list_allowed_directories", {}),
        ("move_file", {"source": f"{s}/note.txt", "destination": f"{s}/n.txt"}),
        ("write_file", {"path": f"{s}/n.txt", "content": "x"}),
    ]


def comparable(name: str, result: dict[str, Any]) -> dict[str, Any]:
    """A result as compared: get_file_info's times are the run's own (the tree is built anew each run)."""
    if name == "get_file_info" and not result.get("isError"):
        text = result["content"][0]["text"]
        kept = "\n".join(
            line for line in text.splitlines() if not line.startswith(("created", "accessed", "modified"))
        )
        result = {**result, "content": [{**result["content"][0], "text": kept}], "structuredContent": None}
    return result


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    return tmp_path / "cache"


def params(served: Path, cache: Path, log: Path, env: dict[str, str], *extra: str) -> StdioServerParameters:
    """serve over stdio, its stderr (at debug) appended to ``log``."""
    command = stdio_serve_command("--log-level", "DEBUG", *extra, str(served))
    shell = ["-c", 'exec "$@" 2>>"$LEAN_LOG"', "sh", *command]
    environment = {**os.environ, "XDG_CACHE_HOME": str(cache), "LEAN_LOG": str(log), **env}
    return StdioServerParameters(command="sh", args=shell, env=environment)


async def session(
    server: StdioServerParameters, mode: str, roots: list[Path], todo: list[tuple[str, dict[str, Any]]]
) -> list[dict[str, Any]]:
    """The results of ``todo`` through the official Python client, as JSON."""
    results = []
    with anyio.fail_after(120):
        async with Client(server, mode=mode, list_roots_callback=RootsCallback(*roots)) as client:
            await client.list_tools()  # as a host does; the first start records it
            for name, arguments in todo:
                result = await client.call_tool(name, arguments)
                results.append(comparable(name, result.model_dump(mode="json", by_alias=True)))
    return results


async def fill(served: Path, cache: Path, log: Path) -> None:
    """A first start, which records the answers the lean path needs."""
    await session(params(served, cache, log, LEAN_OFF), "legacy", [served], [])
    assert list((cache / "mcp-roots" / "serve").glob("*.json")), log.read_text()


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_every_tool_answers_alike_on_the_lean_path_and_the_sdks(
    tmp_path: Path, cache: Path, mode: str
) -> None:
    """Every tool, good and bad arguments, outside paths and symlinks out: equal results on both paths.
    On the legacy era the lean path serves every call (no hand-over); 2026-07-28, which has no
    ``initialize``, goes to the SDK at its first request."""
    base = tmp_path / "tree"
    served, outside = build_tree(base)
    await fill(served, cache, tmp_path / "fill.log")
    runs = {}
    for path, env in (("sdk", LEAN_OFF), ("lean", {})):
        served, outside = build_tree(base)
        log = tmp_path / f"{path}.log"
        runs[path] = await session(params(served, cache, log, env), mode, [served], calls(served, outside))
        said = log.read_text()
        assert "Traceback" not in said, said
        if path == "lean":
            assert (SERVING in said, HANDED in said) == ((True, False) if mode == "legacy" else (False, True))
    todo = calls(served, outside)
    for (name, arguments), sdk, lean in zip(todo, runs["sdk"], runs["lean"], strict=True):
        assert lean == sdk, (name, arguments)
    refused = [r for r in runs["lean"] if r["isError"]]
    assert len(refused) > 25  # the refusal paths were reached, not answered alike by luck
    assert not (outside / "new.txt").exists() and (outside / "secret.txt").read_text() == "secret\n"


async def test_a_client_whose_roots_are_all_outside_is_refused_alike(tmp_path: Path, cache: Path) -> None:
    """No roots left inside the ceiling: every tool, guarded or exempt, refused in the same words."""
    served, outside = build_tree(tmp_path / "tree")
    await fill(served, cache, tmp_path / "fill.log")
    runs = {}
    for path, env in (("sdk", LEAN_OFF), ("lean", {})):
        log = tmp_path / f"{path}.log"
        runs[path] = await session(
            params(served, cache, log, env), "legacy", [outside], no_roots_calls(served)
        )
        if path == "lean":
            assert SERVING in log.read_text() and HANDED not in log.read_text()
    assert runs["lean"] == runs["sdk"]
    said = [result["content"][0]["text"] for result in runs["lean"]]
    assert all("(no roots)" in text or text == "Allowed directories:\n" for text in said), said
