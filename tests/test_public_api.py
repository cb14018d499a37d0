"""What is public: four modules, each one's ``__all__`` exactly what the API reference documents.

Every exception a user meets lives in ``mcp_roots.errors``; no private type appears in a public signature.
"""

from __future__ import annotations

import importlib
import inspect
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"

#: The public modules, and the pages of the API reference that document them.
PUBLIC = {
    "mcp_roots": "api.md",
    "mcp_roots.broker": "api.md",
    "mcp_roots.filesystem": "api-filesystem.md",
    "mcp_roots.testing": "api-testing.md",
}

#: Public but not a reference entry of its own.
UNDOCUMENTED = {"mcp_roots": {"__version__"}}


def documented(face: str) -> set[str]:
    """The names ``::: face.NAME`` shows on the face's reference page."""
    text = (DOCS / PUBLIC[face]).read_text(encoding="utf-8")
    return set(re.findall(rf"^::: {re.escape(face)}\.(\w+)$", text, re.MULTILINE))


@pytest.mark.parametrize("face", sorted(PUBLIC))
def test_every_public_module_exports_exactly_what_the_reference_documents(face: str) -> None:
    module = importlib.import_module(face)
    exported = set(module.__all__)
    assert len(exported) == len(module.__all__), f"{face}.__all__ names something twice"
    assert exported - UNDOCUMENTED.get(face, set()) == documented(face)
    for name in exported:
        assert getattr(module, name) is not None, f"{face}.{name} is listed but does not import"


def test_the_reference_names_the_public_modules_and_nothing_else() -> None:
    text = (DOCS / "api.md").read_text(encoding="utf-8")
    section = text.split("## What is public", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"^- `(mcp_roots[\w.]*)`", section, re.MULTILINE))
    assert listed == set(PUBLIC)


def public_objects() -> Iterator[tuple[str, object]]:
    for face in PUBLIC:
        module = importlib.import_module(face)
        for name in module.__all__:
            yield f"{face}.{name}", getattr(module, name)


def test_every_exception_a_user_meets_is_defined_in_errors() -> None:
    exceptions = {
        name: obj
        for name, obj in public_objects()
        if isinstance(obj, type) and issubclass(obj, BaseException)
    }
    assert "mcp_roots.GuardNotInstalled" in exceptions
    elsewhere = {
        name: obj.__module__ for name, obj in exceptions.items() if obj.__module__ != "mcp_roots.errors"
    }
    assert elsewhere == {}


def public_callables() -> Iterator[tuple[str, Callable[..., object]]]:
    """Every public function, and every public method of every public class (``__init__`` included)."""
    for name, obj in public_objects():
        if inspect.isclass(obj):
            inherited = [c for c in reversed(obj.__mro__) if c.__module__.startswith("mcp_roots.")]
            members = {a: v for c in inherited for a, v in vars(c).items()}  # RootSet's from Confined too
            for attribute, value in members.items():
                if attribute.startswith("_") and attribute != "__init__":
                    continue
                function = value.__func__ if isinstance(value, (staticmethod, classmethod)) else value
                if isinstance(function, property):
                    function = function.fget
                if inspect.isfunction(function):
                    yield f"{name}.{attribute}", function
        elif inspect.isfunction(obj):
            yield name, obj


#: A private name as a signature spells it: an underscore name not reached through a module (``_walk.Limits``
#: names the public ``Limits`` by its module's alias).
PRIVATE_NAME = re.compile(r"(?<![\w.])_[A-Za-z]\w*(?!\w*\.)")


def test_no_private_type_appears_in_a_public_signature() -> None:
    found = []
    for name, function in public_callables():
        signature = inspect.signature(function)
        annotations = [p.annotation for p in signature.parameters.values()] + [signature.return_annotation]
        for annotation in annotations:
            if annotation is inspect.Parameter.empty:
                continue
            text = annotation if isinstance(annotation, str) else repr(annotation)
            found += [f"{name}: {text}" for _ in PRIVATE_NAME.findall(text)]
    assert found == []


def test_the_faces_load_no_private_module_as_a_public_name() -> None:
    for face in PUBLIC:
        module = importlib.import_module(face)
        modules = [n for n in module.__all__ if isinstance(getattr(module, n), ModuleType)]
        assert modules == [], f"{face} exports modules {modules}"


