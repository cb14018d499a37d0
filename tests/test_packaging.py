"""What `pip install 'mcp-roots[EXTRA]'` does beside the SDK a user already has, and what the published
metadata says.

Each extra is a range, and each end of it is a venv that `make test` runs the conformance table in (the main
venv, .venv-mcp1 and the make compat venvs, pinned in requirements/). Every pinned end must lie inside its
extra's range: then pip, finding that release installed, keeps it (an installed distribution that satisfies
a requirement is never changed without --upgrade). Checked by hand too, with fastmcp 4.2.3 and mcp 1.26.0
installed: `pip install --dry-run --report` of '.[fastmcp]' and '.[mcp1]' installs mcp-roots alone.
"""

from __future__ import annotations

import re

import pytest
import tomllib
from packaging.requirements import Requirement

from .kit import REPO

PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]

#: extra -> the lock files holding the two ends of its range that the conformance table runs on.
ENDS = {
    "mcp": ["compat-mcp2.1.txt", "dev.txt"],
    "fastmcp": ["dev.txt", "compat-fastmcp4.2.txt"],
    "mcp1": ["compat-mcp1.26.txt", "mcp1.txt"],
}


def _pinned(lock: str, name: str) -> str:
    text = (REPO / "requirements" / lock).read_text(encoding="utf-8")
    match = re.search(rf"^{re.escape(name)}==(\S+)$", text, re.M)
    assert match, f"requirements/{lock} pins no {name}"
    return match.group(1)


@pytest.mark.parametrize("extra", sorted(ENDS))
def test_both_tested_ends_of_each_extra_lie_in_its_range_and_differ(extra: str) -> None:
    (requirement,) = [Requirement(r) for r in PROJECT["optional-dependencies"][extra]]
    versions = [_pinned(lock, requirement.name) for lock in ENDS[extra]]
    assert len(set(versions)) == 2, versions
    for version in versions:
        assert requirement.specifier.contains(version), (extra, str(requirement), version)
    # the upper bound is the next major: a range, not one minor
    major = int(versions[0].split(".")[0])
    assert requirement.specifier.contains(f"{major}.99.0"), requirement
    assert not requirement.specifier.contains(f"{major + 1}.0.0"), requirement


def test_the_toolchain_is_no_published_extra() -> None:
    extras = PROJECT["optional-dependencies"]
    tools = {"pytest", "pytest-xdist", "mypy", "ruff", "hypothesis", "trio"}
    assert not [r for reqs in extras.values() for r in reqs if Requirement(r).name in tools]


def test_the_classifiers_name_the_python_versions_the_project_requires() -> None:
    classifiers = PROJECT["classifiers"]
    versions = [
        c.rsplit(" ", 1)[-1]
        for c in classifiers
        if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)
    ]
    assert versions
    assert versions[0] == PROJECT["requires-python"].removeprefix(">=")


def test_the_changelog_has_a_section_for_the_version_written_for_users() -> None:
    text = (REPO / "CHANGELOG.md").read_text(encoding="utf-8")
    version = PROJECT["version"]
    assert re.search(rf"^## \[{re.escape(version)}\] - \d{{4}}-\d{{2}}-\d{{2}}$", text, re.M), version
    assert re.search(r"^## \[Unreleased\]$", text, re.M)
    # for users: no issue numbers, no test or module paths
    assert not re.search(r"\bissues? \d+|#\d+\b|tests/|src/mcp_roots", text)


def test_the_version_is_the_same_in_the_package_and_its_metadata() -> None:
    import mcp_roots

    assert mcp_roots.__version__ == PROJECT["version"]
