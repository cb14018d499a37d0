"""Subprocesses confined to root paths by the kernel (Landlock plus a seccomp filter), and the server process.

What a confined program may touch: beneath the roots (read, or read-write with ``write=True``), plus
read-only what a program needs to start (``SYSTEM_READ_PATHS``, its own binary) and a few devices.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import IO, Any

from .._sys import landlock, seccomp
from ..errors import SandboxUnavailable

__all__ = [
    "CLEAN_ENV_NAMES",
    "SYSTEM_DEVICE_PATHS",
    "SYSTEM_READ_PATHS",
    "Confinement",
    "Support",
    "clean_env",
    "confine_process",
    "plan",
    "popen",
    "run",
    "run_async",
    "support",
]

logger = logging.getLogger("mcp_roots.sandbox")

# What a dynamically linked program needs to start and run, read-only (and executable). Entries that do
# not exist here are skipped. /bin, /sbin and /lib* are symlinks into /usr on merged-/usr systems; a rule
# on a symlink applies to its target. Deliberately absent: the rest of /etc (passwd, shadow, ssh, hosts),
# /home, /root, /tmp, /var, /proc and /sys. A program that needs more gets it through ``extra_read=`` or
# a ``system_paths=`` list of its own.
SYSTEM_READ_PATHS: tuple[str, ...] = (
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/ld.so.preload",
    "/etc/localtime",
    "/etc/timezone",
    "/etc/locale.alias",
    "/etc/locale.conf",
    "/etc/default/locale",
    "/etc/ssl/certs",
    "/etc/ca-certificates",
    "/dev/urandom",
    "/dev/random",
)

# Devices a program may read and write: shells redirect to /dev/null (with O_TRUNC) all the time.
SYSTEM_DEVICE_PATHS: tuple[str, ...] = ("/dev/null", "/dev/zero", "/dev/full")

#: What ``clean_env`` (``mcp-roots run --clean-env``) keeps of an environment, besides ``MCP_ROOTS_*``.
CLEAN_ENV_NAMES: tuple[str, ...] = ("PATH", "HOME", "LANG", "TERM")

RootPaths = Iterable[str | os.PathLike[str]]


_FS = landlock.FS
_READ = _FS.READ_FILE | _FS.READ_DIR | _FS.EXECUTE
_WRITE = (
    _FS.WRITE_FILE
    | _FS.REMOVE_DIR
    | _FS.REMOVE_FILE
    | _FS.MAKE_DIR
    | _FS.MAKE_REG
    | _FS.MAKE_SOCK
    | _FS.MAKE_FIFO
    | _FS.MAKE_SYM
    | _FS.REFER
    | _FS.TRUNCATE
)
_DEVICE = _FS.READ_FILE | _FS.WRITE_FILE | _FS.TRUNCATE | _FS.IOCTL_DEV
_NETWORK_ABI = 4

_warned: set[str] = set()
_warned_lock = threading.Lock()


# --- What the kernel offers ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Support:
    """What this kernel can enforce: ``abi`` (0 when Landlock is unusable, with ``reason`` saying why), and
    ``filter_reason`` (None when the seccomp filter can be installed, else why not)."""

    abi: int
    reason: str | None = None
    filter_reason: str | None = None

    @property
    def available(self) -> bool:
        return self.abi >= 1

    @property
    def complete(self) -> bool:
        """Both layers are here: Landlock and the system-call filter."""
        return self.available and self.filter_reason is None

    def enforced(self) -> list[tuple[str, bool, str]]:
        """(feature, enforced here, the ABI or note) for every part of the confinement, for ``doctor``."""
        abi = self.abi
        filtered = self.filter_reason is None
        return [
            ("file reads and writes outside the allowed paths", abi >= 1, "Landlock ABI 1, Linux 5.13"),
            (
                "renames and links across directories inside a writable root",
                abi >= 2,
                "Landlock ABI 2, Linux 5.19 (before: always refused, EXDEV)",
            ),
            ("truncate(2) of a file outside the roots", abi >= 3, "Landlock ABI 3, Linux 6.2"),
            ("TCP bind/connect refused with network=False", abi >= 4, "Landlock ABI 4, Linux 6.7"),
            ("ioctl(2) on devices outside the allowed paths", abi >= 5, "Landlock ABI 5, Linux 6.10"),
            (
                "signals to processes outside the sandbox; abstract unix sockets with network=False",
                abi >= 6,
                "Landlock ABI 6, Linux 6.12",
            ),
            (
                "chmod/chown/utime/xattr by path refused (by descriptor too with write=False; "
                "not with path_metadata=True)",
                filtered,
                "seccomp filter, x86_64",
            ),
            (
                "socket() of every family (UDP, MPTCP, raw, unix socket files) refused with network=False",
                filtered,
                "seccomp filter, x86_64",
            ),
            ("TIOCSTI/TIOCLINUX (typing into a terminal) and io_uring refused", filtered, "seccomp filter"),
        ]


@lru_cache(maxsize=1)
def support() -> Support:
    """Probe the kernel once per process: the Landlock ABI (or why there is none), and the seccomp filter."""
    try:
        abi, reason = landlock.abi_version(), None
    except landlock.LandlockMissing as exc:
        abi, reason = 0, exc.reason
    return Support(abi, reason, seccomp.probe())


def no_new_privs() -> str | None:
    """None when a thread can set no_new_privs (what both layers need), else why not; probed on a thread of
    its own, which sets it on itself only and ends."""
    outcome: list[str | None] = []

    def probe() -> None:
        try:
            landlock.set_no_new_privs()
            outcome.append(None)
        except OSError as exc:
            outcome.append(str(exc))

    thread = threading.Thread(target=probe, name="mcp-roots-nnp-probe", daemon=True)
    thread.start()
    thread.join()
    return outcome[0]


# --- The plan: which paths, which rights -----------------------------------------------------------------


@dataclass(frozen=True)
class Confinement:
    """A ruleset ready to apply: (path, rights) rules and the rights, networks and scopes it handles, and
    the seccomp filter program (None: no filter)."""

    abi: int
    rules: tuple[tuple[str, int], ...]
    handled_fs: int
    handled_net: int = 0
    scoped: int = 0
    notes: tuple[str, ...] = field(default=())
    syscall_filter: bytes | None = None

    def apply_to_current_thread(self) -> None:
        """Confine the calling thread and everything it starts from now on. Irreversible."""
        landlock.restrict_thread(
            self.rules, handled_fs=self.handled_fs, handled_net=self.handled_net, scoped=self.scoped
        )
        if self.syscall_filter is not None:
            seccomp.apply_to_thread(self.syscall_filter)


def _python_paths(executable: str) -> list[str]:
    # A child running this very interpreter (a venv's python is a symlink to it) needs its installation
    # and the venv: the standard library, pyvenv.cfg, site-packages. Read-only, like the rest.
    try:
        same = os.path.realpath(executable) == os.path.realpath(sys.executable)
    except OSError:
        same = False
    if not same:
        return []
    return sorted({sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix})


def _program(argv: Any, options: Mapping[str, Any]) -> str | None:
    """The file the kernel will execute for this argv (as subprocess looks it up), or None."""
    if options.get("shell"):
        program: Any = options.get("executable") or "/bin/sh"
    else:
        program = options.get("executable")
        if program is None:
            program = argv if isinstance(argv, (str, bytes, os.PathLike)) else next(iter(argv), None)
    if program is None:
        return None
    name: str = os.fsdecode(os.fspath(program))
    if os.sep in name:
        cwd = options.get("cwd")
        base = os.fsdecode(os.fspath(cwd)) if cwd is not None else os.getcwd()
        return os.path.join(base, name)
    env = options.get("env")
    search: str = (env if env is not None else os.environ).get("PATH", os.defpath)
    return shutil.which(name, path=search)


def plan(
    roots: RootPaths,
    *,
    write: bool = False,
    network: bool = True,
    allow_unconfined: bool = False,
    program: str | None = None,
    system_paths: Sequence[str | os.PathLike[str]] | None = None,
    extra_read: Sequence[str | os.PathLike[str]] = (),
    scope_signals: bool = True,
    syscall_filter: bool = True,
    path_metadata: bool = False,
) -> Confinement | None:
    """The confinement for a child, or None where Landlock is missing and ``allow_unconfined`` (warned).

    ``roots`` are canonical directory (or file) paths, each granted read (``write=True``: read-write).
    Raises ``SandboxUnavailable`` naming the reason when the kernel cannot enforce what was asked: no
    Landlock, or (with ``syscall_filter``) no seccomp filter here. ``path_metadata=True`` (only with
    ``write=True``, else ``ValueError``) lets the filter pass chmod/chown/utime/xattr by path (see ``run``).
    """
    if path_metadata and not write:
        raise ValueError("path_metadata=True needs write=True: a read-only command has no metadata to change")
    kernel = support()
    if not kernel.available:
        _refuse_or_warn(f"no kernel confinement: {kernel.reason}", allow_unconfined)
        return None
    abi = kernel.abi
    notes: list[str] = []
    program_bytes: bytes | None = None
    if syscall_filter:
        if kernel.filter_reason is None:
            program_bytes = seccomp.program(network=network, write=write, path_metadata=path_metadata)
        else:
            what = ("network=False and " if not network else "") + "the metadata rules need it"
            _refuse_or_warn(
                f"no system-call filter ({what}): {kernel.filter_reason}",
                allow_unconfined,
                "WITHOUT THE SYSTEM-CALL FILTER (Landlock only)",
            )
            notes.append("no system-call filter")
    handled_fs = landlock.fs_rights_for(abi)
    handled_net = 0
    scoped = landlock.SCOPE_SIGNAL if scope_signals and abi >= 6 else 0
    if not network:
        # socket() is refused by the filter; Landlock's TCP rules are a second layer where the ABI has them.
        if abi >= _NETWORK_ABI:
            handled_net = landlock.ACCESS_NET_BIND_TCP | landlock.ACCESS_NET_CONNECT_TCP
            if abi >= 6:
                scoped |= landlock.SCOPE_ABSTRACT_UNIX_SOCKET
        elif program_bytes is None:
            _refuse_or_warn(
                f"network=False needs the system-call filter or Landlock ABI {_NETWORK_ABI}; this kernel has "
                f"ABI {abi} and {kernel.filter_reason}",
                allow_unconfined,
            )
            notes.append("network not confined")
    rules: list[tuple[str, int]] = []
    for path in system_paths if system_paths is not None else SYSTEM_READ_PATHS:
        rules.append((os.fspath(path), _READ))
    rules.extend((path, _DEVICE) for path in SYSTEM_DEVICE_PATHS)
    rules.extend((os.fspath(path), _READ) for path in extra_read)
    if program is not None:
        rules.append((program, _FS.READ_FILE | _FS.EXECUTE))
        rules.extend((path, _READ) for path in _python_paths(program))
    granted = _READ | (_WRITE if write else 0)
    rules.extend((os.fspath(path), granted | landlock.EXACT_PATH) for path in roots)
    return Confinement(abi, tuple(rules), handled_fs, handled_net, scoped, tuple(notes), program_bytes)


def _refuse_or_warn(reason: str, allow_unconfined: bool, how: str = "UNCONFINED") -> None:
    if not allow_unconfined:
        raise SandboxUnavailable(
            f"{reason}; pass allow_unconfined=True (mcp-roots run --allow-unconfined) to run without it"
        )
    with _warned_lock:
        first = reason not in _warned
        _warned.add(reason)
    if first:
        logger.warning("running subprocesses %s (allow_unconfined=True): %s", how, reason)


def clean_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``environ`` (default ``os.environ``) keeping only ``CLEAN_ENV_NAMES`` and ``MCP_ROOTS_*``: no agent
    socket (``SSH_AUTH_SOCK``), token or proxy setting reaches the child."""
    source = os.environ if environ is None else environ
    return {k: v for k, v in source.items() if k in CLEAN_ENV_NAMES or k.startswith("MCP_ROOTS_")}


