"""Starting children confined: a session of their own, no capabilities, Landlock, seccomp.
Where namespaces are allowed, first a PID and a mount namespace of their own (only the grant exists).
"""

# Two ways. Where namespaces are allowed (``namespaces()``), the forked child (single-threaded: an
# unprivileged ``unshare(CLONE_NEWUSER)`` answers EINVAL in a threaded one) unshares, binds, forks into its
# PID namespace (``_tree``), whose first process confines itself and spawns the program (``_exec``): the whole
# tree ends with it. Elsewhere a fresh thread
# of ours confines itself and forks+execs the child, which inherits it all (no code runs in the child before
# its exec), and the protected set is refused. A child started as another user (``user=``, ``group=``) takes
# the first way too: the switch needs the capabilities the child then drops.

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from functools import lru_cache
from typing import IO, Any

from .._sys import privileges
from ..errors import SandboxUnavailable
from . import _srt
from ._exec import SWITCHES_USER, exec_plan, first_starts, user_switch
from ._plan import SYSTEM_READ_PATHS, Confinement, RootPaths, plan, program_of, refuse_or_warn
from ._root import RootLayout, named_folders, private_root, root_layout
from ._tree import ConfinedProcess, read_all, split_tree

__all__ = [
    "NO_NAMESPACES",
    "NO_PROTECT",
    "mount_namespace",
    "popen",
    "popen_tree",
    "run",
    "run_async",
    "spawn_confined",
]

#: The environment variable that turns the namespaces off (Landlock and the filter only, as where the kernel
#: refuses them): for a comparison, or a host where they misbehave.
NO_NAMESPACES = "MCP_ROOTS_NO_NAMESPACES"

#: The opt-out that a refusal for the protected set names.
NO_PROTECT = "protect=False (mcp-roots run --no-protect)"


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
    protect: bool | Iterable[str] = True,
    allow_unix: Sequence[str | os.PathLike[str]] = (),
    strict_git: bool = False,
    sandbox: _srt.Backend = "auto",
    allow_domains: Sequence[str] = (),
    **popen_kwargs: Any,
) -> subprocess.Popen[Any]:
    """``subprocess.Popen(argv, **popen_kwargs)``, confined to ``roots`` by the kernel (see ``run``).

    The face of the sandbox for a caller that spawns a program of its own (``mcp-roots run``, ``wrap``):
    ``roots`` read (``write=True``: read-write, less the protected set: ``protect``), ``extra_read``
    read-only, ``network``; the child gets a session of its own and no capability. ``sandbox`` picks the
    backend (``native``, ``srt``: Anthropic's sandbox runtime, ``auto``); ``allow_domains`` (srt only)
    are the hosts a child with ``network=True`` may reach."""
    _own_stdio_closed(popen_kwargs)
    spawn = _spawner(
        roots,
        argv,
        popen_kwargs,
        write=write,
        network=network,
        allow_unconfined=allow_unconfined,
        system_paths=system_paths,
        extra_read=extra_read,
        path_metadata=path_metadata,
        protect=protect,
        allow_unix=allow_unix,
        strict_git=strict_git,
        sandbox=sandbox,
        allow_domains=allow_domains,
    )
    return spawn()


def _spawner(
    roots: RootPaths,
    argv: Any,
    popen_kwargs: dict[str, Any],
    *,
    write: bool,
    network: bool,
    allow_unconfined: bool,
    system_paths: Sequence[str | os.PathLike[str]] | None,
    extra_read: Sequence[str | os.PathLike[str]],
    path_metadata: bool,
    protect: bool | Iterable[str],
    allow_unix: Sequence[str | os.PathLike[str]],
    strict_git: bool,
    sandbox: _srt.Backend,
    allow_domains: Sequence[str],
) -> Callable[[], subprocess.Popen[Any]]:
    """The spawn of ``argv`` as :func:`popen` describes it, decided now (the backend, the plan; a refusal
    raises here) and done when called (``run_async`` calls it on a worker thread)."""
    if _backend(sandbox, allow_domains) == "srt":
        return functools.partial(
            _srt.popen,
            roots,
            argv,
            write=write,
            network=network,
            allow_domains=allow_domains,
            system_paths=system_paths,
            extra_read=extra_read,
            protect=protect,
            allow_unix=[os.fspath(path) for path in allow_unix],
            strict_git=strict_git,
            popen_kwargs=popen_kwargs,
        )
    confinement = plan(
        roots,
        write=write,
        network=network,
        allow_unconfined=allow_unconfined,
        program=program_of(argv, popen_kwargs),
        system_paths=system_paths,
        extra_read=extra_read,
        path_metadata=path_metadata,
        protect=protect,
        allow_unix=allow_unix,
        strict_git=strict_git,
    )
    if confinement is None:
        return functools.partial(subprocess.Popen, argv, **popen_kwargs)
    return functools.partial(spawn_confined, _usable(confinement, allow_unconfined), argv, popen_kwargs)


