"""The files/* protocol as mcp-roots fixes it: names, codes, shapes.
Pure data and codecs; docs/brokering.md is its prose version.
"""

# Pure data and codecs, no I/O and no ``mcp`` import; docs/brokering.md is the prose version of this file.
# The message shapes are the pydantic models of ``_wire``; both ends build on these definitions.

from __future__ import annotations

import base64
import binascii
import os
import sys
from collections.abc import Iterator, Mapping
from typing import Any, Final, Literal

from ..errors import BrokerError
from ..paths._text import NAME_MAX, PATH_MAX, control_character

__all__ = [
    "CAPABILITY",
    "DEFAULT_CHUNK_SIZE",
    "DEFAULT_MAX_FILE",
    "DEFAULT_TIMEOUT",
    "ERROR_CODES",
    "INVALID_PARAMS",
    "MAX_CHUNK_SIZE",
    "MAX_NAME_BYTES",
    "MAX_PATH_BYTES",
    "METHODS",
    "NOTIFICATION_CHANGED",
    "REASONS",
    "broker_error",
    "check_relative_path",
    "chunk_spans",
    "decode_content",
    "encode_content",
    "error_data",
    "error_from_response",
    "etag_of",
    "iter_chunks",
    "offers_brokering",
]

# --- Names -------------------------------------------------------------------------------------------

CAPABILITY: Final = "filesystemBrokering"
"""The key under ``capabilities.roots`` in the client's initialize params: ``{"roots": {"filesystemBrokering":
true}}``."""

READ: Final = "files/read"
WRITE: Final = "files/write"
LIST: Final = "files/list"
CREATE: Final = "files/create"
DELETE: Final = "files/delete"
RENAME: Final = "files/rename"
STAT: Final = "files/stat"
WATCH: Final = "files/watch"
UNWATCH: Final = "files/unwatch"
CONSENT: Final = "files/consent"

METHODS: Final = frozenset({READ, WRITE, LIST, CREATE, DELETE, RENAME, STAT, WATCH, UNWATCH, CONSENT})
"""Every request method of the protocol (server -> client)."""

NOTIFICATION_CHANGED: Final = "notifications/files/changed"
"""Client -> server: changes seen under a ``files/watch``."""

DEFAULT_CHUNK_SIZE: Final = 1024 * 1024
"""Raw bytes per ``files/read`` / ``files/write`` chunk unless the request says otherwise (1 MiB)."""

MAX_CHUNK_SIZE: Final = 8 * 1024 * 1024
"""The largest chunk a host must accept in one request; larger requests get ``QUOTA_EXCEEDED``."""

MAX_PATH_BYTES: Final = PATH_MAX
"""A protocol path must be shorter than this many UTF-8 bytes (Linux's PATH_MAX)."""

MAX_NAME_BYTES: Final = NAME_MAX
"""One name (a path segment) may hold at most this many UTF-8 bytes (Linux's NAME_MAX). Bytes, never
characters: 63 four-byte characters (252 bytes) are a legal name, 256 ASCII characters are not."""

DEFAULT_MAX_FILE: Final = 1024 * 1024 * 1024
"""A host's default file limit (mcp-roots' ``FileBroker(max_file=)``): the bytes of one file a server may
read or upload; larger is ``QUOTA_EXCEEDED`` with ``kind: "file"``. A host raises it (or passes None)."""

DEFAULT_TIMEOUT: Final = 60.0
"""Seconds a server waits for one ``files/*`` answer, and a host allows one operation, by default."""

# --- Errors ------------------------------------------------------------------------------------------

ERROR_CODES: Final[Mapping[str, int]] = {
    # The draft numbered FILE_LOCKED -32100, which lies inside JSON-RPC's reserved -32768..-32000; this
    # project moves the block to -31100..-31107 (application space) and keeps FILE_LOCKED's slot
    # reserved, since it implements no locks.
    "FILE_LOCKED": -31100,
    "FILE_NOT_FOUND": -31101,
    "PERMISSION_DENIED": -31102,
    "INVALID_PATH": -31103,
    "IO_ERROR": -31104,
    "TIMEOUT": -31105,
    "CONCURRENCY_CONFLICT": -31106,
    "QUOTA_EXCEEDED": -31107,
}
"""JSON-RPC error code of each reason: outside JSON-RPC's reserved range and clear of every code MCP
and the SDK use."""

