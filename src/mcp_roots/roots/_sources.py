"""Fallback roots from the operator's configuration.
And the ceiling that bounds client roots.
"""

# Sources, highest first: an explicit argument (the command line's ``--roots``), ``MCP_ROOTS``,
# ``mcp-roots.json`` in an explicitly given project root, then in the user config directory (or the file
# ``MCP_ROOTS_CONFIG`` names), then the explicitly given project root itself. The first source that is set
# decides; a source that is set never silently hands over to a lower one; nothing set means no fallback.

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TypeAlias

from ..errors import ConfigError, InvalidPath, InvalidRootURI
from ..paths._rootset import Root, RootSet
from ..paths._uri import uri_to_path
from ._config import config_entries, read_config_text

__all__ = [
    "CONFIG_DIR_ENV_VAR",
    "CONFIG_FILENAME",
    "CONFIG_FILE_ENV_VAR",
    "ENV_VAR",
    "SOURCE_ENVIRONMENT",
    "SOURCE_FLAG",
    "SOURCE_PROJECT_ROOT",
    "SOURCE_UNCONFIGURED",
    "clip_to_ceiling",
    "default_user_config_dir",
    "fallback_roots",
    "home_dirs",
    "how_to_configure",
    "lexically_within",
]

logger = logging.getLogger("mcp_roots")

CONFIG_FILENAME = "mcp-roots.json"
ENV_VAR = "MCP_ROOTS"
CONFIG_DIR_ENV_VAR = "MCP_ROOTS_CONFIG_DIR"
CONFIG_FILE_ENV_VAR = "MCP_ROOTS_CONFIG"

# The labels RootSet.source carries; a config file's label is its path.
SOURCE_FLAG = "flag"
SOURCE_ENVIRONMENT = "environment (MCP_ROOTS)"
SOURCE_PROJECT_ROOT = "project root"
# The label of the empty RootSet fallback_roots() returns when the operator configured nothing: every path is
# refused, and the refusal says how to configure roots (how_to_configure()).
SOURCE_UNCONFIGURED = "no fallback roots configured"

# A flag or MCP_ROOTS entry is a URI when it starts with 'file:' or looks like 'scheme://...' (a scheme
# of two letters or more, so that a Windows drive 'C:/x' stays a path). Any other scheme is then refused
# by the URI rules with a message that says so, instead of being looked up as a strange relative path.
_URI_LIKE = re.compile(r"^(?:file:|[A-Za-z][A-Za-z0-9+.-]+://)", re.IGNORECASE)

RootsArgument: TypeAlias = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]


def default_user_config_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The user config directory searched for ``mcp-roots.json``: ``$MCP_ROOTS_CONFIG_DIR`` if set,
    else ``platformdirs.user_config_dir("mcp-roots")`` (on Linux, ``$XDG_CONFIG_HOME/mcp-roots``)."""
    env = os.environ if environ is None else environ
    override = env.get(CONFIG_DIR_ENV_VAR)
    if override:
        return Path(os.path.abspath(override))
    import platformdirs  # here: explicit roots (wrap's ceiling) never need it

    return Path(platformdirs.user_config_dir("mcp-roots"))


def how_to_configure(
    environ: Mapping[str, str] | None = None,
    user_config_dir: str | os.PathLike[str] | None = None,
    *,
    flags: bool = True,
) -> str:
    """The sentence that tells an operator how to give a server fallback roots: with the command line's
    flags (``flags=True``, for the ``mcp-roots`` command), or with ``RootsGuard``'s arguments (a library
    server, which has no ``--roots`` flag of its own). For the server's log and the command's output, never
    for a client: a client is told ``NO_FOLDERS``."""
    try:
        config_dir = (
            os.path.abspath(user_config_dir)
            if user_config_dir is not None
            else str(default_user_config_dir(environ))
        )
    except Exception:  # pragma: no cover - platformdirs cannot name a directory here
        config_dir = "the user config directory"
    if not flags:
        return (
            "no fallback roots are configured for clients that send none; give them with "
            f"RootsGuard(roots=[...]) or RootsGuard(project_root=...), the {ENV_VAR} environment variable, "
            f"or a {CONFIG_FILENAME} file in {config_dir}"
        )
    return (
        "no fallback roots are configured for clients that send none; configure them with --roots DIR, "
        f"the {ENV_VAR} environment variable, or a {CONFIG_FILENAME} file in {config_dir} (or in the "
        "project directory given with --project)"
    )


NO_FOLDERS = "This server has no folders for this client: it sends no roots, and none are set up for it."
"""What a client that sends no roots is told when no fallback roots are configured. It goes to the model:
short, and nothing about the server's configuration or its home directory (the operator's advice,
``how_to_configure``, goes to the server's log once, at start-up)."""


