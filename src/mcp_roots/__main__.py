"""``python -m mcp_roots``: the ``mcp-roots`` command."""

from .cli import main

if __name__ == "__main__":
    raise SystemExit(main())
