"""Which parts of a tool parameter are paths (mcp_roots.guard: _pathnames, _locators, _annotations, _values):
the name rule, locators into real
pydantic v2 models, dataclasses, TypedDicts and NamedTuples, and values read and replaced without mutation.
"""

from __future__ import annotations

import collections
import copy
import dataclasses
import os
import subprocess
import sys
import time
import typing
from pathlib import Path, PurePosixPath

import pydantic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import AliasChoices, AliasPath, BaseModel, ConfigDict, Field, RootModel

from mcp_roots.guard._annotations import locator_fits, parameter_annotations, path_locators
from mcp_roots.guard._locators import MAX_DEPTH, Locator, parse_locator
from mcp_roots.guard._pathnames import is_path_name
from mcp_roots.guard._values import is_path_value, replace_at, values_at

# --- The name rule -----------------------------------------------------------------------------------

#: The audit's name rule before this module (the facade module on main), kept here as the naive control.
OLD_NAMES = {"path", "paths", "file", "files", "filename", "filepath", "dir", "dirs", "directory", "folder"}
OLD_NAMES |= {"src", "source", "dest", "destination", "target", "root", "cwd", "workdir", "uri"}
OLD_SUFFIXES = ("_path", "_paths", "_dir", "_dirs", "_file", "_files", "_directory", "_folder", "_root")


def old_rule(name: str) -> bool:
    return name.lower() in OLD_NAMES or name.lower().endswith(OLD_SUFFIXES)


ISSUE_25_ITEM_14 = ["file_name", "pathname", "fname"]

PATH_NAMES = [
    *sorted(OLD_NAMES),
    *(f"x{suffix}" for suffix in OLD_SUFFIXES),
    *ISSUE_25_ITEM_14,
    "FilePath", "SRC", "Source_Dir", "workDir", "targetDir", "file-path", "filePATH", "_path",
    "fileName", "file_names", "fnames", "pathnames", "dirname", "dir_name", "dirnames", "folder_name",
    "folders", "directories", "output_directory", "input_file", "infile", "outfile", "logfile", "basedir",
    "tmpdir", "dirpath", "src_path", "dest_path", "source_file", "target_paths", "old_path", "new_path",
    "project_root", "roots", "webroot", "srcs", "dst", "dests", "sources", "destinations", "targets",
    "uris", "file_uri", "root_uris", "file_list", "path_array", "dir_set", "config_file", "files_list",
]  # fmt: skip

NOT_PATH_NAMES = [
    "name", "content", "text", "query", "pattern", "url", "size", "file_size", "file_type", "path_style",
    "dir_mode", "root_name", "count", "profile", "profiles", "aws_profile", "xpath", "jsonpath",
    "data_source", "build_target", "redirect_uri", "mode", "recursive", "encoding", "list", "", "_", "x",
    "first_name", "f_name", "basename", "limit", "head", "tail", "exclude_patterns",
]  # fmt: skip


@pytest.mark.parametrize("name", PATH_NAMES)
def test_path_names_are_paths(name: str) -> None:
    assert is_path_name(name), name


@pytest.mark.parametrize("name", NOT_PATH_NAMES)
def test_other_names_are_not_paths(name: str) -> None:
    assert not is_path_name(name), name


def test_the_rule_keeps_everything_the_old_rule_took_and_adds_issue_25_item_14() -> None:
    # The control: the old rule misses the names item 14 reports (the hole), the new one takes them.
    assert [n for n in ISSUE_25_ITEM_14 if old_rule(n)] == []
    assert all(is_path_name(n) for n in ISSUE_25_ITEM_14)
    words = sorted(OLD_NAMES) + [f"{p}{s}" for p in ("x", "Src", "my_big") for s in OLD_SUFFIXES]
    assert [n for n in words + PATH_NAMES + NOT_PATH_NAMES if old_rule(n) and not is_path_name(n)] == []


# --- Types: where the paths are ----------------------------------------------------------------------