def fallback_roots(
    roots: RootsArgument | None = None,
    *,
    project_root: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
    user_config_dir: str | os.PathLike[str] | None = None,
    allow_home: bool = False,
) -> RootSet:
    """The roots a server uses when its client sends none, from the first source that is set.

    1. ``roots``: source ``"flag"``.
    2. ``MCP_ROOTS`` in ``environ``, ``os.pathsep``-separated; an empty value is unset. Source
       ``"environment (MCP_ROOTS)"``.
    3. ``mcp-roots.json`` in ``project_root`` (only when one is given), then the file ``MCP_ROOTS_CONFIG``
       names, else ``mcp-roots.json`` in ``user_config_dir``. Source: the file's path.
    4. ``project_root`` itself, only when given (relative to the working directory). Source
       ``"project root"``.

    Nothing set: an empty RootSet whose source is :data:`SOURCE_UNCONFIGURED` (every path refused; the
    working directory is never used implicitly). A root that is ``/``, the user's home directory or an
    ancestor of it is refused unless ``allow_home``: an error for 1, 2 and 4, a skipped entry (with a
    warning) in a config file.

    Relative entries of 1 and 2 resolve against the project root (an error when none is given); relative
    ``path`` entries of a config file against the directory the file is in. An invalid entry of 1 or 2
    raises :class:`ConfigError` naming the entry and the source; an invalid entry of a config file is
    skipped with a warning, while a file that is not valid JSON or not the expected shape raises
    :class:`ConfigError` naming the file and the line. A source that is set but yields no usable root gives
    an empty RootSet (every path refused): it never falls through to a lower, possibly wider, source.

    Args:
        roots: A path, or a sequence of paths or ``file:`` URIs (the CLI's ``--roots``). A ``str`` is one
            path, commas included: splitting ``--roots a,b`` is the command line's job.
        project_root: The project's folder, for its ``mcp-roots.json`` and as the last source.
        environ: Where ``MCP_ROOTS``, ``MCP_ROOTS_CONFIG`` and ``MCP_ROOTS_CONFIG_DIR`` are read (default
            ``os.environ``).
        user_config_dir: The folder of the user's ``mcp-roots.json`` (default
            :func:`default_user_config_dir`: ``MCP_ROOTS_CONFIG_DIR``, else platformdirs).
        allow_home: Accept ``/``, the home directory or an ancestor of it as a root.
    """
    env = os.environ if environ is None else environ
    base = _project_root(project_root) if project_root is not None else None
    homes = None if allow_home else home_dirs(env)
    if roots is not None:
        return _from_argument(roots, base, homes)
    raw = env.get(ENV_VAR)
    if raw:
        return _from_environment(raw, base, homes)
    candidates: list[tuple[Path, bool]] = []  # (file, whether it must exist)
    if base is not None:
        candidates.append((base.path / CONFIG_FILENAME, False))
    named = env.get(CONFIG_FILE_ENV_VAR)
    if named:
        candidates.append((Path(os.path.abspath(named)), True))
    else:
        config_dir = (
            Path(os.path.abspath(user_config_dir))
            if user_config_dir is not None
            else default_user_config_dir(env)
        )
        candidates.append((config_dir / CONFIG_FILENAME, False))
    for candidate, required in candidates:
        found = _from_config_file(candidate, homes)
        if found is not None:
            return found
        if required:
            raise ConfigError(f"{CONFIG_FILE_ENV_VAR} names {str(candidate)!r}, which does not exist")
    if base is not None:
        _refuse_home(base, homes, f"the project root {str(base.path)!r}", "--project or project_root=")
        return RootSet([base], source=SOURCE_PROJECT_ROOT)
    return RootSet.empty(source=SOURCE_UNCONFIGURED)


