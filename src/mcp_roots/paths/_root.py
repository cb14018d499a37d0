"""Root: one allowed root, canonical and checked.
Its path, its ``file:`` URI, an optional display name.
"""

# A path holding a control character (a newline above all) cannot be a root, however the Root is made: it
# would forge a line of ``as_env()``'s ``MCP_ROOTS_PATHS``.

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from ..errors import InvalidPath
from ._beneath import Unresolvable
from ._canonical import canonicalize
from ._text import checked_text, control_character, describe
from ._uri import path_to_uri

__all__ = ["Root"]

_WINDOWS = os.name == "nt"


@dataclass(frozen=True)
class Root:
    """One allowed root. Build one with :meth:`from_path` (which canonicalizes and checks it).

    Args:
        path: Its canonical path. A path holding a control character (a newline above all) cannot be a root
            (:class:`InvalidPath`): it would forge a line of ``MCP_ROOTS_PATHS``.
        uri: Its ``file:`` URI.
        name: Its display name, if any.
    """

    path: Path
    uri: str
    name: str | None = None

    def __post_init__(self) -> None:
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
    ) -> Root:
        """The root at ``path``, canonicalized.

        Args:
            path: A directory or a regular file.
            name: Its display name, if any.
            base: What a relative ``path`` resolves against (default: the working directory).

        Raises:
            InvalidPath: It cannot be resolved, does not exist, is neither a directory nor a regular file,
                cannot be read, or holds a control character.
        """
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
            return cls(Path(canonical), "", name)  # __post_init__ refuses it, naming the character
        return cls(Path(canonical), path_to_uri(canonical), name)

    def as_dict(self) -> dict[str, str | None]:
        """The ``{uri, name, path}`` form used by ``as_env()`` and the reference server."""
        return {"uri": self.uri, "name": self.name, "path": str(self.path)}
