"""``mcp-roots completion bash|zsh``: the script the command prints, loaded into a real shell and asked what
it completes, as the shell asks it when the user presses Tab."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from mcp_roots.cli import build_parser
from mcp_roots.cli._completion import script


def _complete(shell: str, words: list[str]) -> list[str]:
    """What the shell's completion function offers for the command line ``words`` (the last one is being
    typed), with the script loaded as its header says."""
    generated = subprocess.run(
        [sys.executable, "-m", "mcp_roots.cli", "completion", shell],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    line = " ".join(f"'{w}'" for w in words)
    if shell == "bash":
        ask = f"COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; _mcp_roots_complete; "
        ask += 'printf "%s\\n" "${COMPREPLY[@]}"'
        program = ["bash", "--norc", "--noprofile", "-c", f"{generated}\n{ask}"]
    else:  # zsh: loaded as a ~/.zshrc would, after compinit; asked as bashcompinit's _bash_complete asks
        ask = f'words=({line}); COMP_WORDS=("${{words[@]}}"); COMP_CWORD={len(words) - 1}; '
        ask += 'compgen -F _mcp_roots_complete -- "${words[-1]}"'
        program = ["zsh", "-f", "-c", f"autoload -U compinit && compinit -u\n{generated}\n{ask}"]
    done = subprocess.run(program, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stderr == "", done.stderr
    return [w for w in done.stdout.splitlines() if w]


SHELLS = ["bash", pytest.param("zsh", marks=pytest.mark.skipif(not shutil.which("zsh"), reason="no zsh"))]


@pytest.mark.parametrize("shell", SHELLS)
def test_completion_offers_the_subcommands_their_options_and_their_choices(shell: str) -> None:
    assert _complete(shell, ["mcp-roots", "w"]) == ["wrap"]
    assert _complete(shell, ["mcp-roots", "s"]) == ["show", "serve"]
    assert _complete(shell, ["mcp-roots", "wrap", "--ce"]) == ["--ceiling"]
    assert "--read-only" in _complete(shell, ["mcp-roots", "serve", "--re"])
    assert _complete(shell, ["mcp-roots", "completion", ""]) == ["bash", "zsh"]
    # an option's value is not the subcommand; after '--' the wrapped command's words are the shell's own
    assert _complete(shell, ["mcp-roots", "--roots", "docs", "ch"]) == ["check"]
    assert _complete(shell, ["mcp-roots", "wrap", "--ceiling", "/srv", "--", "--re"]) == []
    assert _complete(shell, ["mcp-roots", "nosuch", "--"]) == []


def test_the_scripts_name_how_to_load_them_and_other_shells_are_refused() -> None:
    parser = build_parser()
    for shell in ("bash", "zsh"):
        assert f"source <(mcp-roots completion {shell})" in script(shell, parser, {})
    with pytest.raises(ValueError, match="fish"):
        script("fish", parser, {})