# --- Project root and the home rule -------------------------------------------------------------------


def _project_root(project_root: str | os.PathLike[str]) -> Root:
    """The canonical project root (a readable directory), or ConfigError saying why not."""
    given: object = project_root
    try:
        root = Root.from_path(project_root)
    except InvalidPath as exc:
        raise ConfigError(f"project root {_show(given)} is not usable: {exc}") from None
    if not root.path.is_dir():
        raise ConfigError(f"project root {_show(given)} is not a directory")
    return root


def home_dirs(env: Mapping[str, str]) -> tuple[Path, ...]:
    """The canonical home directories a fallback root may not be (nor contain): ``$HOME`` and the
    password database's home of this user, when they exist."""
    found: list[Path] = []
    candidates = [env.get("HOME")]
    try:
        import pwd  # POSIX only

        candidates.append(pwd.getpwuid(os.getuid()).pw_dir)
    except (ImportError, KeyError, OSError):
        pass
    if os.name == "nt":  # pragma: no cover - POSIX CI
        candidates.append(os.path.expanduser("~"))
    for candidate in candidates:
        if not candidate or not os.path.isabs(candidate):
            continue
        try:
            home = Root.from_path(candidate).path
        except InvalidPath:
            continue
        if home not in found:
            found.append(home)
    return tuple(found)


def _home_conflict(root: Root, homes: Sequence[Path] | None) -> str | None:
    """Why ``root`` may not be a fallback root without allow_home (``homes`` is None with it), or None."""
    if homes is None:
        return None
    if root.path == Path(root.path.anchor):
        return "it is the filesystem root"
    for home in homes:
        if root.path == home:
            return "it is the home directory"
        if root.path in home.parents:
            return f"it contains the home directory {str(home)!r}"
    return None


def _refuse_home(root: Root, homes: Sequence[Path] | None, what: str, where: str) -> None:
    why = _home_conflict(root, homes)
    if why is not None:
        raise ConfigError(
            f"{what} from {where} is refused as a fallback root: {why}, which would expose the "
            "user's files; name the folders the server needs, or pass --allow-home (allow_home=True in "
            "Python) if you really mean it"
        )


def _show(value: object) -> str:
    return repr(os.fspath(value)) if isinstance(value, (str, os.PathLike)) else repr(value)


# --- Flag / argument and environment: fail fast --------------------------------------------------------


def _strict_root(entry: object, base: Root | None, source: str, homes: Sequence[Path] | None) -> Root:
    shown = f"{source} (--roots or the roots argument)" if source == SOURCE_FLAG else source
    try:
        if isinstance(entry, str) and _URI_LIKE.match(entry):
            root = Root.from_path(uri_to_path(entry))
        else:
            if base is None and isinstance(entry, (str, os.PathLike)) and not os.path.isabs(entry):
                raise ConfigError(
                    f"invalid root {_show(entry)} from {shown}: a relative path needs a project root to "
                    "start from (the working directory is never used implicitly); give an absolute path, "
                    "or the project root (--project DIR, project_root=)"
                )
            where = None if base is None else str(base.path)
            root = Root.from_path(entry, base=where)  # type: ignore[arg-type]  # checked inside
    except (InvalidPath, InvalidRootURI) as exc:
        raise ConfigError(f"invalid root {_show(entry)} from {shown}: {exc}") from None
    _refuse_home(root, homes, f"root {_show(entry)}", shown)
    return root


def _from_argument(roots: RootsArgument, base: Root | None, homes: Sequence[Path] | None) -> RootSet:
    entries: Iterable[object]
    if isinstance(roots, (str, os.PathLike)):
        entries = [roots]
    elif isinstance(roots, Iterable):
        entries = list(roots)
    else:
        raise ConfigError(
            f"roots {roots!r} from {SOURCE_FLAG} must be a path or a sequence of paths, "
            f"not {type(roots).__name__}"
        )
    built = [_strict_root(entry, base, SOURCE_FLAG, homes) for entry in entries]
    if not built:
        # An explicit empty list is a deliberate choice: no fallback, every path refused.
        logger.info("the roots argument is an empty list: every path is refused when the client sends none")
    return RootSet(built, source=SOURCE_FLAG)


