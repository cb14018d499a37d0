"""The srt backend (Anthropic's sandbox runtime) on Linux, through the same promises as the native one: each
attempt is first seen to work unconfined (the control), then refused under srt."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcp_roots import RootSet, sandbox
from mcp_roots.errors import SandboxUnavailable
from mcp_roots.sandbox import _srt
from tests.kit import SRT_ENV, srt_installed, srt_tmp

SECRET = "srt secret 5b1e"
#: A marker no other process has in its command line: the detached daemon's sleep.
MARKER = f"7200.{os.getpid()}"


@pytest.fixture(autouse=True)
def srt(monkeypatch: pytest.MonkeyPatch) -> None:
    srt_installed()
    for name, value in SRT_ENV.items():
        monkeypatch.setenv(name, value)
    _srt.find_srt.cache_clear()


@pytest.fixture
def tmp_path() -> Iterator[Path]:
    with srt_tmp() as folder:  # srt cannot grant a folder under /dev/shm, where make test's tmp_path lies
        yield folder


@pytest.fixture
def tree(tmp_path: Path) -> dict[str, Path]:
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / ".git" / "hooks").mkdir(parents=True)
    (root / ".git" / "config").write_text("[core]\n")
    (root / "inside.txt").write_text("inside")
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET)
    return {"root": root, "outside": outside}


def sh(tree: dict[str, Path], script: str, **options: object) -> subprocess.CompletedProcess[str]:
    return sandbox.run(
        [str(tree["root"])],
        ["/bin/sh", "-c", script],
        sandbox="srt",
        capture_output=True,
        text=True,
        timeout=120,
        **options,  # type: ignore[arg-type]
    )


def test_the_runtime_is_found_at_the_tested_version() -> None:
    runtime = _srt.find_srt()
    assert isinstance(runtime, _srt.Runtime)
    assert runtime.version == _srt.SRT_TESTED


def test_a_missing_or_old_srt_is_one_line_naming_the_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("MCP_ROOTS_SRT", str(tmp_path / "no-srt"))
    monkeypatch.setenv("PATH", str(tmp_path))
    _srt.find_srt.cache_clear()
    with pytest.raises(SandboxUnavailable) as missing:
        sandbox.run([str(tmp_path)], ["true"], sandbox="srt", network=False)
    assert "\n" not in str(missing.value)
    assert "npm install -g @anthropic-ai/sandbox-runtime@0.0.83" in str(missing.value)
    old = tmp_path / "srt"
    old.write_text("#!/bin/sh\necho 0.0.12\n")
    old.chmod(0o755)
    monkeypatch.setenv("MCP_ROOTS_SRT", str(old))
    _srt.find_srt.cache_clear()
    reason = _srt.find_srt()
    assert isinstance(reason, str)
    assert "0.0.12" in reason
    assert "too old" in reason


def test_settings_deny_every_read_and_allow_back_only_the_grant(tree: dict[str, Path]) -> None:
    settings = _srt.settings([str(tree["root"])], write=True, network=False, program="/usr/bin/python3")
    assert settings["filesystem"]["denyRead"] == ["/"]
    allowed = settings["filesystem"]["allowRead"]
    assert str(tree["root"]) in allowed
    assert not any(path.startswith(str(tree["outside"])) for path in allowed)
    assert settings["filesystem"]["allowWrite"] == [str(tree["root"])]
    assert str(tree["root"] / ".git" / "config") in settings["filesystem"]["denyWrite"]
    assert settings["network"]["allowedDomains"] == []
    assert _srt.settings([str(tree["root"])], write=False, network=False)["filesystem"]["allowWrite"] == []


def test_reads_and_writes_outside_are_refused(tree: dict[str, Path]) -> None:
    secret, plant = tree["outside"] / "secret.txt", tree["outside"] / "plant.txt"
    script = f"cat {secret}; echo planted > {plant}; cat {tree['root']}/inside.txt"
    control = subprocess.run(["/bin/sh", "-c", script], capture_output=True, text=True, check=False)
    assert SECRET in control.stdout
    assert plant.read_text() == "planted\n"
    plant.unlink()
    confined = sh(tree, script, write=True, network=False)
    assert SECRET not in confined.stdout
    assert "inside" in confined.stdout
    assert not plant.exists()


def test_the_settings_file_is_private_and_outside_the_roots(tree: dict[str, Path]) -> None:
    process = sandbox.popen(
        [str(tree["root"])], ["/bin/sleep", "30"], sandbox="srt", network=False, stdout=subprocess.PIPE
    )
    try:
        argv = process.args
        assert isinstance(argv, list)
        path = Path(argv[argv.index("--settings") + 1])
        assert (path.stat().st_mode & 0o777) == 0o600
        assert (path.parent.stat().st_mode & 0o777) == 0o700
        assert not path.resolve().is_relative_to(tree["root"].resolve())
    finally:
        process.kill()
        process.wait()


def test_the_protected_set_holds_in_a_writable_root(tree: dict[str, Path]) -> None:
    config = tree["root"] / ".git" / "config"
    confined = sh(
        tree,
        f"echo '[core] fsmonitor = evil' >> {config}; echo x > {tree['root']}/ok",
        write=True,
        network=False,
    )
    assert config.read_text() == "[core]\n"
    assert (tree["root"] / "ok").read_text() == "x\n"
    assert confined.returncode == 0


def test_a_read_only_grant_writes_nothing(tree: dict[str, Path]) -> None:
    sh(tree, f"echo x > {tree['root']}/new", write=False, network=False)
    assert not (tree["root"] / "new").exists()


def _fetch(url: str) -> str:
    return (
        "import urllib.request\n"
        "try:\n"
        f"    urllib.request.urlopen({url!r}, timeout=30).read(1)\n"
        "    print('REACHED')\n"
        "except Exception as exc:\n"
        "    print('REFUSED', type(exc).__name__, exc)\n"
    )


def _intercepted(host: str) -> list[str]:
    # srt never dials a permitted name that resolves to this host's own or a loopback address: where the
    # registry is answered by an interception on this machine (as in this project's CI), its address is
    # allowed as the literal srt asks for (the name must still match; another name at the same address
    # stays refused).
    address = socket.gethostbyname(host)
    local = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True, check=False).stdout
    return [f"{address}:443"] if f" {address}/" in local or address.startswith("127.") else []


def test_allow_domain_lets_the_registry_through_and_refuses_another_host(tree: dict[str, Path]) -> None:
    allowed, other = "https://registry.npmjs.org/is-number", "https://pypi.org/simple/six/"
    for url in (allowed, other):  # the control: both are reachable unconfined
        bare = subprocess.run(
            [sys.executable, "-c", _fetch(url)], capture_output=True, text=True, check=False
        )
        assert "REACHED" in bare.stdout, bare.stdout + bare.stderr
    domains = ["registry.npmjs.org", *_intercepted("registry.npmjs.org")]
    said = {
        url: sandbox.run(
            [str(tree["root"])],
            ["/usr/bin/python3", "-c", _fetch(url)],
            sandbox="srt",
            allow_domains=domains,
            capture_output=True,
            text=True,
            timeout=120,
        )
        for url in (allowed, other)
    }
    assert "REACHED" in said[allowed].stdout, said[allowed].stdout + said[allowed].stderr
    assert "REFUSED" in said[other].stdout, said[other].stdout + said[other].stderr


def test_a_root_under_dev_is_refused_in_words() -> None:
    with pytest.raises(SandboxUnavailable, match="a /dev of its own"):
        sandbox.run(["/dev/shm"], ["true"], sandbox="srt", network=False)


def test_network_without_named_hosts_is_refused_in_words() -> None:
    with pytest.raises(SandboxUnavailable, match="--allow-domain"):
        sandbox.run(["/tmp"], ["true"], sandbox="srt", network=True)
    with pytest.raises(SandboxUnavailable, match="srt backend"):
        sandbox.run(["/tmp"], ["true"], sandbox="native", allow_domains=["example.com"])


def test_a_unix_socket_outside_is_refused(tree: dict[str, Path]) -> None:
    path = tree["outside"] / "daemon.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen(4)
    accepted: list[bytes] = []

    def serve() -> None:
        while True:
            try:
                connection, _ = server.accept()
            except OSError:
                return
            with connection:
                accepted.append(connection.recv(100))

    threading.Thread(target=serve, daemon=True).start()
    script = (
        "import socket, sys\n"
        "try:\n"
        "    s = socket.socket(socket.AF_UNIX)\n"
        f"    s.connect({str(path)!r}); s.sendall(b'hello'); print('CONNECTED')\n"
        "except OSError as exc:\n"
        "    print('REFUSED', exc)\n"
    )
    try:
        bare = subprocess.run(["/usr/bin/python3", "-c", script], capture_output=True, text=True, check=False)
        assert "CONNECTED" in bare.stdout
        confined = sandbox.run(
            [str(tree["root"])],
            ["/usr/bin/python3", "-c", script],
            sandbox="srt",
            network=False,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert "REFUSED" in confined.stdout, confined.stdout + confined.stderr
        assert accepted == [b"hello"]
    finally:
        server.close()


def _marked() -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as handle:
                    if MARKER.encode() in handle.read():
                        found.append(int(entry))
            except OSError:
                continue
    return found


def test_a_detached_daemon_ends_with_the_child(tree: dict[str, Path]) -> None:
    beat = tree["root"] / "beat"
    # setsid + a second fork: the daemon leaves the child's session and process group.
    script = f"setsid sh -c 'sleep {MARKER} & while :; do date >> {beat}; sleep 0.2; done' & exec sleep 3600"
    process = sandbox.popen(
        [str(tree["root"])], ["/bin/sh", "-c", script], sandbox="srt", write=True, network=False
    )
    try:
        for _ in range(600):  # the daemon is up: its sleep shows in /proc and its beats land
            if _marked() and beat.exists():
                break
            time.sleep(0.1)
        assert _marked(), "the daemon never started"
    finally:
        process.kill()
        process.wait()
    for _ in range(600):  # gone with the child (a bound for a loaded machine, not a measure)
        if not _marked():
            break
        time.sleep(0.1)
    assert _marked() == []


def test_rootset_and_auto_pick_the_backend(tree: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    roots = RootSet.from_paths([str(tree["root"])])
    done = roots.run(
        ["/bin/cat", str(tree["root"] / "inside.txt")],
        sandbox="srt",
        network=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.stdout == "inside"
    assert _srt.choose("auto") == ("native" if sandbox.support().complete else "srt")
    assert _srt.choose("srt") == "srt"
    with pytest.raises(ValueError, match="expected one of"):
        _srt.choose("docker")
    monkeypatch.setattr(sys, "platform", "win32")
    with pytest.raises(SandboxUnavailable, match="Windows"):
        _srt.choose("auto")


def test_doctor_proves_every_srt_promise_live() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mcp_roots", "doctor", "--sandbox", "srt"],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    proven = [line for line in done.stdout.splitlines() if line.startswith("  [")]
    assert len(proven) == 6
    assert all(line.startswith("  [held]") for line in proven), done.stdout


def test_srt_leaves_nothing_in_a_root_and_starts_beside_an_existing_claude_folder(
    tree: dict[str, Path],
) -> None:
    # srt makes placeholders for its own denies in a writable working folder: never in the user's root.
    (tree["root"] / ".claude").mkdir()
    (tree["root"] / ".claude" / "settings.json").write_text("{}")
    before = sorted(p.name for p in tree["root"].iterdir())
    process = sandbox.popen(
        [str(tree["root"])],
        ["/bin/sh", "-c", "pwd; echo started; exec sleep 30"],
        sandbox="srt",
        write=True,
        network=False,
        cwd=tree["root"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline().strip() == str(tree["root"])  # the folder asked for
        assert process.stdout.readline().strip() == "started"
        assert sorted(p.name for p in tree["root"].iterdir()) == before
    finally:
        process.kill()
        process.wait()
    assert (tree["root"] / ".claude" / "settings.json").read_text() == "{}"