class Cfg(BaseModel):  # a model with a path field
    path: str
    size: int = 0


class Job(BaseModel):
    name: str
    cfg: Cfg | None = None
    inputs: list[Cfg] = []
    by_name: dict[str, Cfg] = {}
    where: Path | None = None  # an innocuous name, a Path type
    fname: str = ""  # a short file name
    count: int = 0


class Node(BaseModel):  # recursive, with a path: the recursion is reported, not followed
    path: str
    children: list[Node] = []


class Comment(BaseModel):  # recursive, without a path: nothing to report
    text: str
    replies: list[Comment] = []


class A(BaseModel):  # mutual recursion: A -> B -> A
    b: B | None = None


class B(BaseModel):
    a: A | None = None
    file_name: str = ""


A.model_rebuild()


class Aliased(BaseModel):
    x: str = Field(validation_alias="file")
    y: str = Field(validation_alias=AliasChoices("q", "target_dir"))
    z: str = Field(validation_alias=AliasPath("data", "filePath"))
    w: str = Field(alias="dest")
    v: str = Field(validation_alias=AliasPath("file", "size"))  # the last name read is a size: no path


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)
    path: str
    tags: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Copy:
    src: str
    dest: Path
    mode: int = 0
    items: list[Cfg] = dataclasses.field(default_factory=list)
    cache_dir: str = dataclasses.field(default="", init=False)


class Opts(typing.TypedDict):
    output_dir: typing.NotRequired[str]
    level: int


class Pair(typing.NamedTuple):
    left: Path
    label: str


Paths = RootModel[list[str]]


UserId = typing.NewType("UserId", str)
FilePath = typing.NewType("FilePath", str)


def deep_chain(levels: int) -> type[BaseModel]:
    model: type[BaseModel] = pydantic.create_model("L0", path=(str, ...))
    for i in range(1, levels):
        model = pydantic.create_model(f"L{i}", inner=(model, ...))
    return model


LOCATOR_CASES: list[tuple[str, object, str, list[str]]] = [
    ("a model with a path field", Cfg, "cfg", ["cfg.path"]),
    ("a str named like a path", str, "path", ["path"]),
    ("item 14 names", str, "file_name", ["file_name"]),
    ("a str named otherwise", str, "query", []),
    ("an int named like a path", int, "root", []),
    ("a Path named otherwise", Path, "where", ["where"]),
    ("the value itself", Path, "", [""]),
    ("PurePath and os.PathLike", PurePosixPath | os.PathLike[str], "x", ["x"]),
    ("Optional and Annotated", typing.Annotated[Cfg | None, "meta"], "c", ["c.path"]),
    ("Annotated alias on a parameter", typing.Annotated[str, Field(validation_alias="file")], "x", ["x"]),
    ("list of paths, by the list's name", list[str], "paths", ["paths[]"]),
    ("str or list of str", str | list[str], "paths", ["paths", "paths[]"]),
    ("a list of models", list[Cfg], "items", ["items[].path"]),
    ("a dict of models", dict[str, Cfg], "opts", ["opts{}.path"]),
    ("a sequence of dicts of models", typing.Sequence[typing.Mapping[str, Cfg]], "m", ["m[]{}.path"]),
    ("Path keys", dict[Path, int], "sizes", ["sizes{key}"]),
    ("str keys are not paths", dict[str, int], "sizes", []),
    ("a heterogeneous tuple", tuple[Path, int], "pair", ["pair[0]"]),
    (
        "nested models",
        Job,
        "job",
        ["job.cfg.path", "job.inputs[].path", "job.by_name{}.path", "job.where", "job.fname"],
    ),
    ("a recursive model", Node, "tree", ["tree.path", "tree.children[]..."]),
    ("a recursive model without paths", Comment, "c", []),
    ("mutual recursion", A, "x", ["x.b.a...", "x.b.file_name"]),
    ("aliases", Aliased, "m", ["m.x", "m.y", "m.z", "m.w"]),
    ("a frozen model", Frozen, "f", ["f.path"]),
    ("a dataclass", Copy, "c", ["c.src", "c.dest", "c.items[].path", "c.cache_dir"]),
    ("a TypedDict", Opts, "o", ["o.output_dir"]),
    ("a NamedTuple", Pair, "p", ["p.left"]),
    ("a RootModel takes its parameter's name", Paths, "paths", ["paths.root[]"]),
    ("a RootModel named otherwise", Paths, "data", []),
    ("a NewType named like a path", FilePath, "x", ["x"]),
    ("a NewType named otherwise", UserId, "x", []),
    ("a Literal of strings", typing.Literal["a", "b"], "path", ["path"]),
    ("Any, named like a path", typing.Any, "fname", ["fname"]),
    ("no annotation", None, "dir", ["dir"]),
    ("an unresolved forward reference", "Config", "cfg", ["cfg..."]),
    ("an unresolved forward reference, named", typing.ForwardRef("Config"), "path", ["path"]),
    ("a one-shot iterable", typing.Iterable[str], "paths", ["paths..."]),
    ("deeper than MAX_DEPTH", deep_chain(MAX_DEPTH + 2), "d", ["d" + ".inner" * (MAX_DEPTH - 1) + "..."]),
    ("just within MAX_DEPTH", deep_chain(MAX_DEPTH - 1), "d", ["d" + ".inner" * (MAX_DEPTH - 2) + ".path"]),
]


