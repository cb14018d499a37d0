"""wrap's start-up: the first child, confined to no roots, starts before wrap imports its proxy, its event
loop and its roots cache, and it is the child that answers initialize; what wrap loads to get there. Timing
is benchmarks/bench_wrap.py's; these tests hold what the figure rests on, so that a later import cannot
bring the cost back unseen.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from mcp_roots.sandbox import support
from tests.kit import LEGACY, connected, hostile_argv, kernel_refused, wrap_argv

pytestmark = pytest.mark.skipif(not support().complete, reason="needs Landlock and the seccomp filter")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # wrap runs in a process of its own


#: Runs ``mcp-roots wrap`` (the command's own entry, in this process) with a spy on the one function that
#: starts a wrapped server: what was loaded at each start, and what at the end.
SPY = """
import json, sys
from mcp_roots.wrap import _plan
starts = []
real = _plan.spawn
def spawn(*args, **kwargs):
    starts.append(sorted(sys.modules))
    return real(*args, **kwargs)
_plan.spawn = spawn
from mcp_roots.cli import main
code = main(sys.argv[2:])
with open(sys.argv[1], "w") as f:
    json.dump({"code": code, "starts": starts, "at_exit": sorted(sys.modules)}, f)
"""

#: What wrap runs after its first child has started, never before.
AFTER_THE_FIRST_START = (
    "anyio",
    "asyncio",
    "mcp_roots.wrap._proxy",
    "mcp_roots.wrap._child",
    "mcp_roots.roots._cache",
    "mcp_roots.roots._policy",
)
#: What wrap never loads to answer initialize: the SDKs, the RootsGuard facade and its adapters, the
#: other commands, the proofs and the doctor, and the schema walk (wrap's first tool call loads it).
NEVER_AT_START = (
    "mcp",
    "mcp_types",
    "fastmcp",
    "pydantic",
    "mcp_roots._rootsguard",
    "mcp_roots.adapters",
    "mcp_roots.cli._commands",
    "mcp_roots.filesystem",
    "mcp_roots.probe",
    "mcp_roots.sandbox._proof",
    "mcp_roots.sandbox._doctor",
    "mcp_roots.guard._schema",
    "platformdirs",
)


def initialize_line() -> bytes:
    params = {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}
    return (json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}) + "\n").encode()


def test_the_names_checked_are_modules_that_exist() -> None:
    # Otherwise a renamed module would make the checks below pass for nothing.
    for name in (*AFTER_THE_FIRST_START, *NEVER_AT_START):
        assert importlib.util.find_spec(name) is not None, name


def test_the_first_child_starts_before_the_proxy_and_answers_initialize(tmp_path: Path) -> None:
    ceiling = tmp_path / "ceiling"
    ceiling.mkdir()
    server = hostile_argv(tmp_path / "secret.txt", tmp_path / "plant.txt")
    report = tmp_path / "report.json"
    command = ["wrap", "--ceiling", str(ceiling), "--cache-dir", str(tmp_path / "cache"), "--", *server]
    # The host sends initialize and goes away: wrap answers it, sees the end of its input and stops.
    done = subprocess.run(
        [sys.executable, "-c", SPY, str(report), *command],
        input=initialize_line(),
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr.decode()
    answer = json.loads(done.stdout.decode().splitlines()[0])
    assert answer["id"] == 1
    assert answer["result"]["serverInfo"]["name"] == "hostile"
    seen = json.loads(report.read_text())
    assert seen["code"] == 0
    # One start: the child started before the proxy existed is the one that answered.
    assert len(seen["starts"]) == 1
    assert not set(AFTER_THE_FIRST_START) & set(seen["starts"][0])
    assert "mcp_roots.wrap._proxy" in seen["at_exit"]  # the run went through the proxy
    assert not set(NEVER_AT_START) & set(seen["at_exit"])


@pytest.mark.anyio
async def test_the_child_that_starts_first_reads_nothing_even_inside_the_roots_to_come(
    tmp_path: Path,
) -> None:
    # A server that reads its data as it starts. Started first, before wrap has even read the host's
    # initialize, it is confined to no roots: the file inside the client's roots is refused to it too; the
    # child for the client's roots (started once they are known) reads it.
    outside, a = tmp_path / "outside", tmp_path / "ceiling" / "a"
    for folder in (outside, a):
        folder.mkdir(parents=True)
    (outside / "secret.txt").write_text("SECRET")
    (a / "inside.txt").write_text("INSIDE")
    server = [
        *hostile_argv(outside / "secret.txt", outside / "plant.txt", a / "inside.txt"),
        "--read-at-start",
    ]
    async with connected(server, [str(a)]) as host:  # the control: bare, it reads both
        answer = await host.initialize()
        assert json.loads(answer["result"]["instructions"]) == {"secret": "SECRET", "inside": "INSIDE"}
    wrapped = wrap_argv([tmp_path / "ceiling"], server, "--cache-dir", str(tmp_path / "cache"))
    async with connected(wrapped, [str(a)]) as host:
        answer = await host.initialize()
        read = json.loads(answer["result"]["instructions"])
        assert kernel_refused(read["secret"])
        assert kernel_refused(read["inside"])
        assert await host.text("peek") == "INSIDE"