def _backend(sandbox: str, allow_domains: Sequence[str]) -> str:
    chosen = _srt.choose(sandbox)
    if allow_domains and chosen != "srt":
        raise SandboxUnavailable(
            "allow_domains (--allow-domain) filters the network by host name, which only the srt backend "
            "does: pass sandbox='srt' (--sandbox srt), or network=True for every host"
        )
    return chosen


def _usable(confinement: Confinement, allow_unconfined: bool) -> Confinement:
    # The protected set needs a mount namespace: where the kernel refuses one, refuse (naming the cause
    # and the opt-out) or, with allow_unconfined, go on without the binds (warned once).
    if not confinement.binds:
        return confinement
    reason = mount_namespace()
    if reason is None:
        return confinement
    refuse_or_warn(
        f"the protected set (.git/config, .git/hooks, ...) needs a mount namespace, and {reason}",
        allow_unconfined,
        "WITHOUT THE PROTECTED SET",
        NO_PROTECT,
    )
    return replace(confinement, binds=())


def _own_session(popen_kwargs: dict[str, Any]) -> None:
    # A session and process group of its own: setpriority(PRIO_PGRP, 0) and ioprio_set(IOPRIO_WHO_PGRP, 0),
    # which the filter allows, then reach the child's own group only, and setpgid cannot join ours.
    if popen_kwargs.get("process_group") is not None or popen_kwargs.get("start_new_session") is False:
        raise ValueError("a confined child always starts a session of its own (start_new_session=True)")
    popen_kwargs["start_new_session"] = True


def spawn_confined(
    confinement: Confinement, argv: Any, popen_kwargs: Mapping[str, Any]
) -> subprocess.Popen[Any]:
    """``subprocess.Popen(argv, **popen_kwargs)`` with the child confined by ``confinement``."""
    options = dict(popen_kwargs)
    _own_session(options)
    tree = mount_namespace() is None
    if tree or confinement.binds or any(options.get(name) is not None for name in SWITCHES_USER):
        # A user switch (subprocess does it after the fork) needs the capabilities our thread would drop:
        # the child drops them itself, after the switch, as it makes the binds.
        return _spawn_from_child(confinement, argv, options, tree=tree)
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
            outcome.append(subprocess.Popen(argv, **options))
        except BaseException as exc:
            outcome.append(exc)

    spawner = threading.Thread(target=confine_and_spawn, name="mcp-roots-confined-spawn", daemon=True)
    spawner.start()
    spawner.join()
    result = outcome[0]
    if isinstance(result, BaseException):
        raise result
    return result


def _child_step(
    confinement: Confinement | None,
    binds: Sequence[tuple[str, bool]],
    report: int,
    switch: tuple[int | None, int | None, list[int] | None] = (None, None, None),
    then: Any = None,
    tree_fd: int = -1,
    layout: RootLayout | None = None,
    ruleset: int | None = None,
    first_starts: Callable[[], int] | None = None,
    private: Confinement | None = None,
) -> Any:
    """The code the forked child runs before its exec: a mount namespace of its own with ``binds`` (if any)
    and, with ``tree_fd``, a PID namespace, the fork into it (see ``_tree``) and a root of its own (only the
    grant: ``layout``, planned before the fork; ``private`` confines there); the user switch (bounding set
    emptied first, while CAP_SETPCAP is still there); the confinement (Landlock's ``ruleset`` built before the
    fork where given); then the caller's own ``preexec_fn``. On failure it writes the cause to ``report`` (a
    pipe) and raises (the spawn fails). With ``first_starts`` the namespace's first process confines itself
    and spawns the program (``_exec.first_starts``): the step never returns."""
    uid, gid, groups = switch

    def step() -> None:
        stage = "namespace"
        try:
            if binds or tree_fd >= 0:
                # CAP_SYS_ADMIN (root) makes a mount namespace alone; anyone else needs a user namespace.
                user_namespace = not privileges.has_capability(privileges.CAP_SYS_ADMIN)
                privileges.private_mounts(
                    os.getuid(),
                    os.getgid(),
                    new_user_namespace=user_namespace,
                    new_pid_namespace=tree_fd >= 0,
                )
                for path, read_only in binds:
                    privileges.bind(path, read_only=read_only)
                with contextlib.suppress(OSError):  # the working directory again, now through the binds
                    os.chdir(os.getcwd())
            current = confinement
            if tree_fd >= 0:
                split_tree(tree_fd, first_starts)  # returns in the program's process only (pid 2)
                if layout is not None:  # only the grant exists for it from here on
                    private_root(layout)
                if private is not None:
                    current = private
            stage = "confine"
            if (uid, gid, groups) != (None, None, None):
                # After the namespaces and the root of its own: as root (the only one who may switch)
                # they need no user namespace.
                privileges.drop_bounding_set()
                if groups is not None:
                    os.setgroups(groups)
                if gid is not None:
                    os.setregid(gid, gid)
                if uid is not None:
                    os.setreuid(uid, uid)
            if current is not None:
                current.apply_to_current_thread(ruleset)
        except BaseException as exc:
            os.write(report, f"{stage}:{exc}".encode(errors="replace")[:2000])
            raise
        if then is not None:
            then()

    return step


