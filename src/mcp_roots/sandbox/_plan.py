"""What a confined child may touch and do, and what this kernel can enforce.
Landlock rules, the seccomp filter, capabilities, the protected set.
"""

# What a confined child may touch and do: the plan (Landlock rules, the seccomp filter, the capabilities it
# loses, the protected set its mount namespace binds read-only), and what this kernel can enforce.
#
# Beneath the roots: read, or read-write with ``write=True`` (less the protected set); read-only what a
# program needs to start (``SYSTEM_READ_PATHS``, its own binary) and a few devices.

from __future__ import annotations

import logging
import os
import shutil
import stat
import sys
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

from .._sys import landlock, privileges, seccomp
from ..errors import SandboxUnavailable
from ._protect import find_protected, git_folders, protected_names

__all__ = [
    "CLEAN_ENV_NAMES",
    "NETWORK_READ_PATHS",
    "SYSTEM_DEVICE_PATHS",
    "SYSTEM_READ_PATHS",
    "Confinement",
    "RootPaths",
    "Support",
    "clean_env",
    "no_new_privs",
    "plan",
    "program_of",
    "python_paths",
    "refuse_or_warn",
    "support",
    "system_read_paths",
]

logger = logging.getLogger("mcp_roots.sandbox")

# What a dynamically linked program needs to start and run, read-only (and executable). Entries that do
# not exist here are skipped. /bin, /sbin and /lib* are symlinks into /usr on merged-/usr systems; a rule
# on a symlink applies to its target. Deliberately absent: the rest of /etc (passwd, shadow, ssh; hosts
# unless the network is on), /home, /root, /tmp, /var, /proc and /sys. A program that needs more gets it
# through ``extra_read=`` or a ``system_paths=`` list of its own. With the network on,
# ``NETWORK_READ_PATHS`` too.
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
    # Read by runtimes at start: Node stops (status 13) without OpenSSL's configuration, git without an
    # /etc/gitconfig that exists but cannot be read.
    "/etc/ssl/openssl.cnf",
    "/etc/gitconfig",
    "/dev/urandom",
    "/dev/random",
)

#: What name resolution reads, granted read-only beside ``SYSTEM_READ_PATHS`` when the network is on.
NETWORK_READ_PATHS: tuple[str, ...] = (
    "/etc/resolv.conf",
    "/etc/hosts",
    "/etc/nsswitch.conf",
    "/etc/gai.conf",
    "/etc/host.conf",
)


