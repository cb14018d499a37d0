"""Server processes for the tests, forked from a warm interpreter instead of started cold.

A server process the tests start spends most of its CPU importing the SDK (``import mcp``: pydantic builds
the protocol types of every era, ~1 s of CPU here), whatever the row checks. :func:`command` gives the
command line that starts ``python SCRIPT ARGS`` as a real process of its own -- its own pid, its own stdio
pipes, exit status and signals -- but forked from this test process's *zygote*, an interpreter that has
imported the SDK and its web stack already (never ``mcp_roots``: what it reads from the environment at
import must be read in the server's own environment). The command is a small shim (``python -I -S`` on
this file, stdlib only, ~30 ms) that hands its stdin, stdout and stderr, its argv, environment and working
directory to the zygote over a unix socket, forwards the signals it gets to the forked server and exits
as the server exits (the same code, or killed by the same signal). A shim killed outright (SIGKILL) takes
its server with it: the zygote kills a server whose shim has gone.

The zygote is one process per test process (an xdist worker), started on first use with its own session
(no terminal signal reaches it) and gone when the test process exits (its stdin closes).
``MCP_ROOTS_TEST_FORK=0`` in the environment makes :func:`command` the cold ``python SCRIPT ARGS`` instead,
for comparison.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
from typing import Any

_HEADER = struct.Struct("!I")
#: What the zygote imports before it forks (the SDK and its transports; never mcp_roots, see above).
_WARM = (
    "anyio",
    "pydantic",
    "mcp",
    "trio",
    "mcp.server.mcpserver",
    "mcp.server.fastmcp",  # mcp 1.x
    "mcp.server.lowlevel",
    "mcp.server.stdio",
    "mcp.server.streamable_http",
    "mcp.client.stdio",
    "starlette",
    "uvicorn",
)

_lock = threading.Lock()
_zygote: tuple[subprocess.Popen[bytes], str] | None = None


def command(*argv: str) -> list[str]:
    """The command line of ``python *argv`` (``SCRIPT ARGS`` or ``-c CODE ARGS``), forked from the zygote
    (see the module docstring)."""
    if os.environ.get("MCP_ROOTS_TEST_FORK", "1") == "0":
        return [sys.executable, *argv]
    return [sys.executable, "-I", "-S", __file__, _socket_path(), *argv]


def _socket_path() -> str:
    global _zygote
    with _lock:
        if _zygote is None or _zygote[0].poll() is not None:
            # A unix socket's path holds at most 107 bytes: a long TMPDIR falls back to /tmp.
            short = len(tempfile.gettempdir()) <= 64
            where = tempfile.mkdtemp(prefix="mcp-roots-zygote-", dir=None if short else "/tmp")
            path = os.path.join(where, "s")
            proc = subprocess.Popen(
                [sys.executable, __file__, "--zygote", path],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                start_new_session=True,
            )
            assert proc.stdout is not None
            if proc.stdout.readline() != b"ready\n":
                proc.kill()
                raise RuntimeError(f"the test zygote did not start (exit {proc.wait()})")
            _zygote = (proc, path)
            atexit.register(_stop, proc, where)
        return _zygote[1]


def _stop(proc: subprocess.Popen[bytes], where: str) -> None:
    if proc.stdin is not None:
        proc.stdin.close()  # the zygote's signal to end
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    for name in os.listdir(where):
        os.unlink(os.path.join(where, name))
    os.rmdir(where)


# --- the zygote -------------------------------------------------------------------------------------------


def _zygote_main(path: str) -> None:
    import importlib

    for name in _WARM:
        with contextlib.suppress(ModuleNotFoundError):  # not in this venv (mcp 1.x has another stack)
            importlib.import_module(name)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so that set_wakeup_fd sees SIGCHLD
    signal.set_wakeup_fd(wake_w)
    gc.freeze()  # what the imports made is never collected: a server's collections skip it, pages stay shared
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    shims: dict[int, socket.socket] = {}  # server pid -> its shim's connection
    while True:
        readable, _, _ = select.select([sys.stdin, listener, wake_r, *shims.values()], [], [], 1.0)
        if wake_r in readable:
            os.read(wake_r, 512)
        if sys.stdin in readable and not os.read(sys.stdin.fileno(), 512):
            for pid in shims:  # the test process is gone: so are its servers
                os.kill(pid, signal.SIGKILL)
            os._exit(0)
        for pid, conn in list(shims.items()):
            if conn in readable and pid in shims:  # the shim went away before its server: kill it
                os.kill(pid, signal.SIGKILL)
        while shims:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            shim = shims.pop(pid) if pid in shims else None
            if shim is not None:
                with contextlib.suppress(OSError):
                    shim.sendall(_HEADER.pack(status))
                shim.close()
        if listener in readable:
            conn, _ = listener.accept()
            request = _receive(conn)
            if request is None:
                conn.close()
                continue
            fds, spec = request
            pid = os.fork()
            if pid == 0:  # the server: never returns to this loop
                listener.close()
                conn.close()
                for other in shims.values():
                    other.close()
                signal.set_wakeup_fd(-1)
                os.close(wake_r)
                os.close(wake_w)
                _become_server(fds, spec)
            for fd in fds:
                os.close(fd)
            conn.sendall(_HEADER.pack(pid))
            shims[pid] = conn


def _receive(conn: socket.socket) -> tuple[list[int], dict[str, object]] | None:
    data, fds, _, _ = socket.recv_fds(conn, _HEADER.size, 3)
    if len(data) != _HEADER.size or len(fds) != 3:
        for fd in fds:
            os.close(fd)
        return None
    (size,) = _HEADER.unpack(data)
    payload = b""
    while len(payload) < size:
        chunk = conn.recv(size - len(payload))
        if not chunk:
            return None
        payload += chunk
    return fds, json.loads(payload)


def _become_server(fds: list[int], spec: dict[str, Any]) -> None:
    """In the forked child: the shim's stdio, argv, environment and directory; the script as __main__; the
    status ``python SCRIPT`` would exit with (SystemExit, an uncaught exception, Ctrl-C)."""
    import runpy
    import traceback
    import types

    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # as CPython sets it at startup
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.chdir(str(spec["cwd"]))
    os.environ.clear()
    os.environ.update(spec["env"])
    argv = [str(a) for a in spec["argv"]]
    extra = os.environ.get("PYTHONPATH", "")
    sys.path[1:1] = [os.path.abspath(p) for p in extra.split(os.pathsep) if p]
    code = 0
    try:
        if argv[0] == "-c":  # as `python -c CODE ARGS`: argv[0] '-c', the working directory first on the path
            sys.argv = ["-c", *argv[2:]]
            sys.path[0] = ""
            main = types.ModuleType("__main__")
            sys.modules["__main__"] = main
            exec(compile(argv[1], "<string>", "exec"), main.__dict__)
        else:
            sys.argv = argv
            sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))
            runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as exc:  # as the interpreter reads it
        if exc.code is None or isinstance(exc.code, int):
            code = exc.code or 0
        else:
            sys.stderr.write(f"{exc.code}\n")
            code = 1
    except KeyboardInterrupt:
        code = -signal.SIGINT
    except BaseException:
        traceback.print_exc()
        code = 1
    # What the interpreter does on the way out, less tearing down the heap it inherited (a big heap's
    # teardown costs a cold server ~0.2 s as well, and shows nothing): non-daemon threads joined, atexit
    # handlers (logging's flush among them), the standard streams flushed; then the status.
    getattr(threading, "_shutdown", lambda: None)()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code & 0xFF)


# --- the shim ---------------------------------------------------------------------------------------------


_FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)


def _shim_main(path: str, argv: list[str]) -> None:
    # Held until the server's pid is known and the handlers forward: the server runs (and may say it is up)
    # before the zygote's answer reaches us, and a signal sent then must reach it, not kill the shim alone.
    signal.pthread_sigmask(signal.SIG_BLOCK, _FORWARDED)
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(path)
    payload = json.dumps({"argv": argv, "env": dict(os.environ), "cwd": os.getcwd()}).encode()
    socket.send_fds(conn, [_HEADER.pack(len(payload))], [0, 1, 2])
    conn.sendall(payload)
    (pid,) = _HEADER.unpack(_read_exactly(conn, _HEADER.size))
    # The server has the pipes now: hold none of them (a reader waits for every writer to close).
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)

    def forward(sig: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)

    for sig in _FORWARDED:
        signal.signal(sig, forward)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _FORWARDED)  # one held meanwhile is forwarded now
    data = _read_exactly(conn, _HEADER.size)
    if len(data) != _HEADER.size:
        os._exit(70)  # the zygote went away: no status to report
    (status,) = _HEADER.unpack(data)
    if os.WIFSIGNALED(status):
        signum = os.WTERMSIG(status)
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 70)


def _read_exactly(conn: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        try:
            chunk = conn.recv(size - len(data))
        except InterruptedError:  # pragma: no cover - PEP 475 retries
            continue
        if not chunk:
            break
        data += chunk
    return data


if __name__ == "__main__":
    if sys.argv[1] == "--zygote":
        _zygote_main(sys.argv[2])
    else:
        _shim_main(sys.argv[1], sys.argv[2:])
