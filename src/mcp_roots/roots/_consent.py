"""Folders by the user's consent: the question, the strict reading of its answer, and the grant ledger.
Pure: no SDK, no I/O; the guarded call asks through its port and builds the roots.
"""

# The choices for a path (its folder and the ancestors up to the ceiling entry, never `/`, a home folder or
# an ancestor of one unless allowed), the access to offer, the question's text and its elicitation params
# (a flat form: folder and access as string enums), the strict reading of an answer, and the ledger: per key
# (a legacy connection, a principal, a process), its grants, its declined folders, one question in flight,
# a token bucket of questions on the injectable clock, and the sealed requestState of a 2026-07-28 question.

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from ..paths._root import ACCESSES, Access
from ..paths._text import for_reader
from ._clock import Clock
from ._facts import CONSENT_INPUT_KEY

__all__ = [
    "ACCEPT",
    "ACCESSES",
    "CANCEL",
    "CONSENT_INPUT_KEY",
    "DECLINE",
    "INVALID",
    "READ",
    "READ_WRITE",
    "RESOURCES_READ",
    "TOOLS_CALL",
    "Answer",
    "ConsentConfig",
    "ConsentLedger",
    "Grant",
    "Question",
    "access_choices",
    "folder_choices",
    "read_answer",
    "shown",
]

READ: Access = "read"
"""A grant's access: read only (every write beneath it refused, by the path layer)."""
READ_WRITE: Access = "read-write"
"""A grant's access: read and write."""

TOOLS_CALL, PROMPTS_GET, RESOURCES_READ = "tools/call", "prompts/get", "resources/read"
"""The methods a question is asked for (a 2026-07-28 answer is bound to its method)."""


_MAX_CHOICES = 12  # folders offered in one question (the narrowest first)
_MAX_NAME = 200  # characters of one name in the question's text
_MAX_KEYS = 4096  # keys the ledger keeps (the oldest forgotten first)
_MAX_GRANTS = 64  # grants per key (the oldest forgotten first)
_MAX_DECLINED = 256  # declined folders remembered per key
_MAX_SPENT = 4096  # spent requestState nonces remembered, each until its expiry (past it: refused)


def shown(text: str, most: int = _MAX_NAME) -> str:
    """``text`` as a consent question shows it: :func:`~mcp_roots.paths._text.for_reader` (control and bidi
    characters escaped, so a name cannot hide or reorder the rest), at most ``most`` characters."""
    return for_reader(text, most)


@dataclass(frozen=True)
class ConsentConfig:
    """The operator's bounds on consent.

    Args:
        timeout: Seconds a legacy question waits for the user's answer before the call is refused.
        per_minute: Questions a minute per key, whatever the model does (a token bucket).
        lifetime: Seconds a 2026-07-28 grant lasts (per principal or per process).
        state_lifetime: Seconds a 2026-07-28 question's ``requestState`` may be answered.
        allow_home: Offer the home folder and its ancestors (never ``/``).
        server: The server's name, shown in the question.
    """

    timeout: float = 120.0
    per_minute: int = 3
    lifetime: float = 8 * 3600.0
    state_lifetime: float = 600.0
    allow_home: bool = False
    server: str = "this server"

    def __post_init__(self) -> None:
        if self.timeout <= 0 or self.lifetime <= 0 or self.state_lifetime <= 0 or self.per_minute < 1:
            raise ValueError("consent: timeout, lifetime and state_lifetime > 0 s, per_minute >= 1")


def folder_choices(
    start: str, ceiling_entry: str, *, homes: Sequence[str] = (), allow_home: bool = False
) -> tuple[str, ...]:
    """The folders a question for a path in ``start`` (a canonical folder inside the canonical
    ``ceiling_entry``) offers: ``start`` and its ancestors up to ``ceiling_entry``, narrowest first, never
    ``/``, nor one of ``homes`` or an ancestor of one unless ``allow_home``; nothing when ``start`` is
    outside."""
    folder, top = PurePosixPath(start), PurePosixPath(ceiling_entry)
    if folder != top and top not in folder.parents:
        return ()
    home_paths = [PurePosixPath(home) for home in homes]
    found: list[str] = []
    for candidate in (folder, *folder.parents):
        if len(found) == _MAX_CHOICES:
            break
        root = candidate == PurePosixPath("/")
        at_home = any(candidate == home or candidate in home.parents for home in home_paths)
        if not root and not (at_home and not allow_home):
            found.append(str(candidate))
        if candidate == top:
            break
    return tuple(found)


def access_choices(writes: bool) -> tuple[str, ...]:
    """The accesses offered: read only for a tool that only reads, else read-write first, then read."""
    return (READ_WRITE, READ) if writes else (READ,)


