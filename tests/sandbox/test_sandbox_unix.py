"""Network on does not open the host's unix sockets: a stand-in daemon listening on a socket file outside the
roots and on an abstract name is reached by an unconfined child (the control), not by a confined one with
the network on, unless the operator names the socket file (``allow_unix``); TCP on loopback still works."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcp_roots import RootSet
from mcp_roots.sandbox import mount_namespace, support

KERNEL = support()
pytestmark = [
    pytest.mark.skipif(not KERNEL.complete, reason="needs Landlock and the seccomp filter"),
    pytest.mark.skipif(mount_namespace() is not None, reason=f"no namespaces here: {mount_namespace()}"),
]

CONNECT = """
import socket, sys
family, where = sys.argv[1], sys.argv[2]
if family == "tcp":
    s = socket.create_connection(("127.0.0.1", int(where)), timeout=10)
else:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(where if family == "path" else "\\0" + where)
s.sendall(b"hello")
print(s.recv(100).decode())
"""


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[dict[str, str]]:
    """A stand-in daemon that answers "served" on a socket file, an abstract name and a TCP port."""
    folder = tmp_path / "run"
    folder.mkdir()
    path = str(folder / "daemon.sock")
    abstract = f"mcp-roots-test-{os.getpid()}"
    listeners = []
    for family, address in (
        (socket.AF_UNIX, path),
        (socket.AF_UNIX, "\0" + abstract),
        (socket.AF_INET, ("127.0.0.1", 0)),
    ):
        listener = socket.socket(family, socket.SOCK_STREAM)
        listener.bind(address)
        listener.listen(8)
        listeners.append(listener)
    serving = True

    def serve() -> None:
        import select

        while serving:
            ready, _, _ = select.select(listeners, [], [], 0.1)
            for listener in ready:
                connection, _ = listener.accept()
                with connection:
                    connection.recv(100)
                    connection.sendall(b"served")

    import threading

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield {"path": path, "abstract": abstract, "tcp": str(listeners[2].getsockname()[1])}
    finally:
        serving = False
        thread.join()
        for listener in listeners:
            listener.close()


def _try(
    argv_roots: RootSet | None, family: str, where: str, **options: Any
) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-c", CONNECT, family, where]
    if argv_roots is None:
        return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    return argv_roots.run(argv, capture_output=True, text=True, timeout=60, **options)


@pytest.mark.parametrize("family", ["path", "abstract"])
def test_network_on_reaches_no_host_unix_socket(tmp_path: Path, daemon: dict[str, str], family: str) -> None:
    (tmp_path / "root").mkdir()
    roots = RootSet.from_paths([tmp_path / "root"])
    assert _try(None, family, daemon[family]).stdout.strip() == "served"  # the control
    confined = _try(roots, family, daemon[family], network=True)
    assert confined.returncode != 0
    assert "served" not in confined.stdout
    # TCP and UDP are the network: loopback TCP stays reachable with the network on.
    assert _try(roots, "tcp", daemon["tcp"], network=True).stdout.strip() == "served"


def test_a_socket_file_named_by_the_operator_is_reachable(tmp_path: Path, daemon: dict[str, str]) -> None:
    (tmp_path / "root").mkdir()
    roots = RootSet.from_paths([tmp_path / "root"])
    done = _try(roots, "path", daemon["path"], network=True, allow_unix=[daemon["path"]])
    assert done.stdout.strip() == "served", done.stderr
    with pytest.raises(ValueError, match="not a unix socket"):
        roots.run(["true"], allow_unix=[str(tmp_path / "root")])
