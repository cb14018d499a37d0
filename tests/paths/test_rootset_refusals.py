"""What a refusal tells a client: the same sentence for every path outside the roots, whether it exists,
is a file used as a directory, a symlink out or a procfs link; the precise reason in the log only. And
roots that could forge a line of MCP_ROOTS_PATHS (a control character in the path) are refused."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mcp_roots import InvalidPath, InvalidRootURI, PathOutsideRoots, Root, RootSet
from mcp_roots._sys import linux


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "root").mkdir()
    (tmp_path / "outside" / ".ssh").mkdir(parents=True)
    (tmp_path / "outside" / ".ssh" / "id_rsa").write_text("KEY")
    os.symlink(tmp_path / "outside" / ".ssh", tmp_path / "root" / "keys")
    return tmp_path


def refusal(roots: RootSet, path: str | Path) -> str:
    with pytest.raises(PathOutsideRoots) as info:
        roots.resolve(path)
    return str(info.value).replace(str(path), "<path>")


def naive_resolve(roots: RootSet, path: str) -> str:
    """The control: what a guard that reports the resolution error itself would say (the old messages)."""
    try:
        real = os.path.realpath(path, strict=True)
    except OSError as exc:
        return f"{path!r} cannot be resolved: {exc.strerror}"
    return f"{path!r} is outside the allowed roots" if not roots.contains(real) else "inside"


def test_existing_and_missing_outside_paths_are_refused_with_the_same_text(tree: Path) -> None:
    roots = RootSet.from_paths([tree / "root"])
    ssh = tree / "outside" / ".ssh"
    probes = [ssh / "id_rsa" / "x", ssh / "nope" / "x", ssh / "id_rsa", ssh / "nope", tree / "nothing" / "x"]
    # The naive control tells them apart: a client could map what exists outside.
    naive = {naive_resolve(roots, str(p)).replace(str(p), "<path>") for p in probes}
    assert len(naive) > 1, "the control must show the oracle, or this test proves nothing"
    texts = {refusal(roots, p) for p in probes}
    assert len(texts) == 1, texts
    (text,) = texts
    assert text == f"Access denied: '<path>' is outside the allowed roots ({tree / 'root'})"


def test_the_operations_refuse_outside_paths_with_the_same_text(tree: Path) -> None:
    roots = RootSet.from_paths([tree / "root"])
    ssh = tree / "outside" / ".ssh"
    texts = set()
    for path in [ssh / "id_rsa" / "x", ssh / "nope" / "x", ssh / "id_rsa", tree / "root" / "keys" / "id_rsa"]:
        for op in (roots.read_bytes, roots.stat, roots.listdir):
            with pytest.raises(PathOutsideRoots) as info:
                op(path)
            texts.add(str(info.value).replace(str(path), "<path>"))
    assert texts == {f"Access denied: '<path>' is outside the allowed roots ({tree / 'root'})"}
    roots.close()


def test_a_symlink_out_is_refused_without_naming_its_target(tree: Path) -> None:
    roots = RootSet.from_paths([tree / "root"])
    os.symlink(tree / "outside" / ".ssh" / "id_rsa", tree / "root" / "final")
    for action in (
        lambda: roots.resolve(tree / "root" / "keys" / "id_rsa"),
        lambda: roots.write_text(tree / "root" / "final", "x"),
        lambda: roots.read_text(tree / "root" / "final"),
    ):
        with pytest.raises(PathOutsideRoots) as info:
            action()
        assert "outside/.ssh" not in str(info.value)
    assert (tree / "outside" / ".ssh" / "id_rsa").read_text() == "KEY"


@pytest.mark.skipif(linux.PROC_DEV is None, reason="procfs is Linux")
def test_procfs_refusals_do_not_name_the_server_pid() -> None:
    roots = RootSet.from_paths(["/"])
    for path in ["/proc/self/fd/0", "/proc/self/root/etc/passwd", "/proc/self/cwd"]:
        with pytest.raises(PathOutsideRoots) as info:
            roots.resolve(path)
        assert str(os.getpid()) not in str(info.value)


def test_the_precise_reason_goes_to_the_debug_log(tree: Path, caplog: pytest.LogCaptureFixture) -> None:
    roots = RootSet.from_paths([tree / "root"])
    with caplog.at_level(logging.DEBUG, logger="mcp_roots"), pytest.raises(PathOutsideRoots):
        roots.resolve(tree / "outside" / ".ssh" / "id_rsa" / "x")
    assert any("not a directory" in r.getMessage() and r.levelno == logging.DEBUG for r in caplog.records)


@pytest.mark.parametrize("char", ["\n", "\r", "\t", "\x1b", "\x7f"])
def test_a_root_with_a_control_character_is_refused(tmp_path: Path, char: str) -> None:
    evil = tmp_path / f"a{char}/etc"
    evil.mkdir(parents=True)
    with pytest.raises(InvalidPath, match="control character"):
        RootSet.from_paths([evil])
    with pytest.raises(InvalidPath, match="control character"):
        Root.from_path(evil)
    with pytest.raises(InvalidPath, match="control character"):
        Root(evil, "file:///x")
    encoded = "file://" + str(evil).replace(char, f"%{ord(char):02X}")
    with pytest.raises((InvalidPath, InvalidRootURI)):
        RootSet.from_uris([encoded])
    lenient = RootSet.from_uris([encoded, tmp_path.as_uri()], strict=False)
    assert lenient.as_env()["MCP_ROOTS_PATHS"] == str(tmp_path), "no line of MCP_ROOTS_PATHS is forged"


def test_a_newline_root_would_forge_a_line_without_the_rule(tmp_path: Path) -> None:
    """The control: the same directory, joined the way as_env() joins paths, makes two lines."""
    evil = tmp_path / "a\n/etc"
    evil.mkdir(parents=True)
    assert len("\n".join([str(evil)]).splitlines()) == 2


# --- the strategy chosen once, from the environment ------------------------------------------------------


@pytest.mark.parametrize("name", ["openat2", "walk", "walk-no-opath", "bogus"])
def test_mcp_roots_resolve_chooses_the_strategy_at_import(tmp_path: Path, name: str) -> None:
    code = (
        "import mcp_roots, sys; from mcp_roots.paths import _beneath; "
        "r = mcp_roots.RootSet.from_paths([sys.argv[1]]); "
        "print(_beneath.strategy().name, r.read_text('f'), _beneath.self_checking())"
    )
    (tmp_path / "f").write_text("inside")
    env = {**os.environ, "MCP_ROOTS_RESOLVE": name, "MCP_ROOTS_SELF_CHECK": "1"}
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    chosen, content, checking = done.stdout.split()
    assert content == "inside"
    assert checking == "True", "MCP_ROOTS_SELF_CHECK=1 turns the self-check on"
    if name == "bogus":
        assert "not one of" in done.stderr
        assert chosen == ("openat2" if linux.OPENAT2 is not None else "walk")
    elif name != "openat2" or linux.OPENAT2 is not None:
        assert chosen == name


# --- renameat2 (for broker's no-replace rename) -----------------------------------------------------------


@pytest.mark.skipif(linux.OPENAT2 is None, reason="renameat2's number is known on Linux x86_64/aarch64")
def test_renameat2_exchange_and_noreplace(tmp_path: Path) -> None:
    (tmp_path / "a").write_text("A")
    (tmp_path / "b").write_text("B")
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        linux.renameat2(fd, "a", fd, "b", linux.RENAME_EXCHANGE)
        assert (tmp_path / "a").read_text() == "B"
        with pytest.raises(FileExistsError):
            linux.renameat2(fd, "a", fd, "b", linux.RENAME_NOREPLACE)
        linux.renameat2(fd, "a", fd, "c", linux.RENAME_NOREPLACE)
        assert (tmp_path / "c").read_text() == "B"
    finally:
        os.close(fd)


def test_rename_without_replace_refuses_an_existing_destination(tmp_path: Path) -> None:
    (tmp_path / "a").write_text("A")
    (tmp_path / "b").write_text("B")
    roots = RootSet.from_paths([tmp_path])
    with pytest.raises(FileExistsError):
        roots.rename("a", "b", replace=False)
    roots.rename("a", "c", replace=False)
    assert (tmp_path / "c").read_text() == "A"
    assert (tmp_path / "b").read_text() == "B"
    roots.close()


def test_a_refusal_names_the_first_three_roots_then_how_many_more_and_shortens_a_long_path(
    tmp_path: Path,
) -> None:
    """A refusal goes to the model: with 50 roots it names three and the count, and a 3,000-character
    path arrives as its start and its end (the name), not as 3,000 characters."""
    folders = [tmp_path / f"r{i:02}" for i in range(50)]
    for folder in folders:
        folder.mkdir()
    roots = RootSet.from_paths([str(f) for f in folders])
    long = "/" + "x" * 3000 + "/secret.txt"
    with pytest.raises(PathOutsideRoots) as info:
        roots.resolve(long)
    text = str(info.value)
    assert text.startswith("Access denied: '/xxx")
    assert "...' is outside" not in text  # the end of the path stays: its name
    assert "secret.txt' is outside the allowed roots" in text
    assert text.endswith(f"({folders[0]}, {folders[1]}, {folders[2]} and 47 more)")
    assert len(text) < 160 + 3 * len(str(folders[0])) + 100
    assert str(folders[3]) not in text
