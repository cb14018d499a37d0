"""The mcp-roots command. ``_commands`` holds its own subcommands (show, check, env, serve, audit, run,
doctor) and their parser; probe and wrap are applications with their own options, dispatched to first, so
that ``mcp-roots wrap`` (a host starts it for every server) loads wrap and what it needs, not the others.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the mcp-roots command."""
    from ._commands import build_parser as build

    return build()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the mcp-roots command; return its exit code (see ``mcp-roots --help``)."""
    for stream in (sys.stdout, sys.stderr):
        # Paths are bytes on POSIX: print undecodable names as they are instead of failing.
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="surrogateescape")
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["probe"]:  # its own options and '-- COMMAND...': parsed by the probe itself
        from ..probe import command

        return command.main(arguments[1:])
    if arguments[:1] == ["wrap"]:  # mcp_roots.wrap: any MCP server confined to the client's roots
        from ..wrap import command as wrap_command

        return wrap_command.main(arguments[1:])
    from ._commands import main as run_command

    return run_command(argv)


if __name__ == "__main__":
    raise SystemExit(main())
