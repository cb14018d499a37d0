"""make demo: the reference server over stdio, a real MCP client with roots, the boundary in action.

It builds a temporary project with a secret next to it and a symlink pointing out, starts
examples/file_server.py as a subprocess, and connects the official `mcp` client with a RootsProvider (the
client side of mcp-roots: it validates the user's folders, asks for consent, and tells the server when they
change). It shows what is allowed and what is refused, then switches the client's roots and shows the new
boundary in force on the very next call.
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from mcp_roots import ConsentRequest, RootsProvider

HERE = Path(__file__).resolve().parent


def consent(request: ConsentRequest) -> bool:
    """Where a desktop host would show a dialog; the demo approves and says what it approved."""
    shown = ", ".join(str(r.path) for r in request.roots) or "nothing"
    print(f"  [consent] {request.server_name} asks to see: {shown} -> approved")
    return True


def show(label: str, result: Any) -> None:
    text = "".join(getattr(c, "text", "") for c in result.content)
    verdict = "REFUSED" if result.is_error else "allowed"
    print(f"  {verdict:8} {label}")
    print(textwrap.indent(textwrap.shorten(text, 150), "           -> "))


def build_tree(base: Path) -> tuple[Path, Path, Path]:
    project, notes, outside = base / "project", base / "notes", base / "outside"
    for d in (project / "src", notes, outside):
        d.mkdir(parents=True)
    (project / "src" / "main.py").write_text("print('hello from the project')\n")
    (notes / "todo.md").write_text("- try mcp-roots\n")
    (outside / "secret.txt").write_text("TOP SECRET: you should never see this line\n")
    (project / "escape").symlink_to(outside)
    return project, notes, outside


async def main(base: Path) -> None:
    project, notes, _ = build_tree(base)
    print(
        "mcp-roots demo: a real MCP client offers one folder (its root) to the reference server, asks it\n"
        "for files inside and outside, then switches the root. Every line below is what the client sees.\n"
    )
    provider = RootsProvider([project, base / "no-such-folder"], consent=consent, poll_interval=0.2)
    for path, reason in provider.refused.items():
        print(f"(expected) The client offers only folders that exist; it leaves out {path}: {reason}\n")
    # The server logs to stderr; keep the demo's output to what the client sees.
    server = StdioServerParameters(
        command=sys.executable,
        args=[str(HERE / "file_server.py"), "--log-level", "ERROR"],
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    print(f"Starting examples/file_server.py over stdio; the client's root is {project}\n")
    async with (
        Client(server, mode="legacy", list_roots_callback=provider) as client,
        provider.attach(client) as attachment,
    ):

        async def read(path: Path | str, label: str) -> None:
            show(label, await client.call_tool("read_text", {"path": str(path)}))

        listing = await client.call_tool("list_roots", {})
        paths = [r["path"] for r in (listing.structured_content or {}).get("result", [])]
        print(f"\nlist_roots -> {paths}\n")
        await read(project / "src" / "main.py", "read_text project/src/main.py")
        await read(f"{project}/../../../../../etc/passwd", "read_text project/../../../../../etc/passwd")
        await read(project / "escape" / "secret.txt", "read_text project/escape/secret.txt (symlink out)")
        await read(notes / "todo.md", "read_text notes/todo.md (not a root yet)")

        print(f"\nThe user switches the client's root to {notes}; the provider sends roots/list_changed\n")
        sent = attachment.notifications_sent
        provider.add(notes)
        provider.remove(project)
        with anyio.fail_after(10):
            # Wait until the provider has told the server (debounced), so the demo's next call is a
            # call "after the change"; the server then waits for its refresh before checking paths.
            while attachment.notifications_sent == sent:  # noqa: ASYNC110
                await anyio.sleep(0.01)
        await read(notes / "todo.md", "read_text notes/todo.md")
        await read(project / "src" / "main.py", "read_text project/src/main.py (no longer a root)")
    print("\nDone: every refused path was refused by the server before any file was opened.")


if __name__ == "__main__":
    logging.getLogger("mcp_roots").setLevel(logging.ERROR)  # the demo prints the refusals itself
    with tempfile.TemporaryDirectory() as tmp:
        anyio.run(main, Path(tmp).resolve())
