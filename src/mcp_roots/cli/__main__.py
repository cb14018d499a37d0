"""``python -m mcp_roots.cli``: the ``mcp-roots`` command."""

from . import main

raise SystemExit(main())