def system_read_paths(
    network: bool, system_paths: Sequence[str | os.PathLike[str]] | None = None
) -> list[str]:
    """What any child reads to run, whichever backend confines it: ``system_paths`` where given, else
    ``SYSTEM_READ_PATHS`` and, with the network on, ``NETWORK_READ_PATHS``."""
    if system_paths is None:
        return [*SYSTEM_READ_PATHS, *(NETWORK_READ_PATHS if network else ())]
    return [os.fspath(path) for path in system_paths]


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
            (
                "limits, priority, scheduling, I/O priority and memory placement of itself only "
                "(pid 0; its own session and process group)",
                filtered,
                "seccomp filter, new session",
            ),
            (
                "System V IPC, keyrings, perf_event_open, userfaultfd, inotify and fanotify refused",
                filtered,
                "seccomp filter",
            ),
            ("no capability, as root too (all five sets emptied before exec)", True, "capset, prctl"),
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
    #: (path, read-only) bind mounts for the child's own mount namespace (the protected set), outer first.
    binds: tuple[tuple[str, bool], ...] = ()
    drop_capabilities: bool = True
    #: Unix socket files the operator named (``allow_unix``): the only ones its root holds, network on.
    unix_sockets: tuple[str, ...] = ()
    #: The filter where the child gets a root of its own (only the grant exists): metadata calls by path
    #: allowed, since what they can reach is the grant, and read-only mounts answer EROFS.
    private_filter: bytes | None = None

    def grants(self) -> list[tuple[str, bool]]:
        """(path, read-only) of every path the rules name: what a root of the child's own holds."""
        merged: dict[str, bool] = {}
        for path, rights in self.rules:
            # Devices are written through a read-only mount too: only a root granted write is mounted so.
            merged[path] = merged.get(path, True) and not rights & _FS.MAKE_REG
        for path in self.unix_sockets:  # connect() needs no write on the mount (only the socket's mode)
            merged.setdefault(path, True)
        return list(merged.items())

    def exact_paths(self) -> list[str]:
        """The paths whose rules demand they still resolve to themselves (canonical roots)."""
        return [path for path, rights in self.rules if rights & landlock.EXACT_PATH]

    def in_private_root(self) -> Confinement:
        """This confinement for a child in a root of its own: ``private_filter`` in place of the filter, and
        truncation granted to Landlock beneath every path that root mounts read-only, where the mount
        answers EROFS first (no rule granting it made Landlock walk up to ``/`` on every open)."""
        truncate = _FS.TRUNCATE & self.handled_fs
        read_only = {path for path, only_read in self.grants() if only_read}
        rules = tuple(
            (path, rights | truncate if path in read_only else rights) for path, rights in self.rules
        )
        if self.private_filter is None:
            return replace(self, rules=rules)
        return replace(self, rules=rules, syscall_filter=self.private_filter, private_filter=None)

    def ruleset(self) -> int:
        """The Landlock ruleset of the rules, as a descriptor (close-on-exec) for
        ``apply_to_current_thread``: built before a fork, so the child opens no path for it."""
        return landlock.build_ruleset(
            self.rules, handled_fs=self.handled_fs, handled_net=self.handled_net, scoped=self.scoped
        )

    def prepare_filter(self) -> None:
        """Make the filter ready to install before a fork: the child only installs it."""
        if self.syscall_filter is not None:
            seccomp.prepared(self.syscall_filter)

    def apply_to_current_thread(self, ruleset: int | None = None) -> None:
        """Confine the calling thread and everything it starts from now on: every capability dropped, then
        Landlock (``ruleset`` where built already), then the filter. Irreversible. (The binds are the
        spawner's: they come first, in the child.)"""
        if self.drop_capabilities:
            privileges.drop_capabilities()
        if ruleset is not None:
            landlock.restrict_with(ruleset)
        else:
            landlock.restrict_thread(
                self.rules, handled_fs=self.handled_fs, handled_net=self.handled_net, scoped=self.scoped
            )
        if self.syscall_filter is not None:
            seccomp.apply_to_thread(self.syscall_filter)


def python_paths(executable: str) -> list[str]:
    # A child running this very interpreter (a venv's python is a symlink to it) needs its installation
    # and the venv: the standard library, pyvenv.cfg, site-packages. Read-only, like the rest.
    try:
        same = os.path.realpath(executable) == os.path.realpath(sys.executable)
    except OSError:
        same = False
    if not same:
        return []
    return sorted({sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix})


