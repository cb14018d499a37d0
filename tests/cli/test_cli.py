"""The mcp-roots command, run as a real subprocess: each subcommand, good and bad input, exit codes.

The environment of every run is scrubbed of MCP_ROOTS* and points XDG_CONFIG_HOME at a temporary
directory, so the user's own configuration never leaks in; no run may print a traceback.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

import mcp_roots
from mcp_roots import RootSet


@dataclass
class Result:
    code: int
    out: str
    err: str


class Cli:
    def __init__(self, base: Path) -> None:
        self.base = base
        self.project = base / "project"
        self.xdg = base / "xdg"
        self.project.mkdir()
        (self.xdg / "mcp-roots").mkdir(parents=True)
        self.user_file = self.xdg / "mcp-roots" / "mcp-roots.json"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_ROOTS")}
        self.env["XDG_CONFIG_HOME"] = str(self.xdg)

    def run(
        self,
        *args: str,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        prefix: Sequence[str] = (),
    ) -> Result:
        proc = subprocess.run(
            [*prefix, sys.executable, "-m", "mcp_roots.cli", *args],
            cwd=cwd or self.project,
            env={**self.env, **(env or {})},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert "Traceback" not in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stdout, proc.stdout
        return Result(proc.returncode, proc.stdout, proc.stderr)


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path.resolve())


def one_error_line(result: Result) -> str:
    lines = result.err.strip().splitlines()
    assert len(lines) == 1, result.err
    assert lines[0].startswith("mcp-roots: error: "), result.err
    return lines[0]


# --- Help -------------------------------------------------------------------------------------------------


def test_help_explains_sources_and_exit_codes(cli: Cli) -> None:
    result = cli.run("--help")
    assert result.code == 0
    for words in ("show", "check", "env", "--roots", "--project", "--json", "MCP_ROOTS", "mcp-roots.json"):
        assert words in result.out, words
    assert "exit codes:" in result.out
    for code in ("0  success", "1  'check' only", "2  usage or configuration error"):
        assert code in result.out
    # The user config directory named in the help is the one actually searched.
    assert str(cli.xdg / "mcp-roots") in result.out


def test_console_script_is_installed(cli: Cli) -> None:
    (script,) = importlib.metadata.entry_points(group="console_scripts", name="mcp-roots")
    assert script.value == "mcp_roots.cli:main"
    installed = Path(sys.executable).parent / "mcp-roots"
    assert installed.exists(), "make test installs the package; the mcp-roots script should be next to python"
    proc = subprocess.run(
        [str(installed), "--version"], capture_output=True, text=True, env=cli.env, check=False, timeout=60
    )
    assert (proc.returncode, proc.stdout) == (0, f"mcp-roots {mcp_roots.__version__}\n")


@pytest.mark.parametrize(
    ("command", "codes"),
    [
        ("show", "exit codes: 0 success, 2 usage"),
        ("check", "exit codes: 0 every PATH is inside the roots, 1 a PATH is outside"),
        ("env", "exit codes: 0 success, 2 usage"),
        ("serve", "exit codes: 0 the client went away, 2 it cannot start"),
        ("run", "exit codes: the command's own"),
        ("doctor", "exit codes: 0 every layer is there, 1 one is missing"),
        ("audit", "exit codes: 0 everything guarded or exempt, 1 something is unguarded"),
    ],
)
def test_each_command_has_help_with_its_own_exit_codes(cli: Cli, command: str, codes: str) -> None:
    result = cli.run(command, "--help")
    assert result.code == 0
    assert f"usage: mcp-roots {command}" in result.out
    assert codes in " ".join(result.out.split())
    if command != "check":
        assert "a path is outside" not in result.out  # another command's codes


@pytest.mark.parametrize("command", ["serve", "run"])
def test_json_is_offered_only_where_there_is_a_result_to_print(cli: Cli, command: str) -> None:
    assert "--json" not in cli.run(command, "--help").out
    assert "--json" in cli.run("audit", "--help").out


@pytest.mark.parametrize(
    ("args", "words"),
    [
        ((), "a COMMAND is required"),
        (("bogus",), "invalid choice"),
        (("--bogus",), "unrecognized arguments: --bogus"),
        (("show", "--bogus"), "unrecognized arguments: --bogus"),
        (("check",), "PATH"),
        (("serve", "--json", "."), "unrecognized arguments: --json"),
        (("wrap",), "required: --ceiling"),
        (("wrap", "--ceiling", "."), "no COMMAND after '--'"),
        (("probe", "--bogus"), "unrecognized arguments: --bogus"),
        (("completion", "fish"), "invalid choice: 'fish'"),
    ],
    ids=[
        "no-command",
        "unknown-command",
        "unknown-option",
        "unknown-option-after",
        "check-without-paths",
        "serve-json",
        "wrap-without-ceiling",
        "wrap-without-command",
        "probe-unknown-option",
        "completion-unknown-shell",
    ],
)
def test_usage_errors_are_one_line_and_exit_2(cli: Cli, args: tuple[str, ...], words: str) -> None:
    result = cli.run(*args)
    assert result.code == 2
    assert result.out == ""
    assert len(result.err.strip().splitlines()) == 1, result.err
    assert result.err.startswith("mcp-roots")
    assert "error: " in result.err
    assert words in result.err
    assert "--help" in result.err


def test_python_dash_m_mcp_roots_is_the_command(cli: Cli) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "mcp_roots", "--version"],
        capture_output=True,
        text=True,
        env=cli.env,
        check=False,
    )
    assert (proc.returncode, proc.stdout) == (0, f"mcp-roots {mcp_roots.__version__}\n")


def test_audit_json_lists_the_rows_for_a_ci(cli: Cli) -> None:
    (cli.project / "my_server.py").write_text(
        "from mcp.server import MCPServer\n"
        "from mcp_roots import RootsGuard\n"
        "server = MCPServer('s')\n"
        "guard = RootsGuard(['/tmp'])\n"
        "guard.install(server)\n"
        "@server.tool()\n"
        "@guard.paths('path')\n"
        "def read(path: str) -> str:\n"
        "    return path\n"
        "@server.tool()\n"
        "def leak(dest_path: str) -> str:\n"
        "    return dest_path\n"
    )
    result = cli.run("audit", "--json", "my_server:server")
    assert result.code == 1
    rows = {row["name"]: row for row in json.loads(result.out)}
    assert rows["read"]["unguarded"] == []
    assert rows["leak"]["unguarded"] == ["dest_path"]
    assert rows["leak"]["status"] == "UNGUARDED: dest_path"


# --- show -------------------------------------------------------------------------------------------------


def test_show_without_configuration_refuses_everything_and_says_how_to_configure(cli: Cli) -> None:
    # The working directory is never a root implicitly.
    result = cli.run("show")
    assert result.code == 0, result.err
    assert result.out.startswith("No roots: every path is refused; no fallback roots are configured")
    assert "--roots" in result.out
    assert "MCP_ROOTS" in result.out
    assert str(cli.xdg / "mcp-roots") in result.out
    assert result.err == ""


def test_check_from_a_fake_home_without_configuration_is_outside(cli: Cli) -> None:
    # Started from '~' with nothing configured: on main this said "inside" for a private key.
    home = cli.base / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY")
    result = cli.run("check", str(home / ".ssh" / "id_ed25519"), cwd=home, env={"HOME": str(home)})
    assert result.code == 1, result
    lines = result.out.splitlines()
    assert lines[0] == f"outside  {home / '.ssh' / 'id_ed25519'}"
    assert lines[1].startswith("1 of 1 path(s) refused: no fallback roots are configured")


@pytest.mark.parametrize("given", ["home", "ancestor", "root"])
def test_home_and_its_ancestors_need_allow_home(cli: Cli, given: str) -> None:
    home = cli.base / "home"
    home.mkdir()
    target = {"home": home, "ancestor": cli.base, "root": Path("/")}[given]
    env = {"HOME": str(home)}
    for args in (("--roots", str(target)), ("--project", str(target))):
        result = cli.run("show", *args, env=env)
        assert result.code == 2, result
        line = one_error_line(result)
        assert "is refused as a fallback root" in line
        assert "--allow-home" in line
        allowed = cli.run("show", "--json", "--allow-home", *args, env=env)
        assert allowed.code == 0, allowed.err
        assert [r["path"] for r in json.loads(allowed.out)["roots"]] == [str(target)]


def test_relative_roots_without_a_project_are_an_error(cli: Cli) -> None:
    (cli.project / "data").mkdir()
    result = cli.run("show", "--roots", "data")
    assert result.code == 2
    assert "needs a project root" in one_error_line(result)


def test_project_file_is_read_only_from_an_explicit_project(cli: Cli) -> None:
    # A cloned repository's own mcp-roots.json, in the working directory, is not a configuration.
    (cli.project / "mcp-roots.json").write_text('{"roots": [{"path": "/"}]}')
    result = cli.run("check", "/etc/passwd")
    assert result.code == 1, result
    # Given explicitly, its '/' entry is still refused (skipped with a warning): every path is refused.
    result = cli.run("check", "--project", ".", "/etc/passwd")
    assert result.code == 1, result
    assert "it is the filesystem root" in result.err


def test_huge_integer_in_a_config_file_is_a_config_error(cli: Cli) -> None:
    (cli.project / "mcp-roots.json").write_text('{"roots": [\n  {"path": ' + "7" * 5000 + "}\n]}")
    result = cli.run("show", "--project", ".")
    assert result.code == 2
    line = one_error_line(result)
    assert line.startswith(f"mcp-roots: error: {cli.project / 'mcp-roots.json'}:2: ")
    assert "5000 digits" in line


def test_show_with_roots_before_or_after_the_command(cli: Cli) -> None:
    (cli.project / "a").mkdir()
    (cli.base / "b").mkdir()
    for args in (
        ("--roots", f"a,{cli.base / 'b'}", "--json", "show"),
        ("show", "--json", "--roots", "a", "--roots", str(cli.base / "b")),
    ):
        result = cli.run("--project", ".", *args)
        assert result.code == 0, result.err
        shown = json.loads(result.out)
        assert shown["source"] == "flag"
        assert [r["path"] for r in shown["roots"]] == [str(cli.project / "a"), str(cli.base / "b")]
        assert shown["roots"][0]["uri"] == "file://" + str(cli.project / "a")


def test_show_from_the_environment(cli: Cli) -> None:
    (cli.project / "data").mkdir()
    result = cli.run("--project", ".", "show", env={"MCP_ROOTS": "data"})
    assert result.code == 0, result.err
    assert result.out == f"Roots from environment (MCP_ROOTS):\n  {cli.project / 'data'}\n"


def test_show_from_the_project_file_with_names_and_warnings(cli: Cli) -> None:
    (cli.project / "data").mkdir()
    file = cli.project / "mcp-roots.json"
    file.write_text('{"roots": [\n  {"path": "./data", "name": "Data"},\n  {"path": "./gone"}\n]}')
    result = cli.run("--project", ".", "show")
    assert result.code == 0, result.err
    assert result.out == f"Roots from {file}:\n  {cli.project / 'data'}  (Data)\n"
    assert result.err.startswith(f"mcp-roots: warning: {file}:3: skipping this root: ")
    assert "does not exist" in result.err


def test_show_from_the_user_config_directory(cli: Cli) -> None:
    cli.user_file.write_text(json.dumps({"roots": [{"path": "."}]}))
    result = cli.run("show", "--json")
    assert result.code == 0, result.err
    shown = json.loads(result.out)
    assert shown["source"] == str(cli.user_file)
    assert [r["path"] for r in shown["roots"]] == [str(cli.xdg / "mcp-roots")]
    # MCP_ROOTS_CONFIG_DIR points elsewhere.
    other = cli.base / "other-config"
    other.mkdir()
    (other / "mcp-roots.json").write_text(json.dumps({"roots": [{"path": "."}]}))
    shown = json.loads(cli.run("show", "--json", env={"MCP_ROOTS_CONFIG_DIR": str(other)}).out)
    assert shown["source"] == str(other / "mcp-roots.json")


def test_show_with_project_option(cli: Cli) -> None:
    elsewhere = cli.base / "elsewhere"
    elsewhere.mkdir()
    result = cli.run("show", "--project", str(elsewhere))
    assert result.out == f"Roots from project root:\n  {elsewhere}\n"


def test_show_of_a_config_without_usable_roots_says_everything_is_refused(cli: Cli) -> None:
    (cli.project / "mcp-roots.json").write_text('{"roots": []}')
    result = cli.run("--project", ".", "show")
    assert result.code == 0
    assert result.out == f"No roots from {cli.project / 'mcp-roots.json'}: every path is refused.\n"
    assert "lists no usable root" in result.err


# --- Configuration errors: exit 2, one line, no traceback --------------------------------------------------


def test_bad_json_names_file_and_line(cli: Cli) -> None:
    file = cli.project / "mcp-roots.json"
    file.write_text('{\n  "roots": [\n    {"path": "."},\n  ]\n}\n')
    for command in ("show", "env", "check"):
        result = cli.run("--project", ".", command, *(["x"] if command == "check" else []))
        assert result.code == 2
        assert result.out == ""
        assert one_error_line(result).startswith(f"mcp-roots: error: {file}:4:")
        assert "is not valid JSON" in result.err


def test_wrong_shape_names_file_line_and_rule(cli: Cli) -> None:
    cli.user_file.write_text('{\n  "roots": [\n    {"path": ".", "uri": "file:///"}\n  ]\n}\n')
    result = cli.run("show")
    assert result.code == 2
    line = one_error_line(result)
    assert line.startswith(f"mcp-roots: error: {cli.user_file}:3: ")
    assert 'has both "path" and "uri"' in line


def test_bad_flag_entry_names_entry_and_source(cli: Cli) -> None:
    result = cli.run("--project", ".", "show", "--roots", ".,missing")
    assert result.code == 2
    line = one_error_line(result)
    assert "'missing'" in line
    assert "from flag" in line
    assert "does not exist" in line


def test_bad_environment_entry_names_entry_and_source(cli: Cli) -> None:
    result = cli.run("show", env={"MCP_ROOTS": "nowhere"})
    assert result.code == 2
    line = one_error_line(result)
    assert "'nowhere'" in line
    assert "environment (MCP_ROOTS)" in line


def test_bad_uri_in_flag(cli: Cli) -> None:
    result = cli.run("env", "--roots", "file://server/share")
    assert result.code == 2
    assert "is not local" in one_error_line(result)


def test_empty_roots_flag_and_missing_project_are_errors(cli: Cli) -> None:
    result = cli.run("show", "--roots", ",")
    assert result.code == 2
    assert "names no roots" in one_error_line(result)
    result = cli.run("show", "--project", str(cli.base / "missing"))
    assert result.code == 2
    assert "project root" in one_error_line(result)


def _without_permission_override() -> list[str]:
    """A command prefix under which file modes hold: nothing for an ordinary user; for root, setpriv
    removing the capabilities that let root read anything (its uid stays 0, so Python still runs)."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:  # pragma: no cover - util-linux is missing
        pytest.skip("running as root without setpriv: file modes cannot be made to hold")
    return [setpriv, "--bounding-set", "-dac_override,-dac_read_search"]


