"""Shared fixtures: every async test runs on asyncio and on trio (anyio's pytest plugin). And which tests
``make test`` runs alone, after the parallel run (pytest-xdist): those that race the kernel with a naive
control that must be seen to fail, or that bound wall-clock time; other workers' load would make their
controls miss or their clocks lie.
"""

from __future__ import annotations

import pytest

#: Modules run alone (marker ``serial``): races with a leaking control, or wall-clock bounds.
SERIAL_MODULES = frozenset(
    {
        "test_beneath_races",  # check-then-open controls must leak under a swap loop
        "test_broker_observations",  # swap loops against the broker's consent checks, with naive controls
        "test_probe_cli",  # the probe must catch a check-then-open race in a broken server
        "test_probe_plugin",  # the same race, through the plugin
        "test_filesystem_hostile",  # hostile globs answered in 1 s; another client delayed <= 100 ms
        "test_filesystem_limits",  # the bounded diff answers within 5 s
        "test_policy",  # an expensive client answer never stalls the loop of another connection
        "test_hostile_client",  # each hostile answer is refused within its bound
    }
)


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        module = getattr(item, "module", None)
        if module is not None and module.__name__.rpartition(".")[2] in SERIAL_MODULES:
            item.add_marker(pytest.mark.serial)