# --- Starting confined children --------------------------------------------------------------------------


def _own_stdio_closed(popen_kwargs: dict[str, Any]) -> None:
    # Never this process's own stdin/stdout unless asked by name: in a stdio MCP server they are the
    # protocol channel (a child could read the client's next message, or forge one). stdin=None/stdout=None
    # passed explicitly still hand them over, as in subprocess.
    popen_kwargs.setdefault("stdin", subprocess.DEVNULL)
    popen_kwargs.setdefault("stdout", subprocess.DEVNULL)


def popen(
    roots: RootPaths,
    argv: Any,
    *,
    write: bool = False,
    network: bool = True,
    allow_unconfined: bool = False,
    system_paths: Sequence[str | os.PathLike[str]] | None = None,
    extra_read: Sequence[str | os.PathLike[str]] = (),
    path_metadata: bool = False,
    **popen_kwargs: Any,
) -> subprocess.Popen[Any]:
    """``subprocess.Popen(argv, **popen_kwargs)``, confined to ``roots`` by the kernel (see ``run``)."""
    _own_stdio_closed(popen_kwargs)
    confinement = plan(
        roots,
        write=write,
        network=network,
        allow_unconfined=allow_unconfined,
        program=_program(argv, popen_kwargs),
        system_paths=system_paths,
        extra_read=extra_read,
        path_metadata=path_metadata,
    )
    if confinement is None:
        return subprocess.Popen(argv, **popen_kwargs)
    return _spawn_confined(confinement, argv, popen_kwargs)


