"""What a wrapped server may touch beside its roots, and starting it confined.
And the commands wrap refuses because it cannot bound them.
"""

# What a wrapped server may touch beside its roots: its runtime and code (found from the command and its
# arguments), the operator's ``--read`` folders, a private cache folder per wrapped command, a clean
# environment; the commands wrap refuses because it cannot bound them (a container daemon runs them); and the
# server's process started confined to a set of roots by that plan (``spawn``: no event loop needed, so the
# first child starts before the proxy is imported).

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ConfigError
from ..sandbox import SYSTEM_DEVICE_PATHS, Backend, end, popen, system_read_paths

__all__ = [
    "CONTAINER_TOOLS",
    "Plan",
    "cache_base",
    "cache_dir_for",
    "end_tree_now",
    "make_plan",
    "prepare_cache",
    "spawn",
]

#: Commands that hand the server to a daemon (``docker run``...): the child wrap confines would be a client
#: of that daemon, and the server would run outside the confinement.
CONTAINER_TOOLS = frozenset({"docker", "podman", "nerdctl", "finch", "lima", "colima", "kubectl"})
_CONTAINER_VERBS = frozenset({"run", "exec", "start", "create", "compose", "up", "container", "attach"})
#: What a child's environment keeps of wrap's (besides ``--env`` names); HOME and the cache variables point
#: into the private cache folder.
KEPT_ENV = ("PATH", "LANG", "LC_ALL", "TERM", "TZ")
_SHEBANG_MAX = 256
#: Files a served runtime reads at start beyond the sandbox's own plan (its system paths, which hold
#: OpenSSL's configuration and /etc/gitconfig, and the name resolution files with the network on): Python's
#: mimetypes, which FastMCP imports, raises on an unreadable /etc/mime.types.
RUNTIME_FILES = ("/etc/mime.types",)
#: An argument ending so names code (granted read with its package root); any other file is data.
CODE_SUFFIXES = (
    ".py",
    ".pyz",
    ".js",
    ".mjs",
    ".cjs",
    ".ts",
    ".mts",
    ".jar",
    ".rb",
    ".pl",
    ".php",
    ".sh",
    ".lua",
)


@dataclass(frozen=True)
class Plan:
    """The child's command (script paths made absolute), the folders it may read (``read``), its private
    cache folder (read-write), its environment, and why each read folder is there."""

    argv: tuple[str, ...]
    read: tuple[str, ...]
    cache: str
    env: Mapping[str, str]
    reasons: Mapping[str, str] = field(default_factory=dict)
    skipped: tuple[str, ...] = ()
    sandbox: Backend = "auto"  # the backend: native, srt or auto (mcp_roots.sandbox)
    allow_domains: tuple[str, ...] = ()  # srt: the hosts the server may reach
    strict_git: bool = False  # every .git read-only whole (--strict-git): git writes refused

    def describe(self, ceiling: Sequence[str], write: bool, network: bool) -> str:
        """The whole policy, for ``--print-policy``."""
        lines = [
            f"command: {' '.join(self.argv)}",
            f"roots: the client's roots clipped to the ceiling ({', '.join(ceiling)}), "
            f"{'read-write' if write else 'read-only'}; none before the client has sent them",
            f"network: {_network_words(network, self.allow_domains)}",
            f"git: {_git_words(write, self.strict_git)}",
            f"sandbox: {self.sandbox}",
            f"private cache (read-write, persistent): {self.cache}",
            "read-only for the runtime and its code:",
        ]
        lines += [f"  {path}  ({self.reasons.get(path, 'system')})" for path in self.read]
        system = system_read_paths(network)  # the sandbox's own plan, name resolution with the network
        lines.append("read-only system paths: " + ", ".join(p for p in system if os.path.exists(p)))
        lines.append("devices: " + ", ".join(SYSTEM_DEVICE_PATHS))
        lines += [f"not granted (too wide): {path}" for path in self.skipped]
        lines.append("environment: " + ", ".join(f"{k}={v}" for k, v in sorted(self.env.items())))
        return "\n".join(lines)


def _git_words(write: bool, strict: bool) -> str:
    if not write:
        return "read-only (the roots are)"
    if strict:
        return "strict: every .git folder read-only whole, git writes refused (--strict-git)"
    return "default: git's settings and redirections that exist read-only, git writes work"


def _network_words(network: bool, domains: Sequence[str]) -> str:
    if domains:
        return "only " + ", ".join(domains) + " (srt's proxy)"
    return "allowed" if network else "refused (no sockets)"


