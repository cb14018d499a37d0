"""The launcher: apply a Landlock ruleset to this process, then exec the command in its place.

Run as ``python -I -S .../_launch.py 1 FS NET SCOPE N (RIGHTS PATH)*N COMMAND...`` (``_sandbox.launcher_argv``
builds it) where the process that must be confined is spawned by someone else (an event loop). Standard
library only, plus the sibling ``_sys/landlock.py`` loaded by file: site-packages are off (-S).
"""

from __future__ import annotations

import os
import sys
from types import ModuleType

_FORMAT = "1"
EXIT_CANNOT_CONFINE = 125  # as env(1)/timeout(1) use 125-127 for their own failures
EXIT_NOT_EXECUTABLE = 126
EXIT_NOT_FOUND = 127


def _landlock() -> ModuleType:
    if __package__:
        from ._sys import landlock

        return landlock
    # Run by path: load _sys/landlock.py by file, without importing the package (its __init__ is heavy).
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_sys", "landlock.py")
    spec = importlib.util.spec_from_file_location("mcp_roots_launch_landlock", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _fail(message: str, code: int) -> int:
    os.write(2, f"mcp-roots launcher: {message}\n".encode(errors="surrogateescape"))
    return code


def main(argv: list[str]) -> int:
    """Parse the ruleset, confine this process, exec the command; return an exit code only on failure."""
    try:
        if argv[0] != _FORMAT:
            return _fail(f"unknown argument format {argv[0]!r}", EXIT_CANNOT_CONFINE)
        handled_fs, handled_net, scoped = (int(text, 16) for text in argv[1:4])
        count = int(argv[4])
        pairs = argv[5 : 5 + 2 * count]
        command = argv[5 + 2 * count :]
        if len(pairs) != 2 * count or not command:
            raise ValueError("truncated")
        rules = [(pairs[i + 1], int(pairs[i], 16)) for i in range(0, len(pairs), 2)]
    except (IndexError, ValueError) as exc:
        return _fail(f"malformed arguments ({exc})", EXIT_CANNOT_CONFINE)
    try:
        _landlock().restrict_thread(rules, handled_fs=handled_fs, handled_net=handled_net, scoped=scoped)
    except Exception as exc:
        return _fail(f"cannot confine: {exc}", EXIT_CANNOT_CONFINE)
    try:
        os.execvp(command[0], command)
    except FileNotFoundError:
        return _fail(f"{command[0]}: command not found", EXIT_NOT_FOUND)
    except OSError as exc:
        return _fail(f"{command[0]}: {exc.strerror}", EXIT_NOT_EXECUTABLE)
    return EXIT_CANNOT_CONFINE  # pragma: no cover - execvp does not return


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
