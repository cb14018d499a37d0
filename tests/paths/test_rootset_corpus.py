"""Every row of the adversarial corpus (tests/corpus.py) through contains() and resolve().

contains() must never raise and must say True exactly for INSIDE rows; resolve() must return the canonical
path for INSIDE rows and raise PathOutsideRoots / InvalidPath (naming the input) for the others.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_roots import InvalidPath, PathOutsideRoots, RootsError
from tests.corpus import CASES, INSIDE, INVALID, OUTSIDE, Case, CorpusTree, build_tree


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> CorpusTree:
    return build_tree(tmp_path_factory.mktemp("corpus"))


def test_the_corpus_is_big_enough() -> None:
    assert len(CASES) >= 200
    assert {c.expect for c in CASES} == {INSIDE, OUTSIDE, INVALID}


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_contains(case: Case, tree: CorpusTree) -> None:
    roots = tree.rootsets[case.roots]
    assert roots.contains(case.path_for(tree)) is (case.expect == INSIDE), case.why


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_resolve(case: Case, tree: CorpusTree) -> None:
    roots = tree.rootsets[case.roots]
    value = case.path_for(tree)
    if case.expect == INSIDE:
        resolved = roots.resolve(value)
        assert isinstance(resolved, Path)
        assert resolved.is_absolute()
        expected = case.canonical_for(tree)
        if expected is not None:
            assert resolved == expected, case.why
        assert roots.contains(resolved), "the canonical path is inside too"
        return
    wanted = PathOutsideRoots if case.expect == OUTSIDE else InvalidPath
    with pytest.raises(RootsError) as info:
        roots.resolve(value)
    assert type(info.value) is wanted, f"{case.why}: got {info.value!r}"
    message = str(info.value)
    assert len(message) < 1000, "messages stay short even for huge paths"
    if isinstance(value, str) and value and len(value) < 100:
        assert repr(value)[1:-1][:40] in message or repr(value)[:40] in message, "the message names the path"
