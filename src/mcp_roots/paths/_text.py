"""Lexical path rules, each stated once: limits, control characters, checked text, splitting, climbing,
untrusted text for a reader. Pure string work, no I/O. Every other module (and the broker's wire checks)
takes these rules from here.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable
from pathlib import PosixPath, PurePosixPath, PureWindowsPath, WindowsPath
from typing import Literal

from ..errors import InvalidPath

__all__ = [
    "NAME_MAX",
    "NOT_A_NAME",
    "NOT_FOR_READER",
    "PATH_MAX",
    "PATH_TYPES",
    "SYMLOOP_MAX",
    "check_name",
    "checked_text",
    "climbs",
    "control_character",
    "cut_to_bytes",
    "describe",
    "ending",
    "file_kind",
    "for_reader",
    "is_plain",
    "kind_of",
    "no_dot_components",
    "split",
]

#: Linux's limits; other POSIX systems have the same or larger ones for the purpose of refusing input.
#: A path of PATH_MAX bytes or more (its encoded form, without the terminating NUL) is refused.
PATH_MAX = 4096
#: Bytes one name (a path segment, encoded) may hold; a longer name cannot exist. Bytes, never characters.
NAME_MAX = 255
#: Symlinks followed while resolving one path before it counts as a loop (Linux's MAXSYMLINKS).
SYMLOOP_MAX = 40


def control_character(text: str) -> str | None:
    """The first control character (C0 or DEL) in ``text``, or None. A name may hold one, but a root, a
    URI or a wire path may not: a newline in a root would forge a line of ``MCP_ROOTS_PATHS``."""
    if text.isprintable():  # the common case: C0 and DEL are not printable, so none is here
        return None
    for ch in text:
        if ord(ch) < 0x20 or ord(ch) == 0x7F:
            return ch
    return None


WireKind = Literal["file", "directory", "symlink", "other"]

#: The file types, once: by ``stat.S_IFMT``, the word the broker's wire uses and a short human name.
FILE_KINDS: dict[int, tuple[WireKind, str]] = {
    stat.S_IFREG: ("file", "a regular file"),
    stat.S_IFDIR: ("directory", "a directory"),
    stat.S_IFLNK: ("symlink", "a symbolic link"),
    stat.S_IFIFO: ("other", "a FIFO"),
    stat.S_IFSOCK: ("other", "a socket"),
    stat.S_IFCHR: ("other", "a character device"),
    stat.S_IFBLK: ("other", "a block device"),
}
_UNKNOWN_KIND: tuple[WireKind, str] = ("other", "not a regular file")


def file_kind(mode: int) -> str:
    """A short human name of a file type: 'a FIFO', 'a socket'..."""
    return FILE_KINDS.get(stat.S_IFMT(mode), _UNKNOWN_KIND)[1]


def kind_of(mode: int) -> WireKind:
    """The wire's word for a file type: 'file', 'directory', 'symlink' or 'other'."""
    return FILE_KINDS.get(stat.S_IFMT(mode), _UNKNOWN_KIND)[0]


def shorten(text: str, most: int = 120) -> str:
    """``text`` as it is when it has at most ``most`` characters, else its start and its end around
    ``...``: the end of a path (the name) says most, the start where it lies."""
    if len(text) <= most:
        return text
    tail = most // 3
    return text[: most - tail - 3] + "..." + text[-tail:]


