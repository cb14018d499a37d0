"""Root: one allowed root, canonical and checked.
Its path, its ``file:`` URI, an optional display name, its access.
"""

# A path holding a control character (a newline above all) cannot be a root, however the Root is made: it
# would forge a line of ``as_env()``'s ``MCP_ROOTS_PATHS``.

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal, get_args

from ..errors import InvalidPath, InvalidRootURI
from ._beneath import Unresolvable
from ._canonical import canonicalize
from ._text import checked_text, control_character, describe
from ._uri import path_to_uri, uri_and_name, uri_to_path

__all__ = ["ACCESSES", "Access", "Root", "roots_from_paths", "roots_from_uris"]

logger = logging.getLogger("mcp_roots")

_WINDOWS = os.name == "nt"

#: What a root allows: ``"read"`` (every writing operation beneath it is refused) or ``"read-write"``.
Access = Literal["read", "read-write"]
ACCESSES: tuple[Access, ...] = get_args(Access)


@dataclass(frozen=True)
class Root:
    """One allowed root. Build one with :meth:`from_path` (which canonicalizes and checks it).

    Args:
        path: Its canonical path. A path holding a control character (a newline above all) cannot be a root
            (:class:`InvalidPath`): it would forge a line of ``MCP_ROOTS_PATHS``.
        uri: Its ``file:`` URI.
        name: Its display name, if any.
        access: ``"read-write"`` (the default) or ``"read"``: every writing operation beneath it (unless a
            read-write root nested inside holds the path) is refused with :class:`ReadOnlyPath`.
    """

    path: Path
    uri: str
    name: str | None = None
    access: Access = "read-write"

    def __post_init__(self) -> None:
        if self.access not in ACCESSES:
            raise ValueError(f"a root's access is 'read' or 'read-write', not {self.access!r}")
        ch = control_character(str(self.path))
        if ch is not None:
            raise InvalidPath(
                f"root {describe(str(self.path))} contains the control character {ch!r}; a root may not "
                "(it would forge a line of MCP_ROOTS_PATHS)"
            )

    @classmethod
    def from_path(
        cls,
        path: str | os.PathLike[str],
        name: str | None = None,
        *,
        base: str | os.PathLike[str] | None = None,
        access: Access = "read-write",
    ) -> Root:
        """The root at ``path``, canonicalized.

        Args:
            path: A directory or a regular file.
            name: Its display name, if any.
            base: What a relative ``path`` resolves against (default: the working directory).
            access: ``"read-write"`` or ``"read"``.

        Raises:
            InvalidPath: It cannot be resolved, does not exist, is neither a directory nor a regular file,
                cannot be read, or holds a control character.
        """
        if access not in ACCESSES:
            raise ValueError(f"a root's access is 'read' or 'read-write', not {access!r}")
        text = checked_text(path)
        if not os.path.isabs(text):
            text = os.path.join(os.fspath(base) if base is not None else os.getcwd(), text)
        try:
            canonical = canonicalize(text) if not _WINDOWS else os.path.realpath(text, strict=True)
        except (Unresolvable, OSError) as exc:
            why = exc.why if isinstance(exc, Unresolvable) else str(exc)
            raise InvalidPath(f"root {text!r} cannot be resolved: {why}") from None
        try:
            st = os.stat(canonical)
        except FileNotFoundError:
            raise InvalidPath(f"root {text!r} does not exist") from None
        except OSError as exc:
            raise InvalidPath(f"root {text!r} cannot be examined: {exc.strerror or exc}") from None
        is_dir = stat.S_ISDIR(st.st_mode)
        if not is_dir and not stat.S_ISREG(st.st_mode):
            raise InvalidPath(f"root {text!r} is neither a directory nor a regular file")
        needed = os.R_OK | os.X_OK if is_dir else os.R_OK
        if not os.access(canonical, needed):
            raise InvalidPath(f"root {text!r} cannot be read (permission denied)")
        if control_character(canonical) is not None:
            return cls(Path(canonical), "", name, access)  # __post_init__ refuses it, naming the character
        return cls(Path(canonical), path_to_uri(canonical), name, access)

    @property
    def writable(self) -> bool:
        """Whether its access is ``"read-write"``."""
        return self.access == "read-write"

    def with_access(self, access: Access) -> Root:
        """The same root with another access.

        Args:
            access: ``"read-write"`` or ``"read"``.
        """
        return replace(self, access=access)

    def as_dict(self) -> dict[str, str | None]:
        """The ``{uri, name, path, access}`` form used by ``as_env()`` and the CLI."""
        return {"uri": self.uri, "name": self.name, "path": str(self.path), "access": self.access}


def roots_from_paths(
    paths: Iterable[str | os.PathLike[str] | tuple[str | os.PathLike[str], str | None]],
    strict: bool,
    source: str,
    base: str | os.PathLike[str] | None,
    access: Access,
) -> list[Root]:
    """RootSet.from_paths's roots: each path (or ``(path, name)`` pair) as a Root; one that is not a usable
    root raises InvalidPath when ``strict``, else is skipped with a warning naming ``source``."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    roots: list[Root] = []
    for entry in paths:
        name: str | None = None
        if isinstance(entry, tuple):
            entry, name = entry
        try:
            roots.append(Root.from_path(entry, name, base=base, access=access))
        except InvalidPath as exc:
            if strict:
                raise
            logger.warning("skipping root from %s: %s", source, exc)
    return roots


def roots_from_uris(uris_or_roots: Iterable[object], strict: bool, source: str, access: Access) -> list[Root]:
    """RootSet.from_uris's roots: each ``file:`` URI (or object with ``uri`` and ``name``) as a Root; a bad
    one raises when ``strict``, else is skipped with a warning naming ``source``."""
    if isinstance(uris_or_roots, str):
        uris_or_roots = [uris_or_roots]
    roots: list[Root] = []
    for item in uris_or_roots:
        try:
            uri, name = uri_and_name(item)
            roots.append(Root.from_path(uri_to_path(uri), name, access=access))
        except (InvalidRootURI, InvalidPath) as exc:
            if strict:
                raise
            logger.warning("skipping root from %s: %s", source, exc)
    return roots
