"""file:// URIs to local paths and back.
Pure string work, no I/O.
"""

# Decoding is strict: exactly one round of percent-decoding, UTF-8 only, and the encoded forms that smuggle
# separators or NUL are refused rather than interpreted.

from __future__ import annotations

import os
import re
import string
from collections.abc import Mapping
from pathlib import PurePosixPath, PureWindowsPath
from typing import Any

from ..errors import InvalidPath, InvalidRootURI
from ._text import control_character, describe

__all__ = ["is_file_uri", "path_to_uri", "uri_and_name", "uri_to_path"]


def is_file_uri(text: str) -> bool:
    """Whether ``text`` names the ``file:`` scheme (schemes compare without case, RFC 3986 3.1): the one
    test of which resources/read URIs and resource templates are checked as paths."""
    return text[:5].lower() == "file:"


_HEX = frozenset(string.hexdigits)
# Bytes that a URI path may never carry in decoded form: they would change which path is meant.
_FORBIDDEN_DECODED = {
    0x2F: "an encoded '/' (%2F)",
    0x5C: "an encoded '\\' (%5C)",
    0x00: "an encoded NUL (%00)",
}
_DRIVE = re.compile(r"^/([A-Za-z]):(/|$)")
# Characters left as they are by path_to_uri (RFC 3986 pchar minus '%', plus '/').
_SAFE = frozenset(string.ascii_letters + string.digits + "-._~!$&'()*+,;=:@/")


def _refuse(uri: str, rule: str) -> InvalidRootURI:
    return InvalidRootURI(f"invalid root URI {uri!r}: {rule}")


def _percent_decode(uri: str, encoded: str) -> str:
    """Decode %XX escapes once; refuse malformed escapes, invalid UTF-8 and smuggled separators/NUL."""
    out = bytearray()
    i = 0
    n = len(encoded)
    while i < n:
        ch = encoded[i]
        if ch == "%":
            pair = encoded[i + 1 : i + 3]
            if len(pair) != 2 or not (pair[0] in _HEX and pair[1] in _HEX):
                raise _refuse(uri, f"'%' at offset {i} of the path is not followed by two hex digits")
            byte = int(pair, 16)
            if byte in _FORBIDDEN_DECODED:
                raise _refuse(uri, f"the path contains {_FORBIDDEN_DECODED[byte]}")
            out.append(byte)
            i += 3
        else:
            out += ch.encode("utf-8", "surrogatepass")
            i += 1
    try:
        return out.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _refuse(uri, f"the percent-decoded path is not valid UTF-8 ({exc.reason})") from None


def uri_to_path(uri: str, *, windows: bool | None = None) -> str:
    """Return the local path a ``file:`` URI names, or raise :class:`InvalidRootURI` naming the rule broken.

    Accepted: ``file:///p``, ``file://localhost/p`` (host case-insensitive) and ``file:/p``. Refused: any
    other scheme or host (UNC ``file:////server/share`` included), user info, ports, queries, fragments,
    malformed or double-meaning escapes (``%2F``, ``%5C``, ``%00``), invalid UTF-8, control characters, a
    raw backslash, and ``.``/``..`` segments.

    Args:
        uri: The URI, as a client sent it.
        windows: Map ``file:///C:/x`` to ``C:\\x`` (default: this host is Windows); on POSIX such a path
            stays ``/C:/x``.
    """
    if windows is None:
        windows = os.name == "nt"
    if not isinstance(uri, str):
        raise InvalidRootURI(f"invalid root URI {uri!r}: a URI must be a string, not {type(uri).__name__}")
    if not uri:
        raise InvalidRootURI("invalid root URI '': the URI is empty")
    scheme, sep, rest = uri.partition(":")
    if not sep or scheme.lower() != "file":
        shown = scheme if sep else uri
        raise _refuse(uri, f"only file: URIs name local roots (scheme is {shown!r})")
    if "?" in rest:
        raise _refuse(uri, "a root URI may not have a query ('?')")
    if "#" in rest:
        raise _refuse(uri, "a root URI may not have a fragment ('#')")
    ch = control_character(rest)
    if ch is not None:
        raise _refuse(uri, f"the URI contains the control character {ch!r}")
    if "\\" in rest:
        raise _refuse(uri, "the URI contains a raw backslash; separators must be '/'")
    if rest.startswith("//"):
        authority, slash, path = rest[2:].partition("/")
        path = slash + path
        if authority and authority.lower() != "localhost":
            raise _refuse(
                uri, f"the host {authority!r} is not local (only an empty host or 'localhost' is allowed)"
            )
    else:
        path = rest
    if not path.startswith("/"):
        raise _refuse(uri, "the path must be absolute")
    if path.startswith("//"):
        raise _refuse(uri, "UNC and network paths ('//' after the authority) are not local roots")
    decoded = _percent_decode(uri, path)
    segments = decoded.split("/")
    if any(seg in (".", "..") for seg in segments):
        raise _refuse(uri, "the path contains a '.' or '..' segment")
    if windows:
        m = _DRIVE.match(decoded)
        if not m:
            raise _refuse(uri, "on Windows a file URI path must start with a drive letter (file:///C:/...)")
        if ":" in decoded[3:]:
            # 'C:\\file:stream' names an NTFS alternate data stream, not a file or directory.
            raise _refuse(uri, "a ':' after the drive letter names an NTFS alternate data stream")
        return str(PureWindowsPath(m.group(1).upper() + ":\\" + decoded[3:].lstrip("/")))
    return decoded


