"""Who may call ``serve --http``: the holders of a token from the operator's file.
Checked by the SDK's own bearer-auth hooks on every method of the endpoint.
"""

# The file holds one token per line (``#`` comments and blank lines ignored; several lines let a token be
# rotated without a gap). It is created with a random token, mode 0600, when it does not exist; one readable
# by other users is refused, and so is one another user owns, a symlink, or one in a folder another user can
# write. Its content is read again at every request (a rewrite is seen whatever times the writer set), so a
# token is rotated by rewriting the file; a file that cannot be read any more, or holds no token, lets nobody
# in.

from __future__ import annotations

import errno
import hashlib
import hmac
import logging
import os
import secrets
import stat
from pathlib import Path

from mcp.server.auth.provider import AccessToken

from ..errors import ConfigError

__all__ = ["MIN_TOKEN_CHARS", "TokenFile", "default_token_path", "ensure_token_file"]

logger = logging.getLogger("mcp_roots")

#: A shorter token could be guessed; a generated one is 43 characters (32 random bytes, URL-safe base64).
MIN_TOKEN_CHARS = 32
#: The most of a token file read: far more than any list of tokens needs.
_MAX_FILE_BYTES = 64 * 1024


def default_token_path() -> Path:
    """``$XDG_CONFIG_HOME/mcp-roots/http-token`` (``~/.config/mcp-roots/http-token``)."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "mcp-roots" / "http-token"


def ensure_token_file(path: Path) -> bool:
    """Create ``path`` with a new random token (mode 0600, its directory 0700 if made) unless it exists.
    True when it was created."""
    if path.exists():
        return False
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        return False
    except OSError as exc:
        raise ConfigError(f"token file {path}: cannot create it: {exc.strerror or exc}") from None
    with os.fdopen(fd, "w", encoding="ascii") as out:
        out.write(secrets.token_urlsafe(32) + "\n")
    return True


def _credential(token: bytes) -> str:
    """A name for a token that does not reveal it (the SDK binds a session to it)."""
    return "token-" + hashlib.sha256(token).hexdigest()[:12]


class TokenFile:
    """The tokens of one file, re-read when it changes; ``verify_token`` is the SDK's ``TokenVerifier``."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._content: bytes | None = None
        self._problem: str | None = None
        self._tokens: tuple[bytes, ...] = ()
        self._reported: str | None = None  # the problem last logged: each one is logged once
        problem = self._load()
        if problem is not None:
            raise ConfigError(f"token file {self.path}: {problem}")

    def _load(self) -> str | None:
        """Read the file (its content, every time: a rewrite that keeps its size and times is seen too); the
        reason it gives no tokens, or None."""
        problem, data = self._read()
        if problem is not None:
            self._content, self._problem, self._tokens = None, problem, ()
            return problem
        if data != self._content:
            self._content = data
            self._problem, self._tokens = _parse(data)
        return self._problem

    def _read(self) -> tuple[str | None, bytes]:
        folder = self.path.parent
        try:
            where = os.stat(folder)
        except OSError as exc:
            return f"cannot read its folder {folder}: {exc.strerror or exc}", b""
        if where.st_uid not in (os.geteuid(), 0):
            return f"its folder {folder} belongs to another user (uid {where.st_uid})", b""
        if where.st_mode & 0o022:
            return (
                f"other users may write its folder {folder} (mode {stat.S_IMODE(where.st_mode):04o}) and so "
                "replace it; keep it in a folder of your own"
            ), b""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                return "it is a symlink; give the file itself", b""
            return f"cannot read it: {exc.strerror or exc}", b""
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                return "not a regular file", b""
            if info.st_uid != os.geteuid():
                return f"it belongs to another user (uid {info.st_uid}); make your own", b""
            if info.st_mode & 0o077:
                return (
                    f"other users may read or write it (mode {stat.S_IMODE(info.st_mode):04o}); "
                    f"make it private: chmod 600 {self.path}"
                ), b""
            data = os.read(fd, _MAX_FILE_BYTES + 1)
        except OSError as exc:
            return f"cannot read it: {exc.strerror or exc}", b""
        finally:
            os.close(fd)
        if len(data) > _MAX_FILE_BYTES:
            return f"longer than {_MAX_FILE_BYTES} bytes: not a token file", b""
        return None, data

    def credential(self, presented: str) -> str | None:
        """The credential ``presented`` is (a name for its token), or None; every token is compared, each
        in constant time, so the time taken does not say which one nearly matched."""
        problem = self._load()
        if problem != self._reported and problem is not None:
            logger.error("token file %s: %s; every request is refused until it is fixed", self.path, problem)
        self._reported = problem
        if problem is not None:
            return None
        given = presented.encode("utf-8", "surrogateescape")
        found: bytes | None = None
        for token in self._tokens:
            if hmac.compare_digest(given, token):
                found = token
        return None if found is None else _credential(found)

    async def verify_token(self, token: str) -> AccessToken | None:
        name = self.credential(token)
        return None if name is None else AccessToken(token=name, client_id=name, scopes=[])


def _parse(text: bytes) -> tuple[str | None, tuple[bytes, ...]]:
    tokens = [line.strip() for line in text.splitlines()]
    tokens = [token for token in tokens if token and not token.startswith(b"#")]
    short = [token for token in tokens if len(token) < MIN_TOKEN_CHARS]
    if short or not tokens:
        return (
            f"each token must be at least {MIN_TOKEN_CHARS} characters of secret randomness "
            '(make one with: python -c "import secrets; print(secrets.token_urlsafe(32))")'
        ), ()
    return None, tuple(tokens)
