"""Fallback roots (flag, MCP_ROOTS, config files, project root) and the ceiling, on real directories.

Every source is set up for real: directories, config files on disk, the user config directory redirected
to a temporary directory. The ceiling cases are a table, each also probed for "never widens".
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import re
import sys
from pathlib import Path

import pytest

from mcp_roots import Access, ConfigError, ReadOnlyPath, RootSet, clip_to_ceiling, fallback_roots
from mcp_roots.roots._sources import (
    CONFIG_FILE_ENV_VAR,
    ENV_VAR,
    SOURCE_ENVIRONMENT,
    SOURCE_FLAG,
    SOURCE_PROJECT_ROOT,
    SOURCE_UNCONFIGURED,
    how_to_configure,
)

LEVELS = ["flag", "environment", "project file", "user file", "project root"]


class World:
    """A project directory, a user config directory, and one distinct root directory per source."""

    def __init__(self, tmp_path: Path) -> None:
        base = tmp_path.resolve()
        self.project = base / "project"
        self.config_dir = base / "user-config"
        self.project.mkdir()
        self.config_dir.mkdir()
        self.dirs = {}
        for level in LEVELS[:-1]:
            d = base / ("root-" + level.replace(" ", "-"))
            d.mkdir()
            self.dirs[level] = d
        self.dirs["project root"] = self.project
        self.project_file = self.project / "mcp-roots.json"
        self.user_file = self.config_dir / "mcp-roots.json"

    def write(self, file: Path, text: str) -> Path:
        file.write_text(text, encoding="utf-8")
        return file

    def roots(self, *enabled: str) -> RootSet:
        if "project file" in enabled:
            self.write(self.project_file, json.dumps({"roots": [{"path": str(self.dirs["project file"])}]}))
        if "user file" in enabled:
            self.write(self.user_file, json.dumps({"roots": [{"path": str(self.dirs["user file"])}]}))
        return fallback_roots(
            [str(self.dirs["flag"])] if "flag" in enabled else None,
            project_root=self.project,
            environ={"MCP_ROOTS": str(self.dirs["environment"])} if "environment" in enabled else {},
            user_config_dir=self.config_dir,
        )

    def source_of(self, level: str) -> str:
        return {
            "flag": SOURCE_FLAG,
            "environment": SOURCE_ENVIRONMENT,
            "project file": str(self.project_file),
            "user file": str(self.user_file),
            "project root": SOURCE_PROJECT_ROOT,
        }[level]


@pytest.fixture
def world(tmp_path: Path) -> World:
    return World(tmp_path)


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


# --- Priority --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("higher", "lower"), list(itertools.combinations(LEVELS, 2)))
def test_each_source_beats_every_lower_one(world: World, higher: str, lower: str) -> None:
    roots = world.roots(higher, lower)
    assert roots.source == world.source_of(higher)
    assert roots.paths == (world.dirs[higher],)


@pytest.mark.parametrize("level", LEVELS)
def test_each_source_alone_says_where_its_roots_came_from(world: World, level: str) -> None:
    roots = world.roots(level)
    assert roots.source == world.source_of(level)
    assert roots.paths == (world.dirs[level],)


def test_a_set_source_never_consults_lower_ones(world: World) -> None:
    # Broken lower sources are not even read: a flag wins over a broken MCP_ROOTS-less config...
    write(world.project_file, "{not json")
    write(world.user_file, "{not json")
    assert fallback_roots([str(world.dirs["flag"])], project_root=world.project, environ={}).source == "flag"
    env = {"MCP_ROOTS": str(world.dirs["environment"])}
    assert fallback_roots(project_root=world.project, environ=env).source == SOURCE_ENVIRONMENT
    # ...and a valid project file shadows a broken user file.
    write(world.project_file, json.dumps({"roots": [{"path": "."}]}))
    roots = fallback_roots(project_root=world.project, environ={}, user_config_dir=world.config_dir)
    assert roots.source == str(world.project_file)


def test_nothing_configured_means_no_roots_never_the_working_directory(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The working directory holds a project file and would be a root on main; neither is used implicitly.
    monkeypatch.chdir(world.project)
    write(world.project_file, json.dumps({"roots": [{"path": str(world.dirs["project file"])}]}))
    roots = fallback_roots(environ={}, user_config_dir=world.config_dir)
    assert (roots.source, roots.paths) == (SOURCE_UNCONFIGURED, ())
    assert not roots.contains(world.project / "mcp-roots.json")
    assert "--roots" in how_to_configure({})
    assert "MCP_ROOTS" in how_to_configure({})


def test_nothing_configured_from_a_fake_home_refuses_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path.resolve() / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("KEY")
    monkeypatch.chdir(home)
    roots = fallback_roots(environ={"HOME": str(home)}, user_config_dir=tmp_path / "no-config")
    assert roots.source == SOURCE_UNCONFIGURED
    assert not roots.contains(home / ".ssh" / "id_ed25519")


@pytest.mark.parametrize("where", ["home", "ancestor", "filesystem root"])
@pytest.mark.parametrize("source", ["flag", "environment", "project root"])
def test_home_its_ancestors_and_the_filesystem_root_need_allow_home(
    world: World, where: str, source: str
) -> None:
    home = world.project / "home"
    home.mkdir()
    target = {"home": home, "ancestor": world.project, "filesystem root": Path("/")}[where]
    env = {"HOME": str(home)}
    kwargs: dict[str, object] = {"environ": env, "user_config_dir": world.config_dir}
    if source == "flag":
        kwargs["roots"] = [str(target)]
    elif source == "environment":
        env[ENV_VAR] = str(target)
    else:
        kwargs["project_root"] = target
    with pytest.raises(ConfigError, match=r"is refused as a fallback root: it (is|contains) the"):
        fallback_roots(**kwargs)  # type: ignore[arg-type]
    assert fallback_roots(**kwargs, allow_home=True).paths == (target,)  # type: ignore[arg-type]


def test_a_project_file_naming_the_filesystem_root_grants_nothing(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    write(world.project_file, json.dumps({"roots": [{"path": "/"}, {"uri": "file:///"}]}))
    with caplog.at_level(logging.WARNING, logger="mcp_roots"):
        roots = fallback_roots(project_root=world.project, environ={}, user_config_dir=world.config_dir)
    assert roots.source == str(world.project_file)
    assert not roots
    assert not roots.contains("/etc/passwd")
    assert caplog.text.count("it is the filesystem root") == 2
    allowed = fallback_roots(
        project_root=world.project, environ={}, user_config_dir=world.config_dir, allow_home=True
    )
    assert allowed.paths == (Path("/"),)


def test_relative_entries_need_an_explicit_project_root(world: World) -> None:
    with pytest.raises(ConfigError, match="needs a project root"):
        fallback_roots(["relative"], environ={})
    with pytest.raises(ConfigError, match="needs a project root"):
        fallback_roots(environ={ENV_VAR: "relative"})


def test_mcp_roots_config_names_the_user_file(world: World) -> None:
    named = write(
        world.project / "named.json", json.dumps({"roots": [{"path": str(world.dirs["user file"])}]})
    )
    write(world.user_file, json.dumps({"roots": [{"path": str(world.dirs["project file"])}]}))
    env = {CONFIG_FILE_ENV_VAR: str(named)}
    roots = fallback_roots(environ=env, user_config_dir=world.config_dir)
    assert (roots.source, roots.paths) == (str(named), (world.dirs["user file"],))
    with pytest.raises(ConfigError, match=r"MCP_ROOTS_CONFIG names .* which does not exist"):
        fallback_roots(environ={CONFIG_FILE_ENV_VAR: str(world.project / "gone.json")})


def test_a_huge_integer_is_a_config_error_naming_file_and_line(world: World) -> None:
    write(world.project_file, '{"roots": [\n  {"path": "."},\n  {"path": ' + "1" * 5000 + "}\n]}")
    with pytest.raises(ConfigError, match=re.escape(f"{world.project_file}:3: ") + ".*5000 digits"):
        fallback_roots(project_root=world.project, environ={})


def test_project_root_must_exist_and_be_a_directory(world: World) -> None:
    with pytest.raises(ConfigError, match=r"project root '.*missing' is not usable.*does not exist"):
        fallback_roots(project_root=world.project / "missing", environ={})
    file = write(world.project / "file.txt", "x")
    with pytest.raises(ConfigError, match=r"project root '.*file.txt' is not a directory"):
        fallback_roots(project_root=file, environ={})


# --- Flag and environment: fail fast -------------------------------------------------------------------


@pytest.fixture
def bad_entries(world: World) -> list[tuple[str, str]]:
    write(world.project / "file.txt", "x")
    return [
        ("missing", "does not exist"),
        (str(world.project / "missing"), "does not exist"),
        ("file.txt/inside", "is not a directory"),
        ("file://server/share", "is not local"),
        ("http://example.com/x", "only file: URIs"),
        ("file:///tmp/%2e%2e/etc", "'.' or '..' segment"),
        ("file:///a%2Fb", "encoded '/'"),
    ]


def test_flag_fails_fast_naming_entry_and_source(world: World, bad_entries: list[tuple[str, str]]) -> None:
    good = str(world.dirs["flag"])
    for entry, rule in bad_entries:
        with pytest.raises(ConfigError) as caught:
            fallback_roots([good, entry], project_root=world.project, environ={})
        message = str(caught.value)
        assert repr(entry) in message
        assert "from flag" in message
        assert rule in message


def test_environment_fails_fast_naming_entry_and_source(
    world: World, bad_entries: list[tuple[str, str]]
) -> None:
    good = str(world.dirs["environment"])
    for entry, rule in bad_entries:
        env = {"MCP_ROOTS": good + os.pathsep + entry}
        if os.pathsep in entry:  # a URI cannot be given through MCP_ROOTS on POSIX (':' separates)
            continue
        with pytest.raises(ConfigError) as caught:
            fallback_roots(project_root=world.project, environ=env, user_config_dir=world.config_dir)
        message = str(caught.value)
        assert repr(entry) in message
        assert "environment (MCP_ROOTS)" in message
        assert rule in message


def test_environment_uri_entries_work_where_pathsep_allows(world: World) -> None:
    # On POSIX os.pathsep is ':' and splits 'file:///x'; a URI entry then fails fast rather than
    # being half-read. Paths are the way to write MCP_ROOTS there.
    env = {"MCP_ROOTS": "file://" + str(world.dirs["environment"])}
    if os.pathsep == ":":
        with pytest.raises(ConfigError, match="from environment"):
            fallback_roots(project_root=world.project, environ=env)
    else:  # pragma: no cover - Windows
        assert fallback_roots(project_root=world.project, environ=env).paths == (world.dirs["environment"],)


def test_empty_environment_value_counts_as_unset(world: World) -> None:
    roots = fallback_roots(
        project_root=world.project, environ={"MCP_ROOTS": ""}, user_config_dir=world.config_dir
    )
    assert roots.source == SOURCE_PROJECT_ROOT


def test_environment_of_only_separators_is_an_error(world: World) -> None:
    with pytest.raises(ConfigError, match="names no roots"):
        fallback_roots(project_root=world.project, environ={"MCP_ROOTS": os.pathsep * 2})


def test_empty_environment_entries_are_ignored_not_taken_as_the_working_directory(world: World) -> None:
    a, b = world.dirs["flag"], world.dirs["environment"]
    env = {"MCP_ROOTS": f"{a}{os.pathsep}{os.pathsep}{b}{os.pathsep}"}
    assert fallback_roots(project_root=world.project, environ=env).paths == (a, b)


def test_argument_forms(world: World) -> None:
    d = world.dirs["flag"]
    for given in (d, str(d), [d], (str(d),), ["file://" + str(d)]):
        roots = fallback_roots(given, project_root=world.project, environ={})
        assert (roots.source, roots.paths) == ("flag", (d,)), given
    # Duplicates (also through different spellings) collapse to one root.
    assert (
        len(fallback_roots([d, str(d) + "/", str(d / "x" / "..")], project_root=world.project, environ={}))
        == 1
    )


def test_empty_argument_list_refuses_everything_and_does_not_fall_through(world: World) -> None:
    write(world.project_file, json.dumps({"roots": [{"path": "."}]}))
    roots = fallback_roots([], project_root=world.project, environ={"MCP_ROOTS": str(world.project)})
    assert (roots.source, len(roots)) == ("flag", 0)
    assert not roots.contains(world.project)


def test_empty_string_argument_is_an_error(world: World) -> None:
    with pytest.raises(ConfigError, match=r"invalid root '' from flag.*empty"):
        fallback_roots("", project_root=world.project, environ={})


# --- Relative entries ----------------------------------------------------------------------------------


def test_relative_flag_and_environment_entries_start_at_the_project_root(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    (world.project / "data").mkdir()
    (world.project.parent / "sibling").mkdir()
    monkeypatch.chdir(world.config_dir)  # the working directory must not matter
    roots = fallback_roots(["data", "../sibling"], project_root=world.project, environ={})
    assert roots.paths == (world.project / "data", world.project.parent / "sibling")
    env = {"MCP_ROOTS": f"data{os.pathsep}../sibling"}
    roots = fallback_roots(project_root=world.project, environ=env)
    assert roots.paths == (world.project / "data", world.project.parent / "sibling")


def test_relative_config_paths_start_at_the_files_directory(world: World) -> None:
    (world.project / "data").mkdir()
    (world.config_dir / "data").mkdir()
    write(world.user_file, json.dumps({"roots": [{"path": "./data"}, {"path": "."}]}))
    roots = fallback_roots(project_root=world.project, environ={}, user_config_dir=world.config_dir)
    assert roots.paths == (world.config_dir / "data", world.config_dir)
    write(world.project_file, json.dumps({"roots": [{"path": "data"}]}))
    roots = fallback_roots(project_root=world.project, environ={}, user_config_dir=world.config_dir)
    assert roots.paths == (world.project / "data",)


def test_config_paths_expand_home(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(world.dirs["user file"]))
    write(world.user_file, json.dumps({"roots": [{"path": "~"}]}))
    roots = fallback_roots(project_root=world.project, environ={}, user_config_dir=world.config_dir)
    assert roots.paths == (world.dirs["user file"],)


# --- Config files: entries warn and skip, the file errs with its line ----------------------------------


def test_config_entries_by_path_and_uri_with_names(world: World) -> None:
    text = json.dumps(
        {
            "roots": [
                {"path": str(world.dirs["flag"]), "name": "Flag dir"},
                {"uri": "file://" + str(world.dirs["environment"]), "name": None},
                {"uri": "file://localhost" + str(world.dirs["user file"])},
            ]
        }
    )
    write(world.project_file, text)
    roots = fallback_roots(project_root=world.project, environ={})
    assert [(r.path, r.name) for r in roots] == [
        (world.dirs["flag"], "Flag dir"),
        (world.dirs["environment"], None),
        (world.dirs["user file"], None),
    ]


def test_config_warns_per_invalid_entry_and_keeps_the_valid_ones(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    text = (
        '{"roots": [\n'
        '  {"path": "missing"},\n'
        f'  {{"path": "{world.dirs["flag"]}", "name": "Good"}},\n'
        '  {"uri": "file://evil.example/share"},\n'
        f'  {{"uri": "file://{world.dirs["environment"]}"}}\n'
        "]}\n"
    )
    write(world.project_file, text)
    with caplog.at_level(logging.WARNING, logger="mcp_roots"):
        roots = fallback_roots(project_root=world.project, environ={})
    assert roots.paths == (world.dirs["flag"], world.dirs["environment"])
    assert roots.source == str(world.project_file)
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2
    assert messages[0].startswith(f"{world.project_file}:2: ")
    assert "does not exist" in messages[0]
    assert messages[1].startswith(f"{world.project_file}:4: ")
    assert "is not local" in messages[1]


@pytest.mark.parametrize(
    "text",
    ['{"roots": []}', '{"roots": [{"path": "missing"}, {"uri": "file:///nonexistent/mcp-roots-x"}]}'],
    ids=["empty-list", "only-invalid-entries"],
)
def test_config_without_usable_roots_fails_closed(
    world: World, text: str, caplog: pytest.LogCaptureFixture
) -> None:
    write(world.project_file, text)
    write(world.user_file, json.dumps({"roots": [{"path": str(world.dirs["user file"])}]}))
    with caplog.at_level(logging.WARNING, logger="mcp_roots"):
        roots = fallback_roots(project_root=world.project, environ={}, user_config_dir=world.config_dir)
    assert len(roots) == 0
    assert roots.source == str(world.project_file)  # not the user file, not the project root
    assert not roots.contains(world.project / "anything")
    assert "lists no usable root" in caplog.text


def test_invalid_json_names_the_file_and_line(world: World) -> None:
    write(world.project_file, '{\n  "roots": [\n    {"path": "a"}\n    {"path": "b"}\n  ]\n}\n')
    with pytest.raises(ConfigError) as caught:
        fallback_roots(project_root=world.project, environ={})
    assert str(caught.value).startswith(f"{world.project_file}:4:5: is not valid JSON: Expecting ','")


def test_invalid_json_in_the_user_file_names_that_file(world: World) -> None:
    write(world.user_file, '{"roots": [\n\n  {"path": "a",}\n]}')
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(world.user_file))}:3:\d+: is not valid JSON"):
        fallback_roots(project_root=world.project, environ={}, user_config_dir=world.config_dir)


SHAPES = [
    # (file text, line reported, words of the rule)
    ('[\n  {"path": "."}\n]', 1, "must hold a JSON object"),
    ('\n\n"roots"', 3, "not a string"),
    ("{}", 1, 'no "roots" key'),
    ('{\n  "roots": [],\n  "ceiling": []\n}', 3, "unknown key 'ceiling'"),
    ('{\n  "root": [{"path": "."}]\n}', 2, "unknown key 'root'"),
    ('{\n  "roots": {"path": "."}\n}', 2, '"roots" must be an array of entries, not an object'),
    ('{"roots": [\n  {"path": "."},\n  "./data"\n]}', 3, 'entry 2 of "roots" must be an object'),
    (
        '{"roots": [\n  {"path": ".",\n   "uri": "file:///"}\n]}',
        2,
        'entry 1 of "roots" has both "path" and "uri"',
    ),
    ('{"roots": [\n\n  {"name": "x"}\n]}', 3, 'has neither "path" and "uri"'),
    (
        '{"roots": [\n  {\n    "path": ""\n  }\n]}',
        3,
        '"path" of entry 1 of "roots" must be a non-empty string',
    ),
    ('{"roots": [{"uri": 7}]}', 1, '"uri" of entry 1 of "roots" must be a non-empty string'),
    (
        '{"roots": [\n  {"path": ".",\n   "name": 3}]}',
        3,
        '"name" of entry 1 of "roots" must be a string, not a number',
    ),
    ('{"roots": [\n  {"path": ".",\n   "paht": "x"}]}', 3, "unknown key 'paht'"),
    ('{\n  "roots": [],\n  "roots": [{"path": "/"}]\n}', 3, "the key 'roots' appears twice"),
    ('{"roots": [{"path": ".", "path": "/"}]}', 1, "the key 'path' appears twice"),
]


@pytest.mark.parametrize(("text", "line", "rule"), SHAPES, ids=[s[2][:40] for s in SHAPES])
def test_wrong_shape_names_the_file_the_line_and_the_rule(
    world: World, text: str, line: int, rule: str
) -> None:
    write(world.project_file, text)
    with pytest.raises(ConfigError) as caught:
        fallback_roots(project_root=world.project, environ={})
    message = str(caught.value)
    assert message.startswith(f"{world.project_file}:{line}: "), message
    assert rule.replace('"', "") in message.replace('"', "")


def test_config_that_is_not_utf8_names_the_line(world: World) -> None:
    world.project_file.write_bytes(b'{"roots": [\n  {"path": "caf\xe9"}\n]}')
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(world.project_file))}:2: is not valid UTF-8"):
        fallback_roots(project_root=world.project, environ={})


def test_config_with_byte_order_mark_is_read(world: World) -> None:
    world.project_file.write_bytes(b"\xef\xbb\xbf" + json.dumps({"roots": [{"path": "."}]}).encode())
    assert fallback_roots(project_root=world.project, environ={}).paths == (world.project,)


def test_config_that_is_a_directory_or_a_dangling_link_is_an_error(world: World) -> None:
    world.project_file.mkdir()
    with pytest.raises(ConfigError, match="is not a regular file"):
        fallback_roots(project_root=world.project, environ={})
    world.project_file.rmdir()
    world.project_file.symlink_to(world.project / "nowhere.json")
    with pytest.raises(ConfigError, match="symbolic link to nothing"):
        fallback_roots(project_root=world.project, environ={})


def test_deeply_nested_config_is_an_error_not_a_crash(world: World) -> None:
    write(world.project_file, '{"roots": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(ConfigError, match=str(world.project_file)):
        fallback_roots(project_root=world.project, environ={})


# --- The user config directory -----------------------------------------------------------------------


def test_user_config_dir_from_mcp_roots_config_dir(world: World) -> None:
    write(world.user_file, json.dumps({"roots": [{"path": str(world.dirs["user file"])}]}))
    roots = fallback_roots(
        project_root=world.project, environ={"MCP_ROOTS_CONFIG_DIR": str(world.config_dir)}
    )
    assert (roots.source, roots.paths) == (str(world.user_file), (world.dirs["user file"],))


@pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="XDG_CONFIG_HOME is how platformdirs works on Linux"
)
def test_default_user_config_dir_follows_platformdirs(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    xdg = world.config_dir.parent / "xdg"
    (xdg / "mcp-roots").mkdir(parents=True)
    file = write(xdg / "mcp-roots" / "mcp-roots.json", json.dumps({"roots": [{"path": "."}]}))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(xdg))
    roots = fallback_roots(project_root=world.project, environ={})
    assert (roots.source, roots.paths) == (str(file), (xdg / "mcp-roots",))


# --- The ceiling ---------------------------------------------------------------------------------------


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    base = tmp_path.resolve()
    for d in ("top/ceil/a/inner", "top/ceil/b", "top/ceil/a_evil", "top/other", "top/ceil/c"):
        (base / d).mkdir(parents=True)
    write(base / "top/ceil/a/file.txt", "x")
    (base / "top/ceil/a/link_out").symlink_to(base / "top/other")
    (base / "top/ceil/link_in").symlink_to(base / "top/ceil/a/inner")
    return base


CEILING_CASES = [
    # (client roots, ceiling roots, expected roots, what happens)
    (["top/ceil/a/inner"], ["top/ceil/a", "top/ceil/b"], ["top/ceil/a/inner"], "inside: kept"),
    (["top/ceil/a"], ["top/ceil/a", "top/ceil/b"], ["top/ceil/a"], "equal: kept"),
    (["top/ceil/a/file.txt"], ["top/ceil/a"], ["top/ceil/a/file.txt"], "file inside: kept"),
    (["top/ceil"], ["top/ceil/a", "top/ceil/b"], ["top/ceil/a", "top/ceil/b"], "containing: narrowed"),
    (["top"], ["top/ceil/a", "top/ceil/b"], ["top/ceil/a", "top/ceil/b"], "containing far up: narrowed"),
    (["top/other"], ["top/ceil/a", "top/ceil/b"], [], "outside: dropped"),
    (["top/ceil/a_evil"], ["top/ceil/a"], [], "sibling prefix: dropped"),
    (["top/ceil/a"], ["top/ceil/a_evil"], [], "sibling prefix, other way: dropped"),
    (["top/ceil/c"], ["top/ceil/a", "top/ceil/b"], [], "sibling inside the parent: dropped"),
    (["top/ceil/a/link_out"], ["top/ceil/a"], [], "link inside to outside: dropped"),
    (["top/ceil/link_in"], ["top/ceil/a"], ["top/ceil/a/inner"], "link to inside: kept"),
    (
        ["top/other", "top/ceil/a/inner", "top/ceil"],
        ["top/ceil/a", "top/ceil/b"],
        ["top/ceil/a/inner", "top/ceil/a", "top/ceil/b"],
        "mixed",
    ),
    (["top/ceil/a"], [], [], "empty ceiling: nothing"),
    ([], ["top/ceil/a"], [], "no client roots: nothing"),
]

PROBES = [
    "top",
    "top/x",
    "top/ceil",
    "top/ceil/a",
    "top/ceil/a/inner/f",
    "top/ceil/a/file.txt",
    "top/ceil/a/x",
    "top/ceil/b/y",
    "top/ceil/c/z",
    "top/ceil/a_evil/q",
    "top/other/o",
    "top/ceil/a/link_out/o",
]


@pytest.mark.parametrize(
    ("client", "ceiling", "expected", "what"), CEILING_CASES, ids=[c[3] for c in CEILING_CASES]
)
def test_clip_to_ceiling(
    tree: Path, client: list[str], ceiling: list[str], expected: list[str], what: str
) -> None:
    client_roots = RootSet.from_paths([tree / c for c in client], source="client")
    ceiling_roots = RootSet.from_paths([tree / c for c in ceiling], source="ceiling")
    clipped = clip_to_ceiling(client_roots, ceiling_roots)
    assert clipped.paths == tuple(tree / e for e in expected)
    assert clipped.source == "client"
    # Never wider than either side: whatever the result allows, the client and the ceiling both allow.
    for probe in PROBES:
        if clipped.contains(tree / probe):
            assert client_roots.contains(tree / probe), probe
            assert ceiling_roots.contains(tree / probe), probe


def test_dropping_a_root_warns_and_names_it(tree: Path, caplog: pytest.LogCaptureFixture) -> None:
    client = RootSet.from_paths([tree / "top/other", tree / "top/ceil/a"], source="client")
    ceiling = RootSet.from_paths([tree / "top/ceil/a"], source="ceiling")
    with caplog.at_level(logging.WARNING, logger="mcp_roots"):
        clipped = clip_to_ceiling(client, ceiling)
    assert clipped.paths == (tree / "top/ceil/a",)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert str(tree / "top/other") in warnings[0]
    assert "outside the ceiling" in warnings[0]


def test_narrowed_root_takes_the_ceiling_roots_names(tree: Path) -> None:
    client = RootSet.from_paths([(tree / "top", "Everything")], source="client")
    ceiling = RootSet.from_paths([(tree / "top/ceil/a", "A"), tree / "top/ceil/b"], source="ceiling")
    clipped = clip_to_ceiling(client, ceiling)
    assert [(r.path, r.name) for r in clipped] == [(tree / "top/ceil/a", "A"), (tree / "top/ceil/b", None)]


@pytest.mark.parametrize(
    ("client_access", "ceiling_access"), [("read", "read-write"), ("read-write", "read")]
)
def test_clipping_never_widens_access_either(
    tree: Path, client_access: Access, ceiling_access: Access
) -> None:
    """A root is read-only where it or the ceiling root holding it is, kept or narrowed; a write the
    clipped set allows, both sides allow (the control: both read-write, the write goes through)."""
    for client, ceiling in (("top/ceil/a", "top/ceil"), ("top", "top/ceil/a")):  # kept, then narrowed
        client_roots = RootSet.from_paths([tree / client], source="client", access=client_access)
        ceiling_roots = RootSet.from_paths([tree / ceiling], source="ceiling", access=ceiling_access)
        clipped = clip_to_ceiling(client_roots, ceiling_roots)
        assert [r.access for r in clipped] == ["read"]
        with pytest.raises(ReadOnlyPath):
            clipped.write_text(tree / "top/ceil/a/new.txt", "x")
        both = clip_to_ceiling(
            client_roots.with_access("read-write"), ceiling_roots.with_access("read-write")
        )
        both.write_text(tree / "top/ceil/a/new.txt", "x")
        (tree / "top/ceil/a/new.txt").unlink()


def test_clipping_fallback_roots_to_a_ceiling(tree: Path) -> None:
    # The way RootsGuard uses it: a wide project root narrowed by the operator's ceiling.
    fallback = fallback_roots(project_root=tree / "top", environ={}, user_config_dir=tree / "none")
    ceiling = RootSet.from_paths([tree / "top/ceil/b"], source="ceiling")
    clipped = clip_to_ceiling(fallback, ceiling)
    assert (clipped.source, clipped.paths) == (SOURCE_PROJECT_ROOT, (tree / "top/ceil/b",))
