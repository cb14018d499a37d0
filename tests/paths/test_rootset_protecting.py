"""``RootSet.protecting()``: the opt-in for a server's own writes. The same protected set as a confined
child's (one table): open for writing, write_bytes/text, mkdir, remove and rename of a protected path (or of
a folder holding one) are refused; everything else writes as before; a plain RootSet (the control) writes
them all."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from mcp_roots import PathOutsideRoots, RootSet


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    for folder in (".git/hooks", ".vscode", "proj/.git", "src"):
        (root / folder).mkdir(parents=True)
    for name in (".git/config", ".vscode/settings.json", ".mcp.json", "proj/.git/config", "src/a.py"):
        (root / name).write_text("original\n")
    (root / "sub").mkdir()
    (root / "sub" / ".git").write_text("gitdir: ../.git\n")  # a gitdir: redirect, one folder down
    (root / "link").symlink_to(root / ".mcp.json")
    return root.resolve()


WRITES: dict[str, Callable[[RootSet, Path, str], object]] = {
    "write_text": lambda roots, root, name: roots.write_text(root / name, "evil\n"),
    "open a": lambda roots, root, name: roots.open(root / name, "a").close(),
    "open r+": lambda roots, root, name: roots.open(root / name, "r+b").close(),
    "open_fd": lambda roots, root, name: os.close(roots.open_fd(root / name, os.O_WRONLY)),
    "remove": lambda roots, root, name: roots.remove(root / name, recursive=True),
    "rename away": lambda roots, root, name: roots.rename(root / name, root / "moved"),
    "rename over": lambda roots, root, name: roots.rename(root / "src" / "a.py", root / name),
}
TARGETS = [".git/config", ".vscode/settings.json", ".mcp.json", "proj/.git/config", "sub/.git", "link"]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("how", list(WRITES))
def test_a_protecting_rootset_refuses_writes_to_the_protected_set(repo: Path, how: str, target: str) -> None:
    roots = RootSet.from_paths([repo])
    with pytest.raises(PathOutsideRoots, match="is protected"):
        WRITES[how](roots.protecting(), repo, target)
    assert (repo / ".git" / "config").read_text() == "original\n"
    WRITES[how](roots, repo, target)  # the control: a plain RootSet writes it


@pytest.mark.parametrize("folder", [".git", "proj", "proj/.git", ".git/hooks", ".vscode"])
def test_removing_or_renaming_a_folder_that_holds_one_is_refused(repo: Path, folder: str) -> None:
    roots = RootSet.from_paths([repo]).protecting()
    with pytest.raises(PathOutsideRoots, match="is protected"):
        roots.rename(repo / folder, repo / "elsewhere")
    with pytest.raises(PathOutsideRoots, match="is protected"):
        roots.remove(repo / folder, recursive=True)
    with pytest.raises(PathOutsideRoots, match="is protected"):
        roots.mkdir(repo / ".git" / "hooks" / "new")


def test_the_rest_writes_as_before_and_the_opt_outs(repo: Path) -> None:
    roots = RootSet.from_paths([repo]).protecting()
    roots.write_text(repo / "src" / "b.py", "fine\n")
    roots.mkdir(repo / "src" / "pkg")
    roots.rename(repo / "src" / "b.py", repo / "src" / "pkg" / "b.py")
    roots.remove(repo / "src" / "pkg", recursive=True)
    roots.write_text(repo / ".git" / "HEAD", "ref: refs/heads/main\n")  # .git itself stays writable
    with roots.open(repo / ".git" / "config") as f:  # reading is never refused
        assert f.read() == "original\n"
    with pytest.raises(PathOutsideRoots):
        roots.with_source("other").write_text(repo / ".mcp.json", "x")  # the copies keep it
    roots.protecting([".mcp.json"]).write_text(repo / ".git" / "config", "changed\n")
    roots.protecting(False).write_text(repo / ".mcp.json", "changed\n")
    assert (repo / ".mcp.json").read_text() == "changed\n"


# --- serve --protect: the reference server's writing tools ------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("write_file", {"path": ".git/config", "content": "[filter]\n"}),
        ("edit_file", {"path": ".mcp.json", "edits": [{"oldText": "original", "newText": "evil"}]}),
        ("create_directory", {"path": ".git/hooks/new"}),
        ("move_file", {"source": ".git", "destination": "git-moved"}),
    ],
)
async def test_serve_protect_refuses_the_protected_set_in_every_writing_tool(
    repo: Path, tool: str, args: dict[str, object]
) -> None:
    import anyio
    from mcp.client import Client

    from mcp_roots import RootsGuard
    from mcp_roots.filesystem import Settings, build_server

    absolute = {
        k: str(repo / str(v)) if k in ("path", "source", "destination") else v for k, v in args.items()
    }

    async def call(settings: Settings) -> tuple[bool, str]:
        server = build_server(RootsGuard([str(repo)], ceiling=[str(repo)]), settings)
        with anyio.fail_after(30):
            async with Client(server, mode="legacy") as client:
                result = await client.call_tool(tool, absolute)
        return bool(result.is_error), "".join(getattr(b, "text", "") for b in result.content)

    refused, text = await call(Settings(protect=True))
    assert refused, text
    assert "is protected" in text
    assert (repo / ".git" / "config").read_text() == "original\n"
    assert (repo / ".mcp.json").read_text() == "original\n"
    failed, text = await call(Settings())  # the control: without --protect the tool writes it
    assert not failed, text


def test_serve_takes_protect() -> None:
    from mcp_roots.cli import build_parser

    assert build_parser().parse_args(["serve", "--protect", "."]).protect is True
    assert build_parser().parse_args(["serve", "."]).protect is False
