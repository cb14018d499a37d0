"""The portable descriptor walk's platform facts.
The open flags every POSIX system has, and those it may lack.
"""

# ``O_PATH`` is Linux's; macOS and the BSDs (and ``MCP_ROOTS_RESOLVE=walk-no-opath``) walk with plain
# read-only descriptors instead, opened ``O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK`` so nothing can block.

from __future__ import annotations

import errno
import os

__all__ = [
    "O_CLOEXEC",
    "O_CREAT",
    "O_DIRECTORY",
    "O_NOFOLLOW",
    "O_NONBLOCK",
    "O_PATH_NATIVE",
    "O_TMPFILE",
    "SYMLINK_ERRNOS",
]

#: The platform's O_PATH, or 0 where it has none (0 is O_RDONLY).
O_PATH_NATIVE: int = getattr(os, "O_PATH", 0)
O_CLOEXEC: int = getattr(os, "O_CLOEXEC", 0)
O_NOFOLLOW: int = getattr(os, "O_NOFOLLOW", 0)
O_DIRECTORY: int = getattr(os, "O_DIRECTORY", 0)
O_NONBLOCK: int = getattr(os, "O_NONBLOCK", 0)
O_TMPFILE: int = getattr(os, "O_TMPFILE", 0)
O_CREAT: int = os.O_CREAT
#: errno values an ``O_NOFOLLOW`` open gives for a symlink: ELOOP on Linux, EMLINK on FreeBSD, and
#: ENOTDIR when ``O_DIRECTORY`` is set too.
SYMLINK_ERRNOS = frozenset({errno.ELOOP, errno.EMLINK, errno.ENOTDIR})
