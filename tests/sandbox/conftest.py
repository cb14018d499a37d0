"""The sandbox tests' one fixture: the fallback layers alone (Landlock and the filter, no namespaces), as
where the kernel refuses namespaces, for the tests that pin what those layers hold by themselves."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mcp_roots.sandbox import mount_namespace


@pytest.fixture
def without_namespaces(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Turn the namespaces off for this test and the processes it starts (``MCP_ROOTS_NO_NAMESPACES``)."""
    monkeypatch.setenv("MCP_ROOTS_NO_NAMESPACES", "1")
    mount_namespace.cache_clear()
    yield
    monkeypatch.undo()
    mount_namespace.cache_clear()