@pytest.mark.parametrize(
    ("annotation", "name", "expected"), [c[1:] for c in LOCATOR_CASES], ids=[c[0] for c in LOCATOR_CASES]
)
def test_path_locators(annotation: object, name: str, expected: list[str]) -> None:
    assert sorted(path_locators(annotation, name)) == sorted(expected)


def test_a_path_typed_field_with_an_innocuous_name_is_found() -> None:
    assert "job.where" in path_locators(Job, "job")
    assert "job.fname" in path_locators(Job, "job")
    assert not any("count" in loc or loc.rsplit(".")[-1] == "name" for loc in path_locators(Job, "job"))


def test_a_value_can_be_declared_a_path_whatever_its_name() -> None:
    # What @guard.paths("query") declares: the value (or each element) is a path; a model's own fields
    # are still judged by their names.
    assert path_locators(str, "query") == []
    assert path_locators(str, "query", named=True) == ["query"]
    assert path_locators(list[str], "q", named=True) == ["q[]"]
    assert path_locators(Cfg | str, "c", named=True) == ["c.path", "c"]
    assert path_locators(str, "path", named=False) == []
    assert path_locators(Path, "x", named=False) == ["x"]  # a Path type is a path whatever is declared


def test_without_a_name_locators_are_relative_to_the_value() -> None:
    assert path_locators(Cfg) == ["path"]
    assert path_locators(list[Cfg]) == ["[].path"]
    assert path_locators(Node) == ["path", "children[]..."]


def test_string_annotations_resolve_through_the_owner() -> None:
    # This module has ``from __future__ import annotations``: Copy's annotations are strings, resolved here.
    assert {f.name: f.type for f in dataclasses.fields(Copy)}["dest"] == "Path"
    assert "c.dest" in path_locators(Copy, "c")

    def tool(cfg: Cfg, where: Path, n: int) -> None: ...

    assert parameter_annotations(tool) == {"cfg": Cfg, "where": Path, "n": int}


class Weird(type):
    def __eq__(cls, other: object) -> bool:
        raise RuntimeError("no comparing me")

    __hash__ = type.__hash__


NOT_TYPES = [42, "list[", object(), Ellipsis, typing.Union, typing.Optional]
CLASSES_OF_THEIR_OWN = [int, typing.Callable[[int], str], typing.Protocol, typing.TypeVar("T", bound=int)]


