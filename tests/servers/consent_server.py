"""A server for the consent tests over stdio or streamable HTTP: one read tool and the files given as
``file:`` resources, guarded by a RootsGuard that asks the user for folders inside the ceiling given."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable
from pathlib import Path

from mcp.server import MCPServer
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp_types import ToolAnnotations

from mcp_roots import RootsGuard, path_to_uri


def reader(path: Path) -> Callable[[], str]:
    def read() -> str:
        return path.read_text()

    return read


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ceiling", required=True)
    parser.add_argument("--http", type=int)
    parser.add_argument("--token", action="append", default=[], help="NAME=TOKEN: a caller (HTTP)")
    parser.add_argument("--resource", action="append", default=[], help="a file served as a file: resource")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    guard = RootsGuard(ceiling=args.ceiling, consent=True, environ={}, user_config_dir=args.ceiling + "/none")
    tokens = dict(reversed(entry.split("=", 1)) for entry in args.token)

    class Tokens:
        async def verify_token(self, token: str) -> AccessToken | None:
            name = tokens.get(token)
            return None if name is None else AccessToken(token=token, client_id=name, scopes=[])

    auth = {"issuer_url": "http://127.0.0.1", "resource_server_url": None}
    server = (
        MCPServer("notes", auth=AuthSettings.model_validate(auth), token_verifier=Tokens())
        if tokens
        else MCPServer("notes")
    )

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    @guard.paths("path")
    def read(path: str) -> str:
        return Path(path).read_text()

    for name in args.resource:
        server.resource(path_to_uri(name), name=Path(name).name)(reader(Path(name)))

    guard.install(server)
    if args.http is None:
        server.run("stdio")
    else:
        server.run("streamable-http", host="127.0.0.1", port=args.http)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
