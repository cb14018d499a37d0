"""The layering of docs/design.md ("How it fits together"), checked on the imports themselves.

Every module under src/mcp_roots is parsed (not imported). The package is a handful of tiers (TIERS, lowest
first); a module may import from its own tier's earlier members or from a lower tier, never upward. Inside
every package the modules have an order too (INSIDE): a module imports only from its own rung or a lower
one. The applications (filesystem, probe, wrap, testing, cli, __main__) use the public face (``mcp_roots``,
``mcp_roots.errors``) and the internal API named in APP_API, never another package's private modules. Only
the SDK-facing modules import an MCP SDK or pydantic; only _sys/ imports ctypes; no module reads a sibling
module's underscore name (``from ._x import _y``, ``_x._y``); no modules import each other in a circle (lazy
imports included); every module is at most 600 lines. A new module is one entry in a table.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src" / "mcp_roots"
PACKAGE = "mcp_roots"

#: The tiers, lowest first. A module's place is named by its first component under mcp_roots (a module or a
#: package); the members of one tier are ordered too (the applications: filesystem below probe below cli).
TIERS: list[tuple[str, tuple[str, ...]]] = [
    # the public exception hierarchy; the faces' names loaded on first use; the Protocols of the signatures
    ("base", ("errors", "_lazy", "_types")),
    ("platform", ("_sys",)),  # ctypes, syscall numbers, /proc and statfs facts
    ("sandbox", ("sandbox",)),  # children confined by the kernel; needs only _sys and errors
    ("paths", ("paths",)),  # text rules, URIs, RootSet, race-free operations
    ("roots", ("roots",)),  # where roots come from, the legacy lifecycle, which roots a request gets
    ("guard", ("guard",)),  # which parameters are paths, the audit, the guarded call
    ("adapters", ("adapters",)),  # one port and one SDK seam per framework
    ("broker", ("broker",)),  # client-brokered files/*
    ("facade", ("_rootsguard",)),  # RootsGuard: installs an adapter and the broker
    ("public", ("__init__",)),  # the curated public API
    ("applications", ("filesystem", "probe", "wrap", "testing", "cli", "__main__")),
]

#: Inside each package, its modules' order (lowest first; one tuple is one rung, whose modules may import
#: each other). ``__init__`` is the package's face.
INSIDE: dict[str, list[tuple[str, ...]]] = {
    "_sys": [("posix", "linux", "landlock", "seccomp", "privileges", "attempts"), ("__init__",)],
    "sandbox": [
        ("_protect",),
        ("_plan", "_tree", "_root"),
        ("_srt", "_exec"),
        ("_spawn", "_self"),
        ("_launch",),
        ("_proof",),
        ("_srtproof",),
        ("_doctor",),
        ("__init__",),
    ],
    "paths": [
        ("_text", "_fold"),
        ("_uri", "_index"),
        ("_beneath", "_tree"),
        ("_canonical", "_descriptors"),
        ("_root", "_router"),
        ("_open", "_remove", "_rename", "_access"),
        ("_write", "_dirs", "_confined"),
        ("_rootset",),
        ("__init__",),
    ],
    "roots": [
        ("_owned", "_facts", "_config", "_clock", "_consent"),
        ("_answers", "_sources"),
        ("_streak",),
        ("_cache",),
        ("_connections",),
        ("_policy", "_provider"),
        ("_asking", "_port"),
        ("_jsonrpc",),
        ("__init__",),
    ],
    "guard": [
        ("_pathnames", "_locators"),
        ("_annotations",),
        ("_values",),
        ("_audit", "_schema"),
        ("_argcheck",),
        ("_port",),
        ("_consent",),
        ("_calls",),
        ("__init__",),
    ],
    "adapters": [
        ("mcp2_sdk", "fastmcp4_sdk", "mcp1_sdk"),
        ("mcp2_ask",),
        ("mcp1_dispatch",),
        ("mcp2", "mcp1"),
        ("fastmcp4",),
        ("__init__",),
    ],
    "broker": [
        ("_protocol", "_consent", "_records"),
        ("_wire", "_grants"),
        ("_reasons", "_hostops", "_sdk"),
        ("_locator", "_uploads", "_watch", "_server"),
        ("_methods",),
        ("_host",),
        ("__init__",),
    ],
    "filesystem": [
        (
            "_globs",
            "_text",
            "_state",
            "_auth",
            "_budget",
            "_uvicorn",
            "_sessions",
            "_cachefile",
            "_arguments",
        ),
        ("_walk",),
        ("_common",),
        ("_results", "_cores"),
        ("_toolbox",),
        ("_listing", "_reading", "_writing"),
        ("_server", "_stdio", "_http"),
        ("_early", "_http_setup"),
        ("_lean",),
        ("_command",),
        ("__init__",),
    ],
    "cli": [("_common",), ("_completion", "_sandbox"), ("_commands",), ("__init__",), ("__main__",)],
    "probe": [
        ("_session", "_procs", "_report", "_fdtree"),
        ("_gitrepo",),
        ("_scratch",),
        ("_race",),
        ("_discover", "_techniques", "_fastmcp4", "_mcp1", "_mcp2"),
        ("_targets", "_runner"),
        ("command", "__init__"),
    ],
    "wrap": [
        ("_options", "_wire", "_schema", "_plan"),
        ("_child", "_launch"),
        ("_modern", "_checks", "_ask"),
        ("_proxy",),
        ("command", "__init__"),
    ],
}

APPLICATIONS = dict(TIERS)["applications"]

#: What an application may import below its own tier, beyond the public face (``mcp_roots`` and
#: ``mcp_roots.errors``): each package's face is its internal API, named here with what it is for.
APP_API: dict[str, str] = {
    "errors": "the public exception hierarchy",
    "_lazy": "an application's own face loads its names on first use, as the library's faces do",
    "__init__": "the public API",
    "sandbox": "mcp-roots run, doctor and wrap: spawn confined, the protected set, the kernel's support",
    "roots": "the operator's configuration (fallback roots, the ceiling, the config file and variables), and "
    "RAW_PORT for an application with no SDK",
    "guard": "the schema walk: every path in a tool's input schema (the probe, wrap); the guarded call "
    "(serve's lean path)",
    "adapters": "serve's stdio transport: the low-level server behind an MCPServer, checked",
    "_rootsguard": "mcp-roots audit: audit_server and format_audit (the facade's audit of any server)",
    "_sys.linux": "renameat2 for the probe's swap race",
    "paths._text": "for_reader: untrusted text escaped for a person (serve's messages, the probe's report)",
}

#: The raw JSON-RPC port: the core port (``roots._port.RootsPort``) implemented once for the applications
#: that speak MCP with no SDK (wrap), below them, reached through the roots face.
RAW_PORT = "roots._jsonrpc"

#: What an adapter may import from the roots layer: the facts it reports and the signals it answers
#: (``roots._facts``). Which roots a request gets is the policy's one decision table, never an adapter's.
ADAPTER_ROOTS = ("roots._facts",)

#: Third-party modules that are an MCP framework (or its data layer), and where they may be imported.
SDKS = ("mcp", "mcp_types", "fastmcp", "pydantic")
#: The modules (or packages) that may import an SDK: the adapters, the broker, the client-side provider and
#: the applications (the probe's clients load theirs only when a probe runs).
SDK_HOMES = ("adapters", "broker", "roots._provider", "filesystem", "probe")
#: ctypes (and with it syscall numbers) lives in _sys/ only.
CTYPES_HOMES = ("_sys",)

RANK = {member: (tier, i) for tier, (_, members) in enumerate(TIERS) for i, member in enumerate(members)}
TIER_OF = {member: name for name, members in TIERS for member in members}


def inner_rank(module: str) -> int | None:
    """The rung of a package's module inside its package (``paths._rootset`` -> 6), else None."""
    top, _, rest = module.partition(".")
    name = rest.split(".")[0] if rest else "__init__"
    for rung, names in enumerate(INSIDE.get(top, [])):
        if name in names:
            return rung
    return None


