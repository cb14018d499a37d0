"""A server's whole tree ends when wrap retires it: a daemon it detached (setsid, a second fork) reading a
root the client then revokes is gone once the narrowed call is answered, and all of them when wrap exits."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import anyio
import pytest

from mcp_roots.sandbox import mount_namespace
from tests.kit import connected, hostile_argv, wrap_argv

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(sys.platform != "linux", reason="wrap is Linux only"),
    pytest.mark.skipif(mount_namespace() is not None, reason=f"no namespaces here: {mount_namespace()}"),
]


def daemons(mark: str) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        try:
            cmdline = Path(f"/proc/{name}/cmdline").read_bytes() if name.isdigit() else b""
            state = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()[0] if cmdline else "Z"
        except OSError:
            continue
        if mark.encode() in cmdline and state != "Z" and b"hostile_stdio_server" not in cmdline:
            found.append(int(name))
    return found


async def test_a_detached_daemon_reading_a_revoked_root_ends_with_the_retired_child(tmp_path: Path) -> None:
    ceiling = tmp_path / "ceiling"
    for name in ("a", "b"):
        (ceiling / name).mkdir(parents=True)
    (ceiling / "b" / "fixed.txt").write_text("inside b")
    (tmp_path / "outside").mkdir()
    mark = f"mcp-roots-wrap-daemon-{os.getpid()}-{time.monotonic_ns()}"
    server = [
        *hostile_argv(tmp_path / "outside" / "s", tmp_path / "outside" / "p", ceiling / "b" / "fixed.txt"),
        "--daemon",
        mark,
    ]
    wrapped = wrap_argv([ceiling], server, "--cache-dir", str(tmp_path / "cache"))
    try:
        async with connected(wrapped, [str(ceiling / "a"), str(ceiling / "b")]) as host:
            await host.initialize()
            assert await host.text("peek") == "inside b"
            with anyio.fail_after(60):  # a bound for a loaded machine, not a measure
                while len(daemons(mark)) != 1:  # noqa: ASYNC110 - processes, not tasks
                    await anyio.sleep(0.05)
            old = daemons(mark)  # the daemon of the child confined to a and b, reading b
            await host.set_roots([str(ceiling / "a")])
            assert "inside b" not in await host.text("peek")
            # The old child was retired: its daemon too, whatever the new child's own daemon is doing.
            with anyio.fail_after(60):
                while set(old) & set(daemons(mark)):  # noqa: ASYNC110 - processes, not tasks
                    await anyio.sleep(0.05)
        assert daemons(mark) == []  # wrap exited: every child's tree with it
    finally:
        for pid in daemons(mark):
            os.kill(pid, 9)
