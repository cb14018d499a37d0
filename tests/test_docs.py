"""README.md and the docs pages as a reader meets them: the README's servers run and answer as it shows, every
Python block compiles, every JSON block (host configs) parses, every ``mcp-roots`` command line in them parses
with the command's own parser, and the README's links open the clone's own pages. The README's other
commands run in tests/test_readme_commands.py.

The mcp 1.x server block runs in .venv-mcp1: tests/mcp1/test_readme_mcp1.py.
"""

from __future__ import annotations

import ast
import importlib
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mcp_roots import cli
from mcp_roots.probe import command as probe_command
from mcp_roots.wrap import command as wrap_command

from .kit import README, REPO, Block, blocks, command_lines, documents

ALL_BLOCKS = [block for path in documents() for block in blocks(path)]
README_BLOCKS = blocks(README)


def _ids(items: list[Block]) -> list[str]:
    return [b.where for b in items]


def test_the_readme_is_short_and_names_the_platforms_on_its_first_screen() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 200
    first_screen = "\n".join(lines[:24])
    for word in ("Linux", "macOS", "Windows", "tested"):
        assert word in first_screen


def test_the_readme_has_a_server_for_each_framework_and_a_client() -> None:
    names = {b.file_name for b in README_BLOCKS} - {None}
    assert names == {"server.py", "server_fastmcp.py", "server_mcp1.py", "client.py"}


# A block that shows a signature (``FileBroker(`` alone on its first line, then its parameters with their
# types and defaults) documents, it is not code to run.
PYTHON_BLOCKS = [
    b
    for b in ALL_BLOCKS
    if b.info == "python" and not re.fullmatch(r"[A-Za-z_.]+\(\n", b.text[: b.text.find("\n") + 1])
]


@pytest.mark.parametrize("block", PYTHON_BLOCKS, ids=_ids(PYTHON_BLOCKS))
def test_every_python_block_compiles(block: Block) -> None:
    # A docs fragment may await at the top level (it stands inside a tool); the README's files may not.
    flags = 0 if block.source == README else ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    compile(block.text, block.where, "exec", flags=flags, dont_inherit=True)


def _readme_files(directory: Path) -> None:
    for block in README_BLOCKS:
        if block.file_name:
            (directory / block.file_name).write_text(block.text, encoding="utf-8")


def _console_session() -> tuple[list[str], list[str]]:
    """The README's console block: its commands, and the lines it shows them print."""
    console = next(b for b in README_BLOCKS if b.info == "console" and "client.py" in b.text)
    commands = command_lines(console)
    output = [line for line in console.text.splitlines() if line and not line.startswith("$ ")]
    return commands, output


@pytest.mark.parametrize("server", ["server.py", "server_fastmcp.py"])
def test_a_readme_server_answers_the_readme_client_as_the_readme_shows(tmp_path: Path, server: str) -> None:
    _readme_files(tmp_path)
    project = str(tmp_path / "project")
    commands, shown = _console_session()
    setup, run = commands
    subprocess.run(["bash", "-c", setup.replace("/tmp/project", project)], check=True)
    argv = shlex.split(run.replace("/tmp/project", project))
    assert argv[:3] == ["python", "client.py", "server.py"]
    argv = [sys.executable, "client.py", server, *argv[3:]]
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == [line.replace("/tmp/project", project) for line in shown]


JSON_BLOCKS = [b for b in ALL_BLOCKS if b.info == "json"]


@pytest.mark.parametrize("block", JSON_BLOCKS, ids=_ids(JSON_BLOCKS))
def test_every_json_block_parses_and_its_mcp_roots_commands_parse(block: Block) -> None:
    value = json.loads(block.text)
    servers: Any = value.get("mcpServers", value.get("servers", {})) if isinstance(value, dict) else {}
    for server in servers.values():
        assert isinstance(server.get("args", []), list)
        if server.get("command") == "mcp-roots":
            _parse_command(["mcp-roots", *server["args"]], block.where)


def _parse_command(argv: list[str], where: str) -> None:
    assert argv[0] == "mcp-roots", where
    try:
        if argv[1:2] == ["probe"]:
            probe_command.build_parser().parse_args(argv[2:])
        elif argv[1:2] == ["wrap"]:
            wrap_command.build_parser().parse_args(argv[2:])
        else:
            cli.build_parser().parse_args(argv[1:])
    except SystemExit as exc:
        raise AssertionError(f"{where}: {shlex.join(argv)} does not parse (exit {exc.code})") from None


SHELL_BLOCKS = [b for b in ALL_BLOCKS if b.info in ("sh", "console", "bash", "shell")]


