"""``mcp-roots probe``: prove an MCP server's filesystem boundary by trying every known way out of a root
through every path argument of its tools, judged by effects on a scratch tree only. No MCP SDK is loaded
until a probe runs (the clients live in ``_mcp2``, ``_mcp1``, ``_fastmcp4``).
"""

from ._report import FINDINGS, NOT_REACHED, Report, Row
from ._runner import Options, run_probe
from ._session import LEGACY, MODERN, Connection, Session, Target
from ._targets import target_for
from ._techniques import TECHNIQUES, Technique

__all__ = [
    "FINDINGS",
    "LEGACY",
    "MODERN",
    "NOT_REACHED",
    "TECHNIQUES",
    "Connection",
    "Options",
    "Report",
    "Row",
    "Session",
    "Target",
    "Technique",
    "run_probe",
    "target_for",
]