@dataclass(frozen=True)
class Question:
    """One question to the user: may ``server``'s ``tool`` (a tool or prompt; for a ``resources/read``,
    the resource's URI) use one of ``folders`` with one of ``accesses`` (for ``path``), in this session,
    asked for a request of ``method``."""

    server: str
    tool: str
    path: str
    folders: tuple[str, ...]
    accesses: tuple[str, ...]
    method: str = TOOLS_CALL

    def message(self) -> str:
        """The question's text, every name escaped and bounded (:func:`shown`)."""
        verb = "read and write" if READ_WRITE in self.accesses else "read"
        pick = (
            f"Allow it for this session? Pick the folder (the narrowest is {shown(self.folders[0])}) and the "
            "access."
        )
        if self.method == RESOURCES_READ:
            return (
                f"The MCP server {shown(self.server, 80)} asks to read files in a folder for a read of the "
                f"resource {shown(self.tool)}, the path {shown(self.path)}. {pick}"
            )
        what = "prompt" if self.method == PROMPTS_GET else "tool"
        return (
            f"The MCP server {shown(self.server, 80)} asks to {verb} files in a folder for its {what} "
            f"{shown(self.tool, 80)}, which was called with the path {shown(self.path)}. {pick}"
        )

    def params(self) -> dict[str, object]:
        """The ``elicitation/create`` params (form mode): the message and a flat schema whose folder and
        access are string enums (shown escaped as their titles, answered by value)."""
        return {
            "mode": "form",
            "message": self.message(),
            "requestedSchema": {
                "type": "object",
                "properties": {
                    "folder": {
                        "type": "string",
                        "title": "Folder",
                        "enum": list(self.folders),
                        "enumNames": [shown(f) for f in self.folders],
                        "default": self.folders[0],
                    },
                    "access": {
                        "type": "string",
                        "title": "Access",
                        "enum": list(self.accesses),
                        "default": self.accesses[0],
                    },
                },
                "required": ["folder", "access"],
            },
        }

    def digest(self) -> str:
        """What the question was, as a short hash (a 2026-07-28 answer is bound to it)."""
        text = json.dumps([self.method, self.server, self.tool, list(self.folders), list(self.accesses)])
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


ACCEPT, DECLINE, CANCEL, INVALID = "accept", "decline", "cancel", "invalid"


@dataclass(frozen=True)
class Answer:
    """The user's answer as read: ``action`` is ``accept`` (with ``folder`` and ``access`` among the
    question's choices), ``decline``, ``cancel``, or ``invalid`` (``why`` says what was wrong)."""

    action: str
    folder: str | None = None
    access: str | None = None
    why: str = ""


def read_answer(raw: object, question: Question) -> Answer:
    """Read an ``ElicitResult`` strictly: an accept whose folder and access are not among the choices, or
    any other shape, is ``invalid`` (refused, never widened)."""
    if not isinstance(raw, Mapping):
        return Answer(INVALID, why="the answer is not an object")
    action = raw.get("action")
    if action in (DECLINE, CANCEL):
        return Answer(str(action))
    if action != ACCEPT:
        return Answer(INVALID, why="the answer's action is not accept, decline or cancel")
    content = raw.get("content")
    if not isinstance(content, Mapping):
        return Answer(INVALID, why="the accepted answer has no content")
    folder, access = content.get("folder"), content.get("access")
    if not isinstance(folder, str) or folder not in question.folders:
        return Answer(INVALID, why="the folder answered is not one of the folders offered")
    if not isinstance(access, str) or access not in question.accesses:
        return Answer(INVALID, why="the access answered is not one of the accesses offered")
    return Answer(ACCEPT, folder, access)


@dataclass(frozen=True)
class Grant:
    """A folder the user granted, with its access; ``expires`` on the ledger's clock (None: with its key)."""

    folder: str
    access: str
    expires: float | None = None


@dataclass
class _Entry:
    grants: OrderedDict[str, Grant] = field(default_factory=OrderedDict)
    declined: OrderedDict[str, None] = field(default_factory=OrderedDict)
    asking: bool = False
    tokens: float = 0.0
    stamp: float = 0.0


