"""A git repository planted by hand (loose objects, one commit) through directory descriptors, so that a
git-style tool (a ``repo_path``) is reached inside the root and caught reading a repository outside it.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import zlib

from ._fdtree import make_dir, put_file

__all__ = ["plant_repo"]

_CONFIG = b"[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n"


def plant_repo(dir_fd: int, files: dict[str, bytes], message: str) -> None:
    """Make ``dir_fd`` a git working tree whose branch ``main`` has one commit holding ``files`` (names in
    the directory, not committed through it: the files themselves are the caller's) with ``message``."""
    author = "".join(secrets.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(8))
    stamp = f"{author} <{author}@localhost> 1700000000 +0000"  # a random name: nothing says 'probe'
    git = make_dir(dir_fd, ".git")
    try:
        put_file(git, "HEAD", b"ref: refs/heads/main\n")
        put_file(git, "config", _CONFIG)
        objects = make_dir(git, "objects")
        folders: dict[str, int] = {}
        try:

            def store(kind: bytes, body: bytes) -> bytes:
                raw = kind + b" " + str(len(body)).encode() + b"\0" + body
                name = hashlib.sha1(raw).hexdigest()  # git names its objects so
                if name[:2] not in folders:
                    folders[name[:2]] = make_dir(objects, name[:2])
                put_file(folders[name[:2]], name[2:], zlib.compress(raw))
                return name.encode()

            tree = store(
                b"tree",
                b"".join(
                    b"100644 " + name.encode() + b"\0" + bytes.fromhex(store(b"blob", data).decode())
                    for name, data in sorted(files.items())
                ),
            )
            head = f"tree {tree.decode()}\nauthor {stamp}\ncommitter {stamp}\n\n{message}\n"
            commit = store(b"commit", head.encode())
        finally:
            for fd in folders.values():
                os.close(fd)
            os.close(objects)
        refs = make_dir(git, "refs")
        try:
            heads = make_dir(refs, "heads")
            try:
                put_file(heads, "main", commit + b"\n")
            finally:
                os.close(heads)
            os.close(make_dir(refs, "tags"))
        finally:
            os.close(refs)
    finally:
        os.close(git)