def _spawn_from_child(
    confinement: Confinement | None,
    argv: Any,
    options: dict[str, Any],
    binds: Sequence[tuple[str, bool]] = (),
    *,
    tree: bool = False,
    probe_root: Sequence[tuple[str, bool]] = (),
) -> subprocess.Popen[Any]:
    # Everything the child can be spared is done here, before the fork: each page of this process that
    # the child's Python code touches is copied for it (most of a spawn's cost).
    layout: RootLayout | None = None
    ruleset: int | None = None
    private: Confinement | None = None  # the confinement in a root of its own
    try:
        if tree and confinement is not None:
            layout = root_layout(confinement.grants(), named_folders(argv), confinement.exact_paths())
            private = confinement.in_private_root()
            ruleset = private.ruleset()
            private.prepare_filter()
        elif tree and probe_root:
            layout = root_layout(probe_root)
    except OSError as exc:
        raise SandboxUnavailable(f"the kernel refused the confinement: {exc.strerror or exc}") from None
    read_end, write_end = os.pipe()  # close-on-exec: the child's copy closes at its exec
    tree_read, tree_write = os.pipe() if tree else (-1, -1)
    started_read = started_write = -1
    try:
        planned = binds or (confinement.binds if confinement else ())
        switch = user_switch(options)
        then = options.pop("preexec_fn", None)
        # The program spawned (vfork) by the namespace's first process where subprocess's exec can be
        # done the same way there: one fork of this process fewer.
        plain = tree and confinement is not None and then is None and switch == (None, None, None)
        spawns = exec_plan(argv, options) if plain else None
        starts = None
        if spawns is not None and private is not None:
            started_read, started_write = os.pipe()
            starts = first_starts(private, layout, ruleset, spawns, write_end, started_write)
        step = _child_step(
            confinement, planned, write_end, switch, then, tree_write, layout, ruleset, starts, private
        )
        try:
            process = ConfinedProcess(argv, preexec_fn=step, **options)
            if tree:
                os.close(tree_write)
                tree_write = -1
                process.hold_tree(_pidfd_of(tree_read))
        except subprocess.SubprocessError as exc:
            os.close(write_end)
            write_end = -1
            raise _refusal(read_end, exc) from None
        if spawns is not None and started_read >= 0:
            os.close(started_write)
            started_write = -1
            said = read_all(started_read)  # until the program runs, or its start failed
            if said != b"+":
                process.wait()
                for stream in (process.stdin, process.stdout, process.stderr):
                    if stream is not None:
                        stream.close()
                if said.startswith(b"exec:"):
                    code = int(said[5:])
                    raise OSError(code, os.strerror(code), spawns.shown)
                os.close(write_end)
                write_end = -1
                raise _refusal(read_end, "the program could not be started")
        return process
    finally:
        for fd in (read_end, write_end, tree_read, tree_write, started_read, started_write):
            if fd >= 0:
                os.close(fd)
        if ruleset is not None:
            os.close(ruleset)


def _refusal(read_end: int, fallback: object) -> SandboxUnavailable:
    # The cause the child wrote to the report pipe (stage:cause), in words.
    os.set_blocking(read_end, False)
    try:
        said = os.read(read_end, 4000).decode(errors="replace")
    except BlockingIOError:
        said = ""
    stage, _, cause = said.partition(":")
    if stage == "namespace":
        return SandboxUnavailable(
            "the protected set (.git/config, .git/hooks, ...) needs a mount namespace, and the "
            f"kernel refused it: {cause}; pass {NO_PROTECT} to run without it"
        )
    return SandboxUnavailable(f"the kernel refused the confinement: {cause or fallback}")


def _pidfd_of(tree_read: int) -> int | None:
    # The namespace's first process, as the child told it (written before subprocess's error pipe closed,
    # so before Popen returned); None when it has already ended (its namespace with it).
    os.set_blocking(tree_read, False)
    try:
        said = os.read(tree_read, 32)
        return os.pidfd_open(int(said)) if said.isdigit() else None
    except (BlockingIOError, ProcessLookupError):
        return None


