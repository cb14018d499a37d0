"""The probe's techniques: one row per way out of a root, each with the paths (and file: URIs) that try it
against the scratch tree, and the server bug it is made to catch. A new technique is one row.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import quote

from ._scratch import LONG_NAME, TWIN_NFD, Scratch

__all__ = ["TECHNIQUES", "Technique", "Variant", "technique_named", "weakness_of"]


@dataclass(frozen=True)
class Variant:
    """One argument value: a path (or a file: URI, for arguments that take URIs)."""

    value: str
    kind: str  # "file": names a file; "dir": a directory; "new": a name to create


#: The weakness classes a technique belongs to (what a CI can gate on: ``--json`` rows carry it).
TRAVERSAL = "CWE-22 path traversal"
SIBLING = "CVE-2025-53110 sibling prefix (CWE-22)"
SYMLINK = "CVE-2025-53109 symlink following (CWE-59)"
LINK = "CWE-59 link following"
RACE = "CWE-367 check-then-use race"
ENCODING = "CWE-177 encoding decoded after the check"
EQUIVALENCE = "CWE-41 equivalent names (case, Unicode)"
CONTROL = "CWE-158 control characters"
SPECIAL = "CWE-400 special file (hang)"
HARDLINK = "CWE-62 hard link"


@dataclass(frozen=True)
class Technique:
    name: str
    catches: str  # the server bug it is made to catch
    paths: Callable[[Scratch], list[Variant]]
    weakness: str = TRAVERSAL  # its class: a CVE it reproduces, or a CWE
    uris: Callable[[Scratch], list[Variant]] | None = None  # extra raw URIs, for URI arguments
    once: bool = False  # costly or blocking: run in the first connection only
    race: bool = False  # run while the scratch tree swaps a directory with a link out
    limit: bool = False  # an effect here is no escape a path check could stop: 'noted', not a finding
    needs_roots: bool = False  # meaningful only where the probe declares client roots
    #: values for the parameters of the resource templates a server lists (each template, each value)
    parameters: Callable[[Scratch], list[Variant]] | None = None


def _f(value: str) -> Variant:
    return Variant(value, "file")


def _d(value: str) -> Variant:
    return Variant(value, "dir")


def _n(value: str) -> Variant:
    return Variant(value, "new")


_EXPRESSION = re.compile(r"\{[^{}]{0,200}\}")


def expand_template(template: str, value: str) -> str:
    """``template`` (an RFC 6570 URI template from resources/templates/list) with every expression replaced
    by ``value`` as it is: the probe sends what a template's own expansion would have encoded."""
    return _EXPRESSION.sub(lambda _: value, template[:2000])


def file_uri(path: str) -> str:
    """A file: URI naming ``path`` literally (every byte that is not unreserved is percent-encoded)."""
    return "file://" + quote(path, safe="/")