def refuse_container(argv: Sequence[str]) -> None:
    """ConfigError when ``argv`` hands the server to a container daemon (``docker run ...``)."""
    if not argv:
        raise ConfigError("wrap: no COMMAND after '--' (see 'mcp-roots wrap --help')")
    tool = os.path.basename(argv[0])
    if tool in CONTAINER_TOOLS and any(a in _CONTAINER_VERBS for a in argv[1:]):
        raise ConfigError(
            f"wrap: {tool} {' '.join(a for a in argv[1:] if a in _CONTAINER_VERBS)} runs the server in a "
            "container daemon, outside the confinement wrap gives its child; mount the roots into the "
            "container instead, or pass --allow-container to keep only wrap's argument checks"
        )


def cache_base(base: str | os.PathLike[str] | None = None) -> str:
    """Where wrap's cache folders live: ``base`` (--cache-dir), else ``~/.cache/mcp-roots/wrap``."""
    if base is not None:
        return os.fspath(base)
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(xdg, "mcp-roots", "wrap")


def cache_dir_for(argv: Sequence[str], base: str | os.PathLike[str] | None = None) -> Path:
    """The private cache folder of a wrapped command: one per command line, kept across runs."""
    base = cache_base(base)
    digest = hashlib.sha256("\0".join(argv).encode("utf-8", "surrogateescape")).hexdigest()[:16]
    name = "".join(c if c.isalnum() or c in "-_." else "_" for c in os.path.basename(argv[0]))[:40]
    return Path(base) / f"{name}-{digest}"


def _too_wide(path: str, homes: Sequence[str]) -> bool:
    # The rule of the fallback roots: never /, a home directory or one of its ancestors.
    return path == "/" or any(home == path or home.startswith(path.rstrip("/") + "/") for home in homes)


def _package_root(real: str) -> tuple[str, str]:
    """The folder to grant for a file of the runtime or code: its node_modules tree, its venv, else its own
    folder; with the reason."""
    folder = real if os.path.isdir(real) else os.path.dirname(real)
    parts = Path(folder).parts
    if "node_modules" in parts:
        index = len(parts) - 1 - parts[::-1].index("node_modules")
        return str(Path(*parts[: index + 1])), "node packages of the command"
    probe = Path(folder)
    for candidate in (probe, *probe.parents):
        if (candidate / "pyvenv.cfg").is_file():
            return str(candidate), "the Python environment of the command"
    return folder, _CODE


def _shebang(real: str) -> list[str]:
    try:
        with open(real, "rb") as f:
            head = f.read(_SHEBANG_MAX)
    except OSError:
        return []
    if not head.startswith(b"#!"):
        return []
    words = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").split()
    if not words:
        return []
    if os.path.basename(words[0]) == "env":
        names = [w for w in words[1:] if not w.startswith("-")]
        found = shutil.which(names[0]) if names else None
        return [found] if found else []
    return [words[0]]


_CODE = "the command's code"


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _overlaps(path: str, folders: Sequence[str]) -> bool:
    real = os.path.realpath(path)
    return any(_within(real, f) or _within(f, real) for f in folders)


def _system(path: str) -> bool:
    return any(path == p or path.startswith(p + "/") for p in ("/usr", "/bin", "/sbin", "/lib", "/lib64"))


def _is_code(arg: str) -> bool:
    """An argument naming a program file (a script by its extension, or an executable): granted read with
    its package. A data file named as an argument is not: data comes through the roots."""
    if not os.path.isfile(arg):
        return False
    return arg.endswith(CODE_SUFFIXES) or os.access(arg, os.X_OK)


def _venv_home(venv: str) -> str | None:
    try:
        with open(os.path.join(venv, "pyvenv.cfg"), encoding="utf-8") as f:
            for line in f:
                key, _, value = line.partition("=")
                if key.strip() == "home":
                    return value.strip()
    except OSError:
        return None
    return None


