"""The probe's parts without a server: which schema properties take paths (one table), how the other
arguments are filled, and the scratch tree's judging (a change outside is seen, the planted state comes back,
nothing is left behind)."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest

from mcp_roots.probe._discover import PathArgument, fill_arguments, parse_override, path_arguments
from mcp_roots.probe._scratch import Scratch
from mcp_roots.probe._techniques import TECHNIQUES

#: (property name, its schema, expected (takes a URI, as array) or None).
PROPERTIES: list[tuple[str, dict[str, Any], tuple[bool, bool] | None]] = [
    ("path", {"type": "string"}, (False, False)),
    ("paths", {"type": "array", "items": {"type": "string"}}, (False, True)),
    ("maybe_path", {"anyOf": [{"type": "string"}, {"type": "null"}]}, (False, False)),
    ("source", {"type": "string"}, (False, False)),
    ("destination", {"type": "string"}, (False, False)),
    ("config_file", {"type": "string"}, (False, False)),
    ("outputDir", {"type": "string"}, (False, False)),
    ("where", {"type": "string", "description": "The directory to list"}, (False, False)),
    ("doc", {"type": "string", "format": "uri"}, (True, False)),
    ("uri", {"type": "string"}, (True, False)),
    ("ref", {"type": "string", "description": "a file:// URI of the document"}, (True, False)),
    ("content", {"type": "string", "description": "What to write"}, None),
    ("pattern", {"type": "string", "description": "A glob matched against file names"}, None),
    ("count", {"type": "integer", "description": "how many files"}, None),
]


@pytest.mark.parametrize(("name", "schema", "expected"), PROPERTIES, ids=[p[0] for p in PROPERTIES])
def test_path_arguments_are_found_by_schema(name: str, schema: dict[str, Any], expected: Any) -> None:
    tool = {"name": "t", "inputSchema": {"type": "object", "properties": {name: schema}}}
    found = path_arguments(tool)
    if expected is None:
        assert found == []
    else:
        uri, array = expected
        assert found == [PathArgument("t", name + ("[]" if array else ""), uri=uri)]


def test_override_names_an_argument_and_errors_name_what_is_wrong() -> None:
    tools = [{"name": "fetch", "inputSchema": {"properties": {"location": {"type": "string"}}}}]
    assert parse_override("fetch:location", tools) == PathArgument("fetch", "location")
    for spec, message in [
        ("fetch", "not NAME:LOCATOR"),
        ("nope:x", "no tool named 'nope'"),
        ("fetch:x", "no string at 'x'"),
        ("fetch:a..b", "bad locator"),
    ]:
        with pytest.raises(ValueError, match=message):
            parse_override(spec, tools)


def test_other_arguments_are_filled_so_the_call_reaches_its_path() -> None:
    edit = {
        "name": "edit_file",
        "inputSchema": {
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "edits": {"type": "array", "items": {"$ref": "#/$defs/Edit"}},
                "dryRun": {"type": "boolean", "default": False},
            },
            "required": ["path", "edits"],
            "$defs": {
                "Edit": {
                    "type": "object",
                    "properties": {"oldText": {"type": "string"}, "newText": {"type": "string"}},
                    "required": ["oldText", "newText"],
                }
            },
        },
    }
    args = fill_arguments(
        edit, PathArgument("edit_file", "path"), "/x", benign_file="/r/b", fresh_name="/r/n",
        write_token="W", old_text="OLD",
    )  # fmt: skip
    assert args == {"path": "/x", "edits": [{"oldText": "OLD", "newText": "W"}]}
    move = {
        "name": "move",
        "inputSchema": {"properties": {"source": {"type": "string"}, "dest": {"type": "string"}}},
    }
    args = fill_arguments(
        move, PathArgument("move", "source"), "/x", benign_file="/r/b", fresh_name="/r/n", write_token="W"
    )  # fmt: skip
    assert args == {"source": "/x", "dest": "/r/n"}  # a destination gets a fresh inside name


def test_the_scratch_tree_sees_a_change_outside_and_restores_the_planted_state(tmp_path: Path) -> None:
    scratch = Scratch.create(str(tmp_path))
    try:
        root, n = scratch.root, scratch.n
        assert stat.S_ISFIFO(os.lstat(root / n("fifo")).st_mode)
        assert os.readlink(root / n("proc-link")) == "/proc/self/root"
        outside = scratch.base / n("outside")
        assert os.stat(root / n("hardlink")).st_ino == os.stat(outside / n("hardlink-secret.txt")).st_ino
        assert scratch.outside_changes() == []
        secret = outside / n("secret.txt")
        token = secret.read_text()
        assert scratch.evidence_in([f"... {token.strip()} ..."]) == ["outside/secret.txt"]
        (root / n("link-out")).write_text("written through the link")  # what a broken write tool does
        (outside / "new.txt").write_text("x")
        assert scratch.outside_changes() == [
            "changed 'outside'",
            "changed 'outside/secret.txt'",
            "created 'outside/new.txt'",
        ]
        root_inode = os.stat(root).st_ino
        scratch.restore()
        assert scratch.outside_changes() == []
        assert not (outside / "new.txt").exists()
        assert os.stat(root).st_ino == root_inode  # the root itself is never replaced
        assert secret.read_text() == token  # the canary is back, with its token
    finally:
        scratch.remove()
    assert list(tmp_path.iterdir()) == []


def test_the_names_are_random_per_run(tmp_path: Path) -> None:
    """Nothing in the tree a server sees says 'probe' or 'canary': every name and content is drawn per run."""
    one, two = Scratch.create(str(tmp_path)), Scratch.create(str(tmp_path))
    try:
        assert one.top.name != two.top.name
        assert "probe" not in str(one.top)
        # .git: the root is a repository, and every repository's folder has that name.
        assert (set(os.listdir(one.root)) - {".git"}).isdisjoint(os.listdir(two.root))
        assert one.n("ROOT") == one.root.name.upper()
        assert one.n("root_evil").startswith(one.root.name)
        assert one.tokens["outside/secret.txt"] != two.tokens["outside/secret.txt"]
        for name in os.listdir(one.root):
            assert not {"benign", "secret", "canary", "probe", "link", "fifo"} & set(
                name.lower().split(".")
            ), name
    finally:
        one.remove()
        two.remove()


def test_every_technique_stays_in_the_scratch_tree(tmp_path: Path) -> None:
    """Every absolute path a technique sends leads into the scratch tree (through /proc where it says so)."""
    scratch = Scratch.create(str(tmp_path))
    try:
        for technique in TECHNIQUES:
            for variant in technique.paths(scratch) + (technique.uris(scratch) if technique.uris else []):
                value = variant.value.removeprefix("file://")
                if value.startswith("/"):
                    plain = value.removeprefix("/proc/self/root")
                    # /proc/self/cwd: sent only where the server's working directory is the scratch base
                    assert plain.startswith(str(scratch.base)) or plain.startswith("/proc/self/cwd/"), value
    finally:
        scratch.remove()
