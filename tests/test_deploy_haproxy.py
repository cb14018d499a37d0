"""deploy/haproxy.cfg: no port another local user can use, and no routing state a reload must hand over."""

from __future__ import annotations

import re
from pathlib import Path

CFG = Path(__file__).resolve().parent.parent / "deploy" / "haproxy.cfg"


def sections(text: str) -> dict[str, list[str]]:
    """Section header (``listen stats``) -> its lines, comments and blank lines left out."""
    found: dict[str, list[str]] = {}
    current = ""
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if not line[0].isspace():
            current = line.strip()
            found[current] = []
        else:
            found[current].append(line.strip())
    return found


def test_only_the_frontend_listens_on_tcp_and_the_status_page_is_a_private_unix_socket() -> None:
    config = sections(CFG.read_text())
    binds = {name: [line for line in lines if line.startswith("bind ")] for name, lines in config.items()}
    # The frontend: every request it passes on needs the replicas' bearer token.
    assert binds["frontend mcp"] == ['bind "127.0.0.1:${MCP_LB_PORT-8700}"']
    # The status page answers anyone who reaches it: a Unix socket only HAProxy's user can open.
    assert len(binds["listen stats"]) == 1
    assert re.fullmatch(r'bind "unix@\$\{MCP_LB_STATS_SOCKET-/[^"]+\}" mode 600', binds["listen stats"][0])
    assert [name for name, lines in binds.items() if lines] == ["frontend mcp", "listen stats"]
    # No peers section, so no peers port (its protocol has no authentication).
    assert not [name for name in config if name.startswith("peers")]
    lines = [line for section in config.values() for line in section]
    assert not [line for line in lines if line.startswith(("localpeer", "peer "))]


def test_a_legacy_session_is_routed_by_its_id_with_nothing_to_hand_over_on_a_reload() -> None:
    backend = sections(CFG.read_text())["backend mcp_replicas"]
    servers = [line.split()[1] for line in backend if line.startswith("server ")]
    assert servers == ["r1", "r2", "r3", "r4"]
    # Every replica has its route, and no stick table holds state a new process would start without.
    for name in servers:
        assert f"use-server {name} if {{ var(txn.replica) -m str {name} }}" in backend
    assert not [line for line in backend if line.startswith(("stick", "stick-table"))]
    # The client holds the replica's name in front of the id; the replica sees its own id only.
    assert (
        "http-response set-header mcp-session-id %[srv_name].%[res.hdr(mcp-session-id)] "
        "if { res.hdr(mcp-session-id) -m found }"
    ) in backend
    assert (
        "http-request set-header mcp-session-id %[req.hdr(mcp-session-id),field(2,.)] "
        "if { var(txn.replica) -m found }"
    ) in backend
    # Only failed connections are retried: a tools/call that reached a replica never runs twice.
    defaults = sections(CFG.read_text())["defaults"]
    assert "retry-on conn-failure" in defaults