@pytest.mark.parametrize("annotation", NOT_TYPES + CLASSES_OF_THEIR_OWN + [Weird("W", (), {})])
def test_odd_annotations_never_raise(annotation: object) -> None:
    for name in ("x", "path"):
        result = path_locators(annotation, name)
        assert isinstance(result, list)
        assert all(isinstance(loc, str) for loc in result)


@pytest.mark.parametrize("annotation", NOT_TYPES)
def test_what_is_not_a_type_is_judged_by_name(annotation: object) -> None:
    assert path_locators(annotation, "path") == ["path"]
    assert path_locators(annotation, "query") in ([], ["query..."])


def test_an_annotation_that_breaks_the_walk_is_reported_whole() -> None:
    assert path_locators(Weird("W", (), {}), "x") == ["x..."]
    assert path_locators(list[Weird("W", (), {})], "x") == ["x..."]  # type: ignore[misc]


def test_a_type_too_large_to_walk_is_reported_not_skipped() -> None:
    inner = pydantic.create_model("Wide", **{f"f{i}": (str, "") for i in range(120)})  # type: ignore[call-overload]
    outer = pydantic.create_model("Wider", **{f"g{i}": (list[inner], []) for i in range(120)})  # type: ignore[call-overload, valid-type]
    started = time.perf_counter()
    assert any(loc.endswith("...") for loc in path_locators(outer, "w"))
    assert time.perf_counter() - started < 5  # a bound, not a benchmark: the walk stops at its budget


# --- Locators ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text", ["", "path", "cfg.path", "items[].src", "opts{}.path", "pair[0]", "m[]{}.x", "s{key}", "a.b-c"]
)
def test_locators_round_trip(text: str) -> None:
    assert str(parse_locator(text)) == text
    assert isinstance(parse_locator(text), Locator)


@pytest.mark.parametrize(
    "text",
    [
        ".path",
        "a..b",
        "a[",
        "a[x]",
        "a]",
        "a{k}",
        "a{key}.b",
        "a b",
        "a.",
        "[]a",
        "cfg.children[]...",
        "...",
        ".".join(["a"] * (MAX_DEPTH + 1)),
    ],
)
def test_bad_locators_are_refused_with_the_rule(text: str) -> None:
    with pytest.raises(ValueError, match="locator") as caught:
        parse_locator(text)
    assert repr(text) in str(caught.value)


FITS = [
    (Cfg, "path"), (Cfg, "size"), (Cfg, ""), (Job, "cfg.path"), (Job, "inputs[].path"), (Job, "inputs[0]"),
    (Job, "by_name{}.path"), (Job, "by_name{key}"), (Job, "cfg"), (Node, "children[].children[].path"),
    (Copy, "items[].size"), (Opts, "level"), (Pair, "left"), (dict[str, typing.Any], "{}.any.thing[]"),
    ("Unresolved", "a.b"), (typing.Any, "x[]"), (Paths, "root[]"),
]  # fmt: skip
DOES_NOT_FIT = [
    (Cfg, "pth"), (Cfg, "path.x"), (Cfg, "[]"), (Job, "cfg.pth"), (Job, "inputs.path"), (Job, "by_name[]"),
    (Node, "children[].parent"), (str, "x"), (list[str], "{}"), (int, "[]"), (Opts, "output"),
]  # fmt: skip


@pytest.mark.parametrize(("annotation", "text"), FITS)
def test_a_locator_fits_the_places_its_type_has(annotation: object, text: str) -> None:
    assert locator_fits(annotation, text)


@pytest.mark.parametrize(("annotation", "text"), DOES_NOT_FIT)
def test_a_mistyped_locator_does_not_fit(annotation: object, text: str) -> None:
    # What @guard.paths("cfg.pth") must refuse where the tool is defined: it would check nothing.
    assert not locator_fits(annotation, text)
    assert values_at(typing.cast(object, {"cfg": Cfg(path="/etc/passwd")}), "cfg.pth") == []


