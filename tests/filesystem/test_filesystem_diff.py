"""The differential test: one scripted session against the official `@modelcontextprotocol/server-filesystem`
(pinned in tests/interop/package-lock.json) and against `mcp-roots serve`, on the same fixed tree, through
the official TypeScript SDK client over stdio. Tool lists, argument schemas, annotations and results must
match; every intended difference is listed in INTENDED below and in the README ("Differences from the
official server"). A refusal where the official server allows is a feature; a missing field is a bug.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.kit import FsTree, official_command, serve_command, ts_session
from tests.kit import text_of as text

# How two results are compared: "same" (content and structured content equal), "errors" (both refuse),
# or a function of (official, ours) that asserts the documented difference.
Compare = str | Callable[[dict[str, Any], dict[str, Any]], None]


def session(t: FsTree) -> list[tuple[str, dict[str, Any], Compare]]:
    r, out = str(t.root), str(t.outside)
    return [
        ("list_allowed_directories", {}, "same"),
        ("read_text_file", {"path": f"{r}/abc.txt"}, "same"),
        ("read_text_file", {"path": "abc.txt"}, "same"),
        ("read_text_file", {"path": f"{r}/abc.txt", "head": 2}, "same"),
        ("read_text_file", {"path": f"{r}/abc.txt", "tail": 2}, "same"),
        ("read_text_file", {"path": f"{r}/lines.txt", "head": 2}, "same"),
        ("read_text_file", {"path": f"{r}/lines.txt", "tail": 2}, INTENDED["tail keeps N lines"]),
        ("read_text_file", {"path": f"{r}/lines.txt", "head": 1, "tail": 1}, "errors"),
        ("read_file", {"path": f"{r}/abc.txt"}, "same"),
        ("read_text_file", {"path": f"{r}/inner_link.txt"}, "same"),
        ("read_text_file", {"path": f"{r}/bin.dat"}, INTENDED["binary refused"]),
        ("read_text_file", {"path": f"{r}/nope.txt"}, "errors"),
        ("read_text_file", {"path": f"{out}/secret.txt"}, "errors"),
        ("read_text_file", {"path": f"{r}/escape.txt"}, "errors"),
        ("read_text_file", {"path": f"{r}/escape_dir/secret.txt"}, "errors"),
        ("read_media_file", {"path": f"{r}/pic.png"}, "same"),
        ("read_media_file", {"path": f"{r}/bin.dat"}, "same"),
        ("read_media_file", {"path": f"{r}/escape.txt"}, "errors"),
        (
            "read_multiple_files",
            {"paths": [f"{r}/abc.txt", f"{out}/secret.txt", f"{r}/nope.txt", f"{r}/sub/xy.txt"]},
            same_but_error_wording,
        ),
        ("list_directory", {"path": r}, "same"),
        ("list_directory", {"path": f"{r}/sub"}, "same"),
        ("list_directory", {"path": out}, "errors"),
        ("list_directory_with_sizes", {"path": f"{r}/sub"}, "same"),
        ("list_directory_with_sizes", {"path": f"{r}/many", "sortBy": "size"}, "same"),
        ("list_directory_with_sizes", {"path": r}, INTENDED["no size from outside"]),
        ("directory_tree", {"path": r}, "same"),
        (
            "directory_tree",
            {"path": r, "excludePatterns": ["node_modules", "*.txt", "many/**", ".hidden"]},
            "same",
        ),
        ("directory_tree", {"path": f"{r}/escape_dir"}, "errors"),
        ("search_files", {"path": r, "pattern": "**/*.txt"}, "same"),
        ("search_files", {"path": r, "pattern": "*.py"}, "same"),
        ("search_files", {"path": r, "pattern": "**/*.{py,js}"}, "same"),
        (
            "search_files",
            {"path": r, "pattern": "**", "excludePatterns": ["many", "node_modules/**"]},
            "same",
        ),
        ("search_files", {"path": r, "pattern": "sub/**/?.py"}, "same"),
        ("get_file_info", {"path": f"{r}/abc.txt"}, INTENDED["ISO 8601 times"]),
        ("get_file_info", {"path": f"{r}/sub"}, INTENDED["ISO 8601 times"]),
        ("get_file_info", {"path": f"{r}/escape.txt"}, "errors"),
        (
            "edit_file",
            {"path": f"{r}/edit.txt", "edits": [{"oldText": "beta", "newText": "BETA"}], "dryRun": True},
            "same",
        ),
        ("edit_file", {"path": f"{r}/edit.txt", "edits": [{"oldText": "beta", "newText": "BETA"}]}, "same"),
        ("read_text_file", {"path": f"{r}/edit.txt"}, "same"),
        (
            "edit_file",
            {
                "path": f"{r}/code.js",
                # Indented differently from the file: matched line by line ignoring indentation.
                "edits": [{"oldText": "if (x) {\n  return 1;\n}", "newText": "if (y) {\n  return 3;\n}"}],
                "dryRun": True,
            },
            "same",
        ),
        ("edit_file", {"path": f"{r}/edit.txt", "edits": [{"oldText": "absent", "newText": "x"}]}, "errors"),
        ("write_file", {"path": f"{r}/new.txt", "content": "hello\n"}, "same"),
        ("write_file", {"path": f"{out}/planted.txt", "content": "x"}, "errors"),
        ("write_file", {"path": f"{r}/escape.txt", "content": "x"}, "errors"),
        ("create_directory", {"path": f"{r}/made/a"}, "same"),
        ("create_directory", {"path": f"{r}/made/a"}, "same"),
        ("move_file", {"source": f"{r}/new.txt", "destination": f"{r}/made/new.txt"}, "same"),
        ("move_file", {"source": f"{r}/abc.txt", "destination": f"{r}/lines.txt"}, "errors"),
        ("move_file", {"source": f"{r}/made/new.txt", "destination": f"{out}/stolen.txt"}, "errors"),
        ("list_directory", {"path": f"{r}/made"}, "same"),
        ("directory_tree", {"path": f"{r}/made"}, "same"),
    ]


# --- the intended differences (each one is in the README) ---------------------------------------------


def _tail_keeps_n_lines(official: dict[str, Any], ours: dict[str, Any]) -> None:
    # tail=2 of "1\n2\n3\n4\n5\n": the official server counts the empty string after the last newline as
    # a line and returns one line; we return the last two lines.
    assert text(official) == "5\n"
    assert text(ours) == "4\n5\n"


def _binary_refused(official: dict[str, Any], ours: dict[str, Any]) -> None:
    assert not official["isError"]
    assert "\x00" in text(official)
    assert ours["isError"]
    assert "binary" in text(ours)


def _no_size_from_outside(official: dict[str, Any], ours: dict[str, Any]) -> None:
    # The official server stats a symlink's target even when it lies outside the allowed directories
    # (escape.txt shows the outside file's 10 bytes); we show the link's own size. Name order: the
    # official server sorts with ICU collation (localeCompare), we by case-folded code point; the lines
    # are otherwise the same.
    def lines(result: dict[str, Any]) -> dict[str, str]:
        body = text(result).split("\n\n")[0]
        return {line.split()[1]: line for line in body.splitlines()}

    theirs, mine = lines(official), lines(ours)
    assert set(theirs) == set(mine)
    escapes = {"escape.txt", "escape_dir"}
    assert {k: v for k, v in theirs.items() if k not in escapes} == {
        k: v for k, v in mine.items() if k not in escapes
    }
    assert theirs["escape.txt"].endswith(" 10 B")  # the outside file's size: the leak
    assert not mine["escape.txt"].endswith(" 10 B")
    assert text(official).split("\n\n")[1].splitlines()[0] == text(ours).split("\n\n")[1].splitlines()[0]


def _iso_times(official: dict[str, Any], ours: dict[str, Any]) -> None:
    def fields(result: dict[str, Any]) -> dict[str, str]:
        return dict(line.split(": ", 1) for line in text(result).splitlines())

    theirs, mine = fields(official), fields(ours)
    assert list(theirs) == list(mine)  # every field, in the same order
    for key in ("size", "isDirectory", "isFile", "permissions"):
        assert theirs[key] == mine[key], key
    for key in ("created", "modified", "accessed"):
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00", mine[key]), mine[key]


INTENDED: dict[str, Compare] = {
    "tail keeps N lines": _tail_keeps_n_lines,
    "binary refused": _binary_refused,
    "no size from outside": _no_size_from_outside,
    "ISO 8601 times": _iso_times,
}


def same_but_error_wording(official: dict[str, Any], ours: dict[str, Any]) -> None:
    """read_multiple_files: the same parts; a failed file's error message is worded by each server."""

    def parts(result: dict[str, Any]) -> list[str]:
        return [
            part.split(": Error - ")[0] + (" ERROR" if ": Error - " in part else "")
            for part in text(result).split("\n---\n")
        ]

    assert parts(official) == parts(ours)
    assert "TOP SECRET" not in text(ours)


