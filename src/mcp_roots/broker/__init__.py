"""Client-brokered file access: the ``files/*`` methods (see docs/brokering.md).
The host answers with :class:`FileBroker`; a server's tool calls :func:`files`.
Legacy protocol era only: the server's requests ride the back-channel.
"""

# The wire's names, codes and codecs live in ``_protocol``; tests and the benchmarks import them there.
# The errors (BrokerError, BrokeringUnavailable) are mcp_roots' own, in mcp_roots.errors.
from ._host import ConsentItem, FileBroker, FileConsentRequest
from ._protocol import DEFAULT_MAX_FILE
from ._records import ConsentGrant, DirEntry, FileChange, FileInfo
from ._server import BrokeredFiles, enable_brokering, files

__all__ = [
    "DEFAULT_MAX_FILE",
    "BrokeredFiles",
    "ConsentGrant",
    "ConsentItem",
    "DirEntry",
    "FileBroker",
    "FileChange",
    "FileConsentRequest",
    "FileInfo",
    "enable_brokering",
    "files",
]
