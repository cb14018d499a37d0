"""Property: for random trees of dirs, files and symlinks and random paths, contains() and resolve() agree
with a slow reference model that lets the kernel resolve every existing prefix.

The reference opens the path (or its longest existing prefix) with O_PATH and reads the canonical name back
from /proc/self/fd; only the contract's rule for a missing tail (cancel missing names with '..', then go on
resolving physically) is written out by hand, and so is the one '..' rule (a '..' applies only where the
path stands strictly beneath a root, or at '/'; elsewhere the path is outside), over the path with every
symlink spelled out as its target, asking the kernel where each '..' stands.
"""

from __future__ import annotations

import errno
import os
import sys
import tempfile
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from mcp_roots import InvalidPath, PathOutsideRoots, RootSet

pytestmark = pytest.mark.skipif(
    not (sys.platform.startswith("linux") and hasattr(os, "O_PATH")), reason="the reference model reads /proc"
)

NAMES = ["a", "b", "c"]
# Link targets: relative and absolute, inside and outside, loops, '.', '..', dangling, trailing '/'.
TARGETS = [
    "a", "b", "c", "a/b", "b/c", ".", "..", "../..", "./a", "a/", "zz", "zz/y",
    "../outside", "../outside/f", "../root2", "../root/a", "../../x",
    "{root}", "{root}/a", "{root}/b/c", "{base}", "{base}/outside", "{base}/root2/a", "/", "/nonexistent-zz",
]  # fmt: skip
COMPONENTS = ["a", "b", "c", "zz", ".", "..", "", "root", "root2", "outside", "f"]


@dataclass(frozen=True)
class Entry:
    path: tuple[str, ...]
    kind: str  # "dir" | "file" | "link"
    target: str


entries = st.builds(
    Entry,
    st.lists(st.sampled_from(NAMES), min_size=1, max_size=3).map(tuple),
    st.sampled_from(["dir", "dir", "file", "link", "link", "link"]),
    st.sampled_from(TARGETS),
)
paths = st.tuples(
    st.sampled_from(["{root}/", "{base}/", "", "{base}/root2/"]),
    st.lists(st.sampled_from(COMPONENTS), min_size=0, max_size=6),
)


def _build(base: str, spec: list[Entry]) -> None:
    for top in ("root", "root2", "outside"):
        os.mkdir(os.path.join(base, top))
    with open(os.path.join(base, "outside", "f"), "w") as fh:
        fh.write("x")
    for entry in spec:
        where = os.path.join(base, "root", *entry.path)
        parent = os.path.dirname(where)
        if os.path.lexists(where) or not os.path.isdir(parent) or os.path.islink(parent):
            continue
        if entry.kind == "dir":
            os.mkdir(where)
        elif entry.kind == "file":
            with open(where, "w") as fh:
                fh.write("x")
        else:
            target = entry.target.replace("{root}", base + "/root").replace("{base}", base)
            os.symlink(target, where)


def _kernel_canonical(path: str) -> str:
    fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    finally:
        os.close(fd)


def reference(path: str, depth: int = 0) -> str | None:
    """The canonical path of absolute ``path`` per the contract, or None when it cannot be resolved."""
    if depth > 40:
        return None
    try:
        return _kernel_canonical(path)
    except OSError as exc:
        if exc.errno != errno.ENOENT:
            return None  # ELOOP, ENOTDIR...
    comps = path.split("/")
    # The longest prefix the kernel resolves; the next component is missing or a dangling link.
    known = "/"
    for i in range(1, len(comps) + 1):
        prefix = "/".join(comps[:i]) or "/"
        try:
            known = _kernel_canonical(prefix)
        except OSError as exc:
            if exc.errno != errno.ENOENT:
                return None
            name, rest = comps[i - 1], comps[i:]
            candidate = os.path.join(known, name)
            if os.path.islink(candidate):  # dangling: go on from the link's target
                return reference("/".join([os.path.join(known, os.readlink(candidate)), *rest]), depth + 1)
            missing = [name]
            for j, comp in enumerate(rest):
                if comp in ("", "."):
                    continue
                if comp == "..":
                    missing.pop()
                    if not missing:  # the missing names are used up: resolve the rest physically
                        return reference("/".join([known, *rest[j + 1 :]]), depth + 1)
                else:
                    missing.append(comp)
            return os.path.join(known, *missing)
    return known  # pragma: no cover - the whole path resolved after all (raced)