class ConsentLedger:
    """The grants, declined folders and questions of every key (a legacy connection, a principal, a
    process), bounded; ``clock`` is the injectable time (``roots._clock``; a test's manual clock)."""

    def __init__(self, config: ConsentConfig, clock: Clock, secret: bytes | None = None) -> None:
        self.config = config
        self.clock = clock
        self._secret = secret if secret is not None else secrets.token_bytes(32)
        self._entries: OrderedDict[object, _Entry] = OrderedDict()
        self._spent: OrderedDict[str, float] = OrderedDict()

    def _entry(self, key: object) -> _Entry:
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = _Entry(tokens=float(self.config.per_minute), stamp=self.clock.now())
            while len(self._entries) > _MAX_KEYS:  # the least recently asked or granted forgotten first
                self._entries.popitem(last=False)
        else:
            self._entries.move_to_end(key)
        return entry

    # -- grants --

    def grants(self, key: object) -> tuple[Grant, ...]:
        """The grants in force for ``key`` (expired ones dropped)."""
        entry = self._entries.get(key)
        if entry is None:
            return ()
        now = self.clock.now()
        for folder in [f for f, g in entry.grants.items() if g.expires is not None and g.expires <= now]:
            del entry.grants[folder]
        return tuple(entry.grants.values())

    def grant(self, key: object, folder: str, access: str, *, lasting: bool) -> Grant:
        """Record ``folder`` granted with ``access`` for ``key``; ``lasting``: for the configured lifetime
        (2026-07-28), else for as long as the key (a legacy connection). Undeclines the folder."""
        if access not in ACCESSES:
            raise ValueError(f"consent: access must be one of {ACCESSES}, not {access!r}")
        entry = self._entry(key)
        expires = self.clock.now() + self.config.lifetime if lasting else None
        entry.grants.pop(folder, None)
        entry.grants[folder] = made = Grant(folder, access, expires)
        entry.declined.pop(folder, None)
        while len(entry.grants) > _MAX_GRANTS:
            entry.grants.popitem(last=False)
        return made

    def revoke(self, key: object, folder: str | None = None) -> int:
        """Withdraw ``key``'s grant of ``folder`` (None: every grant); the number withdrawn."""
        entry = self._entries.get(key)
        if entry is None:
            return 0
        if folder is None:
            count = len(entry.grants)
            entry.grants.clear()
            return count
        return 1 if entry.grants.pop(folder, None) is not None else 0

    def keys(self) -> tuple[object, ...]:
        """Every key with a grant in force."""
        return tuple(key for key in list(self._entries) if self.grants(key))

    def forget(self, key: object) -> None:
        """``key`` ended (a legacy connection closed): its grants and declines go with it."""
        self._entries.pop(key, None)

    # -- questions --

    def declined(self, key: object, folder: str) -> bool:
        """Whether the user declined ``folder`` for ``key`` already (not asked again)."""
        entry = self._entries.get(key)
        return entry is not None and folder in entry.declined

    def decline(self, key: object, folder: str) -> None:
        """The user declined a question whose narrowest folder is ``folder``; a grant of it is withdrawn."""
        entry = self._entry(key)
        entry.declined[folder] = None
        entry.grants.pop(folder, None)
        while len(entry.declined) > _MAX_DECLINED:
            entry.declined.popitem(last=False)

    def may_ask(self, key: object, *, hold: bool = True) -> str | None:
        """None when a question may go to ``key``'s user now (it is counted; ``hold``: it is the one in
        flight until :meth:`done`), else why not, in words for the refusal."""
        entry = self._entry(key)
        if entry.asking:
            return "another question to the user is waiting for an answer; answer it, then call again"
        now = self.clock.now()
        rate = self.config.per_minute / 60.0
        entry.tokens = min(float(self.config.per_minute), entry.tokens + (now - entry.stamp) * rate)
        entry.stamp = now
        if entry.tokens < 1:
            wait = (1 - entry.tokens) / rate
            return (
                f"at most {self.config.per_minute} questions a minute are asked; the next may be asked in "
                f"{wait:.0f} s"
            )
        entry.tokens -= 1
        entry.asking = hold
        return None

    def done(self, key: object) -> None:
        """The question :meth:`may_ask` allowed for ``key`` was answered (or failed)."""
        entry = self._entries.get(key)
        if entry is not None:
            entry.asking = False

    # -- the sealed state of a 2026-07-28 question --

    def seal(self, question: Question, *, principal: str | None, method: str) -> str:
        """The ``requestState`` of a 2026-07-28 question: bound to the question, the principal, the
        method, a short lifetime and a nonce, and signed (HMAC-SHA256 with this ledger's secret)."""
        body = {
            "q": question.digest(),
            "p": principal,
            "m": method,
            "e": self.clock.now() + self.config.state_lifetime,
            "n": secrets.token_hex(12),
        }
        data = base64.urlsafe_b64encode(json.dumps(body, separators=(",", ":")).encode()).decode()
        return f"{data}.{self._sign(data)}"

    def open(self, state: object, question: Question, *, principal: str | None, method: str) -> str | None:
        """None when ``state`` is a :meth:`seal` of this ``question`` for this principal and method, still
        fresh and never used before (it is spent now); else why not."""
        if not isinstance(state, str) or state.count(".") != 1 or len(state) > 2048:
            return "the answer's requestState is missing or malformed"
        data, mac = state.split(".")
        if not hmac.compare_digest(mac, self._sign(data)):
            return "the answer's requestState was not made by this server"
        try:
            body = json.loads(base64.urlsafe_b64decode(data.encode()))
        except ValueError:
            return "the answer's requestState is malformed"
        now = self.clock.now()
        if not isinstance(body, dict) or not isinstance(body.get("e"), (int, float)) or body["e"] <= now:
            return "the question this answer is for has expired; call again"
        if body.get("q") != question.digest() or body.get("m") != method or body.get("p") != principal:
            return "the answer is for another question, caller or method"
        nonce = body.get("n")
        for old in [n for n, expires in self._spent.items() if expires <= now]:
            del self._spent[old]
        if not isinstance(nonce, str) or nonce in self._spent:
            return "the answer was used already"
        if len(self._spent) >= _MAX_SPENT:  # never forgotten before its expiry: a forgotten one could replay
            return "too many answers arrived in the last minutes; call again later"
        self._spent[nonce] = float(body["e"])
        return None

    def _sign(self, data: str) -> str:
        return hmac.new(self._secret, data.encode(), hashlib.sha256).hexdigest()