@pytest.mark.parametrize("block", SHELL_BLOCKS, ids=_ids(SHELL_BLOCKS))
def test_every_mcp_roots_command_line_in_the_docs_parses(block: Block) -> None:
    for line in command_lines(block):
        argv = shlex.split(line, comments=True)
        while argv and re.fullmatch(r"[A-Z_]+=.*", argv[0]):  # VAR=value before the command
            argv.pop(0)
        if argv[:1] != ["mcp-roots"] or any(tok in argv for tok in ("|", "&&", ";")):
            continue
        _parse_command([a for a in argv if a != "&"], block.where)


def _anchors(page: Path) -> set[str]:
    """The heading anchors of a Markdown page, as the docs site and GitHub make them."""
    headings = re.findall(r"^#+ (.+)$", page.read_text(encoding="utf-8"), re.M)
    return {re.sub(r"[^\w\- ]", "", h.lower().replace("`", "")).strip().replace(" ", "-") for h in headings}


def test_the_readmes_links_are_relative_and_lead_to_files_and_headings_that_exist() -> None:
    # Relative: they open the clone's own pages (on a code host too) until the project's home is confirmed.
    text = README.read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)]+)\)", text)
    assert len(links) >= 15
    for link in links:
        assert not re.match(r"[a-z]+:", link), link
        path, _, anchor = link.partition("#")
        assert (REPO / path).is_file(), link
        if anchor:
            assert anchor in _anchors(REPO / path), link


def test_the_readme_opens_with_make_demo_and_make_test() -> None:
    first = next(b for b in README_BLOCKS if b.info in ("sh", "console"))
    assert [line.split("#")[0].strip() for line in first.text.splitlines()] == ["make demo", "make test"]
    assert first.line < 30


def test_the_cli_reference_is_the_parsers_own_help() -> None:
    sys.path.insert(0, str(REPO / "tools"))
    try:
        cli_reference = importlib.import_module("cli_reference")  # tools/ is not a package
    finally:
        sys.path.remove(str(REPO / "tools"))
    assert (REPO / "docs" / "cli.md").read_text(encoding="utf-8") == cli_reference.render(), (
        "docs/cli.md is stale: run make cli-docs"
    )


@pytest.mark.parametrize(
    ("module", "page"), [("mcp_roots", "api.md"), ("mcp_roots.testing", "api-testing.md")]
)
def test_every_public_name_is_on_its_reference_page(module: str, page: str) -> None:
    names = set(importlib.import_module(module).__all__) - {"__version__"}
    text = (REPO / "docs" / page).read_text(encoding="utf-8")
    missing = sorted(n for n in names if f"::: {module}.{n}\n" not in text)
    assert not missing, f"docs/{page} lacks {missing}"


DOCS_VENV = REPO / ".venv-docs"


def _build_site(tmp_path: Path, page: str) -> subprocess.CompletedProcess[str]:
    """mkdocs (from .venv-docs, as make docs runs it) on one page, with the project's render checks."""
    mkdocs = DOCS_VENV / "bin" / "mkdocs"
    if not mkdocs.exists():
        pytest.fail(f"{mkdocs} is missing: run `make .venv-docs/.installed` (make test does)")
    (tmp_path / "docs").mkdir(parents=True)
    (tmp_path / "docs" / "index.md").write_text(page, encoding="utf-8")
    config = {
        "site_name": "check",
        "strict": True,
        "theme": {"name": "material", "font": False},
        "hooks": [str(REPO / "tools" / "docs_render.py")],
        "markdown_extensions": ["pymdownx.highlight", "pymdownx.superfences"],
    }
    (tmp_path / "mkdocs.yml").write_text(json.dumps(config), encoding="utf-8")
    return subprocess.run(
        [str(mkdocs), "build", "--quiet"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_docs_build_fails_on_a_list_rendered_as_running_text_and_passes_it_written_apart(
    tmp_path: Path,
) -> None:
    flattened = "# Page\n\nMistakes that are now impossible:\n- one\n- two\n"
    failed = _build_site(tmp_path / "flat", flattened)
    assert failed.returncode != 0
    assert "index.md: 'Mistakes that are now impossible: / - one'" in failed.stderr
    apart = _build_site(tmp_path / "apart", flattened.replace(":\n-", ":\n\n-"))
    assert apart.returncode == 0, apart.stderr
    html = (tmp_path / "apart" / "site" / "index.html").read_text(encoding="utf-8")
    assert "<li>one</li>" in html
    # highlighted as the site is built (Pygments' spans), and nothing fetched from another host
    code = _build_site(tmp_path / "code", "# Page\n\n```python\nimport os\n```\n")
    assert code.returncode == 0, code.stderr
    html = (tmp_path / "code" / "site" / "index.html").read_text(encoding="utf-8")
    assert '<span class="kn">import</span>' in html
    assert "fonts.googleapis" not in html
    assert not re.search(r"<script[^>]*src=\"(https?:)?//", html)
