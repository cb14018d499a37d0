"""The probe's findings: one row per (connection, tool, argument, technique), judged by effects, and the
table and JSON a user reads. ESCAPED, HANG and CRASHED are findings; NOTED is a known limit of any check.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from ..paths._text import NOT_FOR_READER, for_reader

__all__ = ["FINDINGS", "NOT_REACHED", "NO_EFFECT", "Cause", "Report", "Row", "worst"]

ESCAPED = "ESCAPED"
HANG = "HANG"
CRASHED = "CRASHED"
NOTED = "noted"
HELD = "held"
UNTESTED = "untested"  # the tool refused the inside controls too: 'held' would mean nothing
NOT_REACHED = "not reached"  # refused before the tool's code ran (input validation, a protocol error)
NO_EFFECT = "no observable effect"  # the tool ran, but nothing a canary sees depends on the place
FINDINGS = (ESCAPED, HANG, CRASHED)
#: What to_json writes as ``\\uNNNN`` beyond json's own escapes (C0: its indenting newlines stay).
_JSON_ESCAPES = {code: f"\\u{code:04x}" for code in NOT_FOR_READER if code >= 0x20}
_ORDER = {ESCAPED: 0, HANG: 1, CRASHED: 2, NOTED: 3, HELD: 4, NO_EFFECT: 5, UNTESTED: 6, NOT_REACHED: 7}
_SYMLINKS = frozenset(
    ("symlink-final", "symlink-dir", "symlink-chain", "dangling-symlink", "dotdot-after-symlink")
) | {"magic-link"}
#: The missing checks, most basic first: (technique that shows it, what is missing, techniques whose
#: findings follow from it; None: every one).
_CAUSES: tuple[tuple[str, str, frozenset[str] | None], ...] = (
    ("absolute-outside", "no boundary check at all: a plain path outside the root got out", None),
    (
        "dotdot",
        "'..' is not resolved before the check",
        frozenset(("parent", "percent-encoded", "control-chars", "long-name", "dotdot-after-symlink")),
    ),
    ("symlink-final", "symlinks are not resolved before the check", _SYMLINKS | {"swap-race"}),
    ("symlink-dir", "symlinks are not resolved before the check", _SYMLINKS | {"swap-race"}),
)


@dataclass
class Cause:
    """One missing check that explains findings: the technique that shows it plainly, the places it
    showed in, and how many other findings (table rows) follow from it."""

    technique: str
    cause: str
    places: list[str] = field(default_factory=list)
    following: int = 0


@dataclass
class Row:
    connection: str
    tool: str
    argument: str
    technique: str
    outcome: str
    evidence: list[str] = field(default_factory=list)
    value: str = ""  # the argument value that showed the outcome (or the last one tried)
    calls: int = 0
    weakness: str = ""  # the technique's class (a CVE it reproduces, or a CWE)


@dataclass
class Report:
    target: str
    rows: list[Row] = field(default_factory=list)
    connections: dict[str, str] = field(default_factory=dict)  # label -> negotiated protocol version
    arguments: list[str] = field(default_factory=list)  # "tool.arg" probed
    notes: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)  # connections that could not be made or broke off
    unreached: dict[str, str] = field(default_factory=dict)  # "tool.locator" or "tool" -> why not reached
    unreached_file_tools: list[str] = field(default_factory=list)  # file tools with nothing reached
    unobserved: dict[str, str] = field(default_factory=dict)  # "tool.locator" reached, effect unseen: why
    unobserved_file_tools: list[str] = field(default_factory=list)  # file tools reached, no effect seen
    calls: int = 0
    seconds: float = 0.0

    @property
    def findings(self) -> list[Row]:
        return [row for row in self.rows if row.outcome in FINDINGS]

    @property
    def escapes(self) -> list[Row]:
        return [row for row in self.rows if row.outcome == ESCAPED]

    def caught_by(self) -> set[str]:
        """The techniques with at least one finding."""
        return {row.technique for row in self.findings}

    def classes_found(self) -> list[str]:
        """The weakness classes with at least one finding, sorted."""
        return sorted({row.weakness for row in self.findings if row.weakness})

    def causes(self) -> list[Cause]:
        """The missing checks that explain the findings, each once, with the findings that follow from it:
        one missing check is one cause, however many techniques got through because of it."""
        by_place: dict[tuple[str, str], set[str]] = {}
        for row in self.table():
            if row.outcome == ESCAPED:  # a hang or a crash is no way out: no missing check explains it
                by_place.setdefault((row.tool, row.argument), set()).add(row.technique)
        found: dict[str, Cause] = {}
        for (tool, argument), techniques in by_place.items():
            left = set(techniques)
            for technique, missing, follows in _CAUSES:
                if technique in left:
                    following = {t for t in left - {technique} if follows is None or t in follows}
                    cause = found.setdefault(missing, Cause(technique, missing))
                    cause.places.append(f"{tool} {argument}")
                    cause.following += len(following)
                    left -= following | {technique}
        return list(found.values())

    def table(self) -> list[Row]:
        """One row per (tool, argument, technique): the worst outcome over the connections tried."""
        merged: dict[tuple[str, str, str], Row] = {}
        for row in self.rows:
            key = (row.tool, row.argument, row.technique)
            if key not in merged or _ORDER[row.outcome] < _ORDER[merged[key].outcome]:
                merged[key] = row
        return list(merged.values())

    def as_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "escapes": len(self.escapes),
            "findings": len(self.findings),
            "classes": self.classes_found(),
            "connections": self.connections,
            "arguments": self.arguments,
            "calls": self.calls,
            "seconds": round(self.seconds, 2),
            "notes": self.notes,
            "failures": self.failures,
            "unreached": self.unreached,
            "unreached_file_tools": self.unreached_file_tools,
            "unobserved": self.unobserved,
            "unobserved_file_tools": self.unobserved_file_tools,
            "causes": [asdict(cause) for cause in self.causes()],
            "rows": [asdict(row) for row in self.rows],
        }

    def to_json(self) -> str:
        """The report as JSON; the rest of ``NOT_FOR_READER`` (DEL, C1, bidi controls, U+2028/U+2029) too
        written as ``\\uNNNN`` (json escapes C0 itself), so a terminal that shows it gets none of them."""
        return json.dumps(self.as_json(), indent=2, ensure_ascii=False).translate(_JSON_ESCAPES)

    def to_text(self, *, all_rows: bool = True) -> str:
        rows = self.table() if all_rows else [r for r in self.table() if r.outcome in FINDINGS]
        head = ("TOOL", "ARGUMENT", "TECHNIQUE", "CLASS", "OUTCOME")
        cells = [
            tuple(
                for_reader(c)
                for c in (r.tool, r.argument, r.technique, r.weakness.split(" (")[0], _outcome_text(r))
            )
            for r in rows
        ]
        widths = [max([len(h)] + [len(c[i]) for c in cells]) for i, h in enumerate(head[:4])]
        lines = [f"probe of {self.target}"]
        lines += [f"  connection {label}: protocol {version}" for label, version in self.connections.items()]
        lines += [
            f"CAUSE: {c.cause} ({c.technique}) in {', '.join(c.places)}"
            + (f"; {c.following} other finding(s) follow from it" if c.following else "")
            for c in self.causes()
        ]
        lines.append("")
        lines.append("  ".join(h.ljust(w) for h, w in zip(head[:4], widths, strict=True)) + "  " + head[4])
        for c in cells:
            lines.append("  ".join(v.ljust(w) for v, w in zip(c[:4], widths, strict=True)) + "  " + c[4])
        lines.append("")
        lines += [f"not reached: {place}: {why}" for place, why in self.unreached.items()]
        lines += [f"no observable effect: {place}: {why}" for place, why in self.unobserved.items()]
        lines += [
            f"FAILED: file tool {name!r} was not reached (name its path with --tool {name}:LOCATOR, or "
            f"--allow-unreached {name})"
            for name in self.unreached_file_tools
        ]
        lines += [
            f"FAILED: file tool {name!r} ran, but no place of it had an effect the probe can see, so no "
            f"verdict of it is earned (--allow-unreached {name} accepts that)"
            for name in self.unobserved_file_tools
        ]
        lines += [f"note: {n}" for n in self.notes]
        lines += [f"FAILED: {f}" for f in self.failures]
        findings = self.findings
        caught = sorted(self.caught_by())
        lines.append(
            f"{len(self.escapes)} escape(s), {len(findings) - len(self.escapes)} other finding(s), "
            f"{len(self.unreached)} place(s) not reached "
            f"in {self.calls} calls, {self.seconds:.1f} s"
            + (f"; techniques that got through: {', '.join(caught)}" if caught else "")
            + (f"; classes: {'; '.join(self.classes_found())}" if caught else "")
        )
        return "\n".join(for_reader(line) for line in lines)


def _outcome_text(row: Row) -> str:
    if row.outcome in FINDINGS or row.outcome == NOTED:
        shown = "; ".join(row.evidence[:3])
        return f"{row.outcome} [{row.connection}] {shown} (via {row.value!r})"
    return row.outcome


def worst(outcomes: list[str]) -> str:
    return min(outcomes, key=lambda o: _ORDER[o]) if outcomes else HELD
