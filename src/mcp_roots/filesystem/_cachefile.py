"""The file that keeps one serve command line's start-up answers, in a cache folder of the user's own."""

# Every read, write, rename and prune is done through a descriptor of a folder checked first; a folder that is
# not the user's own (a symlink serve did not make, another owner, writable by others) is not used at all.

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import logging
import os
import re
import stat
import sys
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

__all__ = ["StartupFile", "StartupSaveError"]

logger = logging.getLogger("mcp_roots")

_FORMAT = 1
_MAX_FILE_BYTES = 4 * 1024 * 1024
_MAX_VERSIONS = 8
_MAX_FILES = 32
#: The folders serve makes under the user's cache folder (``$XDG_CACHE_HOME`` or ``~/.cache``).
_FOLDERS = ("mcp-roots", "serve")
#: The only names serve writes, renames or removes in its folder: its own files and their temporary names.
_OWN_NAME = re.compile(r"[0-9a-f]{32}\.json")
#: The distributions whose installed version and files the answers depend on.
_SDK_PACKAGES = ("mcp", "mcp_types", "pydantic", "pydantic_core")
#: What each recorded answer must hold: a list answer that lacks its list is no answer to that request.
_SHAPE = {
    "initialize": "protocolVersion",
    "tools/list": "tools",
    "prompts/list": "prompts",
    "resources/list": "resources",
    "resources/templates/list": "resourceTemplates",
}


class StartupSaveError(OSError):
    """The cache folder is not one serve may write in."""


def is_answer_to(method: str, result: object) -> bool:
    """Whether ``result`` has the shape of an answer to ``method`` (a list answer holds its list)."""
    key = _SHAPE.get(method)
    if key is None or not isinstance(result, dict):
        return False
    value = result.get(key)
    return isinstance(value, str) if method == "initialize" else isinstance(value, list)


class StartupFile:
    """The file that holds one serve command line's recorded answers, named by their digest, in
    ``cache/mcp-roots/serve``."""

    def __init__(self, cache: Path, key: str) -> None:
        self.cache = cache
        self.key = key
        self.name = f"{key[:32]}.json"
        self.path = cache.joinpath(*_FOLDERS, self.name)
        self._warned = False

    @classmethod
    def for_command(cls, options: Mapping[str, Any], cache: str | None = None) -> StartupFile:
        """The file for a serve run with these ``options`` (the parsed command line)."""
        if cache is None:
            cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        digest = hashlib.sha256()
        shown = sorted((name, repr(value)) for name, value in options.items())
        digest.update(json.dumps([sys.version, sys.executable, shown]).encode("utf-8", "surrogateescape"))
        for item in _fingerprints():
            digest.update(item.encode("utf-8", "surrogateescape") + b"\0")
        return cls(Path(cache), digest.hexdigest())

    @contextlib.contextmanager
    def _folder(self, create: bool) -> Iterator[int | None]:
        """A descriptor of serve's folder, or None where there is none (and ``create`` is false). Raises
        ``StartupSaveError`` where the folder (or the cache folder it is in) is not the user's own."""
        uid = os.geteuid()
        flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
        try:
            fd = os.open(self.cache, flags)
        except FileNotFoundError:
            if not create:
                yield None
                return
            os.makedirs(self.cache, mode=0o700, exist_ok=True)
            fd = os.open(self.cache, flags)
        try:
            info = os.fstat(fd)
            if info.st_uid not in (uid, 0):
                raise StartupSaveError(f"{self.cache} belongs to another user (uid {info.st_uid})")
            for part in _FOLDERS:
                inner = _enter(part, fd, create)
                if inner is None:
                    yield None
                    return
                os.close(fd)
                fd = inner
                info = os.fstat(fd)
                if info.st_uid != uid:
                    raise StartupSaveError(f"{part} in it belongs to another user (uid {info.st_uid})")
                if info.st_mode & 0o022:
                    raise StartupSaveError(
                        f"{part} in it is writable by others (mode {stat.S_IMODE(info.st_mode):04o})"
                    )
            yield fd
        finally:
            os.close(fd)

    def _distrust(self, exc: OSError) -> None:
        if not self._warned:
            self._warned = True
            logger.warning(
                "serve: the start-up cache in %s is not used (%s); serve starts without recorded answers, "
                "which is slower",
                self.cache.joinpath(*_FOLDERS),
                exc,
            )

    def load(self) -> dict[str, dict[str, Any]]:
        """The recorded answers by the protocol version the client asked for; empty when there are none or
        the file or its folder is not trusted (a reason logged)."""
        try:
            with self._folder(create=False) as folder:
                if folder is None:
                    return {}
                data = self._read(folder)
        except StartupSaveError as exc:
            self._distrust(exc)
            return {}
        except OSError:
            return {}
        if data is None:
            return {}
        try:
            stored = json.loads(data)
            answers = stored["answers"]
            if stored["format"] != _FORMAT or stored["key"] != self.key or not isinstance(answers, dict):
                raise ValueError("another format or key")
            for version, recorded in answers.items():
                if not (
                    isinstance(version, str)
                    and isinstance(recorded, dict)
                    and "initialize" in recorded
                    and "tools/list" in recorded
                    and all(isinstance(m, str) and is_answer_to(m, r) for m, r in recorded.items())
                ):
                    raise ValueError(f"answers for {version!r} incomplete")
        except (ValueError, KeyError, TypeError) as exc:
            logger.debug("serve: not using %s: %s", self.path, exc)
            return {}
        return answers

    def _read(self, folder: int) -> bytes | None:
        try:
            fd = os.open(self.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=folder)
        except OSError:
            return None
        try:
            info = os.fstat(fd)
            if not (
                stat.S_ISREG(info.st_mode)
                and info.st_uid == os.geteuid()
                and not info.st_mode & 0o022
                and info.st_size <= _MAX_FILE_BYTES
            ):
                logger.debug("serve: not using %s: not a regular file only this user can write", self.path)
                return None
            return os.read(fd, _MAX_FILE_BYTES + 1)
        finally:
            os.close(fd)

    def save(self, answers: Mapping[str, Mapping[str, Any]]) -> None:
        """Write ``answers`` (merged over what the file holds, request by request), 0600, by rename; keep the
        folder to the newest files. Best effort: a folder that cannot be written (a confined server) or is
        not the user's own only costs speed."""
        merged = self.load()
        for version, recorded in answers.items():
            merged[version] = {**merged.get(version, {}), **recorded}
        if len(merged) > _MAX_VERSIONS:
            return
        text = json.dumps({"format": _FORMAT, "key": self.key, "answers": merged}, ensure_ascii=False)
        temporary = f".{self.name}.{os.getpid()}.tmp"
        try:
            with self._folder(create=True) as folder:
                assert folder is not None
                flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW
                fd = os.open(temporary, flags, 0o600, dir_fd=folder)
                try:
                    try:
                        _write_all(fd, text.encode("utf-8", "surrogateescape"))
                    finally:
                        os.close(fd)
                    os.replace(temporary, self.name, src_dir_fd=folder, dst_dir_fd=folder)
                except OSError:
                    with contextlib.suppress(OSError):
                        os.unlink(temporary, dir_fd=folder)
                    raise
                _prune(folder)
        except StartupSaveError as exc:
            self._distrust(exc)
        except OSError as exc:
            logger.debug("serve: start-up answers not kept in %s: %s", self.path, exc)

    def discard(self) -> None:
        """Remove the file (by its own name, in the checked folder only)."""
        with contextlib.suppress(OSError), self._folder(create=False) as folder:
            if folder is not None:
                os.unlink(self.name, dir_fd=folder)


