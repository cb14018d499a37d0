"""How paths are compared on each platform, proven on this Linux host with the platform's fold function
and RootSets built with it (RootSet(..., platform=...)).

Linux compares bytes exactly. macOS (APFS/HFS+ default) folds case and Unicode normalization; Windows (NTFS)
folds case one character to one and treats '/' and '\\' alike. Both folds are "simple" (one character to one
character): a full fold such as 'ß' -> 'ss' could merge two names the filesystem keeps apart and widen a
root, so it is never applied.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from mcp_roots import RootSet
from mcp_roots.paths._fold import folding_for
from mcp_roots.paths._index import RootIndex

NFC = "caf\u00e9"
NFD = "cafe\u0301"

# (platform, a, b, same?): whether two spellings name the same file on that platform.
FOLDS = [
    ("linux", "/srv/Project", "/srv/project", False),
    ("linux", f"/srv/{NFC}", f"/srv/{NFD}", False),
    ("linux", "/srv/a", "/srv/a", True),
    ("darwin", "/Users/u/Project", "/users/U/PROJECT", True),
    ("darwin", f"/Users/u/{NFC}", f"/Users/u/{NFD}", True),
    ("darwin", f"/Users/u/{NFC.upper()}", f"/Users/u/{NFD}", True),
    ("darwin", "/Users/u/\u00c5ngstr\u00f6m", "/Users/u/A\u030angstro\u0308m", True),
    ("darwin", "/Users/u/\u03a3\u03a3", "/Users/u/\u03c3\u03c2", True),  # final sigma folds to sigma
    ("darwin", "/Users/u/stra\u00dfe", "/Users/u/strasse", False),  # no full folding: 'ß' is not 'ss'
    ("darwin", "/Users/u/\u1e9e", "/Users/u/\u00df", True),  # capital sharp s folds simply to 'ß'
    ("darwin", "/Users/u/\ufb01le", "/Users/u/file", False),  # the 'ﬁ' ligature stays one character
    ("darwin", "/Users/u/a", "/Users/u/b", False),
    ("darwin", "/Users/u/Project", "/Users/u/Project2", False),
    ("win32", "C:/Users/U/Project", "c:\\users\\u\\PROJECT", True),
    ("win32", "C:\\a\\b", "C:/a/b", True),
    ("win32", f"C:\\{NFC}", f"C:\\{NFD}", False),  # NTFS does not normalize
    ("win32", f"C:\\{NFC}", f"C:\\{NFC.upper()}", True),
    ("win32", "C:\\stra\u00dfe", "C:\\STRASSE", False),
    ("win32", "C:\\\u03c3", "C:\\\u03a3", True),
    ("win32", "C:\\a", "C:\\a_evil", False),
    ("cygwin", "/cygdrive/c/A", "/cygdrive/c/a", True),
]


@pytest.mark.parametrize(("platform", "a", "b", "same"), FOLDS)
def test_fold_for_platform(platform: str, a: str, b: str, same: bool) -> None:
    fold = folding_for(platform).key
    assert (fold(a) == fold(b)) is same


@pytest.mark.parametrize("platform", ["linux", "darwin", "win32"])
def test_folds_keep_separators_and_are_idempotent(platform: str) -> None:
    fold = folding_for(platform).key
    for text in ["/a/B/c", f"/{NFC}/{NFD}/\u00df/\u1e9e", "/\u0130stanbul/\u03a3"]:
        once = fold(text)
        assert fold(once) == once
        sep = "\\" if platform == "win32" else "/"
        assert once.count(sep) == text.count("/")


def _build(tmp_path: Path, platform: str) -> RootSet:
    (tmp_path / "Project").mkdir()
    (tmp_path / "Project" / "file.txt").write_text("x")
    (tmp_path / "Project2").mkdir()
    (tmp_path / NFC).mkdir()
    linux = RootSet.from_paths([tmp_path / "Project", tmp_path / NFC])
    return RootSet(linux.roots, source="test", platform=platform)


# (relative path, inside on linux, darwin, win32)
SPELLINGS = [
    ("Project/file.txt", True, True, True),
    ("PROJECT/file.txt", False, True, True),
    ("project", False, True, True),
    ("Project2/x", False, False, False),
    ("PROJECT2/x", False, False, False),
    ("projec/x", False, False, False),
    (f"{NFC}/x", True, True, True),
    (f"{NFD}/x", False, True, False),
    (f"{NFC.upper()}/x", False, True, True),
    (f"{NFD.upper()}/x", False, True, False),
    ("Project/../PROJECT2", False, False, False),
]


@pytest.mark.parametrize("platform", ["linux", "darwin", "win32"])
@pytest.mark.parametrize(("rel", "linux", "darwin", "win32"), SPELLINGS)
def test_rootset_compares_like_the_platform(
    tmp_path: Path, platform: str, rel: str, linux: bool, darwin: bool, win32: bool
) -> None:
    roots = _build(tmp_path, platform)
    expected = {"linux": linux, "darwin": darwin, "win32": win32}[platform]
    assert roots.contains(str(tmp_path / rel)) is expected


def test_linux_rootset_compares_exactly(tmp_path: Path) -> None:
    (tmp_path / "Project").mkdir()
    roots = RootSet.from_paths([tmp_path / "Project"])
    assert roots.contains(tmp_path / "Project" / "x")
    assert not roots.contains(tmp_path / "project" / "x")


ROOT_SHAPES = [
    ["/"],
    ["/a"],
    ["/a", "/a/b/c"],
    ["/a/b", "/ab", "/x/y/z/w"],
    ["/", "/a/b"],
    ["/" + "/".join(["d"] * n) for n in (1, 3, 7)],
]
PATH_SHAPES = [
    "/",
    "/a",
    "/ab",
    "/a/b",
    "/a/b/c",
    "/a/b/c/d",
    "/a/bc",
    "/x/y/z/w/v",
    "/d/d/d/d/d/d/d/d",
    "/q",
]


@pytest.mark.parametrize("roots", ROOT_SHAPES, ids=str)
def test_the_index_by_root_path_length_answers_as_the_walk_up_the_components(roots: list[str]) -> None:
    """Where names compare exactly, RootIndex finds roots with one probe per root-path length (a path of
    thousands of components costs no more); each answer is the one the walk up its components gives
    (an index told its names fold takes that walk)."""
    exact = folding_for("linux")
    by_length = RootIndex(roots, exact)
    by_component = RootIndex(roots, dataclasses.replace(exact, exact=False))
    assert by_length.lengths
    assert not by_component.lengths
    for path in PATH_SHAPES:
        parts = [p for p in path.split("/") if p]
        for n in range(len(parts) + 1):
            assert list(by_length.lexical(parts[:n])) == list(by_component.lexical(parts[:n])), parts[:n]
        assert by_length.above(path) == by_component.above(path), path
        assert by_length.strictly_beneath(path) == by_component.strictly_beneath(path), path
        assert by_length.innermost_prefix(path) == by_component.innermost_prefix(path), path