def program_of(argv: Any, options: Mapping[str, Any]) -> str | None:
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
    protect: bool | Iterable[str] = True,
    drop_capabilities: bool = True,
    allow_unix: Sequence[str | os.PathLike[str]] = (),
    strict_git: bool = False,
) -> Confinement | None:
    """The confinement for a child, or None where Landlock is missing and ``allow_unconfined`` (warned).

    ``roots`` are canonical directory (or file) paths, each granted read (``write=True``: read-write).
    Raises ``SandboxUnavailable`` naming the reason when the kernel cannot enforce what was asked: no
    Landlock, or (with ``syscall_filter``) no seccomp filter here. ``path_metadata=True`` (only with
    ``write=True``, else ``ValueError``) lets the filter pass chmod/chown/utime/xattr by path (see ``run``).
    With ``write=True`` the protected names (``protect``: True for the table, False for none, or names)
    that exist in the roots become read-only binds in the child's mount namespace. Unix sockets: with the
    namespaces, none outside the roots but ``allow_unix`` (socket files) exists for the child, and an
    abstract one made outside its sandbox is refused (Landlock ABI 6 scope), network on too. With
    ``strict_git`` (and ``write=True``) every ``.git`` folder found is read-only whole: git writes are
    refused, and no repository's settings can change (nor a repository be staged into another).
    """
    if path_metadata and not write:
        raise ValueError("path_metadata=True needs write=True: a read-only command has no metadata to change")
    kernel = support()
    if not kernel.available:
        refuse_or_warn(f"no kernel confinement: {kernel.reason}", allow_unconfined)
        return None
    abi = kernel.abi
    notes: list[str] = []
    program_bytes: bytes | None = None
    private_bytes: bytes | None = None
    if syscall_filter:
        if kernel.filter_reason is None:
            program_bytes = seccomp.program(network=network, write=write, path_metadata=path_metadata)
            if write:
                private_bytes = seccomp.program(network=network, write=True, path_metadata=True)
        else:
            what = ("network=False and " if not network else "") + "the metadata rules need it"
            refuse_or_warn(
                f"no system-call filter ({what}): {kernel.filter_reason}",
                allow_unconfined,
                "WITHOUT THE SYSTEM-CALL FILTER (Landlock only)",
            )
            notes.append("no system-call filter")
    handled_fs = landlock.fs_rights_for(abi)
    handled_net = 0
    scoped = landlock.SCOPE_SIGNAL if scope_signals and abi >= 6 else 0
    if scope_signals and abi >= 6:
        # The host's abstract unix sockets (a session bus, an agent) are no part of "network", on or off.
        scoped |= landlock.SCOPE_ABSTRACT_UNIX_SOCKET
    if not network:
        # socket() is refused by the filter; Landlock's TCP rules are a second layer where the ABI has them.
        if abi >= _NETWORK_ABI:
            handled_net = landlock.ACCESS_NET_BIND_TCP | landlock.ACCESS_NET_CONNECT_TCP
        elif program_bytes is None:
            refuse_or_warn(
                f"network=False needs the system-call filter or Landlock ABI {_NETWORK_ABI}; this kernel has "
                f"ABI {abi} and {kernel.filter_reason}",
                allow_unconfined,
            )
            notes.append("network not confined")
    rules: list[tuple[str, int]] = []
    for path in system_read_paths(network, system_paths):
        rules.append((os.fspath(path), _READ))
    rules.extend((path, _DEVICE) for path in SYSTEM_DEVICE_PATHS)
    rules.extend((os.fspath(path), _READ) for path in extra_read)
    if program is not None:
        rules.append((program, _FS.READ_FILE | _FS.EXECUTE))
        rules.extend((path, _READ) for path in python_paths(program))
    granted = _READ | (_WRITE if write else 0)
    root_paths = [os.fspath(path) for path in roots]
    rules.extend((path, granted | landlock.EXACT_PATH) for path in root_paths)
    binds: tuple[tuple[str, bool], ...] = ()
    if write:
        found = find_protected(root_paths, protected_names(protect))
        binds = found.mounts
        if strict_git:
            merged = dict(binds)
            merged.update((path, True) for path in git_folders(root_paths))
            binds = tuple(sorted(merged.items(), key=lambda item: (item[0].count(os.sep), item[0])))
        for path in found.not_held:
            logger.warning("protected name %s is a symlink (or unreadable): not protected", path)
    return Confinement(
        abi,
        tuple(rules),
        handled_fs,
        handled_net,
        scoped,
        tuple(notes),
        program_bytes,
        binds,
        drop_capabilities,
        tuple(_socket_paths(allow_unix)),
        private_bytes,
    )


def _socket_paths(paths: Sequence[str | os.PathLike[str]]) -> list[str]:
    found = []
    for path in paths:
        name = os.path.realpath(os.fspath(path))
        try:
            is_socket = stat.S_ISSOCK(os.stat(name).st_mode)
        except OSError as exc:
            raise ValueError(f"allow_unix: {os.fspath(path)!r}: {exc.strerror}") from None
        if not is_socket:
            raise ValueError(f"allow_unix: {os.fspath(path)!r} is not a unix socket")
        found.append(name)
    return found


def refuse_or_warn(
    reason: str,
    allow_unconfined: bool,
    how: str = "UNCONFINED",
    opt_out: str = "allow_unconfined=True (mcp-roots run --allow-unconfined)",
) -> None:
    """Raise ``SandboxUnavailable`` naming ``reason`` and the opt-out, or (opted out) warn once per reason."""
    if not allow_unconfined:
        raise SandboxUnavailable(f"{reason}; pass {opt_out} to run without it")
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
