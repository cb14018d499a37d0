"""The layering of docs/design.md ("Layers", from ../shared/DESIGN.md), checked on the imports themselves.

Every module under src/mcp_roots is parsed (not imported). A module may import from its own layer or a
lower one, never a higher one; only the SDK-facing modules may import an MCP SDK or pydantic; only _sys/
may import ctypes; no module reads a sibling module's underscore name (``from ._x import _y``, ``_x._y``);
no modules import each other in a circle (lazy imports included); every module is at most 600 lines. The
layers are a table: a new module is one entry in it.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src" / "mcp_roots"
PACKAGE = "mcp_roots"

#: Lowest first. A module's layer is named by its first component under mcp_roots (a module or a
#: sub-package). Modules on one line are one layer: they may import each other.
LAYERS: list[tuple[str, ...]] = [
    ("_errors",),
    ("_pathtext", "_pathlike"),  # _pathlike: which parts of a parameter are paths; pure, SDK-free
    ("_uri", "_fold"),
    ("_sys",),
    ("_beneath",),
    ("_canonical", "_tree"),
    ("_fileops",),
    ("_descriptors",),
    ("_sandbox",),  # takes root paths; RootSet.run hands its paths down
    ("_router",),
    ("_ops",),
    ("_rootset",),
    ("_sources",),
    ("_owned",),  # the task group an object owns while open (anyio only)
    ("_answers",),
    ("_cache",),
    ("_policy",),  # which RootSet is in force
    ("_audit",),  # guarded or exempt: the record @guard.paths leaves, read by the calls and the audit
    ("_argcheck",),  # which parts of a guarded function's arguments are paths, and their checks
    ("_calls",),  # the guarded call, once; adapters are its ports
    ("adapters",),
    ("_provider",),
    ("broker",),
    ("_guard",),  # the RootsGuard facade: installs an adapter, enables the broker
    ("__init__",),
    ("filesystem",),  # built on the public API (import mcp_roots), as a user would write a server
    ("probe",),  # mcp-roots probe: a client of any server; uses _sys.linux's renameat2 for its swap race
    ("testing",),  # the opt-in pytest plugin over the probe
    ("cli", "__main__"),  # the command uses the public API, as a user would
]

LEVEL = {name: level for level, names in enumerate(LAYERS) for name in names}

#: Third-party modules that are an MCP framework (or its data layer), and where they may be imported.
SDKS = ("mcp", "mcp_types", "fastmcp", "pydantic")
#: probe/: its clients (_mcp2, _mcp1, _fastmcp4) speak MCP through each SDK's own client, loaded only
#: when a probe runs.
SDK_HOMES = ("adapters", "broker", "_provider", "filesystem", "probe")
#: ctypes (and with it syscall numbers) lives in _sys/ only.
CTYPES_HOMES = ("_sys",)


@dataclass(frozen=True)
class Import:
    module: str  # the importing module, dotted under mcp_roots ("_rootset", "broker._host")
    line: int
    target: str  # the imported module, absolute ("mcp_roots._beneath", "ctypes")
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


def violations() -> list[str]:
    found: list[str] = []
    for path in modules():
        imports, reads = imports_of(path)
        module = dotted(path)
        layer = layer_of(module)
        where = f"{path.relative_to(SRC.parent)}"
        if layer not in LEVEL:
            found.append(f"{where}: module layer {layer!r} is not in the LAYERS table")
            continue
        for imp in imports:
            mine = own(imp.target)
            if mine is not None:
                other = layer_of(mine)
                if other in LEVEL and LEVEL[other] > LEVEL[layer]:
                    found.append(f"{where}:{imp.line}: upward import of {imp.target} ({layer} < {other})")
                private = [n for n in imp.names if n.startswith("_") and not n.startswith("__")]
                private = [n for n in private if not _is_module(f"{imp.target}.{n}")]
                if private and mine != module:
                    found.append(
                        f"{where}:{imp.line}: imports the underscore name(s) {private} of {imp.target}"
                    )
                continue
            top = imp.target.split(".")[0]
            if top in SDKS and layer not in SDK_HOMES:
                found.append(f"{where}:{imp.line}: imports the SDK module {imp.target} outside {SDK_HOMES}")
            if top == "ctypes" and layer not in CTYPES_HOMES:
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


def test_the_layer_table_names_every_module() -> None:
    missing = {layer_of(dotted(p)) for p in modules()} - set(LEVEL)
    assert not missing, f"add these to LAYERS: {sorted(missing)}"


def test_imports_follow_the_layers() -> None:
    found = violations()
    assert not found, "\n".join(found)


# --- the checker itself must see what it is meant to see ---------------------------------------------------


@pytest.mark.parametrize(
    ("source", "module", "expected"),
    [
        ("from ._rootset import RootSet\n", "_beneath.py", "upward import"),
        ("from ._beneath import _magic\n", "_rootset.py", "underscore name"),
        ("from . import _beneath\nx = _beneath._active\n", "_rootset.py", "reads the underscore name"),
        ("import ctypes\n", "_beneath.py", "ctypes outside"),
        ("import mcp.server\n", "_rootset.py", "SDK module"),
        ("from pydantic import BaseModel\n", "_cache.py", "SDK module"),
        # A lazy edge of the table is upward all the same when it runs at import time...
        ("from . import broker\n", "_guard.py", "upward import"),
        # ...and a function-local import is no excuse for an edge the table does not name.
        ("def f():\n    from ._rootset import RootSet\n", "_beneath.py", "upward import"),
    ],
)
def test_the_checker_sees_each_kind_of_violation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, module: str, expected: str
) -> None:
    fake = tmp_path / "mcp_roots"
    fake.mkdir()
    for name in ("__init__.py", "_rootset.py", "_beneath.py", "_cache.py", "_sandbox.py", "_guard.py"):
        (fake / name).write_text("")
    (fake / module).write_text(source)
    monkeypatch.setattr(sys.modules[__name__], "SRC", fake)
    found = violations()
    assert any(expected in v for v in found), found


def test_the_circle_finder_sees_a_circle_through_a_lazy_import() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(graph) == [["a", "b", "c", "a"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_the_checker_accepts_clean_imports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "mcp_roots"
    (fake / "_sys").mkdir(parents=True)
    (fake / "__init__.py").write_text("from ._rootset import RootSet\n")
    (fake / "_rootset.py").write_text("from ._beneath import open_beneath\nfrom . import _beneath\n")
    (fake / "_beneath.py").write_text("from ._sys import linux\nfrom ._errors import InvalidPath\n")
    (fake / "_errors.py").write_text("")
    (fake / "_sys" / "__init__.py").write_text("")
    (fake / "_sys" / "linux.py").write_text("import ctypes\n")
    (fake / "_sandbox.py").write_text("from ._errors import SandboxUnavailable\n")
    (fake / "_rootset.py").write_text(
        "from typing import TYPE_CHECKING\nfrom ._beneath import open_beneath\nfrom . import _beneath\n"
        "if TYPE_CHECKING:\n    from ._sandbox import run\n"
        "def run_here():\n    from . import _sandbox\n"
    )
    monkeypatch.setattr(sys.modules[__name__], "SRC", fake)
    assert violations() == []
