"""The key that seals 2026-07-28 multi-round-trip request state, read from a file every replica shares, so
that a call one replica started can be finished by another behind a load balancer.
"""

from pathlib import Path

from mcp.server.mcpserver import RequestStateSecurity

from ..errors import ConfigError

__all__ = ["MIN_KEY_BYTES", "shared_request_state"]

#: A shorter secret could be guessed: 32 bytes is the key size of the AES-256-GCM that seals the state.
MIN_KEY_BYTES = 32


def shared_request_state(path: str | Path) -> RequestStateSecurity:
    """The request-state policy of every replica that reads the same secret from ``path`` (surrounding
    whitespace ignored). Raises ``ConfigError`` naming the file if it cannot be read or holds fewer than
    32 bytes.

    Args:
        path: The file holding the shared secret (at least 32 bytes).
    """
    try:
        secret = Path(path).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError(f"state key file {path}: cannot read it: {reason}") from None
    if len(secret.encode()) < MIN_KEY_BYTES:
        raise ConfigError(
            f"state key file {path}: the key must be at least {MIN_KEY_BYTES} bytes of secret randomness "
            '(make one with: python -c "import secrets; print(secrets.token_hex(32))")'
        )
    return RequestStateSecurity(keys=[secret])