@pytest.mark.skipif(not hasattr(os, "geteuid"), reason="POSIX permissions")
def test_unreadable_root_fails_fast(cli: Cli) -> None:
    locked = cli.project / "locked"
    locked.mkdir()
    locked.chmod(0o000)
    try:
        result = cli.run("--project", ".", "show", "--roots", "locked", prefix=_without_permission_override())
    finally:
        locked.chmod(0o755)
    assert result.code == 2, result
    line = one_error_line(result)
    assert "'locked'" in line
    assert "cannot be read" in line


# --- check ------------------------------------------------------------------------------------------------


@pytest.fixture
def checked(cli: Cli) -> Cli:
    (cli.project / "src").mkdir()
    (cli.project / "src" / "app.py").write_text("x")
    (cli.base / "project_evil").mkdir()
    (cli.project / "escape").symlink_to(cli.base / "project_evil")
    return cli


def test_check_all_inside_exits_0_and_names_the_root(checked: Cli) -> None:
    result = checked.run(
        "--project", ".", "check", "src/app.py", str(checked.project / "new" / "file"), "--roots", "."
    )
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    new = checked.project / "new" / "file"
    assert lines == [
        f"inside   src/app.py  ->  {checked.project / 'src' / 'app.py'}  (root: {checked.project})",
        f"inside   {new}  ->  {new}  (root: {checked.project})",
    ]