def make_plan(
    argv: Sequence[str],
    *,
    extra_read: Sequence[str] = (),
    env_names: Sequence[str] = (),
    cache_base: str | None = None,
    environ: Mapping[str, str] | None = None,
    ceiling: Sequence[str] = (),
) -> Plan:
    """The plan for ``argv``: the program (found on PATH) and every argument naming a code file (a script's
    extension, or executable; made absolute: the child's working folder is its first root), each granted
    read through its package root (a node_modules tree, a venv, else its folder), the interpreter of a
    ``#!`` script and a venv's base Python. Data files and folders named as arguments are not granted: data
    comes through the roots. A code folder that overlaps the ``ceiling`` is narrowed to the program's file;
    a package root (node_modules, a venv) that holds the ceiling is refused (ConfigError)."""
    ceilings = [os.path.realpath(c) for c in ceiling]
    source = os.environ if environ is None else environ
    homes = sorted(
        {os.path.realpath(os.path.expanduser("~")), os.path.realpath(source.get("HOME", "/"))} - {"/"}
    )
    reasons: dict[str, str] = {}
    skipped: list[str] = []

    def grant(path: str, why: str) -> None:
        real = os.path.realpath(path)
        if _too_wide(real, homes):
            if real not in skipped:
                skipped.append(real)
            return
        if not any(real == r or real.startswith(r.rstrip("/") + "/") for r in reasons):
            reasons[real] = why

    def runtime(path: str, depth: int = 0) -> None:
        real = os.path.realpath(path)
        for candidate in dict.fromkeys((os.path.abspath(path), real)):
            root, why = _package_root(candidate)
            if _system(root):
                pass
            elif why == _CODE and os.path.isfile(candidate) and _overlaps(root, ceilings):
                # Never the ceiling's folders through the code's: the program's file alone.
                grant(candidate, f"{_CODE}: this file alone (its folder overlaps the ceiling)")
            elif held := [c for c in ceilings if _within(c, os.path.realpath(root))]:
                raise ConfigError(
                    f"wrap: {root} ({why}) would be readable by the server and holds the ceiling "
                    f"{held[0]}: the server could read all of it whatever the client's roots; move the "
                    "server's files out of the ceiling's way, or name a narrower ceiling"
                )
            else:
                grant(root, why)
            if why.startswith("the Python"):
                home = _venv_home(root)
                python = os.path.realpath(os.path.join(home, "python3")) if home else ""
                if python and os.path.exists(python) and not _system(python):
                    grant(os.path.dirname(os.path.dirname(python)), "the base Python of the venv")
        if depth < 2:
            for interpreter in _shebang(real):
                runtime(interpreter, depth + 1)

    program = argv[0]
    found = program if os.sep in program else shutil.which(program, path=source.get("PATH", os.defpath))
    if found is None:
        raise ConfigError(f"wrap: command {program!r} not found on PATH")
    absolute = [os.path.abspath(found)]
    runtime(absolute[0])
    for arg in argv[1:]:
        if arg and not arg.startswith("-") and _is_code(arg):
            arg = os.path.abspath(arg)
            runtime(arg)
        absolute.append(arg)
    for path in RUNTIME_FILES:
        if os.path.isfile(path):
            reasons[path] = "read by runtimes at start"
    for path in extra_read:
        if not os.path.exists(path):
            raise ConfigError(f"wrap: --read {path!r} does not exist")
        reasons[os.path.realpath(path)] = "--read"
    cache = cache_dir_for(absolute, cache_base)
    env = {k: source[k] for k in (*KEPT_ENV, *env_names) if k in source}
    env.update(
        HOME=str(cache / "home"),
        XDG_CACHE_HOME=str(cache / "cache"),
        XDG_CONFIG_HOME=str(cache / "config"),
        XDG_DATA_HOME=str(cache / "data"),
        TMPDIR=str(cache / "tmp"),
        npm_config_cache=str(cache / "npm"),
        PIP_CACHE_DIR=str(cache / "pip"),
        UV_CACHE_DIR=str(cache / "uv"),
    )
    for name in env_names:
        if name in source:
            env[name] = source[name]
    return Plan(tuple(absolute), tuple(reasons), str(cache), env, reasons, tuple(skipped))


def prepare_cache(plan: Plan) -> None:
    """Make the cache folder and its parts (mode 0700)."""
    for sub in ("home", "cache", "config", "data", "tmp", "npm", "pip", "uv"):
        os.makedirs(os.path.join(plan.cache, sub), mode=0o700, exist_ok=True)


def spawn(
    plan: Plan, roots: Sequence[str], *, write: bool, network: bool, read_roots: Sequence[str] = ()
) -> subprocess.Popen[bytes]:
    """The server of ``plan`` started confined to ``roots`` (read-write unless ``write`` is false),
    ``read_roots`` (read only) and its private cache folder, in a session of its own, its stdin and stdout
    pipes, its stderr this process's; its working folder is the first root (none: the cache's home). Raises
    OSError or SandboxUnavailable."""
    first = [*roots, *read_roots][:1]
    return popen(
        [*roots, plan.cache],
        list(plan.argv),
        write=write,
        network=network,
        strict_git=plan.strict_git and write,
        sandbox=plan.sandbox,
        allow_domains=plan.allow_domains,
        extra_read=[*plan.read, *read_roots],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=None,  # the child's stderr is wrap's
        cwd=first[0] if first else os.path.join(plan.cache, "home"),
        env=dict(plan.env),
        start_new_session=True,
    )


def end_tree_now(process: subprocess.Popen[bytes]) -> None:
    """End a child and everything it started (``sandbox.end``: its group, and its PID namespace where the
    kernel gives one), and reap it. The one place every retirement goes through: a roots change, a pool
    eviction, the end of a drain, a stalled input, wrap's exit."""
    end(process)