def test_a_locator_names_its_parameter() -> None:
    locator = parse_locator("cfg.items[].path")
    assert locator.parameter == "cfg"
    assert str(locator.within()) == "items[].path"
    assert parse_locator("[]").parameter is None


# --- Values ------------------------------------------------------------------------------------------


def job() -> Job:
    return Job(
        name="j",
        cfg=Cfg(path="/outside/a"),
        inputs=[Cfg(path="/r/b"), Cfg(path="/outside/c")],
        by_name={"k": Cfg(path="/r/d")},
        where=Path("/r/e"),
        fname="f",
    )


def test_values_at_finds_the_paths_of_issue_24() -> None:
    arguments = {"cfg": Cfg(path="/etc/passwd"), "n": 3}
    assert values_at(arguments, "cfg.path") == ["/etc/passwd"]
    found = {loc: values_at({"job": job()}, loc) for loc in path_locators(Job, "job")}
    assert found == {
        "job.cfg.path": ["/outside/a"],
        "job.inputs[].path": ["/r/b", "/outside/c"],
        "job.by_name{}.path": ["/r/d"],
        "job.where": [Path("/r/e")],
        "job.fname": ["f"],
    }


def test_values_at_skips_none_missing_and_other_union_members() -> None:
    assert values_at({"job": Job(name="j")}, "job.cfg.path") == []  # None on the way
    assert values_at({}, "cfg.path") == []  # missing
    assert values_at({"target": "/a"}, "target.path") == []  # a str where `str | Model` had a model
    assert values_at({"paths": "/a"}, "paths[]") == []  # a str is not a list of paths
    assert values_at({"paths": ["/a", None, "/b"]}, "paths[]") == ["/a", "/b"]
    assert values_at(Opts(level=1), "output_dir") == []  # a TypedDict without its NotRequired key
    assert values_at(Pair(Path("/l"), "x"), "left") == [Path("/l")]
    assert values_at((Path("/a"), 3), "[0]") == [Path("/a")]
    assert values_at((Path("/a"),), "[5]") == []


def test_values_at_refuses_what_it_cannot_look_inside() -> None:
    with pytest.raises(TypeError, match="generator"):
        values_at({"paths": (p for p in ["/etc/passwd"])}, "paths[]")
    with pytest.raises(TypeError, match="object"):
        values_at({"cfg": object()}, "cfg.path")


def test_values_at_is_linear_in_a_large_value() -> None:
    items = [{"path": f"/r/{i}"} for i in range(200_000)]  # every element is visited, once
    assert len(values_at({"items": items}, "items[].path")) == 200_000


def canonical(value: object) -> object:
    """A stand-in for the guard's check: a new value of the same kind (``Path`` stays ``Path``)."""
    return Path("/canon" + str(value)) if isinstance(value, Path) else "/canon" + str(value)


def test_replace_at_copies_and_never_mutates() -> None:
    original = job()
    arguments = {"job": original, "other": [1, 2]}
    before = copy.deepcopy(arguments)
    new = arguments
    for loc in path_locators(Job, "job"):
        new = typing.cast(dict[str, object], replace_at(new, loc, canonical))
    assert arguments == before
    assert arguments["job"] is original
    replaced = typing.cast(Job, new["job"])
    assert replaced is not original
    assert new["other"] is arguments["other"]
    assert replaced.cfg is not None
    assert replaced.cfg.path == "/canon/outside/a"
    assert [c.path for c in replaced.inputs] == ["/canon/r/b", "/canon/outside/c"]
    assert replaced.by_name["k"].path == "/canon/r/d"
    assert replaced.where == Path("/canon/r/e")
    assert replaced.fname == "/canonf"
    assert replaced.name == "j"
    assert original.inputs[0].path == "/r/b"