def _spawn_confined(
    confinement: Confinement, argv: Any, popen_kwargs: Mapping[str, Any]
) -> subprocess.Popen[Any]:
    # Landlock and seccomp confine the calling thread and what it creates afterwards. A fresh thread of our
    # own confines itself, forks+execs the child (which inherits both), and ends: no preexec_fn, no
    # interpreter start, and nothing executed before the confinement. Never a pooled thread: it would stay
    # confined for whatever it runs next.
    outcome: list[subprocess.Popen[Any] | BaseException] = []

    def confine_and_spawn() -> None:
        try:
            confinement.apply_to_current_thread()
        except OSError as exc:
            outcome.append(SandboxUnavailable(f"the kernel refused the confinement: {exc}"))
            return
        try:
            outcome.append(subprocess.Popen(argv, **popen_kwargs))
        except BaseException as exc:
            outcome.append(exc)

    spawner = threading.Thread(target=confine_and_spawn, name="mcp-roots-confined-spawn", daemon=True)
    spawner.start()
    spawner.join()
    result = outcome[0]
    if isinstance(result, BaseException):
        raise result
    return result


def run(
    roots: RootPaths,
    argv: Any,
    *,
    write: bool = False,
    network: bool = True,
    allow_unconfined: bool = False,
    system_paths: Sequence[str | os.PathLike[str]] | None = None,
    extra_read: Sequence[str | os.PathLike[str]] = (),
    path_metadata: bool = False,
    input: Any = None,
    capture_output: bool = False,
    timeout: float | None = None,
    check: bool = False,
    **popen_kwargs: Any,
) -> subprocess.CompletedProcess[Any]:
    """``subprocess.run`` with the child confined by the kernel to ``roots``.

    The child (and all its descendants) may read beneath the roots, and write there with ``write=True``,
    plus read what a program needs (``SYSTEM_READ_PATHS`` or ``system_paths``, ``extra_read``, its own
    binary). It may not change metadata by path (chmod, chown, utime, xattr), type into a terminal
    (TIOCSTI) or use io_uring. ``path_metadata=True`` (opt-in, only with ``write=True``, else ValueError)
    allows chmod/chown/utime/xattr by path, for builds (GNU ld's chmod +x, pip/npm scripts), and so
    OUTSIDE the roots too: the filter cannot see paths and Landlock has no right for them.
    ``network=False`` refuses every ``socket()`` and ``connect()`` (and TCP by Landlock). stdin and
    stdout default to ``/dev/null`` (never this process's own: pass ``stdin=None`` or ``stdout=None`` to
    hand them over); ``env`` defaults to this process's environment, as in subprocess (``clean_env()``
    gives a reduced one). Raises ``SandboxUnavailable`` where the kernel cannot do this, unless
    ``allow_unconfined=True`` (then a warning, once per reason).
    """
    if input is not None:
        if popen_kwargs.get("stdin") is not None:
            raise ValueError("stdin and input arguments may not both be used.")
        popen_kwargs["stdin"] = subprocess.PIPE
    if capture_output:
        if popen_kwargs.get("stdout") is not None or popen_kwargs.get("stderr") is not None:
            raise ValueError("stdout and stderr arguments may not be used with capture_output.")
        popen_kwargs["stdout"] = subprocess.PIPE
        popen_kwargs["stderr"] = subprocess.PIPE
    with popen(
        roots,
        argv,
        write=write,
        network=network,
        allow_unconfined=allow_unconfined,
        system_paths=system_paths,
        extra_read=extra_read,
        path_metadata=path_metadata,
        **popen_kwargs,
    ) as process:
        try:
            stdout, stderr = process.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise
        except BaseException:
            process.kill()
            raise
        code = process.poll()
        assert code is not None
    if check and code:
        raise subprocess.CalledProcessError(code, process.args, output=stdout, stderr=stderr)
    return subprocess.CompletedProcess(process.args, code, stdout, stderr)