def test_check_relative_paths_start_at_the_working_directory(checked: Cli) -> None:
    result = checked.run(
        "check", "app.py", "../app.py", "--project", str(checked.project), cwd=checked.project / "src"
    )
    assert result.code == 0, result.out
    assert result.out.count("inside") == 2


@pytest.mark.parametrize(
    "outside",
    ["/etc/passwd", "../project_evil/x", "escape/x", "src/../../project_evil", ""],
    ids=["absolute", "sibling-prefix", "symlink-escape", "dotdot", "empty"],
)
def test_check_outside_exits_1(checked: Cli, outside: str) -> None:
    result = checked.run("--project", ".", "check", "src/app.py", outside)
    assert result.code == 1, result
    lines = result.out.splitlines()
    assert lines[0].startswith("inside   src/app.py")
    assert lines[1] == f"outside  {outside}"
    assert lines[2] == f"1 of 2 path(s) outside the roots from project root: {checked.project}"


def test_check_json(checked: Cli) -> None:
    (checked.project / "src" / "mcp-roots.json")  # not a config location: ignored
    result = checked.run("--project", ".", "check", "--json", "src", "/etc")
    assert result.code == 1
    report = json.loads(result.out)
    assert report["source"] == "project root"
    assert report["all_inside"] is False
    inside, outside = report["results"]
    assert inside == {
        "path": "src",
        "inside": True,
        "resolved": str(checked.project / "src"),
        "root": {
            "uri": "file://" + str(checked.project),
            "name": None,
            "path": str(checked.project),
            "access": "read-write",
        },
        "reason": None,
    }
    assert outside["inside"] is False
    assert outside["root"] is None
    assert "outside the allowed roots" in outside["reason"]


