"""How names compare on each platform.
The key a canonical path is indexed and looked up by.
"""

# Linux compares bytes exactly; macOS (APFS/HFS+) ignores case and Unicode normalization; Windows (NTFS)
# upcases through its table and treats '/' and '\' alike. Pure string work.

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Folding", "folding_for"]


def fold_exact(path: str) -> str:
    return path


def _simple_casefold(text: str) -> str:
    # One character to one character only (Unicode "simple" folding): a full folding such as 'ß' -> 'ss'
    # could make two names the filesystem keeps apart compare equal, and widen a root.
    if text.isascii():
        return text.lower()
    out = []
    for ch in text:
        folded = ch.casefold()
        if len(folded) != 1:
            folded = ch.lower()
            if len(folded) != 1:
                folded = ch
        out.append(folded)
    return "".join(out)


def _simple_upper(text: str) -> str:
    if text.isascii():
        return text.upper()
    return "".join(up if len(up := ch.upper()) == 1 else ch for ch in text)


def fold_darwin(path: str) -> str:
    # APFS and HFS+ (default formats) are case-insensitive and normalization-insensitive: compare in NFD
    # after simple case folding, then NFD again because folding can un-normalize.
    if path.isascii():
        return path.lower()
    return unicodedata.normalize("NFD", _simple_casefold(unicodedata.normalize("NFD", path)))


def fold_windows(path: str) -> str:
    # NTFS compares names through its upcase table (one character to one, no Unicode normalization);
    # '/' and '\\' are the same separator.
    return _simple_upper(path.replace("/", "\\"))


@dataclass(frozen=True)
class Folding:
    """A platform's comparison rule: ``key`` maps a canonical path to its comparison key, whose components
    are separated by ``separator``; ``exact`` is True where the key is the path itself."""

    platform: str
    key: Callable[[str], str]
    separator: str
    exact: bool

    def parent_key(self, key: str) -> str | None:
        """The key of the parent directory of ``key``, or None at the top ('/', 'C:\\')."""
        sep = self.separator
        cut = key.rfind(sep)
        if cut < 0:
            return None
        if cut == 0 or (sep == "\\" and cut == 2 and key[1] == ":"):
            parent = key[: cut + 1]
            return None if parent == key else parent
        return key[:cut]

    def is_beneath(self, key: str, ancestor_key: str) -> bool:
        """Whether ``key`` lies strictly beneath ``ancestor_key`` (whole components)."""
        prefix = ancestor_key if ancestor_key.endswith(self.separator) else ancestor_key + self.separator
        return key.startswith(prefix)


_EXACT = Folding("linux", fold_exact, "/", True)


def folding_for(platform: str) -> Folding:
    """The comparison rule of ``platform`` (a ``sys.platform`` value)."""
    if platform == "darwin":
        return Folding(platform, fold_darwin, "/", False)
    if platform in ("win32", "cygwin"):
        return Folding(platform, fold_windows, "\\", False)
    return _EXACT if platform == _EXACT.platform else Folding(platform, fold_exact, "/", True)
