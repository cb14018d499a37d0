"""Client-brokered filesystem access (the ``files/*`` methods of the SEP-1708 draft, as mcp-roots fixes
them; see docs/brokering.md). Legacy protocol era only: the server's requests ride the back-channel."""

from ..errors import BrokerError, BrokeringUnavailable
from . import _protocol as protocol
from ._host import ConsentItem, FileBroker, FileConsentRequest
from ._protocol import (
    CAPABILITY,
    DEFAULT_CHUNK_SIZE,
    DEFAULT_MAX_FILE,
    DEFAULT_TIMEOUT,
    ERROR_CODES,
    METHODS,
    NOTIFICATION_CHANGED,
    broker_error,
    check_relative_path,
    decode_content,
    encode_content,
    offers_brokering,
)
from ._server import BrokeredFiles, ConsentGrant, DirEntry, FileChange, FileInfo, enable_brokering, files

__all__ = [
    "CAPABILITY",
    "DEFAULT_CHUNK_SIZE",
    "DEFAULT_MAX_FILE",
    "DEFAULT_TIMEOUT",
    "ERROR_CODES",
    "METHODS",
    "NOTIFICATION_CHANGED",
    "BrokerError",
    "BrokeredFiles",
    "BrokeringUnavailable",
    "ConsentGrant",
    "ConsentItem",
    "DirEntry",
    "FileBroker",
    "FileChange",
    "FileConsentRequest",
    "FileInfo",
    "broker_error",
    "check_relative_path",
    "decode_content",
    "enable_brokering",
    "encode_content",
    "files",
    "offers_brokering",
    "protocol",
]