def path_to_uri(path: str | os.PathLike[str], *, windows: bool | None = None) -> str:
    """Return the ``file://`` URI of an absolute local path, percent-encoding what RFC 3986 requires.

    The result always satisfies :func:`uri_to_path` and maps back to ``path``; a path it could not round
    trip (a '.' or '..' segment, a backslash or undecodable bytes in a POSIX name, NUL) raises
    :class:`InvalidPath` instead of producing a URI the guard itself would refuse.

    Args:
        path: An absolute local path.
        windows: Whether it is a Windows path (default: this host is Windows).
    """
    if windows is None:
        windows = os.name == "nt"
    raw = os.fspath(path)
    if not isinstance(raw, str):
        raise TypeError(f"path_to_uri needs a str path, not {type(raw).__name__}")
    if "\x00" in raw:
        raise InvalidPath(f"path {raw!r} contains a NUL byte")
    if windows:
        wp = PureWindowsPath(raw)
        if not wp.drive or not wp.root or wp.drive.startswith("\\\\"):
            raise InvalidPath(f"path {raw!r} is not an absolute drive path")
        text = "/" + wp.as_posix()
        if ":" in text[3:]:
            raise InvalidPath(f"path {raw!r} names an NTFS alternate data stream (':' after the drive)")
    else:
        if not PurePosixPath(raw).is_absolute():
            raise InvalidPath(f"path {raw!r} is not absolute")
        if "\\" in raw:
            raise InvalidPath(f"path {raw!r} contains a backslash, which a file: URI may not encode (%5C)")
        text = raw
        if text.startswith("//"):
            text = "/" + text.lstrip("/")
    if any(seg in (".", "..") for seg in text.split("/")):
        raise InvalidPath(f"path {raw!r} has a '.' or '..' segment; give a normalized path")
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidPath(f"path {raw!r} is not valid UTF-8, which a file: URI requires") from None
    encoded = "".join(chr(b) if chr(b) in _SAFE else f"%{b:02X}" for b in data)
    return "file://" + encoded


def uri_and_name(item: object) -> tuple[str, str | None]:
    """The ``uri`` and ``name`` of a root as a client or a config gives it: a URI string, a mapping with
    ``uri``/``name``, or an object with those attributes (the SDK's ``Root``, mcp_roots' ``Root``)."""
    if isinstance(item, str):
        return item, None
    if isinstance(item, Mapping):
        uri: Any = item.get("uri")
        name: Any = item.get("name")
    else:
        uri = getattr(item, "uri", None)
        name = getattr(item, "name", None)
    if uri is None:
        raise InvalidRootURI(f"invalid root {describe(item)}: it has no 'uri'")
    if not isinstance(uri, str):
        uri = str(uri)  # pydantic FileUrl and friends
    if name is not None and not isinstance(name, str):
        raise InvalidRootURI(f"invalid root {describe(item)}: 'name' must be a string")
    return uri, name
