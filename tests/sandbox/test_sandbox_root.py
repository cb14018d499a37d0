"""No privilege in a confined child, as root too: every capability set emptied before exec (bounding,
permitted, effective, inheritable, ambient), kept empty by no_new_privs. These run as root (a server in a
container, ``mcp-roots run`` under sudo) and skip, saying so, elsewhere; the protected set of an unprivileged
user (a user namespace, made in the forked child) is tried by dropping to uid 65534."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcp_roots import RootSet
from mcp_roots.sandbox import support
from tests.kit import confined, refused, unconfined

KERNEL = support()
ROOT = os.geteuid() == 0
pytestmark = [
    pytest.mark.skipif(
        not KERNEL.complete,
        reason=f"needs Landlock and the seccomp filter: {KERNEL.reason or KERNEL.filter_reason}",
    ),
    pytest.mark.skipif(not ROOT, reason="capabilities as root: this test runs as root (it is not root here)"),
]
NOBODY = 65534
SRC = Path(__file__).resolve().parents[2] / "src"


@pytest.fixture
def roots(tmp_path: Path) -> RootSet:
    return RootSet.from_paths([tmp_path])


def test_a_child_confined_as_root_holds_no_capability(roots: RootSet) -> None:
    control = unconfined("capabilities")
    assert control["ok"]
    assert control["value"]["effective"] != "0x0"  # root's child holds them all
    said = confined(roots, "capabilities")
    assert said == {
        "ok": True,
        "value": {
            "effective": "0x0",
            "permitted": "0x0",
            "inheritable": "0x0",
            "bounding": "0x0",
            "ambient": "0x0",
        },
    }
    assert confined(roots, "capabilities", write=True)["value"]["bounding"] == "0x0"  # the namespace path too


@pytest.mark.parametrize("call", ["syslog", "sethostname", "setuid"])
def test_root_powers_work_unconfined_and_are_refused_confined(roots: RootSet, call: str) -> None:
    control = unconfined(call)
    if not control["ok"]:
        pytest.skip(f"{call} fails for root here too (a container's limit): {control}")
    assert refused(confined(roots, call))
    assert refused(confined(roots, call, write=True))


def test_finit_module_answers_eperm_not_ebadf(roots: RootSet) -> None:
    control = unconfined("finit_module")
    if control.get("error") != "EBADF":
        pytest.skip(f"finit_module(-1) does not reach the capability check here: {control}")
    assert refused(confined(roots, "finit_module"))


# --- an unprivileged user: the protected set through a user namespace ------------------------------------


@pytest.fixture
def nobody_tree() -> Iterator[Path]:
    base = Path(tempfile.mkdtemp(prefix="mcp-roots-nobody-"))
    try:
        (base / "repo" / ".git" / "hooks").mkdir(parents=True)
        (base / "repo" / ".git" / "config").write_text("[core]\n")
        (base / "repo" / "src").mkdir()
        for path in [base, *base.rglob("*")]:
            os.chown(path, NOBODY, NOBODY)
        base.chmod(0o755)
        yield base / "repo"
    finally:
        shutil.rmtree(base)


def test_an_unprivileged_user_gets_the_protected_set_from_a_threaded_process(nobody_tree: Path) -> None:
    site = [p for p in sys.path if p.endswith("site-packages")]
    script = textwrap.dedent(
        f"""
        import sys, threading, time
        sys.path[:0] = {[str(SRC), *site]!r}
        from mcp_roots import RootSet
        threading.Thread(target=time.sleep, args=(5,), daemon=True).start()  # a threaded server
        repo = {str(nobody_tree)!r}
        result = RootSet.from_paths([repo]).run(
            ["sh", "-c", "id -u; echo evil >> .git/config; mv .git .g; echo ok > src/new.txt; cat src/*"],
            write=True, capture_output=True, text=True, cwd=repo,
        )
        print(result.stdout + result.stderr)
        """
    )
    python = shutil.which("python3", path="/usr/bin:/bin") or sys.executable
    out = subprocess.run(
        [python, "-I", "-c", script],
        user=NOBODY,
        group=NOBODY,
        extra_groups=[],
        capture_output=True,
        text=True,
    )
    if "Permission denied" in out.stderr and "python" in out.stderr:
        pytest.skip(f"no Python uid {NOBODY} may run here: {out.stderr.strip()}")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0] == str(NOBODY)
    assert "Read-only file system" in out.stdout
    assert "Device or resource busy" in out.stdout
    assert "\nok\n" in out.stdout
    assert (nobody_tree / ".git" / "config").read_text() == "[core]\n"


def test_root_may_still_start_a_confined_child_as_another_user(roots: RootSet, tmp_path: Path) -> None:
    # user= switches after the fork and needs CAP_SETUID: the child drops every capability after it.
    python = shutil.which("python3", path="/usr/bin:/bin")
    if python is None:
        pytest.skip("no system python3 for uid 65534 to run")
    tmp_path.chmod(0o755)
    switch = {"user": NOBODY, "group": NOBODY, "extra_groups": [], "capture_output": True, "text": True}
    ids = roots.run(["sh", "-c", "id -u; id -g"], **switch)  # type: ignore[arg-type]
    assert ids.stdout.split() == [str(NOBODY), str(NOBODY)], ids.stderr
    script = str(SRC / "mcp_roots" / "_sys" / "attempts.py")
    for attempt, expected in ((["capabilities"], '"bounding": "0x0"'), (["setuid", "0"], '"error": "EPERM"')):
        said = roots.run([python, "-I", "-S", script, *attempt], extra_read=[script], **switch)  # type: ignore[arg-type]
        assert expected in said.stdout, said.stderr