INVALID_PARAMS: Final = -32602
"""Malformed params that are not a path problem (bad encoding, missing field) keep JSON-RPC's own code,
with reason ``INVALID_PARAMS``."""

REASONS: Final[Mapping[int, str]] = {
    **{code: reason for reason, code in ERROR_CODES.items()},
    INVALID_PARAMS: "INVALID_PARAMS",
}

Reason = Literal[
    "FILE_LOCKED",
    "FILE_NOT_FOUND",
    "PERMISSION_DENIED",
    "INVALID_PATH",
    "IO_ERROR",
    "TIMEOUT",
    "CONCURRENCY_CONFLICT",
    "QUOTA_EXCEEDED",
    "INVALID_PARAMS",
]


def broker_error(reason: Reason, message: str, **data: object) -> BrokerError:
    """A :class:`BrokerError` for ``reason`` with its code; ``data`` joins ``error.data``."""
    code = INVALID_PARAMS if reason == "INVALID_PARAMS" else ERROR_CODES.get(reason)
    if code is None:
        raise ValueError(f"unknown files/* error reason {reason!r}; known: {', '.join(REASONS.values())}")
    return BrokerError(message, reason=reason, code=code, data=dict(data))


def error_data(error: BrokerError) -> dict[str, Any]:
    """The JSON-RPC ``error`` object (``code``, ``message``, ``data`` with ``reason``) for ``error``."""
    return {"code": error.code, "message": error.message, "data": dict(error.data)}


def error_from_response(code: int, message: str, data: object = None) -> BrokerError:
    """Rebuild a :class:`BrokerError` from a JSON-RPC error a host answered.

    ``data.reason`` wins when it names a known reason; otherwise the code decides; an error that is
    neither (say -32601 from a client without the protocol) keeps its code under reason ``IO_ERROR``.
    """
    details = dict(data) if isinstance(data, Mapping) else {}
    reason = details.pop("reason", None)
    if not (isinstance(reason, str) and reason in REASONS.values()):
        reason = REASONS.get(code, "IO_ERROR")
    return BrokerError(message, reason=reason, code=code, data=details)


# --- Capability ----------------------------------------------------------------------------------------


def offers_brokering(raw_capabilities: object) -> bool:
    """Whether raw initialize capabilities (the JSON object, not the SDK's typed model, which drops the
    key) carry ``roots.filesystemBrokering: true``. Only the literal ``true`` counts."""
    if not isinstance(raw_capabilities, Mapping):
        return False
    roots = raw_capabilities.get("roots")
    return isinstance(roots, Mapping) and roots.get(CAPABILITY) is True


# --- Paths ---------------------------------------------------------------------------------------------


def check_relative_path(path: object) -> str:
    """Return ``path`` in canonical relative form ('' for the root itself), or raise ``INVALID_PATH``.

    A protocol path is relative and lexical: no leading '/', no drive, no '\\', no NUL or control
    character, no '..' segment, shorter than PATH_MAX and no name over NAME_MAX, both counted in UTF-8
    bytes. '.' and empty segments are dropped. This is only the wire check; the
    host still resolves the result beneath the root with the race-free RootSet operations, which is what
    stops symlinks.
    """
    if not isinstance(path, str):
        raise broker_error("INVALID_PATH", f"path {path!r} is not a string", path=repr(path))
    if len(path.encode("utf-8", "surrogatepass")) >= MAX_PATH_BYTES:
        raise broker_error(
            "INVALID_PATH", f"path {path[:80]!r}... is longer than {MAX_PATH_BYTES - 1} bytes", path=path[:80]
        )
    ch = control_character(path)
    if ch is not None:
        raise broker_error("INVALID_PATH", f"path {path!r} contains the control character {ch!r}", path=path)
    if "\\" in path:
        raise broker_error("INVALID_PATH", f"path {path!r} contains '\\'; separators are '/'", path=path)
    if path.startswith("/") or (len(path) >= 2 and path[1] == ":" and path[0].isalpha()):
        raise broker_error(
            "INVALID_PATH", f"path {path!r} is absolute; paths are relative to an approved root", path=path
        )
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise broker_error("INVALID_PATH", f"path {path!r} contains a '..' segment", path=path)
    for name in parts:
        if len(name) > MAX_NAME_BYTES // 4 and len(name.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
            raise broker_error(
                "INVALID_PATH",
                f"path {path[:80]!r}: the name {name[:40]!r}... is too long "
                f"(more than {MAX_NAME_BYTES} bytes)",
                path=path[:80],
            )
    return "/".join(parts)