def in_homes(module: str, homes: tuple[str, ...]) -> bool:
    return any(module == h or module.startswith(h + ".") for h in homes)


@dataclass(frozen=True)
class Import:
    module: str  # the importing module, dotted under mcp_roots ("_rootset", "broker._host")
    line: int
    target: str  # the imported module, absolute ("mcp_roots.paths._beneath", "ctypes")
    names: tuple[str, ...]  # the names taken from it (from-imports), else ()
    lazy: bool = False  # inside a function or under 'if TYPE_CHECKING': not run when the module loads


def modules() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py") if "__pycache__" not in p.parts)


def dotted(path: Path) -> str:
    rel = path.relative_to(SRC).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts)


def layer_of(module: str) -> str:
    return module.split(".")[0]


def imports_of(path: Path) -> tuple[list[Import], list[tuple[int, str, str]]]:
    """The imports of one file, and its ``alias._name`` reads of imported sibling modules."""
    module = dotted(path)
    is_package = path.name == "__init__.py"
    package_parts = [PACKAGE, *module.split(".")] if is_package else [PACKAGE, *module.split(".")[:-1]]
    tree = ast.parse(path.read_text(), str(path))
    found: list[Import] = []
    aliases: dict[str, str] = {}
    lazy = _lazy_imports(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.append(Import(module, node.lineno, alias.name, (), node in lazy))
                if alias.asname:
                    aliases[alias.asname] = alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package_parts[: len(package_parts) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            names: list[str] = []
            for alias in node.names:
                submodule = f"{target}.{alias.name}"
                if _is_module(submodule):  # 'from . import _ops' imports the module _ops, not the package
                    found.append(Import(module, node.lineno, submodule, (), node in lazy))
                    aliases[alias.asname or alias.name] = submodule
                else:
                    names.append(alias.name)
            if names or not node.names:
                found.append(Import(module, node.lineno, target, tuple(names), node in lazy))
    reads = [
        (node.lineno, aliases[node.value.id], node.attr)
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id in aliases
        and aliases[node.value.id].startswith(PACKAGE + ".")
        and node.attr.startswith("_")
        and not node.attr.startswith("__")
    ]
    return found, reads


def _lazy_imports(tree: ast.AST) -> set[ast.AST]:
    """The import statements of ``tree`` inside a function body or an ``if TYPE_CHECKING:`` block."""
    lazy: set[ast.AST] = set()

    def visit(node: ast.AST, inside: bool) -> None:
        for child in ast.iter_child_nodes(node):
            deferred = inside or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            if (
                isinstance(child, ast.If)
                and isinstance(child.test, ast.Name)
                and child.test.id == "TYPE_CHECKING"
            ):
                deferred = True
            if isinstance(child, (ast.Import, ast.ImportFrom)) and inside:
                lazy.add(child)
            visit(child, deferred)

    visit(tree, False)
    return lazy


def _is_module(name: str) -> bool:
    if not name.startswith(PACKAGE + "."):
        return False
    rel = Path(*name.split(".")[1:])
    return (SRC / rel).with_suffix(".py").exists() or (SRC / rel / "__init__.py").exists()


def own(target: str) -> str | None:
    """The importing-side name of an mcp_roots module (``_beneath``, ``broker._host``), or None."""
    if target == PACKAGE:
        return "__init__"
    if target.startswith(PACKAGE + "."):
        return target[len(PACKAGE) + 1 :]
    return None


def edge_violation(module: str, target: str) -> str | None:
    """Why ``module`` may not import ``target`` (both dotted under mcp_roots), or None."""
    top, other = layer_of(module), layer_of(target)
    if top == other:
        if top not in INSIDE:
            return None  # a single module
        mine, theirs = inner_rank(module), inner_rank(target)
        if mine is None or theirs is None:
            missing = module if mine is None else target
            return f"{missing} is not in the INSIDE table of {top}"
        if theirs > mine:
            return f"upward import inside {top} ({module} below {target})"
        return None
    if RANK[other] > RANK[top]:
        return f"upward import ({TIER_OF[top]}: {top} below {TIER_OF[other]}: {other})"
    if top in APPLICATIONS and other not in APPLICATIONS:
        face = target if target in APP_API else other if other in APP_API and target == other else None
        if face is None:
            return (
                f"an application imports {target}, which is not the public face or the internal API (APP_API)"
            )
    return None


def violations() -> list[str]:
    found: list[str] = []
    for path in modules():
        imports, reads = imports_of(path)
        module = dotted(path)
        layer = layer_of(module)
        where = f"{path.relative_to(SRC.parent)}"
        if layer not in RANK:
            found.append(f"{where}: {layer!r} is not in the TIERS table")
            continue
        if layer in INSIDE and inner_rank(module) is None:
            found.append(f"{where}: {module} is not in the INSIDE table of {layer}")
            continue
        for imp in imports:
            mine = own(imp.target)
            if mine is not None:
                other = layer_of(mine)
                if other in RANK and mine != module:
                    why = edge_violation(module, mine)
                    if why:
                        found.append(f"{where}:{imp.line}: {why}")
                if layer == "adapters" and other == "roots" and mine not in ADAPTER_ROOTS:
                    found.append(
                        f"{where}:{imp.line}: an adapter imports {mine}: it reports facts "
                        f"({', '.join(ADAPTER_ROOTS)}) and the roots policy decides"
                    )
                private = [n for n in imp.names if n.startswith("_") and not n.startswith("__")]
                private = [n for n in private if not _is_module(f"{imp.target}.{n}")]
                if private and mine != module:
                    found.append(
                        f"{where}:{imp.line}: imports the underscore name(s) {private} of {imp.target}"
                    )
                continue
            top = imp.target.split(".")[0]
            if top in SDKS and not in_homes(module, SDK_HOMES):
                found.append(f"{where}:{imp.line}: imports the SDK module {imp.target} outside {SDK_HOMES}")
            if top == "ctypes" and not in_homes(module, CTYPES_HOMES):
                found.append(f"{where}:{imp.line}: imports ctypes outside _sys/")
        for line, target, attr in reads:
            if own(target) != module:
                found.append(f"{where}:{line}: reads the underscore name {attr} of {target}")
    return found


MAX_LINES = 600
"""Every module at most this long: one job each, which its docstring names."""


def import_graph() -> dict[str, set[str]]:
    """Module -> the mcp_roots modules it imports (lazy imports too: a circle is a circle)."""
    graph: dict[str, set[str]] = {}
    for path in modules():
        imports, _ = imports_of(path)
        module = dotted(path)
        targets = graph.setdefault(module, set())
        for imp in imports:
            mine = own(imp.target)
            if mine is None or mine == module:
                continue
            targets.add(mine)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every circle of ``graph``, once each (found by depth-first search)."""
    found: list[list[str]] = []
    seen: set[frozenset[str]] = set()
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                circle = path[path.index(target) :]
                if frozenset(circle) not in seen:
                    seen.add(frozenset(circle))
                    found.append([*circle, target])
            elif target not in state:
                visit(target)
        path.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return found


def test_no_module_imports_in_a_circle() -> None:
    found = circles(import_graph())
    assert not found, "\n".join(" -> ".join(c) for c in found)


def test_every_module_is_at_most_600_lines() -> None:
    long = {
        str(p.relative_to(SRC.parent)): n
        for p in modules()
        if (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert not long, f"split these by job (at most {MAX_LINES} lines each): {long}"


ADAPTER_MAX_LINES = 250
"""Every adapter module at most this long: a new framework costs a seam module and a small port."""


def test_every_adapter_module_is_small() -> None:
    long = {
        p.name: n
        for p in sorted((SRC / "adapters").glob("*.py"))
        if (n := len(p.read_text().splitlines())) > ADAPTER_MAX_LINES
    }
    assert not long, (
        f"an adapter reports facts and turns outcomes into results (<= {ADAPTER_MAX_LINES}): {long}"
    )


def test_the_tables_name_every_module() -> None:
    missing = {layer_of(dotted(p)) for p in modules()} - set(RANK)
    assert not missing, f"add these to TIERS: {sorted(missing)}"
    unplaced = [
        dotted(p) for p in modules() if layer_of(dotted(p)) in INSIDE and inner_rank(dotted(p)) is None
    ]
    assert not unplaced, f"add these to INSIDE: {unplaced}"
    assert not set(INSIDE) - set(RANK), "INSIDE names a package that TIERS does not"


def test_the_top_shows_the_concepts() -> None:
    """At most five modules at the top beside __init__.py and __main__.py; the rest live in packages."""
    top = sorted(p.name for p in SRC.glob("*.py") if p.name not in ("__init__.py", "__main__.py"))
    assert len(top) <= 5, top


def test_the_raw_port_sits_below_the_applications_that_share_it() -> None:
    layer = layer_of(RAW_PORT)
    assert all(RANK[layer] < RANK[app] for app in APPLICATIONS)
    assert inner_rank(RAW_PORT) is not None
    assert f"{PACKAGE}.{RAW_PORT}" in dict(imports_found(SRC / layer / "__init__.py"))  # on the face
    wrap = {t for p in (SRC / "wrap").glob("*.py") for t, names in imports_found(p) if "JsonRpcPort" in names}
    assert wrap == {f"{PACKAGE}.{layer}"}, wrap  # wrap reaches it through the face, nothing else of roots/


def imports_found(path: Path) -> list[tuple[str, tuple[str, ...]]]:
    """(target, names) of each import of ``path``."""
    return [(imp.target, imp.names) for imp in imports_of(path)[0]]


def test_imports_follow_the_layers() -> None:
    found = violations()
    assert not found, "\n".join(found)


# --- the checker itself must see what it is meant to see ---------------------------------------------------

FAKE_MODULES = (
    "__init__.py",
    "errors.py",
    "_rootsguard.py",
    "cli.py",
    "paths/__init__.py",
    "paths/_rootset.py",
    "paths/_beneath.py",
    "roots/__init__.py",
    "roots/_cache.py",
    "sandbox/__init__.py",
    "sandbox/_spawn.py",
    "_sys/__init__.py",
    "_sys/linux.py",
)


def fake_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: dict[str, str]) -> None:
    fake = tmp_path / "mcp_roots"
    for name in FAKE_MODULES:
        (fake / name).parent.mkdir(parents=True, exist_ok=True)
        (fake / name).write_text("")
    for name, source in files.items():
        (fake / name).parent.mkdir(parents=True, exist_ok=True)
        (fake / name).write_text(source)
    monkeypatch.setattr(sys.modules[__name__], "SRC", fake)


@pytest.mark.parametrize(
    ("source", "module", "expected"),
    [
        ("from ._rootset import RootSet\n", "paths/_beneath.py", "upward import inside paths"),
        ("from ..roots._cache import RootsCache\n", "paths/_rootset.py", "upward import (paths"),
        ("from ._beneath import _magic\n", "paths/_rootset.py", "underscore name"),
        ("from . import _beneath\nx = _beneath._active\n", "paths/_rootset.py", "reads the underscore name"),
        ("import ctypes\n", "paths/_beneath.py", "ctypes outside"),
        ("import mcp.server\n", "paths/_rootset.py", "SDK module"),
        ("from pydantic import BaseModel\n", "roots/_cache.py", "SDK module"),
        # A function-local import is no excuse for an edge the tables do not name.
        ("def f():\n    from .. import cli\n", "paths/_rootset.py", "upward import"),
        # An application uses the public face and the named internal API, not a package's private modules.
        ("from .paths._rootset import RootSet\n", "cli.py", "not the public face"),
        ("def f():\n    from .roots import _cache\n", "cli.py", "not the public face"),
        # An adapter reports facts; it never imports the roots policy (or any other part of roots/).
        ("from ..roots._policy import GuardPolicy\n", "adapters/mcp2.py", "an adapter imports roots._policy"),
        ("def f():\n    from ..roots import _cache\n", "adapters/mcp1.py", "an adapter imports roots._cache"),
        # A module the INSIDE table does not place is refused until it is placed.
        ("", "paths/_new.py", "not in the INSIDE table"),
    ],
)
def test_the_checker_sees_each_kind_of_violation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, module: str, expected: str
) -> None:
    fake_tree(tmp_path, monkeypatch, {module: source})
    found = violations()
    assert any(expected in v for v in found), found


def test_the_circle_finder_sees_a_circle_through_a_lazy_import() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(graph) == [["a", "b", "c", "a"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_the_checker_accepts_clean_imports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_tree(
        tmp_path,
        monkeypatch,
        {
            "__init__.py": "from .paths._rootset import RootSet\n",
            "paths/_rootset.py": (
                "from typing import TYPE_CHECKING\nfrom ._beneath import open_beneath\n"
                "from . import _beneath\nfrom ..errors import InvalidPath\n"
                "if TYPE_CHECKING:\n    from ..sandbox._spawn import run\n"
                "def run_here():\n    from ..sandbox import _spawn\n"
            ),
            "paths/_beneath.py": "from .._sys import linux\nfrom ..errors import InvalidPath\n",
            "_sys/linux.py": "import ctypes\n",
            "sandbox/__init__.py": "from ._spawn import run\n",
            "sandbox/_spawn.py": "from ..errors import SandboxUnavailable\n",
            "cli.py": "from . import RootSet\nfrom .errors import ConfigError\nfrom .sandbox import run\n",
            "roots/_facts.py": "",
            "adapters/mcp2.py": "from ..roots._facts import RequestFacts\n",
        },
    )
    assert violations() == []