def _enter(part: str, parent: int, create: bool) -> int | None:
    """A descriptor of the folder ``part`` in ``parent`` (made, 0700, where missing and ``create``), never
    through a symlink; None where it is missing."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    for _ in range(2):
        try:
            return os.open(part, flags, dir_fd=parent)
        except FileNotFoundError:
            if not create:
                return None
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, 0o700, dir_fd=parent)
        except OSError as exc:
            try:
                mode = os.stat(part, dir_fd=parent, follow_symlinks=False).st_mode
            except OSError:
                raise exc from None
            what = "a symlink" if stat.S_ISLNK(mode) else "not a folder"
            raise StartupSaveError(f"{part} in it is {what}") from None
    raise StartupSaveError(f"{part} in it cannot be made")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _prune(folder: int) -> None:
    """Keep the newest ``_MAX_FILES`` of serve's own files; nothing else in the folder is touched."""
    uid = os.geteuid()
    own: list[tuple[int, str]] = []
    with os.scandir(folder) as entries:
        for entry in entries:
            if not _OWN_NAME.fullmatch(entry.name):
                continue
            with contextlib.suppress(OSError):
                info = entry.stat(follow_symlinks=False)
                if stat.S_ISREG(info.st_mode) and info.st_uid == uid:
                    own.append((info.st_mtime_ns, entry.name))
    own.sort(reverse=True)
    for _, name in own[_MAX_FILES:]:
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=folder)


def _fingerprints() -> Iterable[str]:
    """What the answers depend on besides the command line: the stat of every file of mcp-roots, and each
    SDK distribution's installed version and record (a new install rewrites its RECORD)."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    folders = [here]
    while folders:
        with os.scandir(folders.pop()) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False) and entry.name != "__pycache__":
                    folders.append(entry.path)
                elif entry.name.endswith(".py"):
                    info = entry.stat()
                    yield f"{entry.path}:{info.st_mtime_ns}:{info.st_size}"
    listed: dict[str, list[str]] = {}
    for name in _SDK_PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.origin:
            yield f"{name}:absent"
            continue
        parent = os.path.dirname(os.path.dirname(spec.origin))
        if parent not in listed:
            try:
                listed[parent] = sorted(n for n in os.listdir(parent) if n.endswith(".dist-info"))
            except OSError:
                listed[parent] = []
        prefix = name.replace("_", "-").lower() + "-"
        for dist in listed[parent]:
            if dist.replace("_", "-").lower().startswith(prefix) and dist[len(prefix)].isdigit():
                try:
                    info = os.stat(os.path.join(parent, dist, "RECORD"))
                except OSError:
                    yield f"{name}:{dist}:no record"
                else:
                    yield f"{name}:{dist}:{info.st_mtime_ns}:{info.st_size}:{info.st_ino}"
        yield f"{name}:{spec.origin}"
