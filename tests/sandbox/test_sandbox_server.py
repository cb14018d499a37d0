"""A server started with RootsGuard(confine=True), over stdio with the SDK's own client: an unguarded tool
cannot read outside the ceiling (the kernel refuses), guarded tools and guard.run keep working.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from mcp_roots.sandbox import support
from tests.kit import text_of

pytestmark = pytest.mark.anyio
KERNEL = support()
SERVER = Path(__file__).resolve().parents[1] / "confined_server.py"
SECRET = "TOP SECRET"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the server is a subprocess; the client side's backend is not what is tested


@contextlib.asynccontextmanager
async def server(
    mode: str, ceiling: Path
) -> AsyncIterator[Callable[[str, Path], Awaitable[tuple[bool, str]]]]:
    params = StdioServerParameters(command=sys.executable, args=[str(SERVER), mode, str(ceiling)])
    async with Client(params, mode="legacy") as client:

        async def call(tool: str, path: Path) -> tuple[bool, str]:
            result = await client.call_tool(tool, {"path": str(path)})
            return bool(result.is_error), text_of(result)

        yield call


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path]:
    base = tmp_path.resolve()
    (base / "ceiling").mkdir()
    (base / "outside").mkdir()
    (base / "ceiling" / "inside.txt").write_text("inside content")
    (base / "outside" / "secret.txt").write_text(SECRET)
    return base / "ceiling", base / "outside" / "secret.txt"


@pytest.mark.skipif(not KERNEL.available, reason=f"no Landlock here: {KERNEL.reason}")
async def test_a_confined_server_cannot_read_outside_its_ceiling_from_an_unguarded_tool(
    tree: tuple[Path, Path],
) -> None:
    ceiling, secret = tree
    inside = ceiling / "inside.txt"
    async with server("unconfined", ceiling) as call:
        # The naive control: the same server unconfined leaks through the unguarded tool.
        assert await call("read_unguarded", secret) == (False, SECRET)
    async with server("confined", ceiling) as call:
        is_error, text = await call("read_unguarded", secret)
        assert is_error
        assert text == "Error executing tool read_unguarded"  # the SDK's words for the kernel's EACCES
        assert await call("read_unguarded", inside) == (False, "inside content")
        # Guarded tools keep working inside, and refuse outside (the guard's message, not the kernel's).
        assert await call("read_guarded", inside) == (False, "inside content")
        is_error, text = await call("read_guarded", secret)
        assert is_error
        assert "outside the allowed roots" in text
        # guard.run: the child gets the call's roots.
        assert await call("cat", inside) == (False, "exit 0: inside content")
        is_error, text = await call("cat", secret)
        assert text.startswith("exit 1: ")
        assert "Permission denied" in text
        assert SECRET not in text


THREADED = """
import threading, sys
from mcp_roots import RootsGuard, SandboxUnavailable
stop = threading.Event()
worker = threading.Thread(target=stop.wait, args=(30,))
worker.start()
try:
    RootsGuard(roots=[sys.argv[1]], confine=True)
    print("CONFINED")
except SandboxUnavailable as exc:
    print("REFUSED", exc)
finally:
    stop.set()
try:
    open(sys.argv[2]).read()
    print("UNCONFINED")
except PermissionError:
    print("CONFINED ANYWAY")
"""


@pytest.mark.skipif(not KERNEL.available, reason=f"no Landlock here: {KERNEL.reason}")
def test_confine_refuses_when_threads_already_exist(tree: tuple[Path, Path]) -> None:
    ceiling, secret = tree
    proc = subprocess.run(
        [sys.executable, "-c", THREADED, str(ceiling), str(secret)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("REFUSED cannot confine the server process: it already has 2 threads"), proc
    assert "before anything starts a thread" in lines[0]
    assert lines[1] == "UNCONFINED"  # refused whole: nothing was half-applied


def test_confine_needs_something_to_confine_to(tmp_path: Path) -> None:
    code = (
        "from mcp_roots import RootsGuard, ConfigError\n"
        "try:\n    RootsGuard(roots=[], confine=True)\nexcept ConfigError as exc:\n    print(exc)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert "needs a ceiling or fallback roots" in proc.stdout, proc


HOME_SCRIPT = """
import sys
from mcp_roots import RootsGuard
RootsGuard(roots=[sys.argv[1]], ceiling=sys.argv[1], confine=sys.argv[3] == "confined")
try:
    print(open(sys.argv[2]).read())
except PermissionError:
    print("REFUSED")
"""


@pytest.mark.skipif(not KERNEL.available, reason=f"no Landlock here: {KERNEL.reason}")
def test_a_server_started_from_home_does_not_grant_home_through_sys_path(tmp_path: Path) -> None:
    home = tmp_path.resolve()
    (home / "project").mkdir()
    (home / ".ssh").mkdir()
    (home / ".ssh" / "id_rsa").write_text(SECRET)
    script = home / "server.py"  # run from $HOME: sys.path[0] and __main__'s directory are $HOME
    script.write_text(HOME_SCRIPT)
    env = {**os.environ, "HOME": str(home)}

    def start(mode: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, str(script), str(home / "project"), str(home / ".ssh" / "id_rsa"), mode]
        return subprocess.run(
            argv, capture_output=True, text=True, timeout=60, check=False, env=env, cwd=home
        )

    assert start("unconfined").stdout.strip() == SECRET  # the naive control
    confined = start("confined")
    assert confined.stdout.strip() == "REFUSED", confined
    assert "not granting" in confined.stderr


@pytest.mark.skipif(sys.platform != "linux", reason="the simulation is a Linux seccomp filter")
def test_confine_without_landlock_refuses_to_start(tmp_path: Path) -> None:
    code = (
        "import sys\nfrom mcp_roots import RootsGuard, SandboxUnavailable\n"
        "try:\n    RootsGuard(roots=[sys.argv[1]], confine=True)\n    print('STARTED')\n"
        "except SandboxUnavailable as exc:\n    print(exc)"
    )
    without_landlock = Path(__file__).resolve().parents[1] / "without_landlock.py"
    argv = [sys.executable, str(without_landlock), "EPERM", sys.executable, "-c", code, str(tmp_path)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert proc.stdout.startswith(
        "cannot confine the server process: the Landlock system calls are refused"
    ), proc
