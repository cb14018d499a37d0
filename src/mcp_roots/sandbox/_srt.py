"""The second backend: Anthropic's sandbox runtime (``srt``), given the same plan as the native one.

Each child gets srt settings of its own (a private file, mode 0600, outside every root) built from its roots.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

from ..errors import SandboxUnavailable
from ._plan import SYSTEM_DEVICE_PATHS, RootPaths, program_of, python_paths, system_read_paths
from ._protect import find_protected, protected_names

__all__ = [
    "BACKENDS",
    "SRT_INSTALL",
    "SRT_TESTED",
    "SRT_WRITABLE",
    "Backend",
    "Runtime",
    "choose",
    "find_srt",
    "popen",
    "scratch_bases",
    "settings",
]

#: The backends a caller may name (``sandbox=``, ``--sandbox``).
Backend = Literal["auto", "native", "srt"]
BACKENDS: tuple[str, ...] = ("auto", "native", "srt")
#: The srt release mcp-roots is tested with (tests/interop/srt/package-lock.json), and the oldest it accepts.
SRT_TESTED = "0.0.83"
SRT_INSTALL = f"npm install -g @anthropic-ai/sandbox-runtime@{SRT_TESTED}" + (
    " and apt-get install bubblewrap socat ripgrep" if sys.platform == "linux" else ""
)
#: What srt makes writable whatever its settings say (its README, "Filesystem Configuration").
SRT_WRITABLE = ("the child's stdio and /dev/tty", "/tmp/claude", "~/.claude/debug", "~/.npm/_logs")
#: What srt needs beside itself on Linux: its sandbox, its proxy bridge, and its file search.
_LINUX_TOOLS = ("bwrap", "socat", "rg")
#: Where reads are denied on macOS (Seatbelt cannot hide the system, so the user's data is denied instead).
_MACOS_DENY_READ = ("/Users", "/Volumes", "/private/tmp", "/private/var/folders", "/tmp", "/opt", "/var")


@dataclass(frozen=True)
class Runtime:
    """An installed srt: the command that starts it, its version, and its package folder (read by srt's
    own helpers from inside the sandbox)."""

    command: tuple[str, ...]
    version: str
    package: str


def _version_tuple(text: str) -> tuple[int, ...]:
    parts = []
    for part in text.strip().lstrip("v").split("."):
        digits = "".join(ch for ch in part if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


@lru_cache(maxsize=1)
def find_srt() -> Runtime | str:
    """The srt on ``$MCP_ROOTS_SRT`` or PATH, or why there is none usable (one line, naming the install)."""
    if sys.platform == "win32":
        return "srt on Windows is an alpha that needs an administrator's install: not supported"
    found = os.environ.get("MCP_ROOTS_SRT") or shutil.which("srt")
    if not found or not os.path.exists(found):
        return f"srt (Anthropic's sandbox runtime) is not installed: {SRT_INSTALL}"
    real = os.path.realpath(found)
    command: tuple[str, ...] = (real,)
    if real.endswith(".js"):
        node = os.environ.get("MCP_ROOTS_SRT_NODE") or shutil.which("node")
        if node is None:
            return "srt needs Node.js (node) on PATH"
        command = (node, real)
    package = os.path.dirname(os.path.dirname(real)) if real.endswith(".js") else os.path.dirname(real)
    try:
        said = subprocess.run(
            [*command, "--version"], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"srt at {found} does not start ({exc}): {SRT_INSTALL}"
    version = said.stdout.strip().splitlines()[-1] if said.stdout.strip() else ""
    if said.returncode != 0 or not version:
        return f"srt at {found} does not start (exit {said.returncode}): {SRT_INSTALL}"
    if _version_tuple(version) < _version_tuple(SRT_TESTED):
        return f"srt {version} at {found} is too old (mcp-roots needs {SRT_TESTED} or newer): {SRT_INSTALL}"
    if sys.platform == "linux":
        missing = [tool for tool in _LINUX_TOOLS if shutil.which(tool) is None]
        if missing:
            return f"srt needs {', '.join(missing)} on Linux: apt-get install bubblewrap socat ripgrep"
    return Runtime(command, version, package)


def choose(sandbox: str) -> Literal["native", "srt"]:
    """The backend a spawn uses: ``native`` and ``srt`` as named; ``auto`` is native where this kernel
    holds every native layer, else srt where it is installed, else native (which then refuses, naming why).
    Raises ``ValueError`` for another name and ``SandboxUnavailable`` on Windows."""
    if sandbox not in BACKENDS:
        raise ValueError(f"sandbox={sandbox!r}: expected one of {', '.join(BACKENDS)}")
    if sys.platform == "win32":
        raise SandboxUnavailable(
            "confined subprocesses are not supported on Windows (wrap and run refuse it)"
        )
    if sandbox == "native":
        return "native"
    if sandbox == "srt":
        return "srt"
    if sys.platform == "linux":
        from ._plan import support

        if support().complete:
            return "native"
    return "srt" if isinstance(find_srt(), Runtime) else "native"


def _existing(paths: Iterable[str]) -> list[str]:
    return [path for path in dict.fromkeys(paths) if os.path.lexists(path)]


def settings(
    roots: RootPaths,
    *,
    write: bool,
    network: bool,
    allow_domains: Sequence[str] = (),
    allow_unix: Sequence[str] = (),
    extra_read: Sequence[str | os.PathLike[str]] = (),
    program: str | None = None,
    system_paths: Sequence[str | os.PathLike[str]] | None = None,
    protect: bool | Iterable[str] = True,
    strict_git: bool = False,
    runtime_package: str = "",
    runtime_folder: str = "",
    platform: str = sys.platform,
) -> dict[str, Any]:
    """srt's settings for one child: reads denied everywhere (Linux: from ``/``) and allowed back for the
    system paths, the program, ``extra_read`` and the roots; writes only to the roots (``write``), less the
    protected set; network only to ``allow_domains`` (``network`` without domains: refused, since srt
    filters by name and allows no wildcard for every host); unix sockets only as named (macOS)."""
    if network and not allow_domains:
        raise SandboxUnavailable(
            "the srt backend reaches the network only by host name: name each host with "
            "--allow-domain NAME (allow_domains=[...]), or pass --no-network (network=False)"
        )
    if allow_unix and platform == "linux":
        raise SandboxUnavailable(
            "srt on Linux cannot allow one unix socket (its filter blocks them all): use --sandbox native "
            "to reach " + ", ".join(os.fspath(path) for path in allow_unix)
        )
    root_paths = [os.fspath(path) for path in roots]
    under_dev = [path for path in root_paths if os.path.realpath(path).startswith("/dev/")]
    if under_dev and platform == "linux":
        raise SandboxUnavailable(
            f"srt mounts a /dev of its own, so {', '.join(under_dev)} cannot be granted under srt: "
            "use --sandbox native (sandbox='native')"
        )
    read = system_read_paths(network, system_paths)  # the native plan's, one list for both backends
    read += [*SYSTEM_DEVICE_PATHS, *(os.fspath(path) for path in extra_read)]
    if program is not None:
        read.append(program)
        read += python_paths(program)
    if runtime_package:
        read.append(runtime_package)  # srt's own helpers (apply-seccomp) run inside the sandbox
    if runtime_folder:
        # srt's proxy socket: srt binds it into the sandbox before the tmpfs that hides /tmp, so the folder
        # that holds it (srt's TMPDIR, private to this child) is allowed back, or no host is reachable.
        read.append(runtime_folder)
    deny_write: list[str] = []
    if write:
        found = find_protected(root_paths, protected_names(protect))
        deny_write = [path for path, read_only in found.mounts if read_only]
        deny_write += list(found.not_held)
        if strict_git:  # every repository's .git read-only whole, as the native strict mode
            deny_write += [
                os.path.join(root, ".git")
                for root in root_paths
                if os.path.lexists(os.path.join(root, ".git"))
            ]
    deny_read = ["/"] if platform == "linux" else list(_MACOS_DENY_READ)
    return {
        "network": {
            "allowedDomains": list(allow_domains) if network else [],
            "deniedDomains": [],
            "allowUnixSockets": [os.fspath(path) for path in allow_unix],
            "allowLocalBinding": False,
        },
        "filesystem": {
            "denyRead": deny_read,
            "allowRead": _existing([*read, *root_paths]),
            "allowWrite": list(root_paths) if write else [],
            "denyWrite": deny_write,
        },
    }


#: Settings files are written here: a private folder of this process's (0700), outside every root.
_folder_lock = threading.Lock()
_folders: list[str] = []


def scratch_bases() -> list[str]:
    """Where a folder srt can grant may be made: the temporary folder unless it lies under /dev (srt mounts
    a /dev of its own, which hides it), then /tmp and /var/tmp."""
    bases = [tempfile.gettempdir(), "/tmp", "/var/tmp"]
    return [b for b in dict.fromkeys(bases) if not os.path.realpath(b).startswith("/dev/")]


def _private_folder(roots: Sequence[str]) -> str:
    def inside(path: str) -> bool:
        real = os.path.realpath(path)
        return any(real == r or real.startswith(r.rstrip("/") + "/") for r in map(os.path.realpath, roots))

    with _folder_lock:
        for folder in _folders:
            if not inside(folder):
                return folder
        for base in (os.environ.get("XDG_RUNTIME_DIR"), *scratch_bases(), os.path.expanduser("~")):
            if base and os.path.isdir(base) and not inside(base):
                folder = tempfile.mkdtemp(prefix="mcp-roots-srt-", dir=base)
                _folders.append(folder)
                atexit.register(shutil.rmtree, folder, True)
                return folder
    raise SandboxUnavailable("no private folder outside the roots for srt's settings")


def write_settings(document: Mapping[str, Any], roots: Sequence[str]) -> str:
    """Write ``document`` to a new private file (0600) outside ``roots``; its path."""
    folder = _private_folder(roots)
    descriptor, path = tempfile.mkstemp(prefix="child-", suffix=".json", dir=folder)
    with os.fdopen(descriptor, "w") as handle:
        os.fchmod(handle.fileno(), 0o600)
        json.dump(document, handle)
    return path


def popen(
    roots: RootPaths,
    argv: Any,
    *,
    write: bool,
    network: bool,
    allow_domains: Sequence[str] = (),
    allow_unix: Sequence[str] = (),
    system_paths: Sequence[str | os.PathLike[str]] | None = None,
    extra_read: Sequence[str | os.PathLike[str]] = (),
    protect: bool | Iterable[str] = True,
    strict_git: bool = False,
    popen_kwargs: Mapping[str, Any],
) -> subprocess.Popen[Any]:
    """``subprocess.Popen`` of ``srt --settings FILE -- argv``: the child and its whole tree confined by srt
    (on Linux: bubblewrap with a PID namespace that ends with srt). Raises ``SandboxUnavailable``."""
    runtime = find_srt()
    if not isinstance(runtime, Runtime):
        raise SandboxUnavailable(runtime)
    options = dict(popen_kwargs)
    if options.get("shell"):
        argv = ["/bin/sh", "-c", argv if isinstance(argv, str) else " ".join(map(str, argv))]
        options.pop("shell")
    elif isinstance(argv, (str, bytes, os.PathLike)):
        argv = [argv]
    command = [os.fsdecode(os.fspath(part)) for part in argv]
    if options.get("executable") is not None:
        command[0] = os.fsdecode(os.fspath(options.pop("executable")))
    program = program_of(command, options)
    root_paths = [os.fspath(path) for path in roots]
    folder = tempfile.mkdtemp(prefix="run-", dir=_private_folder(root_paths))
    given: Mapping[str, str] | None = options.get("env")
    environment = dict(os.environ if given is None else given)
    environment["TMPDIR"] = folder  # srt's own: the child gets srt's /tmp/claude
    options["env"] = environment
    document = settings(
        root_paths,
        write=write,
        network=network,
        allow_domains=allow_domains,
        allow_unix=allow_unix,
        extra_read=extra_read,
        program=program,
        system_paths=system_paths,
        protect=protect,
        strict_git=strict_git,
        runtime_package=runtime.package,
        runtime_folder=folder,
    )
    path = write_settings(document, root_paths)
    if program is not None and os.sep not in command[0]:
        command[0] = program  # srt looks the command up on its own PATH otherwise
    options["start_new_session"] = True  # srt, its shell and bubblewrap: one group, ended as one
    # srt makes placeholders for its mandatory denies (.mcp.json, .vscode, .claude/commands...) in its
    # working folder when that is writable: in a user's root they would appear there while the child runs,
    # and clash with the protected set's denyWrite of an existing .claude. srt starts in its private folder
    # instead (read-only for the child: no placeholder) and the child changes into the folder asked for.
    cwd = options.pop("cwd", None)
    wanted = os.fsdecode(os.fspath(cwd)) if cwd is not None else os.getcwd()
    options["cwd"] = folder
    command = ["/bin/sh", "-c", 'cd "$1" 2>/dev/null; shift; exec "$@"', "sh", wanted, *command]
    try:
        process = _SrtProcess([*runtime.command, "--settings", path, "--", *command], **options)
    except BaseException:
        _remove(path, folder)
        raise
    weakref.finalize(process, _remove, path, folder)
    return process


class _SrtProcess(subprocess.Popen[Any]):
    """srt's process, whose signals (``kill``, ``terminate``, ``send_signal``) go to its whole group: srt
    starts bubblewrap through a shell, so a signal to srt alone (SIGKILL above all) would leave the sandbox
    running; bubblewrap's end takes the PID namespace and every process in it along."""

    def send_signal(self, sig: int) -> None:
        self.poll()
        if self.returncode is None:
            try:
                os.killpg(self.pid, sig)
            except ProcessLookupError:
                pass
            except PermissionError:
                super().send_signal(sig)


def _remove(path: str, folder: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)
    shutil.rmtree(folder, ignore_errors=True)