def popen_tree(argv: Any, **popen_kwargs: Any) -> subprocess.Popen[Any]:
    """``subprocess.Popen(argv, **popen_kwargs)`` in a session and a PID namespace of its own, NOT confined
    otherwise: every process it starts ends with it (``end``). Where the kernel refuses namespaces, a plain
    ``Popen`` in a session of its own (its process group ends with it, not a process that leaves it)."""
    options = dict(popen_kwargs)
    _own_session(options)
    if mount_namespace() is not None:
        return subprocess.Popen(argv, **options)
    return _spawn_from_child(None, argv, options, tree=True)


@lru_cache(maxsize=1)
def mount_namespace() -> str | None:
    """None where a child can get a mount namespace with a read-only bind (what the protected set needs),
    a PID namespace (its whole tree ends with it) and a root of its own, else why not; tried once per
    process with ``true``, a bind of an empty folder and a root holding the system paths."""
    import tempfile  # here: only this probe needs it

    if os.environ.get(NO_NAMESPACES, "") not in ("", "0"):
        return f"turned off ({NO_NAMESPACES} is set): Landlock and the filter only"
    program = shutil.which("true") or sys.executable
    try:
        with tempfile.TemporaryDirectory(prefix="mcp-roots-probe-") as folder:
            process = _spawn_from_child(
                None,
                [program],
                {"stdin": subprocess.DEVNULL, "stdout": subprocess.DEVNULL},
                [(folder, True)],
                tree=True,
                probe_root=[(path, True) for path in (*SYSTEM_READ_PATHS, folder)],
            )
            process.wait()
    except SandboxUnavailable as exc:
        return str(exc).split("refused it: ", 1)[-1].split("; pass ", 1)[0] or str(exc)
    except OSError as exc:  # a process confined itself (RootsGuard(confine=True)) has no temporary folder
        return f"the probe could not start: {exc}"
    return None


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
    protect: bool | Iterable[str] = True,
    allow_unix: Sequence[str | os.PathLike[str]] = (),
    strict_git: bool = False,
    sandbox: _srt.Backend = "auto",
    allow_domains: Sequence[str] = (),
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
    (TIOCSTI) or use io_uring; it runs in a session of its own, holds no capability (as root too), and may
    not change the limits or priority of any process but itself, use System V IPC, keyrings, inotify,
    fanotify, perf_event_open or userfaultfd. With ``write=True`` the protected set (``protect=True``, the
    default: ``.git/config``, ``.git/hooks``, ``.mcp.json``, ...; see ``PROTECTED``) stays read-only in a
    mount namespace of the child's own (``protect=False``: none; or a list of names). ``path_metadata=True``
    (opt-in, only with ``write=True``, else ValueError)
    allows chmod/chown/utime/xattr by path, for builds (GNU ld's chmod +x, pip/npm scripts), and so
    OUTSIDE the roots too: the filter cannot see paths and Landlock has no right for them.
    ``network=False`` refuses every ``socket()`` and ``connect()`` (and TCP by Landlock). With the network
    on, TCP and UDP (the host's loopback included) and name resolution work, but no unix socket of the
    host's: none by path exists in its root but those named in ``allow_unix`` (socket files), and an
    abstract one is refused (Landlock ABI 6). ``strict_git=True`` (with ``write=True``) makes every
    ``.git`` folder read-only whole: git writes are refused there (see docs/sandbox.md). stdin and
    stdout default to ``/dev/null`` (never this process's own: pass ``stdin=None`` or ``stdout=None`` to
    hand them over); ``env`` defaults to this process's environment, as in subprocess (``clean_env()``
    gives a reduced one). Raises ``SandboxUnavailable`` where the kernel cannot do this, unless
    ``allow_unconfined=True`` (then a warning, once per reason). ``sandbox="srt"`` confines through
    Anthropic's sandbox runtime instead (see ``popen``); ``"auto"`` (the default) picks native where this
    kernel holds every native layer, else srt where it is installed.
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
        protect=protect,
        allow_unix=allow_unix,
        strict_git=strict_git,
        sandbox=sandbox,
        allow_domains=allow_domains,
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
    protect: bool | Iterable[str] = True,
    allow_unix: Sequence[str | os.PathLike[str]] = (),
    strict_git: bool = False,
    sandbox: _srt.Backend = "auto",
    allow_domains: Sequence[str] = (),
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
    spawn = _spawner(
        roots,
        command,
        options,
        write=write,
        network=network,
        allow_unconfined=allow_unconfined,
        system_paths=system_paths,
        extra_read=extra_read,
        path_metadata=path_metadata,
        protect=protect,
        allow_unix=allow_unix,
        strict_git=strict_git,
        sandbox=sandbox,
        allow_domains=allow_domains,
    )
    lock = threading.Lock()
    started: list[subprocess.Popen[bytes]] = []
    cancelled = False

    def spawn_and_wait() -> tuple[int, bytes | None, bytes | None]:
        process: subprocess.Popen[bytes] = spawn()
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
