"""The adversarial path corpus: one real tree with real symlinks, and one table of cases over it.

Every case names a path (a template over the tree, or a non-path value), the root set it is asked of,
and what must happen: the path is ``INSIDE`` (``contains`` is True, ``resolve`` returns the canonical
path), ``OUTSIDE`` (``contains`` is False, ``resolve`` raises ``PathOutsideRoots``) or ``INVALID``
(``contains`` is False, ``resolve`` raises ``InvalidPath``). ``tests/paths/test_rootset_corpus.py`` runs every
case through ``contains`` and ``resolve``; the file operations run the same table (a new case costs one
line, as in Go's ``rootTestCases``).

Use it as::

    tree = build_tree(tmp_path)              # the tree, plus the named root sets
    for case in CASES:
        value = case.path_for(tree)          # the path (str) or the raw value to ask about
        roots = tree.rootsets[case.roots]
        ...

Templates: ``{base}`` is the temporary directory (canonical), ``{basename}`` its last name, ``{root}`` is
``{base}/project``, the root
of the default root set ``"main"``. Root sets: ``main`` (project), ``symroot`` (a root given through a
symlink to project), ``nested`` (only project/nested), ``both`` (project and project/nested), ``slash``
(``/``), ``fileroot`` (the file project/file.txt), ``nfc`` (project/café, NFC), ``empty`` (no roots).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from mcp_roots import RootSet
from mcp_roots._sys import linux
from mcp_roots._sys.posix import O_PATH_NATIVE
from mcp_roots.paths._beneath import forced

INSIDE = "inside"
OUTSIDE = "outside"
INVALID = "invalid"

NFC_NAME = "caf\u00e9"  # 'café' composed
NFD_NAME = "cafe\u0301"  # 'café' decomposed: another name on Linux
LONG_CHAIN = 41  # links long_0 -> long_1 -> ... -> long_40 -> sub: following long_0 takes 41 hops


@dataclass(frozen=True)
class CorpusTree:
    """The built tree: its canonical ``base``, the main ``root`` and the named root sets."""

    base: Path
    root: Path
    rootsets: dict[str, RootSet]


@dataclass(frozen=True)
class Case:
    """One row: ``path`` is a template (str) or a raw value; ``canonical`` is the expected result of
    ``resolve`` (a template) for INSIDE rows that state it."""

    path: object
    expect: str
    why: str
    roots: str = "main"
    canonical: str | None = None

    @property
    def ops(self) -> str:
        """What every operation does with this row: ``allowed`` (it runs; it may fail as the OS would,
        FileNotFoundError...), ``outside`` (the one refusal sentence), ``invalid``,
        ``oserror`` (contains() says outside because the path cannot resolve, but it lies inside a root
        and the OS error is what the operation reports) or ``no-roots``."""
        found = OPERATION_OUTCOMES.get(self.why)
        if found is not None:
            return found
        return {INSIDE: "allowed", OUTSIDE: "outside", INVALID: "invalid"}[self.expect]

    @property
    def reaches_outside(self) -> bool:
        """The unconfined control (Go's alwaysFails): plain ``os.stat`` of this path reaches an existing
        file outside the roots, so refusing it proves the guard stopped something real."""
        return self.why in REACHES_OUTSIDE

    def path_for(self, tree: CorpusTree) -> Any:
        """The input as a client may send it: a path, or any other value (typed Any so that the corpus's
        non-paths reach the operations unchecked, as a hostile client's would)."""
        if isinstance(self.path, str):
            return fill(self.path, tree)
        if callable(self.path):
            return self.path(tree)
        return self.path

    def canonical_for(self, tree: CorpusTree) -> Path | None:
        return None if self.canonical is None else Path(fill(self.canonical, tree))

    @property
    def id(self) -> str:
        if isinstance(self.path, str):
            shown = self.path
        elif callable(self.path):
            shown = self.why
        else:
            shown = type(self.path).__name__
        text = f"{self.roots}:{shown}"
        return text if len(text) < 80 else text[:60] + f"...<{len(text)}>"


def fill(template: str, tree: CorpusTree) -> str:
    filled = template.replace("{root}", str(tree.root)).replace("{base}", str(tree.base))
    return filled.replace("{basename}", tree.base.name)


def build_tree(tmp: Path) -> CorpusTree:
    """Create the corpus tree under ``tmp`` and return it with its root sets."""
    base = Path(os.path.realpath(tmp))
    root = base / "project"
    for d in [
        "project/sub/deep/a/b/c",
        "project/dir with space",
        "project/paren(1)",
        "project/%2e%2e",
        "project/...",
        f"project/{NFC_NAME}",
        "project/nested/inner",
        "project2",
        "project_backup",
        "project.bak",
        "projectX",
        "Project",
        "outside",
    ]:
        (base / d).mkdir(parents=True, exist_ok=True)
    for f in [
        "project/file.txt",
        "project/sub/file.txt",
        "project/sub/deep/a/b/c/file.txt",
        "project/report_50%.pdf",
        "project/..test",
        "project/nested/inner/n.txt",
        "project2/x",
        "outside/secret.txt",
        "outside_file",
    ]:
        (base / f).write_text("data\n")
    os.mkfifo(base / "outside_fifo")
    links = {
        # inside -> inside
        "project/link_in": "sub",
        "project/link_in_abs": str(root / "sub"),
        "project/link_file": "file.txt",
        "project/link_dot": ".",
        "project/link_file_dot": "file.txt/.",
        "project/link_file_slash": "file.txt/",
        "project/link_sub_dot": "sub/.",
        "project/sub/up": "..",
        "project/chain1": "chain2",
        "project/chain2": "chain3",
        "project/chain3": "sub",
        # inside -> outside
        "project/link_out": "../outside",
        "project/link_out_abs": str(base / "outside"),
        "project/link_parent": "..",
        "project/link_slash": "/",
        "project/link_sibling": "../project2",
        "project/link_dotdot_in_target": "sub/../../outside",
        "project/chain_out1": "chain_out2",
        "project/chain_out2": "../outside",
        # loops and dangling links
        "project/loop_a": "loop_b",
        "project/loop_b": "loop_a",
        "project/self_loop": "self_loop",
        "project/dangling_in": "nothere",
        "project/dangling_out": "../outside/nothere",
        "project/dangling_abs_out": "/nonexistent-mcp-roots-corpus/x",
        # procfs magic links reached through a symlink
        "project/proc_root": "/proc/self/root",
        "project/proc_cwd": "/proc/self/cwd",
        "project/proc_fd0": "/proc/self/fd/0",
        "project/proc_self": "/proc/self",
        # a root given through a symlink
        "rootlink": "project",
        # an outside symlink (a probe of the '..' rule)
        "outside_link": "outside",
    }
    for i in range(LONG_CHAIN):
        links[f"project/long_{i}"] = f"long_{i + 1}" if i + 1 < LONG_CHAIN else "sub"
    for name, target in links.items():
        (base / name).symlink_to(target)
    rootsets = {
        "main": RootSet.from_paths([root]),
        "symroot": RootSet.from_paths([base / "rootlink"]),
        "nested": RootSet.from_paths([root / "nested"]),
        "both": RootSet.from_paths([root, root / "nested"]),
        "slash": RootSet.from_paths(["/"]),
        "fileroot": RootSet.from_paths([root / "file.txt"]),
        "nfc": RootSet.from_paths([root / NFC_NAME]),
        "empty": RootSet.empty(),
    }
    return CorpusTree(base, root, rootsets)


class _LyingStr(str):
    """A str subclass whose methods lie: the guard must judge the characters, not the methods."""

    lie: str = "/"

    def split(self, sep: str | None = None, maxsplit: int = -1) -> list[str]:  # type: ignore[override]
        return str(self.lie).split(sep, maxsplit)

    def startswith(self, *args: object, **kwargs: object) -> bool:
        return True


def _lying(text: str, lie: str) -> _LyingStr:
    value = _LyingStr(text)
    value.lie = lie
    return value


def _exact_length(tree: CorpusTree, size: int) -> str:
    """A path under the root of exactly ``size`` bytes, made of short missing names."""
    prefix = str(tree.root) + "/"
    need = size - len(os.fsencode(prefix))
    body = ("x/" * need)[: need - 1] + "y"
    return prefix + body


class _BytesPathLike:
    def __fspath__(self) -> bytes:
        return b"/etc/passwd"


class _BrokenPathLike:
    def __fspath__(self) -> str:
        raise RuntimeError("hostile __fspath__")


class _StrPathLike:
    def __init__(self, text: str) -> None:
        self.text = text

    def __fspath__(self) -> str:
        return self.text


def _lazy(make: Callable[[CorpusTree], object]) -> Callable[[CorpusTree], object]:
    return make


I, O, X = INSIDE, OUTSIDE, INVALID  # noqa: E741 - one letter keeps each row on one line

_DEEP = ["sub", "deep", "a", "b", "c", "file.txt"]
#: Outside names of every kind, for the '..' rule's rows: a '..' after them must give one answer.
_PROBES = [
    ("nothere", "a missing name"),
    ("outside", "a directory"),
    ("outside_file", "a file"),
    ("outside_link", "a symlink to a directory"),
    ("outside_fifo", "a FIFO"),
]


def _generated() -> list[Case]:
    """Families written as loops: '..', '.', '//' and '/' in every position of a deep path."""
    out: list[Case] = []
    last = len(_DEEP) - 1
    for i in range(len(_DEEP)):
        # '..' after component i removes it: still inside the root, unless component i is the file
        # (a file used as a directory does not resolve).
        spelled = [*_DEEP[: i + 1], "..", *_DEEP[i + 1 :]]
        kept = _DEEP[:i] + _DEEP[i + 1 :]
        if i == last:
            out.append(Case("{root}/" + "/".join(spelled), O, "'..' after the file"))
        else:
            canonical = "{root}/" + "/".join(kept)
            out.append(
                Case("{root}/" + "/".join(spelled), I, f"'..' after component {i}", canonical=canonical)
            )
        # '../..' after component i climbs one level above it: at i == 0 that leaves the root.
        spelled = [*_DEEP[: i + 1], "..", "..", *_DEEP[i + 1 :]]
        expect = O if i in (0, last) else I
        out.append(Case("{root}/" + "/".join(spelled), expect, f"'../..' after component {i}"))
        # '.' and doubled separators in every position change nothing (but '.' after the file is not
        # a directory).
        dotted = [*_DEEP[: i + 1], ".", *_DEEP[i + 1 :]]
        deep = "{root}/" + "/".join(_DEEP)
        if i == last:
            out.append(Case("{root}/" + "/".join(dotted), O, "'.' after the file"))
        else:
            out.append(Case("{root}/" + "/".join(dotted), I, f"'.' after component {i}", canonical=deep))
        doubled = "/".join(_DEEP[: i + 1]) + "//" + "/".join(_DEEP[i + 1 :])
        out.append(
            Case(
                "{root}/" + doubled.rstrip("/"),
                I,
                f"'//' after component {i}",
                canonical="{root}/" + "/".join(_DEEP),
            )
        )
        # Climbing out of the root at depth i and straight back in is outside: the '..' that leaves the
        # root decides, before what lies beyond it is looked at (the one '..' rule).
        back = [*_DEEP[:i], *([".."] * (i + 1)), "project", *_DEEP]
        out.append(Case("{root}/" + "/".join(back), O, f"out at depth {i} and back in"))
        # ... and climbing out into a sibling at depth i is outside.
        sib = [*_DEEP[:i], *([".."] * (i + 1)), "project2", "x"]
        out.append(Case("{root}/" + "/".join(sib), O, f"out at depth {i} into a sibling prefix"))
    for sibling in ["project2", "project_backup", "project.bak", "projectX", "Project", "projec", "proj"]:
        for suffix in ["", "/", "/x", "/../project2/x", "/../project/../" + sibling]:
            out.append(Case("{base}/" + sibling + suffix, O, f"sibling prefix {sibling!r}{suffix}"))
        out.append(Case("{root}/../" + sibling + "/x", O, f"'..' into the sibling {sibling!r}"))
        out.append(Case("../" + sibling + "/x", O, f"relative climb into the sibling {sibling!r}"))
    for n in [1, 2, 3, 10, 1000]:
        out.append(Case("{root}/" + "../" * n + "etc/passwd", O, f"{n} x '..' to /etc/passwd"))
        out.append(Case("../" * n + "etc/passwd", O, f"relative, {n} x '..' to /etc/passwd"))
        out.append(
            Case(
                "/" + "../" * n + "{root}/file.txt",
                I,
                f"{n} x '..' above / first",
                canonical="{root}/file.txt",
            )
        )
    return out


_TABLE: list[Case] = [
    # -- the root itself and its children --
    Case("{root}", I, "the root itself", canonical="{root}"),
    Case("{root}/", I, "the root with a trailing separator", canonical="{root}"),
    Case("{root}//", I, "the root with two trailing separators", canonical="{root}"),
    Case("{root}/.", I, "the root with a trailing '.'", canonical="{root}"),
    Case("{root}/./.", I, "the root with '././'", canonical="{root}"),
    Case("{root}/file.txt", I, "a file in the root", canonical="{root}/file.txt"),
    Case("{root}/sub", I, "a directory in the root", canonical="{root}/sub"),
    Case("{root}/sub/", I, "a directory with a trailing separator", canonical="{root}/sub"),
    Case("{root}/sub/file.txt", I, "a nested file", canonical="{root}/sub/file.txt"),
    Case(
        "{root}/sub/deep/a/b/c/file.txt",
        I,
        "a file 6 levels deep",
        canonical="{root}/sub/deep/a/b/c/file.txt",
    ),
    Case("{root}/new.txt", I, "a file that does not exist yet", canonical="{root}/new.txt"),
    Case("{root}/new/dir/file", I, "a missing tail", canonical="{root}/new/dir/file"),
    Case("{root}/new/../file.txt", I, "'..' cancels a missing name", canonical="{root}/file.txt"),
    Case("{root}/new/../../outside", O, "'..' cancels a missing name, then climbs out"),
    Case("{root}/new/x/../../..", O, "a missing tail that climbs out"),
    Case("{root}/new/../../project/x", O, "missing, out, back in"),
    Case("{root}/new/", I, "a missing directory with a trailing separator", canonical="{root}/new"),
    # -- the one '..' rule: out and back in is outside whatever lies beyond the '..' (no type oracle) --
    *[
        Case(f"{{root}}/../{probe}/../project/file.txt", O, f"out at the root, through {kind}, back in")
        for probe, kind in _PROBES
    ],
    *[
        Case(f"{{base}}/{probe}/../project/file.txt", O, f"'..' outside the roots after {kind}")
        for probe, kind in _PROBES
    ],
    *[
        Case(
            f"{{root}}/../../{{basename}}/{probe}/../../{{basename}}/project/file.txt",
            O,
            f"the one '..' rule with {kind}",
        )
        for probe, kind in _PROBES
    ],
    # -- the root spelled with '..' --
    Case("{base}/project/../project/file.txt", O, "'..' inside the root spelling"),
    Case(
        "{base}/outside/../project/file.txt",
        O,
        "'..' through an outside directory",
    ),
    Case("{base}/project2/../project/sub", O, "'..' through a sibling"),
    Case("{base}/nothere/../project/sub", O, "'..' through a missing name"),
    Case("{base}/./project/./sub", I, "'.' inside the root spelling", canonical="{root}/sub"),
    Case("{base}//project//sub", I, "'//' inside the root spelling", canonical="{root}/sub"),
    Case("{root}/..", O, "the root's parent"),
    Case("{root}/../", O, "the root's parent with a trailing separator"),
    Case("{root}/sub/../..", O, "two levels up from a child"),
    Case("{root}/sub/..", I, "'..' back to the root", canonical="{root}"),
    Case("{root}/../outside/secret.txt", O, "'..' to an outside file"),
    Case("{root}/sub/../../outside", O, "'..' twice to an outside directory"),
    Case("{root}\\x", O, "a backslash is a name character on POSIX: 'project\\x' is a sibling"),
    Case(
        "{root}/\\..\\..\\etc", I, "backslashes are not separators on POSIX", canonical="{root}/\\..\\..\\etc"
    ),
    # -- names that look like '.' or '..' --
    Case("{root}/..test", I, "'..test' is a name", canonical="{root}/..test"),
    Case("{root}/...", I, "'...' is a name", canonical="{root}/..."),
    Case("{root}/..../x", I, "'....' is a name", canonical="{root}/..../x"),
    Case("{root}/.. ", I, "'.. ' (trailing space) is a name", canonical="{root}/.. "),
    Case("{root}/ ..", I, "' ..' (leading space) is a name", canonical="{root}/ .."),
    Case("{root}/..\t", I, "'..<tab>' is a name", canonical="{root}/..\t"),
    Case("{root}/.hidden", I, "a dot file", canonical="{root}/.hidden"),
    Case("..test", I, "relative '..test'", canonical="{root}/..test"),
    Case("...", I, "relative '...'", canonical="{root}/..."),
    # -- percent signs, spaces, parentheses are not decoded --
    Case("{root}/report_50%.pdf", I, "a '%' in a name", canonical="{root}/report_50%.pdf"),
    Case("{root}/%2e%2e", I, "'%2e%2e' is a name, not '..'", canonical="{root}/%2e%2e"),
    Case(
        "{root}/%2e%2e/%2e%2e/etc/passwd",
        I,
        "encoded dots are never decoded",
        canonical="{root}/%2e%2e/%2e%2e/etc/passwd",
    ),
    Case("{root}/..%2f..%2fetc", I, "'%2f' is not a separator", canonical="{root}/..%2f..%2fetc"),
    Case("{root}/%2F..%2F..%2Fetc", I, "'%2F' is not a separator", canonical="{root}/%2F..%2F..%2Fetc"),
    Case("{root}/%00", I, "'%00' is three characters", canonical="{root}/%00"),
    Case("{root}/%252e%252e", I, "'%252e' is a name", canonical="{root}/%252e%252e"),
    Case("{root}/dir with space", I, "a space in a name", canonical="{root}/dir with space"),
    Case("{root}/dir with space/f", I, "a space in a directory name", canonical="{root}/dir with space/f"),
    Case("{root}/paren(1)", I, "parentheses in a name", canonical="{root}/paren(1)"),
    Case("{root}/paren(1)/../file.txt", I, "'..' after parentheses", canonical="{root}/file.txt"),
    Case("{root} /x", O, "'project ' (trailing space) is a sibling"),
    Case("{root}%20/x", O, "'project%20' is a sibling"),
    Case("{base}/project%2fsub", O, "'project%2fsub' is a sibling name, not project/sub"),
    Case(
        "file:///etc/passwd",
        I,
        "a URI given as a path is a relative name",
        canonical="{root}/file:/etc/passwd",
    ),
    Case("~/x", I, "'~' is not expanded", canonical="{root}/~/x"),
    Case("$HOME/x", I, "'$HOME' is not expanded", canonical="{root}/$HOME/x"),
    # -- Unicode: bytes are compared exactly on Linux --
    Case("{root}/" + NFC_NAME, I, "an NFC name that exists", canonical="{root}/" + NFC_NAME),
    Case(
        "{root}/" + NFD_NAME, I, "the NFD spelling is another (missing) name", canonical="{root}/" + NFD_NAME
    ),
    Case(
        "{root}/" + NFC_NAME + "/x",
        I,
        "inside the NFC root",
        roots="nfc",
        canonical="{root}/" + NFC_NAME + "/x",
    ),
    Case("{root}/" + NFD_NAME + "/x", O, "NFD is not NFC on Linux", roots="nfc"),
    Case("{root}/CAFÉ/x", O, "case differs: another name on Linux", roots="nfc"),
    Case("{base}/Project/x", O, "'Project' is not 'project' on Linux"),
    Case("{base}/PROJECT/file.txt", O, "upper case is not the root on Linux"),
    Case("{root}/\udcff", I, "an undecodable byte (surrogateescape) is a name", canonical="{root}/\udcff"),
    Case("{root}/\ud800", X, "a lone surrogate cannot be encoded for the filesystem"),
    Case(
        "{root}/\u202e.txt", I, "a right-to-left override is just a character", canonical="{root}/\u202e.txt"
    ),
    Case("{root}/\u2024\u2024/x", I, "one-dot leaders are not '..'", canonical="{root}/\u2024\u2024/x"),
    Case("{root}/\uff0e\uff0e/x", I, "fullwidth dots are not '..'", canonical="{root}/\uff0e\uff0e/x"),
    Case("{root}\u2215x", O, "a division slash is not a separator: a sibling name"),
    # -- NUL, empty, non-strings --
    Case("{root}/file\x00.txt", X, "a NUL byte"),
    Case("{root}\x00/../../etc/passwd", X, "a NUL byte before '..'"),
    Case("\x00", X, "only a NUL byte"),
    Case("", X, "the empty string"),
    Case("", X, "the empty string with no roots", roots="empty"),
    Case(None, X, "None"),
    Case(42, X, "an int"),
    Case(3.5, X, "a float"),
    Case(True, X, "a bool"),
    Case(b"/etc/passwd", X, "bytes"),
    Case(bytearray(b"/etc"), X, "a bytearray"),
    Case(["/etc"], X, "a list"),
    Case(object(), X, "an object"),
    Case(_BytesPathLike(), X, "a PathLike that returns bytes"),
    Case(_BrokenPathLike(), X, "a PathLike whose __fspath__ raises"),
    Case(_lazy(lambda t: t.root / "file.txt"), I, "a pathlib.Path", canonical="{root}/file.txt"),
    Case(_lazy(lambda t: PurePosixPath(t.root, "sub")), I, "a PurePosixPath", canonical="{root}/sub"),
    Case(_lazy(lambda t: _StrPathLike(str(t.base / "outside"))), O, "a PathLike to an outside dir"),
    Case(
        _lazy(lambda t: _lying(str(t.base / "outside/secret.txt"), str(t.root / "file.txt"))),
        O,
        "a str subclass whose split() lies",
    ),
    Case(_lazy(lambda t: _lying("../outside", str(t.root))), O, "a relative str subclass whose methods lie"),
    # -- relative paths (relative to the first root) --
    Case("file.txt", I, "a relative file", canonical="{root}/file.txt"),
    Case("./file.txt", I, "'./' relative", canonical="{root}/file.txt"),
    Case("sub/../file.txt", I, "a relative path with '..'", canonical="{root}/file.txt"),
    Case(".", I, "'.' is the first root", canonical="{root}"),
    Case("..", O, "relative '..' leaves the root"),
    Case("../outside/secret.txt", O, "a relative climb out"),
    Case("../project/file.txt", O, "a relative climb out and back"),
    Case("link_out/secret.txt", O, "a relative path through a link out"),
    Case("file.txt", O, "a relative path with no roots fails closed", roots="empty"),
    Case("x", I, "relative to the root '/'", roots="slash", canonical="/x"),
    Case("n.txt", O, "relative to a file root: the file is not a directory", roots="fileroot"),
    # -- symlinks inside -> inside --
    Case("{root}/link_in", I, "a link to a sibling dir inside", canonical="{root}/sub"),
    Case("{root}/link_in/file.txt", I, "through a link inside", canonical="{root}/sub/file.txt"),
    Case("{root}/link_in/", I, "a link with a trailing separator", canonical="{root}/sub"),
    Case(
        "{root}/link_in_abs/file.txt", I, "through an absolute link inside", canonical="{root}/sub/file.txt"
    ),
    Case("{root}/link_file", I, "a link to a file inside", canonical="{root}/file.txt"),
    Case("{root}/link_dot/link_dot/file.txt", I, "a link to '.' twice", canonical="{root}/file.txt"),
    Case(
        "{root}/" + "link_dot/" * 40 + "file.txt",
        I,
        "40 links: the kernel's limit",
        canonical="{root}/file.txt",
    ),
    Case("{root}/" + "link_dot/" * 41 + "file.txt", O, "41 links: one too many"),
    Case("{root}/sub/up/file.txt", I, "a link to '..' that stays inside", canonical="{root}/file.txt"),
    Case("{root}/sub/up/../outside", O, "'..' after a link is physical, not lexical"),
    Case("{root}/link_in/../file.txt", I, "'..' after a link to sub", canonical="{root}/file.txt"),
    Case("{root}/chain1", I, "a chain of three links inside", canonical="{root}/sub"),
    Case("{root}/chain1/file.txt", I, "through a chain", canonical="{root}/sub/file.txt"),
    Case("{root}/long_1", I, "a chain of 40 links", canonical="{root}/sub"),
    Case("{root}/long_0", O, "a chain of 41 links is a loop"),
    Case("{root}/long_0/file.txt", O, "through a chain of 41 links"),
    Case("{root}/dangling_in", I, "a dangling link whose target would be inside", canonical="{root}/nothere"),
    Case("{root}/dangling_in/x", I, "below a dangling link inside", canonical="{root}/nothere/x"),
    # -- symlinks inside -> outside --
    Case("{root}/link_out", O, "a link to an outside dir"),
    Case("{root}/link_out/secret.txt", O, "a file through a link out"),
    Case("{root}/link_out/", O, "a link out with a trailing separator"),
    Case("{root}/link_out/..", O, "'..' after a link out"),
    Case(
        "{root}/link_out/../project/file.txt",
        O,
        "out through a link, back in by name",
    ),
    Case("{root}/link_out_abs/secret.txt", O, "an absolute link out"),
    Case("{root}/link_parent", O, "a link to '..'"),
    Case("{root}/link_parent/project2/x", O, "a link to '..' then a sibling"),
    Case("{root}/link_parent/project/file.txt", O, "a link to '..' then back in"),
    Case("{root}/link_slash/etc/passwd", O, "a link to '/'"),
    Case("{root}/link_sibling/x", O, "a link to a sibling prefix"),
    Case("{root}/link_dotdot_in_target", O, "a link whose target climbs out"),
    Case("{root}/chain_out1/secret.txt", O, "a chain that ends outside"),
    Case("{root}/dangling_out", O, "a dangling link whose target would be outside"),
    Case("{root}/dangling_out/x", O, "below a dangling link out"),
    Case("{root}/dangling_abs_out", O, "a dangling absolute link out"),
    # -- loops and files used as directories --
    Case("{root}/loop_a", O, "a two-link loop"),
    Case("{root}/loop_b/x", O, "below a loop"),
    Case("{root}/self_loop", O, "a link to itself"),
    Case("{root}/self_loop/../file.txt", O, "'..' after a loop"),
    Case("{root}/file.txt/x", O, "a file used as a directory"),
    Case("{root}/file.txt/..", O, "'..' after a file"),
    Case("{root}/file.txt/", O, "a file with a trailing separator"),
    Case("{root}/file.txt/.", O, "a file with a trailing '.'"),
    Case("{root}/link_file/", O, "a link to a file with a trailing separator"),
    Case("{root}/link_file/x", O, "a link to a file used as a directory"),
    Case("{root}/link_file_dot", O, "a link to a file whose target ends in '/.'"),
    Case("{root}/link_file_slash", O, "a link to a file whose target ends in '/'"),
    Case("{root}/link_sub_dot", I, "a link to a directory whose target ends in '/.'", canonical="{root}/sub"),
    # -- procfs magic links --
    Case("{root}/proc_root", O, "a link to /proc/self/root"),
    Case("{root}/proc_root/etc/passwd", O, "through /proc/self/root"),
    Case("{root}/proc_root" + "{root}/file.txt", O, "back into the root through /proc/self/root"),
    Case("{root}/proc_cwd", O, "a link to /proc/self/cwd"),
    Case("{root}/proc_cwd/x", O, "through /proc/self/cwd"),
    Case("{root}/proc_fd0", O, "a link to /proc/self/fd/0"),
    Case("{root}/proc_self/status", O, "a plain procfs link out"),
    Case("/proc/self/root/etc/passwd", O, "/proc/self/root with the root '/'", roots="slash"),
    Case("/proc/self/root", O, "/proc/self/root itself with the root '/'", roots="slash"),
    Case("/proc/self/cwd", O, "/proc/self/cwd with the root '/'", roots="slash"),
    Case("/proc/thread-self/root/etc", O, "/proc/thread-self/root with the root '/'", roots="slash"),
    Case("/proc/self/fd/0", O, "/proc/self/fd/0 with the root '/'", roots="slash"),
    Case("{root}/proc_root", O, "/proc/self/root through a link with the root '/'", roots="slash"),
    Case("{root}/proc_cwd/x", O, "/proc/self/cwd through a link with the root '/'", roots="slash"),
    Case("/proc/self/status", I, "/proc/self is a plain link", roots="slash"),
    # -- a root that is itself a symlink --
    Case(
        "{base}/rootlink/file.txt",
        I,
        "through the symlink the root was given as",
        roots="symroot",
        canonical="{root}/file.txt",
    ),
    Case("{root}/file.txt", I, "the canonical spelling", roots="symroot", canonical="{root}/file.txt"),
    Case("{base}/rootlink", I, "the link itself", roots="symroot", canonical="{root}"),
    Case("{base}/rootlink/..", O, "'..' after the root link is the link target's parent", roots="symroot"),
    Case("{base}/rootlink/../outside", O, "out of a symlinked root", roots="symroot"),
    Case(
        "{base}/rootlink/../project/x",
        O,
        "out of and back into a symlinked root",
        roots="symroot",
    ),
    Case("{base}/rootlink2/x", O, "a sibling prefix of the link", roots="symroot"),
    # -- nested roots and a root of '/' --
    Case(
        "{root}/nested/inner/n.txt",
        I,
        "inside the inner root",
        roots="nested",
        canonical="{root}/nested/inner/n.txt",
    ),
    Case("{root}/nested/../file.txt", O, "from the inner root to its parent", roots="nested"),
    Case("{root}/file.txt", O, "the outer root is not a root here", roots="nested"),
    Case("{root}/nested", I, "the inner root itself", roots="nested", canonical="{root}/nested"),
    Case("{root}/nested_evil", O, "a sibling prefix of the inner root", roots="nested"),
    Case("{root}/nested/inner/n.txt", I, "nested roots: the inner file", roots="both"),
    Case(
        "{root}/nested/../file.txt",
        I,
        "nested roots: the outer file",
        roots="both",
        canonical="{root}/file.txt",
    ),
    Case("{root}/../outside", O, "nested roots: outside both", roots="both"),
    Case("/etc/passwd", I, "everything resolvable is under '/'", roots="slash", canonical="/etc/passwd"),
    Case("/", I, "the root '/' itself", roots="slash", canonical="/"),
    Case("//", I, "'//' is '/'", roots="slash", canonical="/"),
    Case("/..", I, "'..' above '/' is '/'", roots="slash", canonical="/"),
    Case(
        "/nonexistent-mcp-roots/x",
        I,
        "a missing path under '/'",
        roots="slash",
        canonical="/nonexistent-mcp-roots/x",
    ),
    Case("{root}/loop_a", O, "a loop is outside even under '/'", roots="slash"),
    Case("{root}/file.txt/x", O, "a file as a directory is outside even under '/'", roots="slash"),
    Case("", X, "empty is invalid even under '/'", roots="slash"),
    Case(None, X, "None is invalid even under '/'", roots="slash"),
    # -- a root that is a file --
    Case("{root}/file.txt", I, "the file root", roots="fileroot", canonical="{root}/file.txt"),
    Case("{root}/link_file", I, "a link to the file root", roots="fileroot", canonical="{root}/file.txt"),
    Case("{root}/file.txt/x", O, "below a file root", roots="fileroot"),
    Case("{root}/file.txt/", O, "the file root with a trailing separator", roots="fileroot"),
    Case("{root}/file.txt2", O, "a sibling prefix of the file root", roots="fileroot"),
    Case("{root}/sub", O, "beside the file root", roots="fileroot"),
    # -- no roots: fail closed --
    Case("{root}/file.txt", O, "no roots: an existing file", roots="empty"),
    Case("/", O, "no roots: '/'", roots="empty"),
    Case(None, X, "no roots: None is still invalid", roots="empty"),
    # -- length limits --
    Case("{root}/" + "a" * 5000, X, "longer than PATH_MAX"),
    Case("{root}/" + "./" * 2100 + "file.txt", X, "longer than PATH_MAX even though it normalizes short"),
    Case(_lazy(lambda t: _exact_length(t, 4096)), X, "PATH_MAX bytes exactly is too long"),
    Case(_lazy(lambda t: _exact_length(t, 4095)), I, "PATH_MAX - 1 bytes is the longest path"),
    Case("{root}/" + "a" * 256, O, "a name longer than NAME_MAX cannot be looked up"),
    Case("{root}/" + "a" * 255, I, "a name of NAME_MAX bytes", canonical="{root}/" + "a" * 255),
    Case("{root}/" + "./" * 999 + "file.txt", I, "1000 components of '.'", canonical="{root}/file.txt"),
    Case("{root}/" + "x/" * 999 + "y", I, "1000 missing components", canonical="{root}/" + "x/" * 999 + "y"),
    Case(
        "{root}/" + "sub/../" * 500 + "file.txt",
        I,
        "1000 components of 'sub/..'",
        canonical="{root}/file.txt",
    ),
    Case("{root}/" + "x/" * 500 + "../" * 501 + "outside", O, "1000 components that climb out at the end"),
    Case(
        "{root}/" + "x/" * 500 + "../" * 500 + "file.txt",
        I,
        "1000 components that stay in",
        canonical="{root}/file.txt",
    ),
]

CASES: list[Case] = _TABLE + _generated()


# --- Resolution strategies (MCP_ROOTS_RESOLVE), for the tests that run under each --------------------------

#: The strategies this machine can run: openat2 (where Linux has it), the O_PATH walk (where O_PATH
#: exists) and the walk without O_PATH (what macOS and the BSDs get).
STRATEGIES: list[str] = [
    name
    for name in ("openat2", "walk", "walk-no-opath")
    if (name != "openat2" or linux.OPENAT2 is not None) and (name != "walk" or O_PATH_NATIVE)
]


@contextlib.contextmanager
def strategy_in_force(name: str, *, self_check: bool = True) -> Iterator[str]:
    """Resolve with ``name`` inside the block through the documented test hook (``_beneath.forced``), with
    the self-check on by default: every openat2 answer is re-done by the walk and compared."""
    with forced(name, self_check=self_check):
        yield name


#: The ``ops`` column where it differs from what ``expect`` implies (keyed by the row's ``why``, unique).
OPERATION_OUTCOMES: dict[str, str] = {
    "a relative path with no roots fails closed": "no-roots",
    "relative to a file root: the file is not a directory": "oserror",
    "a file used as a directory": "oserror",
    "'..' after a file": "oserror",
    "a file with a trailing separator": "oserror",
    "a file with a trailing '.'": "oserror",
    "a link to a file with a trailing separator": "oserror",
    "a link to a file used as a directory": "oserror",
    "a link to a file whose target ends in '/.'": "oserror",
    "a link to a file whose target ends in '/'": "oserror",
    "a file as a directory is outside even under '/'": "oserror",
    "below a file root": "oserror",
    "the file root with a trailing separator": "oserror",
    "a name longer than NAME_MAX cannot be looked up": "oserror",
    "'..' after the file": "oserror",
    "'../..' after component 5": "oserror",
    "'.' after the file": "oserror",
}

#: The unconfined-control column: rows whose path, followed by plain ``os`` calls, reaches a file outside.
REACHES_OUTSIDE: frozenset[str] = frozenset(
    {
        "the root's parent",
        "the root's parent with a trailing separator",
        "two levels up from a child",
        "'..' to an outside file",
        "'..' twice to an outside directory",
        "a str subclass whose split() lies",
        "'..' after a link is physical, not lexical",
        "a link to an outside dir",
        "a file through a link out",
        "a link out with a trailing separator",
        "'..' after a link out",
        "an absolute link out",
        "a link to '..'",
        "a link to '..' then a sibling",
        "a link to '/'",
        "a link to a sibling prefix",
        "a link whose target climbs out",
        "a chain that ends outside",
        "a link to /proc/self/root",
        "through /proc/self/root",
        "a link to /proc/self/cwd",
        "a link to /proc/self/fd/0",
        "a plain procfs link out",
        "'..' after the root link is the link target's parent",
        "out of a symlinked root",
        "from the inner root to its parent",
        "the outer root is not a root here",
        "nested roots: outside both",
        "beside the file root",
        "no roots: an existing file",
        "no roots: '/'",
        "out at depth 0 into a sibling prefix",
        "out at depth 1 into a sibling prefix",
        "out at depth 2 into a sibling prefix",
        "out at depth 3 into a sibling prefix",
        "out at depth 4 into a sibling prefix",
        "out at depth 5 into a sibling prefix",
        "sibling prefix 'project2'",
        "sibling prefix 'project2'/",
        "sibling prefix 'project2'/x",
        "sibling prefix 'project2'/../project2/x",
        "sibling prefix 'project2'/../project/../project2",
        "'..' into the sibling 'project2'",
        "sibling prefix 'project_backup'",
        "sibling prefix 'project_backup'/",
        "sibling prefix 'project_backup'/../project2/x",
        "sibling prefix 'project_backup'/../project/../project_backup",
        "sibling prefix 'project.bak'",
        "sibling prefix 'project.bak'/",
        "sibling prefix 'project.bak'/../project2/x",
        "sibling prefix 'project.bak'/../project/../project.bak",
        "sibling prefix 'projectX'",
        "sibling prefix 'projectX'/",
        "sibling prefix 'projectX'/../project2/x",
        "sibling prefix 'projectX'/../project/../projectX",
        "sibling prefix 'Project'",
        "sibling prefix 'Project'/",
        "sibling prefix 'Project'/../project2/x",
        "sibling prefix 'Project'/../project/../Project",
        "10 x '..' to /etc/passwd",
        "1000 x '..' to /etc/passwd",
    }
)
