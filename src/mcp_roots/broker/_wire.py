"""The files/* messages as pydantic models.
Both ends validate against them: one definition (docs/brokering.md, section 5).
"""

# Strict: no "5" for 5, no 1 for True. Numbers a peer sends are bounded here (an offset past 2**63 is
# INVALID_PARAMS, never an OverflowError further down). Unknown fields are ignored, as MCP's own types do.

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from ..errors import BrokerError
from ._protocol import DEFAULT_CHUNK_SIZE, broker_error

__all__ = [
    "ChangeEvent",
    "ChangedParams",
    "ConsentParams",
    "ConsentResult",
    "CreateParams",
    "CreateResult",
    "DeleteParams",
    "Entry",
    "ListParams",
    "ListResult",
    "PathRef",
    "ReadParams",
    "ReadResult",
    "RenameParams",
    "StatResult",
    "UnwatchParams",
    "WatchParams",
    "WatchResult",
    "WriteParams",
    "WriteResult",
    "dump",
    "parse",
]

MAX_OFFSET = 2**63 - 1
"""The largest byte offset or length either end accepts (the kernel's off_t)."""

MAX_CURSOR_DIGITS = 12

Offset = Annotated[int, Field(ge=0, le=MAX_OFFSET)]
Count = Annotated[int, Field(ge=0, le=MAX_OFFSET)]
Encoding = Literal["base64", "utf-8"]
Kind = Literal["file", "directory", "symlink", "other"]
Access = Literal["read", "write"]

PATH_FIELDS = frozenset({"path", "newPath"})
"""A malformed value here is INVALID_PATH rather than INVALID_PARAMS."""


class Message(BaseModel):
    """Base of every files/* message: camelCase on the wire, strict types, unknown fields ignored."""

    model_config = ConfigDict(
        strict=True, frozen=True, extra="ignore", populate_by_name=True, alias_generator=to_camel
    )


class PathRef(Message):
    """A path as the protocol names it: a root by URI (None: the first root) and a relative path."""

    path: str
    root: str | None = None


class ReadParams(PathRef):
    offset: Offset = 0
    length: Count = DEFAULT_CHUNK_SIZE
    encoding: Encoding = "base64"


class ReadResult(Message):
    content: str
    encoding: Encoding = "base64"
    offset: Offset
    bytes_read: Count
    size: Count
    eof: bool
    etag: str
    mtime: float


class WriteParams(Message):
    """The first chunk names the target (``path``); later chunks name the ``upload_id`` it answered."""

    content: str
    encoding: Encoding = "base64"
    path: str | None = None
    root: str | None = None
    upload_id: str | None = None
    offset: Offset | None = None
    more: bool = False
    if_match: str | None = None
    create_only: bool = False


class WriteResult(Message):
    bytes_written: Count
    upload_id: str | None = None
    etag: str | None = None
    mtime: float | None = None
    size: Count | None = None


class ListParams(PathRef):
    cursor: Annotated[str, Field(pattern=f"^[0-9]{{1,{MAX_CURSOR_DIGITS}}}$")] | None = None


class Entry(Message):
    name: str
    type: Kind
    size: Count
    mtime: float


class ListResult(Message):
    entries: list[Entry]
    next_cursor: str | None = None


class CreateParams(PathRef):
    type: Literal["file", "directory"]
    parents: bool = False


class CreateResult(Message):
    etag: str
    mtime: float


class DeleteParams(PathRef):
    recursive: bool = False
    if_match: str | None = None


class RenameParams(PathRef):
    new_path: str
    new_root: str | None = None
    overwrite: bool = False


class StatResult(Message):
    type: Kind
    size: Count
    mtime: float
    etag: str


class WatchParams(PathRef):
    recursive: bool = False


class WatchResult(Message):
    watch_id: str


class UnwatchParams(Message):
    watch_id: str


class ConsentParams(Message):
    message: Annotated[str, Field(min_length=1, max_length=4000)]
    # Each item is checked on its own: one the host cannot map is listed in ``denied``, not an error.
    paths: Annotated[list[dict[str, Any]], Field(max_length=1000)] | None = None
    access: Access = "read"


class ConsentResult(Message):
    granted: list[PathRef]
    denied: list[PathRef]
    access: Access


class ChangeEvent(Message):
    root: str | None = None
    path: str
    kind: Literal["created", "modified", "deleted"]


class ChangedParams(Message):
    watch_id: str
    changes: list[ChangeEvent]
    ended: bool = False
    reason: str | None = None


_M = TypeVar("_M", bound=Message)


def parse(model: type[_M], raw: object, *, what: str = "params") -> _M:
    """``raw`` as ``model``, or a BrokerError naming the field and the rule it broke: INVALID_PATH for a
    path field, INVALID_PARAMS otherwise (decided by the error's location, never its text)."""
    try:
        return model.model_validate(raw if raw is not None else {})
    except ValidationError as exc:
        raise error_of(exc, what) from None


def error_of(exc: ValidationError, what: str = "params") -> BrokerError:
    """The protocol error for a failed validation (see :func:`parse`)."""
    first = exc.errors(include_url=False, include_input=False)[0]
    location = ".".join(str(part) for part in first["loc"]) or what
    reason: Literal["INVALID_PATH", "INVALID_PARAMS"] = (
        "INVALID_PATH" if first["loc"] and first["loc"][0] in PATH_FIELDS else "INVALID_PARAMS"
    )
    return broker_error(reason, f"{what}: {location}: {first['msg']}", field=location)


def dump(message: Message) -> dict[str, Any]:
    """``message`` as wire JSON (camelCase, absent optional fields left out)."""
    return message.model_dump(by_alias=True, exclude_none=True)