# --- Content and chunks --------------------------------------------------------------------------------


def encode_content(data: bytes, encoding: str = "base64") -> str:
    """Bytes as wire ``content``: standard base64 with padding, or UTF-8 text."""
    if encoding == "base64":
        return base64.b64encode(data).decode("ascii")
    if encoding == "utf-8":
        return data.decode("utf-8")
    raise broker_error("INVALID_PARAMS", f"unknown content encoding {encoding!r}; use 'base64' or 'utf-8'")


def _b64decode_strict(content: str) -> bytes:
    if sys.version_info >= (3, 11):
        # One C pass: strict_mode refuses what validate=True refuses (characters outside the alphabet,
        # whitespace, bad padding) without b64decode's extra regex pass over the text (about 30% faster).
        return binascii.a2b_base64(content, strict_mode=True)
    return base64.b64decode(content.encode("ascii"), validate=True)  # pragma: no cover - Python 3.10


def decode_content(content: object, encoding: object = "base64", *, max_bytes: int = MAX_CHUNK_SIZE) -> bytes:
    """Wire ``content`` back to bytes, strictly (no whitespace, correct padding, standard alphabet).

    Raises ``QUOTA_EXCEEDED`` past ``max_bytes`` (checked before decoding, so an oversized chunk costs
    no memory) and ``INVALID_PARAMS`` for malformed content.
    """
    if not isinstance(content, str):
        raise broker_error("INVALID_PARAMS", f"content must be a string, not {type(content).__name__}")
    if encoding == "base64":
        if len(content) > 4 * ((max_bytes + 2) // 3):
            raise broker_error(
                "QUOTA_EXCEEDED", f"chunk is larger than {max_bytes} bytes", limit=max_bytes, kind="chunk"
            )
        try:
            data = _b64decode_strict(content)
        except (binascii.Error, UnicodeEncodeError, ValueError):
            raise broker_error(
                "INVALID_PARAMS", "content is not valid base64 (standard alphabet, padded)"
            ) from None
    elif encoding == "utf-8":
        try:
            data = content.encode("utf-8")
        except UnicodeEncodeError:
            raise broker_error("INVALID_PARAMS", "content is not valid UTF-8 text (lone surrogate)") from None
    else:
        raise broker_error(
            "INVALID_PARAMS", f"unknown content encoding {encoding!r}; use 'base64' or 'utf-8'"
        )
    if len(data) > max_bytes:
        raise broker_error(
            "QUOTA_EXCEEDED", f"chunk is larger than {max_bytes} bytes", limit=max_bytes, kind="chunk"
        )
    return data


def chunk_spans(size: int, chunk_size: int = DEFAULT_CHUNK_SIZE) -> Iterator[tuple[int, int]]:
    """``(offset, length)`` pairs covering ``size`` bytes in ``chunk_size`` pieces (one empty span for an
    empty file, so a reader always makes at least one request)."""
    if chunk_size <= 0:
        raise ValueError(f"chunk_size must be positive, not {chunk_size}")
    if size < 0:
        raise ValueError(f"size must not be negative, not {size}")
    if size == 0:
        yield (0, 0)
        return
    for offset in range(0, size, chunk_size):
        yield (offset, min(chunk_size, size - offset))


def iter_chunks(data: bytes, chunk_size: int = DEFAULT_CHUNK_SIZE) -> Iterator[bytes]:
    """``data`` in ``chunk_size`` slices (memoryview-backed copies are avoided until each is encoded)."""
    view = memoryview(data)
    for offset, length in chunk_spans(len(data), chunk_size):
        yield bytes(view[offset : offset + length])


def etag_of(st: os.stat_result) -> str:
    """An opaque version tag of a file: device, inode, size and nanosecond mtime and ctime.

    Any write through the file system changes mtime/ctime (or size, or the inode when a file is
    replaced by rename), so a changed file gets a new tag; a coarse-mtime file system could in theory
    hide two writes in one tick with the same size, which is why ctime and the inode are included too.
    """
    return f"{st.st_dev:x}-{st.st_ino:x}-{st.st_size:x}-{st.st_mtime_ns:x}-{st.st_ctime_ns:x}"
