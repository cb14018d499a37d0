"""Starting children confined: each in a session of its own, with its capabilities dropped, Landlock and the
seccomp filter, and (where the plan has binds: the protected set) a mount namespace of its own first.

Two ways, by what the plan needs. Without binds, a fresh thread of ours confines itself and forks+execs
the child, which inherits it all: no code runs in the child before its exec. With binds, the mounts must
come before Landlock (under Landlock ``mount`` answers EPERM) and, for an unprivileged user, in a
single-threaded process (``unshare(CLONE_NEWUSER)`` answers EINVAL in a threaded one): so the forked child
itself (single-threaded) unshares, binds, confines itself and then execs. A child started as another
user (``user=``, ``group=``) goes that way too: the switch needs the capabilities the child then drops.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from functools import lru_cache
from typing import IO, Any

from .._sys import privileges
from ..errors import SandboxUnavailable
from . import _srt
from ._plan import Confinement, RootPaths, plan, program_of, refuse_or_warn

__all__ = ["NO_PROTECT", "mount_namespace", "popen", "run", "run_async", "spawn_confined"]

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
    if _backend(sandbox, allow_domains) == "srt":
        return _srt.popen(
            roots,
            argv,
            write=write,
            network=network,
            allow_domains=allow_domains,
            system_paths=system_paths,
            extra_read=extra_read,
            protect=protect,
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
    )
    if confinement is None:
        return subprocess.Popen(argv, **popen_kwargs)
    return spawn_confined(_usable(confinement, allow_unconfined), argv, popen_kwargs)


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
    if confinement.binds or any(options.get(name) is not None for name in _SWITCHES_USER):
        # A user switch (subprocess does it after the fork) needs the capabilities our thread would drop:
        # the child drops them itself, after the switch, as it makes the binds.
        return _spawn_from_child(confinement, argv, options)
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


#: subprocess options that switch user in the child after the fork (before the step below runs).
_SWITCHES_USER = ("user", "group", "extra_groups")


def _user_switch(options: dict[str, Any]) -> tuple[int | None, int | None, list[int] | None]:
    """Take ``user=``, ``group=``, ``extra_groups=`` out of ``options`` as numbers (names looked up here, in
    the parent, as subprocess does): the child step switches itself, after emptying its bounding set."""
    import grp
    import pwd

    user, group, extra = (
        options.pop("user", None),
        options.pop("group", None),
        options.pop("extra_groups", None),
    )
    uid = pwd.getpwnam(user).pw_uid if isinstance(user, str) else user
    gid = grp.getgrnam(group).gr_gid if isinstance(group, str) else group
    groups = None if extra is None else [grp.getgrnam(g).gr_gid if isinstance(g, str) else g for g in extra]
    return uid, gid, groups


def _child_step(
    confinement: Confinement | None,
    binds: Sequence[tuple[str, bool]],
    report: int,
    switch: tuple[int | None, int | None, list[int] | None] = (None, None, None),
    then: Any = None,
) -> Any:
    """The code the forked child runs before its exec: the user switch (bounding set emptied first, while
    CAP_SETPCAP is still there), a mount namespace of its own with ``binds`` (if any), the confinement,
    then the caller's own ``preexec_fn``. On failure it writes the cause to ``report`` (a pipe) and raises
    (the spawn fails)."""
    uid, gid, groups = switch

    def step() -> None:
        stage = "namespace"
        try:
            if (uid, gid, groups) != (None, None, None):
                stage = "confine"
                privileges.drop_bounding_set()
                if groups is not None:
                    os.setgroups(groups)
                if gid is not None:
                    os.setregid(gid, gid)
                if uid is not None:
                    os.setreuid(uid, uid)
                stage = "namespace"
            if binds:
                # CAP_SYS_ADMIN (root) makes a mount namespace alone; anyone else needs a user namespace.
                user_namespace = not privileges.has_capability(privileges.CAP_SYS_ADMIN)
                privileges.private_mounts(os.getuid(), os.getgid(), new_user_namespace=user_namespace)
                for path, read_only in binds:
                    privileges.bind(path, read_only=read_only)
                with contextlib.suppress(OSError):  # the working directory again, now through the binds
                    os.chdir(os.getcwd())
            stage = "confine"
            if confinement is not None:
                confinement.apply_to_current_thread()
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
) -> subprocess.Popen[Any]:
    read_end, write_end = os.pipe()  # close-on-exec: the child's copy closes at its exec
    try:
        planned = binds or (confinement.binds if confinement else ())
        switch = _user_switch(options)
        step = _child_step(confinement, planned, write_end, switch, options.pop("preexec_fn", None))
        try:
            return subprocess.Popen(argv, preexec_fn=step, **options)
        except subprocess.SubprocessError as exc:
            os.close(write_end)
            write_end = -1
            os.set_blocking(read_end, False)
            try:
                said = os.read(read_end, 4000).decode(errors="replace")
            except BlockingIOError:
                said = ""
            stage, _, cause = said.partition(":")
            if stage == "namespace":
                raise SandboxUnavailable(
                    "the protected set (.git/config, .git/hooks, ...) needs a mount namespace, and the "
                    f"kernel refused it: {cause}; pass {NO_PROTECT} to run without it"
                ) from None
            raise SandboxUnavailable(f"the kernel refused the confinement: {cause or exc}") from None
    finally:
        os.close(read_end)
        if write_end >= 0:
            os.close(write_end)


@lru_cache(maxsize=1)
def mount_namespace() -> str | None:
    """None where a child can get a mount namespace of its own with a read-only bind (what the protected
    set needs), else why not; tried once per process with ``true`` and a bind of an empty folder."""
    import tempfile  # here: only this probe needs it

    program = shutil.which("true") or sys.executable
    with tempfile.TemporaryDirectory(prefix="mcp-roots-probe-") as folder:
        try:
            process = _spawn_from_child(
                None, [program], {"stdin": subprocess.DEVNULL, "stdout": subprocess.DEVNULL}, [(folder, True)]
            )
        except SandboxUnavailable as exc:
            return str(exc).split("refused it: ", 1)[-1].split("; pass ", 1)[0] or str(exc)
        except OSError as exc:
            return f"the probe could not start: {exc}"
        process.wait()
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
    ``network=False`` refuses every ``socket()`` and ``connect()`` (and TCP by Landlock). stdin and
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
    srt_spawn: Any = None
    confinement: Confinement | None = None
    if _backend(sandbox, allow_domains) == "srt":
        srt_spawn = functools.partial(
            _srt.popen,
            roots,
            command,
            write=write,
            network=network,
            allow_domains=allow_domains,
            system_paths=system_paths,
            extra_read=extra_read,
            protect=protect,
            popen_kwargs=dict(options, start_new_session=True),
        )
    else:
        confinement = plan(
            roots,
            write=write,
            network=network,
            allow_unconfined=allow_unconfined,
            program=program_of(command, options),
            system_paths=system_paths,
            extra_read=extra_read,
            path_metadata=path_metadata,
            protect=protect,
        )
        if confinement is not None:
            confinement = _usable(confinement, allow_unconfined)
    lock = threading.Lock()
    started: list[subprocess.Popen[bytes]] = []
    cancelled = False

    def spawn_and_wait() -> tuple[int, bytes | None, bytes | None]:
        if srt_spawn is not None:
            process: subprocess.Popen[bytes] = srt_spawn()
        elif confinement is None:
            process = subprocess.Popen(command, **options)
        else:
            process = spawn_confined(confinement, command, options)
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
