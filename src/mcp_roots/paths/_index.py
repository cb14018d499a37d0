"""The root index: canonical root paths by their comparison key, and the innermost root of a path found by
one dict probe per path component -- or, where names compare exactly and the roots have few distinct
lengths, one probe per root-path length -- whatever the number of roots. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from ._fold import Folding

__all__ = ["RootIndex"]

#: At most this many distinct root-path lengths are probed by length (see RootIndex.innermost_prefix).
_MAX_LENGTHS = 16


class RootIndex:
    """Canonical root paths indexed by their comparison key: one dict probe per path component (or per
    distinct root-path length) finds the innermost root of a path, whatever the number of roots."""

    __slots__ = ("_keys", "folding", "lengths", "paths")

    def __init__(self, paths: Iterable[str], folding: Folding) -> None:
        self.folding = folding
        keys: dict[str, str] = {}
        for path in paths:
            keys.setdefault(folding.key(path), path)
        self._keys = keys
        #: The kept root paths, in the order given (duplicates by key dropped).
        self.paths: tuple[str, ...] = tuple(keys.values())
        # The distinct root-path lengths, longest first: only where names compare exactly (a folded key
        # need not be a prefix of the text) and while there are few of them.
        lengths = sorted({len(key) for key in keys}, reverse=True)
        few = folding.exact and len(lengths) <= _MAX_LENGTHS
        self.lengths: tuple[int, ...] = tuple(lengths) if few else ()

    def __bool__(self) -> bool:
        return bool(self._keys)

    def exact(self, path: str) -> str | None:
        """The root path that ``path`` names (compared by key), or None."""
        return self._keys.get(self.folding.key(path))

    def above(self, canonical: str) -> str | None:
        """The innermost root that is ``canonical`` or an ancestor of it: one dict probe per component."""
        keys = self._keys
        if not keys:
            return None
        if self.lengths:
            return self.innermost_prefix(canonical)  # one probe per root-path length, not per component
        key: str | None = self.folding.key(canonical)
        while key is not None:
            found = keys.get(key)
            if found is not None:
                return found
            key = self.folding.parent_key(key)
        return None

    def strictly_beneath(self, canonical: str) -> bool:
        """Whether ``canonical`` lies strictly beneath a root (a root itself does not): where a '..' may
        be applied (see ``_canonical.canonicalize``)."""
        parent = self.folding.parent_key(self.folding.key(canonical))
        return parent is not None and self.above(parent) is not None  # a key folds to itself

    def beneath(self, path: str) -> list[str]:
        """The root paths that lie strictly beneath ``path`` (whole components, compared by key)."""
        key = self.folding.key(path)
        return [root for root_key, root in self._keys.items() if self.folding.is_beneath(root_key, key)]

    def innermost_prefix(self, text: str) -> str | None:
        """The innermost root that is a whole-component prefix of the absolute ``text``. Where names
        compare exactly, one dict probe per distinct root-path length (usually one or a few)."""
        lengths = self.lengths
        if not lengths:  # names fold, too many lengths, or no roots
            return self.above(text)
        keys, size = self._keys, len(text)
        for length in lengths:
            if length < size:
                if text[length] == "/" or length == 1:
                    key = text[:length]
                    if key in keys:
                        return key  # the key is the root path, exactly
            elif length == size and text in keys:
                return text
        return None

    def lexical(self, parts: list[str]) -> Iterator[tuple[str, list[str]]]:
        """Roots that are a whole-component prefix of ``parts``, innermost first, with the rest of it."""
        keys, key = self._keys, self.folding.key
        if self.lengths:  # one probe per root-path length, not one join and probe per component
            text = "/" + "/".join(parts)
            size = len(text)
            for length in self.lengths:  # longest first: innermost first
                if length <= size and (length in (1, size) or text[length] == "/"):
                    root = keys.get(text[:length])
                    if root is not None:  # '/' holds 0 components; '/a/b' holds 2 (one '/' each)
                        yield root, parts[text.count("/", 0, length) if length > 1 else 0 :]
            return
        for i in range(len(parts), -1, -1):
            root = keys.get(key("/" + "/".join(parts[:i])))
            if root is not None:
                yield root, parts[i:]
