"""``python -m mcp_roots.sandbox._launch -- PROGRAM ARGS...`` (``tree_command``): PROGRAM in a PID namespace
of its own, not confined otherwise, so that its whole tree ends with it, for a program someone else starts
(the probe's servers, through an SDK's spawn); as it is where the kernel refuses one."""

from __future__ import annotations

import os
import sys

from .._sys import privileges
from ._tree import split_tree

__all__ = ["main"]


def main(args: list[str]) -> None:
    """Unshare a PID namespace (and a user namespace where needed), fork into it, exec ``args``."""
    if args[:1] == ["--"]:
        args = args[1:]
    if not args:
        sys.exit("usage: python -m mcp_roots.sandbox._launch -- PROGRAM [ARGS...]")
    try:
        user_namespace = not privileges.has_capability(privileges.CAP_SYS_ADMIN)
        privileges.private_mounts(
            os.getuid(), os.getgid(), new_user_namespace=user_namespace, new_pid_namespace=True
        )
    except OSError:
        os.execvp(args[0], args)  # the kernel refuses namespaces: the program as it is (its group still ends)
    split_tree(-1)  # returns in the program's process only
    try:
        os.execvp(args[0], args)
    except OSError as exc:
        os.write(2, f"{args[0]}: {exc.strerror}\n".encode())
        os._exit(127)


if __name__ == "__main__":
    main(sys.argv[1:])