def test_the_typing_uses_are_under_the_strict_check() -> None:
    """tests/typing_uses.py holds the signatures: make typecheck checks it, and an unneeded ignore fails."""
    import tomllib

    mypy = tomllib.loads((DOCS.parent / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]
    assert "tests" in mypy["files"]
    assert mypy["strict"] is True
    assert mypy["warn_unused_ignores"] is True
    assert not any(re.search(pattern, "tests/typing_uses.py") for pattern in mypy["exclude"])
    source = (DOCS.parent / "tests" / "typing_uses.py").read_text(encoding="utf-8")
    wrong = source.split("async def wrong_uses", 1)[1].splitlines()[1:]
    assert len(wrong) >= 15
    assert all(re.search(r"  # type: ignore\[[a-z-]+\]$", line) for line in wrong if line.strip())


#: The public parameters and results still typed with ``Any`` or ``object``, each for a reason; every other
#: public signature names the narrowest true type (``SupportedServer``, ``SupportedContext``, ``Argv``...).
LOOSE = {
    ("mcp_roots.BrokerError.__init__", "data"): "a JSON-RPC error's data object",
    ("mcp_roots.RootSet.from_uris", "uris_or_roots"): "a client's answer, validated entry by entry",
    ("mcp_roots.RootSet.open", "return"): "the builtin open's type for a mode known only at run time",
    ("mcp_roots.RootSet.run", "kwargs"): "subprocess.run's options",
    ("mcp_roots.RootSet.run", "return"): "bytes or str, as text= says",
    ("mcp_roots.RootSet.popen", "kwargs"): "subprocess.Popen's options",
    ("mcp_roots.RootSet.popen", "return"): "bytes or str, as text= says",
    ("mcp_roots.RootSet.run_async", "kwargs"): "anyio.run_process's options",
    ("mcp_roots.RootsCache.__init__", "fetch"): "a client's raw roots/list answer, validated",
    ("mcp_roots.RootsGuard.run", "options"): "anyio.run_process's options",
    ("mcp_roots.SupportedContext.session", "return"): "each SDK's own session type",
    ("mcp_roots.SupportedContext.request_id", "return"): "each SDK's own id type",
    ("mcp_roots.SupportedServer.run", "return"): "each SDK's own run signature",
    ("mcp_roots.broker.FileBroker.handle", "params"): "a JSON-RPC request's params",
    ("mcp_roots.broker.FileBroker.handle", "return"): "a JSON-RPC result",
    ("mcp_roots.broker.enable_brokering", "server"): "the low-level Server's lifespan type parameter",
}


def test_no_public_signature_says_any_or_object_without_a_reason() -> None:
    loose = set()
    for name, function in public_callables():
        signature = inspect.signature(function)
        annotations = {p.name: p.annotation for p in signature.parameters.values()}
        annotations["return"] = signature.return_annotation
        for parameter, annotation in annotations.items():
            text = annotation if isinstance(annotation, str) else repr(annotation)
            if re.search(r"\b(Any|object)\b", text):
                loose.add((name, parameter))
    assert loose == set(LOOSE)


def with_parameters() -> Iterator[tuple[str, Callable[..., object], str]]:
    """Every public callable that takes parameters: its name, its signature's function, its docstring.

    A class documents its ``__init__`` in its own docstring (the reference merges the two); a Protocol is
    never constructed, and so has none.
    """
    for name, obj in public_objects():
        if inspect.isclass(obj) and "__init__" in vars(obj) and not getattr(obj, "_is_protocol", False):
            yield name, obj.__init__, inspect.getdoc(obj) or ""
    for name, function in public_callables():
        if not name.endswith(".__init__"):
            yield name, function, inspect.getdoc(function) or ""


def parameter_names(function: Callable[..., object]) -> list[str]:
    stars: dict[inspect._ParameterKind, str] = {
        inspect.Parameter.VAR_POSITIONAL: "*",
        inspect.Parameter.VAR_KEYWORD: "**",
    }
    return [
        stars.get(p.kind, "") + p.name
        for p in inspect.signature(function).parameters.values()
        if p.name not in ("self", "cls")
    ]


#: The public callables that take parameters, each of whose docstrings carries a parameter list (Google style
#: ``Args:``, which the API reference shows as a table): every parameter named there, and nothing else.
WITH_ARGS = {name: (function, doc) for name, function, doc in with_parameters() if parameter_names(function)}


def test_the_parameter_lists_cover_the_public_face() -> None:
    for name in ("mcp_roots.RootsGuard", "mcp_roots.RootSet.open", "mcp_roots.broker.BrokeredFiles.read"):
        assert name in WITH_ARGS
    assert len(WITH_ARGS) > 80


def documented_args(docstring: str) -> list[str]:
    section = docstring.split("\nArgs:\n", 1)[1]
    names = []
    for line in section.splitlines():
        if line and not line.startswith(" "):
            break
        match = re.match(r"^    (\*{0,2}\w+): ", line)
        if match:
            names.append(match.group(1))
    return names


@pytest.mark.parametrize("name", sorted(WITH_ARGS))
def test_a_public_callables_docstring_lists_its_parameters(name: str) -> None:
    function, docstring = WITH_ARGS[name]
    assert "\nArgs:\n" in docstring, f"{name} has no Args: section"
    assert documented_args(docstring) == parameter_names(function)