# --- tool lists and schemas ---------------------------------------------------------------------------


def _norm_property(prop: dict[str, Any]) -> dict[str, Any]:
    if "anyOf" in prop:  # optional values: Python spells them `T | None`
        arms = [arm for arm in prop["anyOf"] if arm.get("type") != "null"]
        assert len(arms) == 1, prop
        prop = {**prop, **arms[0]}
    kind = prop.get("type")
    out: dict[str, Any] = {"type": kind}
    for key in ("enum", "description"):
        if key in prop:
            out[key] = prop[key]
    if "items" in prop:
        out["items"] = prop["items"].get("type", "object")
    return out


def _norm_schema(schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "properties": {name: _norm_property(p) for name, p in schema.get("properties", {}).items()},
        "required": sorted(schema.get("required", [])),
    }


def check_tools(official: list[dict[str, Any]], ours: list[dict[str, Any]]) -> None:
    theirs = {t["name"]: t for t in official}
    mine = {t["name"]: t for t in ours}
    assert sorted(theirs) == sorted(mine)
    for name, tool in theirs.items():
        assert mine[name]["title"] == tool["title"], name
        for hint, value in tool["annotations"].items():
            assert mine[name]["annotations"][hint] == value, (name, hint)
        assert _norm_schema(mine[name]["inputSchema"]) == _norm_schema(tool["inputSchema"]), name
        for prop, spec in tool["inputSchema"]["properties"].items():
            if "default" in spec:
                assert mine[name]["inputSchema"]["properties"][prop].get("default") == spec["default"], (
                    name,
                    prop,
                )
        assert set(mine[name]["outputSchema"]["properties"]) == set(tool["outputSchema"]["properties"]), name
        if name == "read_media_file":  # the content blocks: the image/audio/resource union, as declared there
            items = repr(mine[name]["outputSchema"])
            assert {"image", "audio", "resource"} <= set(re.findall(r"'(image|audio|resource)'", items))
        assert mine[name]["outputSchema"]["required"] == tool["outputSchema"]["required"], name


