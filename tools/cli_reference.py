"""Write docs/cli.md, the command-line reference, from the mcp-roots command's own argument parsers.

Run by ``make cli-docs``; tests/test_docs.py fails when docs/cli.md differs from what this writes.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

PAGE = Path(__file__).resolve().parent.parent / "docs" / "cli.md"
WIDTH = "100"


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def render() -> str:
    """The page: ``mcp-roots --help``, then each subcommand's ``--help``, as the command prints them."""
    os.environ["COLUMNS"] = WIDTH  # argparse wraps to the terminal's width: make it the same everywhere
    from mcp_roots import cli
    from mcp_roots.probe import command as probe
    from mcp_roots.wrap import command as wrap

    own = {"probe": probe.build_parser, "wrap": wrap.build_parser}  # they parse their own options

    parser = cli.build_parser()
    parts = [
        "# The command line",
        "",
        "Generated from the command's own parsers by `make cli-docs` (`tools/cli_reference.py`); the test "
        "suite fails when this page and the parsers disagree.",
        "",
        "## mcp-roots",
        "",
        "```text",
        parser.format_help().rstrip(),
        "```",
    ]
    for name, sub in _subcommands(parser).items():
        text = own[name]().format_help() if name in own else sub.format_help()
        parts += ["", f"## mcp-roots {name}", "", "```text", text.rstrip(), "```"]
    return "\n".join(parts) + "\n"


if __name__ == "__main__":
    PAGE.write_text(render(), encoding="utf-8")
    sys.stdout.write(f"wrote {PAGE}\n")