async def run_async(
    roots: RootPaths,
    argv: str | Sequence[str],
    *,
    write: bool = False,
    network: bool = True,
    allow_unconfined: bool = False,
    system_paths: Sequence[str | os.PathLike[str]] | None = None,
    extra_read: Sequence[str | os.PathLike[str]] = (),
    path_metadata: bool = False,
    input: bytes | None = None,
    stdin: int | IO[Any] | None = subprocess.DEVNULL,
    stdout: int | IO[Any] | None = subprocess.PIPE,
    stderr: int | IO[Any] | None = subprocess.PIPE,
    check: bool = True,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """``anyio.run_process`` (its defaults: output captured, ``check=True``; stdin ``/dev/null``) with the
    child confined to ``roots`` as ``run`` does. The spawn and the wait run on a worker thread (the spawn
    itself on a throwaway thread that confines itself first); cancelling kills the child."""
    import anyio

    command = ["/bin/sh", "-c", argv] if isinstance(argv, str) else [os.fspath(a) for a in argv]
    if input is not None:
        if stdin not in (None, subprocess.DEVNULL):
            raise ValueError("stdin and input arguments may not both be used.")
        stdin = subprocess.PIPE
    options: dict[str, Any] = {"cwd": cwd, "env": env, "stdin": stdin, "stdout": stdout, "stderr": stderr}
    confinement = plan(
        roots,
        write=write,
        network=network,
        allow_unconfined=allow_unconfined,
        program=_program(command, options),
        system_paths=system_paths,
        extra_read=extra_read,
        path_metadata=path_metadata,
    )
    lock = threading.Lock()
    started: list[subprocess.Popen[bytes]] = []
    cancelled = False

    def spawn_and_wait() -> tuple[int, bytes | None, bytes | None]:
        if confinement is None:
            process: subprocess.Popen[bytes] = subprocess.Popen(command, **options)
        else:
            process = _spawn_confined(confinement, command, options)
        with lock:
            started.append(process)
            if cancelled:
                process.kill()
        with process:
            out, err = process.communicate(input)
        return process.returncode, out, err

    try:
        code, out, err = await anyio.to_thread.run_sync(spawn_and_wait, abandon_on_cancel=True)
    except BaseException:
        with lock:
            cancelled = True
            for process in started:
                if process.poll() is None:
                    process.kill()
        raise
    if check and code:
        raise subprocess.CalledProcessError(code, argv, out, err)
    return subprocess.CompletedProcess(argv, code, out, err)


# --- Confining this process --------------------------------------------------------------------------------


def _too_wide(path: str) -> bool:
    # The rule of the fallback roots: never /, the home directory or one of its ancestors. A server run
    # from $HOME (python -m server) has $HOME on sys.path; granting it would grant ~/.ssh.
    real = os.path.realpath(path)
    home = os.path.realpath(os.path.expanduser("~"))
    return real == "/" or real == home or home.startswith(real.rstrip("/") + "/")


def _python_needs() -> list[str]:
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    paths.update(p for p in sys.path if p and os.path.isabs(p))
    paths.add(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # where mcp_roots is
    main_file = getattr(sys.modules.get("__main__"), "__file__", None)
    if isinstance(main_file, str):
        paths.add(os.path.dirname(os.path.abspath(main_file)))
    needed = []
    for path in sorted(paths):
        if _too_wide(path):
            logger.warning(
                "confine=True: not granting %s (it is /, the home directory or one of its ancestors); "
                "modules not yet imported from there will fail to import",
                path,
            )
        else:
            needed.append(path)
    return needed


def confine_process(
    roots: RootPaths,
    *,
    write: bool = True,
    extra_read: Sequence[str | os.PathLike[str]] = (),
) -> Confinement:
    """Confine this whole process to ``roots`` plus what Python and programs need. Irreversible.

    Landlock confines the calling thread and the threads and processes it starts afterwards, never the
    threads that already exist; so this refuses (``SandboxUnavailable``) unless the process has exactly
    one thread. Network and signals are left alone: a server needs its transport.
    """
    kernel = support()
    if not kernel.available:
        raise SandboxUnavailable(f"cannot confine the server process: {kernel.reason}")
    threads = landlock.thread_count()
    if threads != 1:
        raise SandboxUnavailable(
            f"cannot confine the server process: it already has {threads} threads, and Landlock confines "
            "only the calling thread and what it starts afterwards, so the others would stay unconfined; "
            "create RootsGuard(confine=True) before anything starts a thread (at the top of the program)"
        )
    paths = [os.fspath(root) for root in roots]
    confinement = plan(
        paths,
        write=write,
        extra_read=[*_python_needs(), *extra_read],
        scope_signals=False,
        syscall_filter=False,
    )
    assert confinement is not None
    try:
        confinement.apply_to_current_thread()
    except OSError as exc:
        raise SandboxUnavailable(f"the kernel refused to confine the server process: {exc}") from exc
    logger.info("server process confined by Landlock ABI %d to %s", confinement.abi, paths)
    return confinement
