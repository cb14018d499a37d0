"""Deliberately broken MCP file servers, one bug each, for the probe's proof: `mcp-roots probe` must catch
every one with the technique made for it. DO NOT COPY: each check below is a real-world mistake.

    python tests/broken_servers/broken_server.py BUG ROOT      (stdio, mcp 2.x MCPServer)

BUG is one of BUGS. Client roots (legacy era) replace ROOT when the client declares them.
"""

# ruff: noqa: ASYNC230, ASYNC240 - blocking file access in async tools is part of how these servers are written

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import unicodedata
import warnings
from urllib.parse import unquote, urlsplit

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError


def _inside(real: str, root: str) -> bool:
    return real == root or real.startswith(root.rstrip("/") + "/")


def check_prefix(path: str, root: str) -> bool:
    """A prefix check without a separator: /x/root_evil passes for /x/root."""
    return os.path.realpath(path).startswith(root)


def check_parent_realpath(path: str, root: str) -> bool:
    """The realpath of the parent only: a final symlink is never looked at."""
    parent, name = os.path.split(path)
    return _inside(os.path.join(os.path.realpath(parent), name), root)


def check_normalize_dotdot(path: str, root: str) -> bool:
    """'..' normalized lexically before symlinks are resolved: 'link/..' taken for the root."""
    return _inside(os.path.realpath(os.path.normpath(path)), root)


def check_realpath(path: str, root: str) -> bool:
    """A correct check, but the open that follows goes by name again: a swap in between wins (swap)."""
    return _inside(os.path.realpath(path), root)


def check_write_follows(path: str, root: str) -> bool:
    """Existing paths resolved fully; a new name checked by its parent only, then opened following a final
    (dangling) symlink: the CVE-2025-53109 pattern."""
    if os.path.exists(path):
        return _inside(os.path.realpath(path), root)
    return check_parent_realpath(path, root)


def check_nfc(path: str, root: str) -> bool:
    """Both sides normalized to NFC before the comparison, the path then opened as sent: the outside twin
    'twi\u0308n' (NFD) passes for the root 'tw\u00efn' (NFC)."""
    return _inside(unicodedata.normalize("NFC", os.path.realpath(path)), unicodedata.normalize("NFC", root))


def check_none(path: str, root: str) -> bool:
    """No check at all: every way out works, the plainest first."""
    return True


def check_deny(path: str, root: str) -> bool:
    """Refuses every path, inside ones too: nothing the probe tries tells it anything."""
    return False


CHECKS = {
    "prefix": check_prefix,
    "parent-realpath": check_parent_realpath,
    "normalize-dotdot": check_normalize_dotdot,
    "swap": check_realpath,
    "double-decode": check_realpath,
    "write-follows": check_write_follows,
    "nfc": check_nfc,
    "template": check_realpath,
}
BUGS = tuple(CHECKS)
#: Not a way out: a server whose read_file exits on a control character (the probe must say CRASHED).
CRASH = "crash"
#: Servers for the probe's verdicts (none is a bug a technique is made for): no check at all; every path
#: refused; paths used NFC-folded; a tool run in a working folder it never checks.
VERDICTS = {"none": check_none, "deny": check_deny, "fold": check_realpath, "workdir": check_realpath}


def root_path(uri: str, bug: str) -> str:
    path = unquote(urlsplit(uri).path)
    if bug == "double-decode":
        path = unquote(path)  # the bug: decoded twice; 'sub%252F..' ends as 'sub/..'
    return os.path.realpath(path)


def build(bug: str, root: str) -> MCPServer:
    server = MCPServer(f"broken-{bug}")
    check = {**CHECKS, **VERDICTS}.get(bug, check_realpath)

    async def roots(ctx: Context) -> list[str]:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                answer = await ctx.session.list_roots()
            return [root_path(str(r.uri), bug) for r in answer.roots]
        except Exception:
            return [os.path.realpath(root)]

    async def allowed(path: str, ctx: Context, *, write: bool = False) -> str:
        candidates = await roots(ctx)
        full = path if os.path.isabs(path) else os.path.join(candidates[0], path)
        if bug == "fold":  # checked and used as NFC (as the official filesystem server 2.0.1 does): a write
            full = unicodedata.normalize("NFC", full)  # to the outside NFD twin lands in the NFC root
        if bug == "write-follows" and not write:
            ok = any(check_realpath(full, r) for r in candidates)
        else:
            ok = any(check(full, r) for r in candidates)
        if not ok:
            raise ToolError(f"Access denied: {path} is outside the allowed directories")
        return full

    @server.tool()
    async def read_file(path: str, ctx: Context) -> str:
        """Read a text file. path: the file's path."""
        if bug == CRASH and "\x01" in path:
            os._exit(3)
        full = await allowed(path, ctx)
        try:
            with open(full, encoding="utf-8", errors="replace") as f:
                return f.read(65536)
        except (OSError, ValueError) as exc:
            raise ToolError(f"cannot read {path}: {exc}") from None

    @server.tool()
    async def write_file(path: str, content: str, ctx: Context) -> str:
        """Write a text file. path: the file's path."""
        full = await allowed(path, ctx, write=True)
        try:
            with open(full, "w", encoding="utf-8") as f:
                f.write(content)
        except (OSError, ValueError) as exc:
            raise ToolError(f"cannot write {path}: {exc}") from None
        return f"wrote {path}"

    @server.tool()
    async def list_directory(path: str, ctx: Context) -> str:
        """List a directory. path: the directory's path."""
        full = await allowed(path, ctx)
        try:
            return "\n".join(sorted(os.listdir(full))[:1000])
        except (OSError, ValueError) as exc:
            raise ToolError(f"cannot list {path}: {exc}") from None

    if bug == "workdir":

        @server.tool()
        def run_command(command: str, working_dir: str) -> str:
            """Run a command in a working directory (any directory: the folder is never checked)."""
            try:
                done = subprocess.run(shlex.split(command) or ["true"], cwd=working_dir, capture_output=True)
            except FileNotFoundError:
                return "exit 127"
            return f"exit {done.returncode}"

    if bug == "template":

        @server.resource("docs://files/{name}")
        def doc(name: str) -> str:
            """A document of the root by name: no '/' and no '..' in it (checked before it is decoded)."""
            if "/" in name or name == "..":
                raise ValueError(f"bad name {name!r}")
            with open(os.path.join(root, unquote(name)), encoding="utf-8", errors="replace") as f:
                return f.read(65536)

    return server


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in (*BUGS, CRASH, *VERDICTS):
        sys.exit(f"usage: broken_server.py {{{'|'.join((*BUGS, CRASH, *VERDICTS))}}} ROOT")
    build(sys.argv[1], sys.argv[2]).run("stdio")