def test_check_against_an_empty_config_is_all_outside(checked: Cli) -> None:
    (checked.project / "mcp-roots.json").write_text('{"roots": []}')
    result = checked.run("--project", ".", "check", "src/app.py")
    assert result.code == 1
    assert result.out.splitlines()[0] == "outside  src/app.py"


# --- env --------------------------------------------------------------------------------------------------


def test_env_exports_survive_a_shell(cli: Cli) -> None:
    odd = cli.project / 'it\'s a "dir" $HOME'
    odd.mkdir()
    (cli.project / "plain").mkdir()
    result = cli.run("--project", ".", "env", "--roots", f"{odd},plain")
    assert result.code == 0, result.err
    assert result.out.startswith("export MCP_ROOTS_JSON=")
    script = (
        result.out + 'printf "%s\\n--\\n%s\\n--\\n%s" "$MCP_ROOTS_COUNT" "$MCP_ROOTS_PATHS" "$MCP_ROOTS_JSON"'
    )
    shell = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True, timeout=30)
    count, paths, roots_json = shell.stdout.split("\n--\n")
    assert count == "2"
    assert paths.splitlines() == [str(odd), str(cli.project / "plain")]
    assert [r["path"] for r in json.loads(roots_json)] == [str(odd), str(cli.project / "plain")]


def test_env_json_matches_the_library(cli: Cli) -> None:
    result = cli.run("--project", ".", "env", "--json")
    assert result.code == 0, result.err
    assert json.loads(result.out) == RootSet.from_paths([cli.project]).as_env()


def test_audit_warns_once_and_names_a_forgotten_install(cli: Cli) -> None:
    (cli.project / "forgot.py").write_text(
        "from mcp.server import MCPServer\n"
        "from mcp_roots import RootsGuard\n"
        "server = MCPServer('s')\n"
        "guard = RootsGuard()\n"  # nothing configured: the start-up warning
        "@server.tool()\n"
        "@guard.paths('path')\n"
        "def read(path: str) -> str:\n"
        "    return path\n"
    )
    result = cli.run("audit", "forgot:server")
    assert result.code == 1
    assert "UNGUARDED: path (its guard was never installed: call guard.install(server))" in result.out
    assert result.err.count("no fallback roots are configured") == 1, result.err