def climbs_only_beneath_roots(path: str, roots: list[str], depth: int = 0) -> bool:
    """The '..' rule, by hand: every '..' of the absolute ``path`` (or of a symlink's target met on the
    way) stands, per the kernel (``reference``), strictly beneath a root or at '/'."""
    if depth > 40:
        return True  # a loop: reference() says it cannot be resolved anyway
    comps = path.split("/")
    so_far: list[str] = []
    for i, comp in enumerate(comps):
        if comp in ("", "."):
            continue
        here = "/" + "/".join(so_far)
        if comp == "..":
            position = reference(here)
            if position is None:
                return True  # unresolvable: outside whatever the rule says
            if position != "/" and not any(r == "/" or position.startswith(r + "/") for r in roots):
                return False
            so_far.append(comp)
            continue
        # Where the walk stands, per the kernel: a '..' that cancelled a missing name leaves the kernel unable
        # to look up ``here`` as spelled, though the walk goes on physically from there.
        at = reference(here) or here
        candidate = os.path.join(at, comp)
        if os.path.islink(candidate):
            target = os.readlink(candidate)
            spelled = target if target.startswith("/") else os.path.join(at, target)
            return climbs_only_beneath_roots("/".join([spelled, *comps[i + 1 :]]), roots, depth + 1)
        so_far.append(comp)
    return True


def _inside(canonical: str, roots: list[str]) -> bool:
    return any(r == "/" or canonical == r or canonical.startswith(r + "/") for r in roots)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# A '..' that cancels a missing name, then a symlink whose '..' steps out of a root's top (found by a run).
@example(
    spec=[Entry(("a",), "dir", "a"), Entry(("b",), "link", "../root2")],
    asked=[("{root}/", ["c", "..", "b"])],
    extra_roots={"root2", "root/a"},
)
@given(
    spec=st.lists(entries, max_size=10),
    asked=st.lists(paths, min_size=1, max_size=12),
    extra_roots=st.sets(st.sampled_from(["root/a", "root2", "root/b/c"]), max_size=2),
)
def test_contains_agrees_with_the_reference_model(
    spec: list[Entry], asked: list[tuple[str, list[str]]], extra_roots: set[str]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = os.path.realpath(tmp)
        _build(base, spec)
        given_roots = [os.path.join(base, "root"), *(os.path.join(base, r) for r in sorted(extra_roots))]
        roots = RootSet.from_paths(given_roots, strict=False)
        canonical_roots = [reference(r) for r in given_roots if os.path.exists(r)]
        assert [str(p) for p in roots.paths] == list(dict.fromkeys(canonical_roots))
        first = str(roots.paths[0])
        for start, comps in asked:
            text = start.replace("{root}", base + "/root").replace("{base}", base) + "/".join(comps)
            if not text:
                continue
            absolute = text if text.startswith("/") else first + "/" + text
            expected = reference(absolute)
            root_paths = [str(p) for p in roots.paths]
            inside = (
                expected is not None
                and _inside(expected, root_paths)
                and climbs_only_beneath_roots(absolute, root_paths)
            )
            assert roots.contains(text) is inside, (text, expected)
            if inside:
                assert str(roots.resolve(text)) == expected
            else:
                with pytest.raises(PathOutsideRoots):
                    roots.resolve(text)


def test_the_reference_model_is_not_lexical() -> None:
    # A control: the lexical answer (normpath) differs from the reference exactly where links matter.
    with tempfile.TemporaryDirectory() as tmp:
        base = os.path.realpath(tmp)
        _build(base, [Entry(("a",), "dir", ""), Entry(("a", "up"), "link", "../..")])
        path = base + "/root/a/up/root2/x"
        assert os.path.normpath(path).startswith(base + "/root/")  # the naive check says inside
        assert reference(path) == base + "/root2/x"
        assert not RootSet.from_paths([base + "/root"]).contains(path)
        with pytest.raises(InvalidPath):
            RootSet.from_paths([base + "/root"]).resolve("")