#: The code points :func:`for_reader` writes as escapes: C0 controls, DEL and C1 controls (a terminal acts on
#: them: ESC, CR, BEL, CSI), the bidi controls (they reorder what follows, so a name can hide its true end)
#: and the line and paragraph separators (they break what a reader takes for one line).
NOT_FOR_READER = frozenset(
    (*range(0x20), *range(0x7F, 0xA0), 0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))
) | {0x2028, 0x2029}
_READER_ESCAPES = {code: f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" for code in NOT_FOR_READER}


def for_reader(text: str, most: int | None = None) -> str:
    """``text`` (untrusted) fit for a person to read: each of :data:`NOT_FOR_READER` written as ``\\xNN``
    (C0, DEL, C1) or ``\\uNNNN``, all else as it is. With ``most`` (at least 4), at most ``most`` characters
    of that: its start and its end around ``...`` (as :func:`shorten`), never an escape cut in two."""
    if most is not None and most < 4:
        raise ValueError(f"for_reader: most must be at least 4 ('...' and a character), not {most}")
    # The common case first: no code point of NOT_FOR_READER is printable.
    escaped = text if text.isprintable() else text.translate(_READER_ESCAPES)
    if most is None or len(escaped) <= most:
        return escaped
    tail = most // 3
    return "".join(_whole(text, most - tail - 3)) + "..." + "".join(reversed(_whole(reversed(text), tail)))


def _whole(chars: Iterable[str], room: int) -> list[str]:
    """The escaped pieces of ``chars``, in their order, while they fit in ``room`` characters."""
    taken: list[str] = []
    for ch in chars:
        piece = _READER_ESCAPES.get(ord(ch), ch)
        room -= len(piece)
        if room < 0:
            break
        taken.append(piece)
    return taken


def describe(value: object) -> str:
    """``repr(value)``, shortened in the middle for messages (at most 160 characters)."""
    return shorten(repr(value), 160)


#: The exact pathlib classes: str() of one is its __fspath__() and always an exact str.
PATH_TYPES = frozenset({PurePosixPath, PosixPath, PureWindowsPath, WindowsPath})


def checked_text(path: object) -> str:
    """Turn a user-supplied path into text, or raise InvalidPath naming the input and the rule."""
    if type(path) in PATH_TYPES:
        path = str(path)  # what their __fspath__ returns
    if type(path) is str and path.isascii() and 0 < len(path) < PATH_MAX and "\x00" not in path:
        # The common case, checked in O(1) but for the NUL scan: ASCII text encodes one byte per character
        # in every filesystem encoding and cannot hold a lone surrogate.
        return path
    if isinstance(path, str):
        raw: object = path
    elif isinstance(path, os.PathLike):
        try:
            raw = os.fspath(path)
        except Exception as exc:  # a hostile __fspath__ must not escape contains()
            raise InvalidPath(f"path {describe(path)} cannot be turned into text: {exc!r}") from exc
        if not isinstance(raw, str):
            raise InvalidPath(f"path {describe(path)} is not text (bytes paths are not accepted)")
    else:
        raise InvalidPath(f"path {describe(path)} is a {type(path).__name__}, not a str or os.PathLike")
    # A str subclass may override split(), startswith()...: judge an exact copy of its characters.
    text = str.__str__(raw) if type(raw) is not str else raw
    if not text:
        raise InvalidPath("path '' is empty")
    if "\x00" in text:
        raise InvalidPath(f"path {describe(text)} contains a NUL byte")
    try:
        size = len(os.fsencode(text))
    except UnicodeError:
        raise InvalidPath(
            f"path {describe(text)} cannot be encoded for the filesystem (a lone surrogate?)"
        ) from None
    if size >= PATH_MAX:
        raise InvalidPath(f"path {describe(text)} is longer than PATH_MAX ({PATH_MAX} bytes)")
    return text


def no_dot_components(text: str) -> bool:
    """Whether the absolute ``text`` has no '.', '..' or empty component (a trailing '/' is allowed)."""
    return "//" not in text and "/./" not in text and "/../" not in text and not text.endswith(("/.", "/.."))


def is_plain(text: str) -> bool:
    """Whether the absolute ``text`` is in canonical form as text: no '.', '..' or empty component and no
    trailing '/' (``/`` itself is not plain)."""
    return not text.endswith("/") and no_dot_components(text)


def check_name(name: str) -> None:
    """Raise EINVAL unless ``name`` is one name: not empty, not '.' or '..', no '/'."""
    if not name or name in (".", "..") or "/" in name:
        raise OSError(errno.EINVAL, os.strerror(errno.EINVAL))


#: What a name operation (by its verb) answers for a path that ends in '/.', as the kernel's: the final
#: '.' is the directory itself, which cannot be removed (rmdir EINVAL), renamed (EBUSY), made (EEXIST) or
#: written as a file (EISDIR).
NOT_A_NAME = {
    "removed": errno.EINVAL,
    "renamed": errno.EBUSY,
    "replaced": errno.EBUSY,
    "created": errno.EEXIST,
    "written": errno.EISDIR,
}


def ending(text: str) -> Literal["", "/", "/."]:
    """How ``text`` ends after its last name, as the kernel reads it: '' (a name), '/' (a trailing
    separator: the name must be a directory) or '/.' (a final '.': the directory itself, not a name)."""
    stripped = text.rstrip("/")
    if stripped == "." or stripped.endswith("/."):
        return "/."
    return "/" if len(stripped) < len(text) else ""


def split(text: str) -> list[str]:
    """The components of a path, without empty ones and '.' ('..' stays: its meaning is physical)."""
    return [c for c in text.split("/") if c and c != "."]


def climbs(rest: list[str]) -> bool:
    """Whether the relative components ``rest`` go above their starting directory at any point."""
    depth = 0
    for name in rest:
        if name == "..":
            depth -= 1
            if depth < 0:
                return True
        else:
            depth += 1
    return False


def cut_to_bytes(name: str, size: int) -> str:
    """The longest prefix of ``name`` whose filesystem encoding is at most ``size`` bytes (a character is
    never split: a temporary name built from a 252-byte multibyte name must still fit NAME_MAX)."""
    total = 0
    for i, ch in enumerate(name):
        total += len(os.fsencode(ch))
        if total > size:
            return name[:i]
    return name