TECHNIQUES: list[Technique] = [
    Technique(
        "absolute-outside",
        "no check at all: an absolute path outside the roots (the control every server must refuse)",
        lambda s: [
            _f(f"{s.base}/{s.n('outside')}/{s.n('secret.txt')}"),
            _d(f"{s.base}/{s.n('outside')}"),
            _n(f"{s.base}/{s.n('outside')}/new.txt"),
        ],
    ),
    Technique(
        "dotdot",
        "'..' not resolved before the check",
        lambda s: [
            _f(f"{s.root}/../{s.n('outside')}/{s.n('secret.txt')}"),
            _d(f"{s.root}/../{s.n('outside')}"),
            _f(f"../{s.n('outside')}/{s.n('secret.txt')}"),
            _n(f"{s.root}/../{s.n('outside')}/new.txt"),
        ],
    ),
    Technique(
        "sibling-prefix",
        "a prefix check without a separator: '/x/root_evil' taken for inside '/x/root'",
        lambda s: [
            _f(f"{s.base}/{s.n('root_evil')}/{s.n('secret.txt')}"),
            _d(f"{s.base}/{s.n('root_evil')}"),
            _n(f"{s.base}/{s.n('root_evil')}/new.txt"),
        ],
        weakness=SIBLING,
    ),
    Technique(
        "parent",
        "the root's parent itself taken as inside",
        lambda s: [
            _d(f"{s.root}/.."),
            _d(str(s.base)),
            _f(f"{s.base}/{s.n('parent-secret.txt')}"),
            _n(f"{s.root}/../new.txt"),
        ],
    ),
    Technique(
        "relative-cwd",
        "a relative path resolved against the server's working directory instead of the root",
        lambda s: [
            _f(f"{s.n('outside')}/{s.n('secret.txt')}"),
            _d(f"{s.n('outside')}"),
            _f(f"{s.n('parent-secret.txt')}"),
            _n(f"{s.n('outside')}/new.txt"),
        ],
    ),
    Technique(
        "symlink-final",
        "the realpath of the parent only: a last component that is a symlink out",
        lambda s: [
            _f(f"{s.root}/{s.n('link-out')}"),
            _d(f"{s.root}/{s.n('dir-out')}"),
            _f(f"{s.n('link-out')}"),
        ],
        weakness=SYMLINK,
    ),
    Technique(
        "symlink-dir",
        "a directory symlink out in the middle of the path",
        lambda s: [
            _f(f"{s.root}/{s.n('dir-out')}/{s.n('secret.txt')}"),
            _d(f"{s.root}/{s.n('dir-out')}/{s.n('deep')}"),
            _n(f"{s.root}/{s.n('dir-out')}/new.txt"),
        ],
        weakness=SYMLINK,
    ),
    Technique(
        "symlink-chain",
        "only the first link of a chain followed before the check",
        lambda s: [_f(f"{s.root}/{s.n('chain1')}")],
        weakness=SYMLINK,
    ),
    Technique(
        "dangling-symlink",
        "a write that follows a final symlink to a file that does not exist yet (created outside)",
        lambda s: [_n(f"{s.root}/{s.n('dangling')}"), _f(f"{s.root}/{s.n('dangling')}")],
        weakness=SYMLINK,
    ),
    Technique(
        "dotdot-after-symlink",
        "'..' normalized before symlinks are resolved: 'hop/..' is the link target's parent, not the root",
        lambda s: [
            _f(f"{s.root}/{s.n('hop')}/../{s.n('secret.txt')}"),
            _d(f"{s.root}/{s.n('hop')}/.."),
            _n(f"{s.root}/{s.n('hop')}/../new.txt"),
        ],
        weakness=SYMLINK,
    ),
    Technique(
        "magic-link",
        "procfs magic links (/proc/self/root, /proc/self/cwd) that jump anywhere",
        lambda s: [
            _f(f"/proc/self/root{s.base}/{s.n('outside')}/{s.n('secret.txt')}"),
            _f(f"{s.root}/{s.n('proc-link')}{s.base}/{s.n('outside')}/{s.n('secret.txt')}"),
            _f(f"/proc/self/cwd/{s.n('outside')}/{s.n('secret.txt')}"),
            _d(f"/proc/self/root{s.base}/{s.n('outside')}"),
            _n(f"/proc/self/root{s.base}/{s.n('outside')}/new.txt"),
        ],
        weakness=LINK,
    ),
    Technique(
        "percent-encoded",
        "paths percent-decoded after the check ('%2e%2e' is '..')",
        lambda s: [
            _f(f"{s.root}/%2e%2e/{s.n('outside')}/{s.n('secret.txt')}"),
            _f(f"{s.root}/..%2F{s.n('outside')}%2F{s.n('secret.txt')}"),
            _f(f"{s.root}/%252e%252e/{s.n('outside')}/{s.n('secret.txt')}"),
            _d(f"{s.root}/%2e%2e/{s.n('outside')}"),
        ],
        uris=lambda s: [
            _f(f"file://{s.root}/%2e%2e/{s.n('outside')}/{s.n('secret.txt')}"),
            _f(f"file://{s.root}/..%2F{s.n('outside')}%2F{s.n('secret.txt')}"),
            _f(f"file://{s.root}/%252e%252e/{s.n('outside')}/{s.n('secret.txt')}"),
            _f(f"file://{s.root}/../{s.n('outside')}/{s.n('secret.txt')}"),
        ],
        weakness=ENCODING,
    ),
    Technique(
        "percent-root",
        "root URIs percent-decoded twice: the root 'sub%2F..' becomes 'sub/..', its parent",
        lambda s: [_f(f"{s.percent_root.parent}/{s.n('pct-secret.txt')}"), _d(str(s.percent_root.parent))],
        needs_roots=True,
        weakness=ENCODING,
    ),
    Technique(
        "unicode-folded",
        "names folded (case, NFKC) before the check: 'ROOT', fullwidth 'ｒｏｏｔ', fullwidth dots",
        lambda s: [
            _f(f"{s.base}/{s.n('ROOT')}/{s.n('secret.txt')}"),
            _f(f"{s.base}/{s.n('fullwidth')}/{s.n('secret.txt')}"),
            _f(f"{s.root}/\uff0e\uff0e/{s.n('outside')}/{s.n('secret.txt')}"),
            _d(f"{s.base}/{s.n('ROOT')}"),
        ],
        weakness=EQUIVALENCE,
    ),
    Technique(
        "control-chars",
        "control characters stripped after the check ('.\\x01.' becomes '..'), or names with a newline",
        lambda s: [
            _f(f"{s.root}/.\x01./{s.n('outside')}/{s.n('secret.txt')}"),
            _f(f"{s.root}/.\n./{s.n('outside')}/{s.n('secret.txt')}"),
            _f(f"{s.root}/.\x7f./{s.n('outside')}/{s.n('secret.txt')}"),
            _f(f"{s.root}/../{s.n('outside')}/ctl\n{s.n('secret.txt')}"),
            _f(f"{s.root}/{s.n('benign.txt')}\x00/../../{s.n('outside')}/{s.n('secret.txt')}"),
        ],
        once=True,
        weakness=CONTROL,
    ),
    Technique(
        "long-name",
        "over-long names and paths (NAME_MAX, PATH_MAX) normalized differently by the check and the open",
        lambda s: [
            _f(f"{s.root}/../{s.n('outside')}/{LONG_NAME}"),
            _f(f"{s.root}/{'a' * 300}/../../{s.n('outside')}/{s.n('secret.txt')}"),
            _f(f"{s.root}/{'./' * 2100}../{s.n('outside')}/{s.n('secret.txt')}"),
        ],
        once=True,
        weakness=TRAVERSAL,
    ),
    Technique(
        "fifo",
        "a FIFO opened for reading or writing: the call blocks forever",
        lambda s: [_f(f"{s.root}/{s.n('fifo')}")],
        once=True,
        weakness=SPECIAL,
    ),
    Technique(
        "swap-race",
        "check-then-open: a directory swapped for a symlink out between the check and the open",
        lambda s: [
            _f(f"{s.root}/{s.n('race')}/{s.n('d')}/{s.n('secret.txt')}"),
            _n(f"{s.root}/{s.n('race')}/{s.n('d')}/new.txt"),
        ],
        once=True,
        race=True,
        weakness=RACE,
    ),
    Technique(
        "unicode-twin",
        "names compared after Unicode normalization (NFC/NFD) but opened as sent: the root 'tw\u00efn' (NFC) "
        "taken for its outside twin 'twi\u0308n' (NFD)",
        lambda s: [
            _f(f"{s.twin_root.parent}/{TWIN_NFD}/{s.n('secret.txt')}"),
            _d(f"{s.twin_root.parent}/{TWIN_NFD}"),
        ],
        weakness=EQUIVALENCE,
        needs_roots=True,
    ),
    Technique(
        "template-dotdot",
        "'..' (plain or percent-encoded) in a resource template's URI parameter, joined to a directory "
        "unchecked",
        lambda s: [],
        parameters=lambda s: [
            _f(f"../{s.n('outside')}/{s.n('secret.txt')}"),
            _f(f"..%2F{s.n('outside')}%2F{s.n('secret.txt')}"),
            _f(f"%2e%2e%2F{s.n('outside')}%2F{s.n('secret.txt')}"),
            _f(f"..%252F{s.n('outside')}%252F{s.n('secret.txt')}"),
            _f(f"{s.base}/{s.n('outside')}/{s.n('secret.txt')}"),
        ],
    ),
    Technique(
        "hard-link",
        "a hard link inside the root to a file outside (no path check can tell; noted, not counted)",
        lambda s: [_f(f"{s.root}/{s.n('hardlink')}")],
        limit=True,
        weakness=HARDLINK,
    ),
]


def weakness_of(name: str) -> str:
    """The class of the technique ``name`` (the inside controls: link following)."""
    for technique in TECHNIQUES:
        if technique.name == name:
            return technique.weakness
    return LINK


def technique_named(name: str) -> Technique:
    for technique in TECHNIQUES:
        if technique.name == name:
            return technique
    raise KeyError(name)