def test_replace_at_on_frozen_records() -> None:
    frozen = Frozen(path="/a", tags=("t",))
    with pytest.raises(pydantic.ValidationError):
        frozen.path = "/b"
    assert typing.cast(Frozen, replace_at(frozen, "path", canonical)).path == "/canon/a"
    assert frozen.path == "/a"
    dc = Copy(src="/s", dest=Path("/d"), items=[Cfg(path="/i")])
    new = typing.cast(Copy, replace_at(replace_at(dc, "src", canonical), "items[].path", canonical))
    assert (new.src, new.items[0].path, dc.src, dc.items[0].path) == ("/canon/s", "/canon/i", "/s", "/i")
    assert typing.cast(Copy, replace_at(dc, "cache_dir", lambda v: "/c")).cache_dir == "/c"  # init=False
    assert dc.cache_dir == ""
    pair = typing.cast(Pair, replace_at(Pair(Path("/l"), "x"), "left", canonical))
    assert isinstance(pair, Pair)
    assert pair.left == Path("/canon/l")


def test_replace_at_keeps_container_types() -> None:
    assert replace_at(("/a", "/b"), "[]", canonical) == ("/canon/a", "/canon/b")
    assert replace_at({"/a"}, "[]", canonical) == {"/canon/a"}
    assert replace_at(frozenset({"/a"}), "[]", canonical) == frozenset({"/canon/a"})
    d = collections.deque(["/a"], maxlen=3)
    new_d = typing.cast(collections.deque[str], replace_at(d, "[]", canonical))
    assert list(new_d) == ["/canon/a"]
    assert new_d.maxlen == 3
    assert list(d) == ["/a"]
    od = collections.OrderedDict(x="/a")
    assert replace_at(od, "{}", canonical) == collections.OrderedDict(x="/canon/a")
    assert od["x"] == "/a"
    assert replace_at(("/a", 3), "[0]", canonical) == ("/canon/a", 3)
    assert replace_at({Path("/a"): 1}, "{key}", canonical) == {Path("/canon/a"): 1}
    with pytest.raises(ValueError, match="same path"):
        replace_at({"/a/../b": 1, "/b": 2}, "{key}", lambda p: os.path.normpath(str(p)))


def test_replace_at_returns_the_value_itself_when_nothing_changes() -> None:
    value = {"job": job()}
    assert replace_at(value, "job.inputs[].path", lambda v: v) is value
    assert replace_at(value, "job.cfg.nothing", canonical) is value


class Box(BaseModel):
    model_config = ConfigDict(frozen=True)
    path: object = None
    a: object = None


_leaves = st.one_of(st.none(), st.integers(), st.text(max_size=3))
_values = st.recursive(
    _leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.lists(inner, max_size=3).map(tuple),
        st.dictionaries(st.sampled_from(["a", "b", "path"]), inner, max_size=3),
        st.builds(Box, path=inner, a=inner),
    ),
    max_leaves=12,
)
_locators = st.lists(st.sampled_from(["a", "b", "path", "[]", "[0]", "{}"]), max_size=4).map(
    lambda steps: "".join(s if s[0] in "[{" else "." + s for s in steps).lstrip(".")
)


@settings(max_examples=150, deadline=None)
@given(_values, _locators)
def test_replace_at_changes_exactly_what_values_at_finds_and_nothing_in_place(
    value: object, text: str
) -> None:
    snapshot = copy.deepcopy(value)
    found = values_at(value, text)
    replaced = replace_at(value, text, lambda v: ("checked", v))
    assert value == snapshot  # never mutated
    assert values_at(replaced, text) == [("checked", v) for v in found]
    if not found:
        assert replaced is value


def test_is_path_value() -> None:
    assert all(is_path_value(v) for v in ["/a", b"/a", Path("/a")])
    assert not any(is_path_value(v) for v in [1, None, ["/a"], Cfg(path="/a")])


def test_importing_it_loads_no_pydantic() -> None:
    code = (
        "import sys, mcp_roots.guard._annotations as p, mcp_roots.guard._values\n"
        "assert p.path_locators(list[str], 'paths') == ['paths[]']\n"
        "assert 'pydantic' not in sys.modules, sorted(m for m in sys.modules if 'pydantic' in m)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