# --- the tests -----------------------------------------------------------------------------------------


def run_both(
    tmp_path: Path, roots: Callable[[FsTree], list[Path]] | None = None
) -> tuple[Any, Any, list[Any]]:
    summaries = []
    for label, command in (("official", official_command), ("ours", serve_command)):
        t = FsTree.make(tmp_path / label)  # the session writes: a fresh copy of the same tree for each
        calls = session(t)
        client_roots = roots(t) if roots is not None else None
        summaries.append(ts_session(command(str(t.root)), [(n, a) for n, a, _ in calls], client_roots))
    # Both trees differ only in their base directory: compare with it replaced.
    official, ours = summaries
    _replace(official, str((tmp_path / "official").resolve()), "BASE")
    _replace(ours, str((tmp_path / "ours").resolve()), "BASE")
    return official, ours, session(FsTree.make(tmp_path / "spec"))


def _replace(value: Any, old: str, new: str) -> Any:
    if isinstance(value, dict):
        for key in value:
            value[key] = _replace(value[key], old, new)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            value[i] = _replace(item, old, new)
    elif isinstance(value, str):
        return value.replace(old, new).replace(old.replace("/", "%2F"), new)
    return value


def test_same_session_same_results_as_the_official_server(tmp_path: Path) -> None:
    official, ours, calls = run_both(tmp_path)
    check_tools(official["tools"], ours["tools"])
    failures = []
    for (name, args, compare), theirs, mine in zip(calls, official["results"], ours["results"], strict=True):
        try:
            if compare == "same":
                assert mine["isError"] == theirs["isError"], text(mine)
                assert mine["content"] == theirs["content"]
                assert mine["structured"] == theirs["structured"]
            elif compare == "errors":
                assert theirs["isError"], f"the official server allowed it: {text(theirs)[:200]}"
                assert mine["isError"], f"we allowed it: {text(mine)[:200]}"
                assert "TOP SECRET" not in text(mine)
            else:
                assert callable(compare)
                compare(theirs, mine)
        except AssertionError as exc:
            failures.append(f"{name}({args}): {exc}")
    assert not failures, "\n".join(failures)


def test_client_roots_widen_the_official_server_but_never_ours(tmp_path: Path) -> None:
    """The control: a client that names a directory outside the command-line directories gets it from the
    official server (its roots replace the command line); from ours it gets nothing."""
    calls = [
        ("list_allowed_directories", {}),
        ("read_text_file", {"path": str(tmp_path / "{}" / "outside" / "secret.txt")}),
    ]
    results = {}
    for label, command in (("official", official_command), ("ours", serve_command)):
        t = FsTree.make(tmp_path / label)
        these = [(n, {k: v.replace("{}", label) for k, v in a.items()}) for n, a in calls]
        # The official server applies client roots in the background after `initialized`: wait for them.
        settle: tuple[str, dict[str, Any], str] | None = None
        if label == "official":
            settle = ("list_allowed_directories", {}, str(t.outside.resolve()))
        results[label] = ts_session(command(str(t.root)), these, [t.outside], settle)["results"]
    official, ours = results["official"], results["ours"]
    assert text(official[0]).endswith(str((tmp_path / "official" / "outside").resolve()))
    assert not official[1]["isError"]
    assert text(official[1]) == "TOP SECRET"
    assert str(tmp_path / "ours" / "outside") not in text(ours[0])
    assert ours[1]["isError"]
    assert "TOP SECRET" not in text(ours[1])


@pytest.mark.parametrize("reason", sorted(INTENDED))
def test_every_intended_difference_is_on_the_serving_page(reason: str) -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "serve.md").read_text()
    section = page.split("## Differences from the official server", 1)
    assert len(section) == 2, "docs/serve.md has no 'Differences from the official server' section"
    assert f"({reason})" in section[1].split("\n## ", 1)[0], reason