def _from_environment(raw: str, base: Root | None, homes: Sequence[Path] | None) -> RootSet:
    # Empty entries ('a::b', a trailing separator) are ignored, never taken as the working directory
    # the way PATH does.
    entries = [entry for entry in raw.split(os.pathsep) if entry]
    if not entries:
        raise ConfigError(
            f"{ENV_VAR} is set to {raw!r}, which names no roots; list at least one path, or unset it"
        )
    built = [_strict_root(entry, base, SOURCE_ENVIRONMENT, homes) for entry in entries]
    return RootSet(built, source=SOURCE_ENVIRONMENT)


# --- Config files: errors for the file (the parser: _config), warnings for entries ----------------------


def _from_config_file(path: Path, homes: Sequence[Path] | None) -> RootSet | None:
    text = read_config_text(path)
    if text is None:
        return None
    source = str(path)
    roots: list[Root] = []
    entries = config_entries(path, text)
    for line, entry in entries:
        name = entry.get("name")
        try:
            if "uri" in entry:
                root = Root.from_path(uri_to_path(entry["uri"]), name)
            else:
                # '~' is expanded because a JSON file has no shell to do it; relative paths are taken
                # from the directory the file was found in.
                root = Root.from_path(os.path.expanduser(entry["path"]), name, base=path.parent)
        except (InvalidPath, InvalidRootURI) as exc:
            logger.warning("%s:%d: skipping this root: %s", path, line, exc)
            continue
        why = _home_conflict(root, homes)
        if why is not None:
            # A config file may come with a cloned repository: it never grants the whole disk or home.
            logger.warning(
                "%s:%d: skipping the root %s: %s (pass --allow-home, allow_home=True in Python, to allow it)",
                path,
                line,
                root.path,
                why,
            )
            continue
        roots.append(root)
    found = RootSet(roots, source=source)
    if not found:
        logger.warning(
            "%s lists no usable root: every path is refused when the client sends no roots "
            "(mcp-roots does not fall back to a lower source)",
            path,
        )
    return found


# --- The ceiling ---------------------------------------------------------------------------------------


def clip_to_ceiling(roots: RootSet, ceiling: RootSet) -> RootSet:
    """Clip roots (typically the client's) to the operator's ceiling: roots narrow, never widen.

    A root inside a ceiling root is kept. A root that contains ceiling roots is replaced by those ceiling
    roots (logged at info level). A root that is neither is dropped with a warning. Comparison is by
    whole path components of the canonical paths (``/srv/data_evil`` is not inside ``/srv/data``). An
    empty ceiling allows nothing. The result keeps ``roots.source``.

    Args:
        roots: The roots to clip.
        ceiling: The operator's bound.
    """
    kept: list[Root] = []
    for root in roots:
        if ceiling.root_above(root.path) is not None:
            kept.append(root)
            continue
        inner = ceiling.roots_beneath(root.path)
        if inner:
            logger.info(
                "narrowing root %s (from %s) to the ceiling roots inside it: %s",
                root.path,
                roots.source,
                ", ".join(str(c.path) for c in inner),
            )
            kept.extend(inner)
        else:
            logger.warning(
                "dropping root %s (from %s): it is outside the ceiling (%s)",
                root.path,
                roots.source,
                ceiling.describe(),
            )
    clipped = roots.with_roots(kept)
    if roots and not clipped:
        logger.warning(
            "no root from %s is inside the ceiling (%s): every path is refused",
            roots.source,
            ceiling.describe(),
        )
    return clipped


def lexically_within(ceiling: RootSet, text: str) -> bool:
    """Whether absolute ``text``, its ``..`` taken by the letter, lies in ``ceiling``. The precheck leaves
    such a path to the check against the call's roots: walking it in the ceiling would make the answer (and
    whether the client is asked) depend on what lies there, outside the roots (the one '..' rule)."""
    norm = os.path.normpath(text)
    for path in ceiling.paths:
        root = str(path)
        if norm == root or norm.startswith(root.rstrip("/") + "/"):
            return True
    return False
