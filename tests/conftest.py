"""Shared fixtures: every async test runs on asyncio and on trio (anyio's pytest plugin). And which tests
``make test`` runs alone, after the parallel run (pytest-xdist): those that race the kernel with a naive
control that must be seen to fail, or that bound wall-clock time; other workers' load would make their
controls miss or their clocks lie.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest

# `mcp-roots serve` keeps its start-up answers in the user's cache folder (and wrap its children's caches):
# the servers the tests start keep theirs in a folder of this run, removed at its end.
_CACHE = tempfile.mkdtemp(prefix="mcp-roots-tests-cache-")
os.environ["XDG_CACHE_HOME"] = _CACHE
atexit.register(shutil.rmtree, _CACHE, True)

#: What runs alone (marker ``serial``), by module: ``None`` for the whole module, else the tests whose name
#: holds one of the words. Races whose naive control must be seen to leak, and wall-clock bounds.
SERIAL: dict[str, tuple[str, ...] | None] = {
    "test_beneath_races": None,  # check-then-open controls must leak under a swap loop
    "test_broker_observations": ("swapped",),  # swap loops against the consent checks, with naive controls
    "test_broker_consent_over_time": ("swap",),  # stat and a conflict etag under a swap loop, naive control
    "test_probe_plugin": ("each_broken_server_is_caught_by_the_technique_made_for_it[swap",),  # a race
    "test_probe_hostile": ("swapped",),  # a swap loop against the scratch tree, with naive controls
    "test_filesystem_hostile": None,  # hostile globs answered in 1 s; another client delayed <= 100 ms
    "test_filesystem_limits": ("48_kb",),  # the bounded diff answers within 5 s
    # serve --http: deadlines of 1-2 s, a budget's wait of 0.5 s, and memory traced while clients stall
    "test_serve_http_limits": None,
    # the control: the official server applies client roots in the background after `initialized`, and its
    # first call must already see them
    "test_filesystem_diff": ("widen_the_official_server",),
    "test_wrap_interop": ("probe",),  # the control: the official server loses a swap race bare
    "test_wrap": ("cancelled", "drain"),  # a call that must end within a drain; progress that must stop
    "test_readme_commands": ("probe",),  # the README's probe line: a call unanswered for 3 s is a hang
}


#: Modules whose rows over these transports start the server in a process of its own, with its own event
#: loop: their trio row would differ from the asyncio row only in the SDK client's backend (the SDK's code,
#: not ours), so it is not collected. Their in-memory rows, where the server runs on the test's loop, keep
#: both backends, and so do the mcp 1.x stdio rows, whose server runs on the test's backend (`--backend`);
#: an HTTP server runs on uvicorn's asyncio loop whatever the client's backend.
SERVER_IN_ITS_OWN_PROCESS: dict[str, tuple[str, ...]] = {
    "test_guard_transports": ("stdio", "http"),
    "test_filesystem": ("stdio", "http"),
    "test_policy": ("stdio",),  # examples/file_server.py on the SDK's default (asyncio) loop
    "test_adapter_mcp1": ("http",),
}


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


#: Tests (by module, then name) that talk only to a server in a process of its own, with no transport in
#: their ids: their trio row is not collected either, for the same reason.
SERVER_PROCESS_ONLY: dict[str, tuple[str, ...]] = {
    "test_server": (
        "test_stateless_http_uses_the_fallback",
        "test_json_response_http_reads_and_sees_a_roots_change",
    ),
    "test_filesystem": ("test_search_and_tree_are_capped_python_client",),
    "test_consent": (
        "test_over_stdio",
        "test_over_streamable_http",
        "test_grants_are_kept_per_authenticated_caller",
    ),
    "test_consent_read": ("test_over_stdio", "test_over_streamable_http"),
}


def _trio_client_of_a_server_process(item: pytest.Item) -> bool:
    module = getattr(item, "module", None)
    callspec = getattr(item, "callspec", None)
    if module is None or callspec is None or callspec.params.get("anyio_backend") != "trio":
        return False
    name = module.__name__.rpartition(".")[2]
    if getattr(item, "originalname", None) in SERVER_PROCESS_ONLY.get(name, ()):
        return True
    transports = SERVER_IN_ITS_OWN_PROCESS.get(name, ())
    ids = callspec.id.split("-")
    return any(transport in ids for transport in transports)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """The run of ``-m serial`` alone collects only the modules that hold serial tests (collecting the path
    table's 13,000 rows only to deselect them costs seconds)."""
    if config.getoption("markexpr", "") != "serial" or collection_path.suffix != ".py":
        return None
    if not collection_path.name.startswith("test_"):
        return None
    return collection_path.stem not in SERIAL or None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    dropped = [item for item in items if _trio_client_of_a_server_process(item)]
    if dropped:
        items[:] = [item for item in items if not _trio_client_of_a_server_process(item)]
        config.hook.pytest_deselected(items=dropped)
    for item in items:
        module = getattr(item, "module", None)
        if module is None:
            continue
        name = module.__name__.rpartition(".")[2]
        if name not in SERIAL:
            continue
        words = SERIAL[name]
        if words is None or any(word in item.name for word in words):
            item.add_marker(pytest.mark.serial)


#: The report section a test adds (``request.node.add_report_section("call", REPORT_SECTION, text)``) for the
#: run's output whether it passes or not: the official conformance suite's report.
REPORT_SECTION = "conformance"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    shown = [
        (report.nodeid, text)
        for outcome in ("passed", "failed")
        for report in terminalreporter.stats.get(outcome, [])
        if getattr(report, "when", None) == "call"
        for name, text in getattr(report, "sections", [])
        if name.endswith(f" {REPORT_SECTION} call")
    ]
    if shown:
        terminalreporter.section("the official MCP conformance suite")
        for nodeid, text in shown:
            terminalreporter.write_line(f"{nodeid}\n{text}")
