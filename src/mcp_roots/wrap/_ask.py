"""wrap's questions to the user (``--ask``): a tool call naming a path inside the ceiling under no grant asks
a host without roots that declared elicitation; a granted folder joins the roots the next child gets.
"""

# The consent core (questions, the strict reading of answers, the ledger) is the roots layer's; this module
# is wrap's side of it: which host may be asked (legacy era, elicitation declared, no roots declared), which
# paths of a call are worth a question (inside the ceiling, under no root in force), the access offered (read
# only for a tool marked readOnlyHint or under --read-only), the round trip to the host with its bound, and
# the roots a child gets (the connection's roots and the grants in force, each grant with its access).

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio

from .. import Root, RootSet, uri_to_path
from ..errors import InvalidPath, InvalidRootURI, PathOutsideRoots
from ..roots import (
    ConsentConfig,
    ConsentLedger,
    ConsentQuestion,
    access_choices,
    consent_shown,
    folder_choices,
    home_folder,
    read_consent_answer,
)
from ._child import Child, Clock, LoopClock
from ._wire import Message

__all__ = ["AskHost", "Call", "Consent", "call_of", "host_may_be_asked"]

logger = logging.getLogger("mcp_roots.wrap")

AskHost = Callable[[str, Mapping[str, Any]], Awaitable[Message]]
"""How wrap sends a request to the host and gets its answer (a result or an error message, no id)."""
Call = tuple[str, str, bool]
"""A tool call as a question names it: the server's name, the tool's, and whether the tool may write."""

_KEY = "host"  # one host connection per wrap process: the ledger's one key
_MAX_WALK = 64  # parents walked from a path to the folder that exists


def host_may_be_asked(params: Mapping[str, Any]) -> str | None:
    """None when the host of ``initialize`` ``params`` may be asked for folders (it declared elicitation in
    form mode, and no roots: a host that declared roots is the only authority for its folders); else why
    not, in words for a refusal."""
    capabilities = params.get("capabilities")
    capabilities = capabilities if isinstance(capabilities, Mapping) else {}
    if isinstance(capabilities.get("roots"), Mapping):
        return "the host declared roots: its roots are the only folders it grants"
    elicitation = capabilities.get("elicitation")
    if not isinstance(elicitation, Mapping):
        return "the host did not declare elicitation, so wrap cannot ask its user for a folder"
    if "form" not in elicitation and "url" in elicitation:
        return "the host takes only URL-mode elicitation, and a folder question is a form"
    return None


class Consent:
    """One host connection's questions and grants under ``ceiling``."""

    def __init__(
        self,
        ceiling: RootSet,
        config: ConsentConfig,
        ask_host: AskHost,
        *,
        write: bool = True,
        clock: Clock | None = None,
    ) -> None:
        self.ceiling = ceiling
        self.config = config
        self._ask_host = ask_host
        self._write = write
        self._clock: Clock = clock if clock is not None else LoopClock()
        self.ledger = ConsentLedger(config, self._clock.now)
        self.cannot_ask: str | None = "the host has not initialized yet"
        self.declared_roots = False
        self._made: tuple[RootSet | None, tuple[object, ...], RootSet] | None = None
        self._chose_read: set[str] = set()  # folders granted read only where read-write was offered

    def open(self, params: Mapping[str, Any]) -> None:
        """The host's ``initialize`` ``params``: whether it may be asked, once for the connection."""
        self.cannot_ask = host_may_be_asked(params)
        capabilities = params.get("capabilities")
        self.declared_roots = isinstance(capabilities, Mapping) and isinstance(
            capabilities.get("roots"), Mapping
        )
        if self.cannot_ask is not None:
            logger.info("--ask: the user will not be asked for folders: %s", self.cannot_ask)

    def roots(self, base: RootSet | None) -> RootSet:
        """``base`` (the connection's roots in force, None: none) with the grants in force added, each with
        its access; a grant whose folder is gone is left out (said in the log)."""
        grants = self.ledger.grants(_KEY)
        made = self._made
        if made is not None and made[0] is base and made[1] == grants:
            return made[2]
        roots: list[Root] = list(base) if base is not None else []
        for grant in grants:
            try:
                roots.append(Root.from_path(grant.folder, access=grant.access))  # type: ignore[arg-type]
            except (OSError, ValueError, PathOutsideRoots, InvalidPath) as exc:
                logger.warning("the folder granted %s is left out: %s", consent_shown(grant.folder), exc)
        start = base if base is not None else RootSet.empty(source="granted by the user")
        result = start.with_roots(roots) if grants else start
        self._made = (base, grants, result)
        return result

    async def settle(self, call: Call, paths: list[str], in_force: Callable[[], RootSet]) -> str | None:
        """Ask for the folder of each of ``paths`` (the ``call``'s) that lies inside the ceiling and under
        none of ``in_force()``; None when every such path is granted now, else the refusal."""
        server, tool, writes = call
        writes = writes and self._write
        for value in paths:
            spot = self.spot(in_force(), value, writes=writes)
            if spot is None:
                continue
            path, start, top = spot
            if self.cannot_ask is not None:
                return (
                    f"Access denied: {consent_shown(path)} is in no folder granted, and wrap --ask could not "
                    f"ask the user: {self.cannot_ask}"
                )
            why = await self._ask(server, tool, path, start, top, writes)
            if why is not None:
                return why
        return None

    def spot(self, roots: RootSet, value: str, *, writes: bool) -> tuple[str, str, str] | None:
        """(the path, the folder a question starts from, the ceiling entry above it) for a ``value`` that
        is an absolute path (a ``file:`` URI, ``~/...``) inside the ceiling and outside ``roots`` (or, for a
        tool that ``writes``, under a root granted read only); None for anything else (a relative path, one
        inside the roots, one outside the ceiling: never offered)."""
        try:
            if value[:5].lower() == "file:":
                text = str(uri_to_path(value))
            elif value.startswith("~"):
                text = os.path.expanduser(value)
            else:
                text = value
            if not os.path.isabs(text):
                return None
            if roots.contains(text) and (not writes or roots.writable(text) or self._kept_read(roots, text)):
                return None
            canonical = self.ceiling.resolve_text(text)
        except (PathOutsideRoots, InvalidPath, InvalidRootURI, OSError, ValueError):
            return None
        top = self.ceiling.root_above(canonical)
        if top is None:
            return None
        start = canonical
        for _ in range(_MAX_WALK):
            if os.path.isdir(start) or start == str(top.path):
                break
            start = os.path.dirname(start)
        return text, start, str(top.path)

    def _kept_read(self, roots: RootSet, text: str) -> bool:
        """The root holding ``text`` was granted read only where read and write was offered: the user
        chose, so a writing tool there is not asked about it again (its writes are refused)."""
        root = roots.root_of(text)
        return root is not None and str(root.path) in self._chose_read

    async def _ask(self, server: str, tool: str, path: str, start: str, top: str, writes: bool) -> str | None:
        folders = folder_choices(start, top, home=home_folder(), allow_home=self.config.allow_home)
        if not folders:
            return (
                f"Access denied: {consent_shown(path)} is in no folder granted, and no folder can be offered "
                "for it (/, the home folder and its ancestors never are)"
            )
        denied = f"Access denied: {consent_shown(path)} is in no folder granted"
        if self.ledger.declined(_KEY, folders[0]):
            return f"{denied}: the user declined {consent_shown(folders[0])} in this session"
        busy = self.ledger.may_ask(_KEY)
        if busy is not None:
            return f"{denied}, and the user was not asked: {busy}"
        question = ConsentQuestion(server, tool, path, folders, access_choices(writes))
        try:
            raw = await self._round_trip(question.params())
        finally:
            self.ledger.done(_KEY)
        if raw is None:
            return f"{denied}: the user did not answer within {self.config.timeout:g} s"
        if "result" not in raw:
            problem = raw.get("error")
            text = problem.get("message") if isinstance(problem, Mapping) else None
            return f"{denied}: the host refused the question ({consent_shown(str(text or 'no result'))})"
        answer = read_consent_answer(raw["result"], question)
        if answer.action == "accept" and answer.folder is not None and answer.access is not None:
            self.ledger.grant(_KEY, answer.folder, answer.access, lasting=False)
            granted = {grant.folder for grant in self.ledger.grants(_KEY)}  # bounded as the grants are
            self._chose_read &= granted
            if answer.access == "read" and len(question.accesses) > 1:
                self._chose_read.add(answer.folder)
            else:
                self._chose_read.discard(answer.folder)
            logger.info(
                "the user granted %s (%s) for this session", consent_shown(answer.folder), answer.access
            )
            return None
        if answer.action == "decline":
            self.ledger.decline(_KEY, folders[0])
            return f"{denied}: the user declined access to {consent_shown(folders[0])}"
        if answer.action == "cancel":
            return f"{denied}: the user dismissed the question"
        return f"{denied}: the host's answer was not understood ({answer.why})"

    async def _round_trip(self, params: Mapping[str, Any]) -> Message | None:
        """The host's answer to ``elicitation/create``, or None when none came within the bound."""
        got: list[Message] = []
        done = anyio.Event()
        async with anyio.create_task_group() as group:

            async def send() -> None:
                got.append(await self._ask_host("elicitation/create", params))
                done.set()

            group.start_soon(send)
            await self._clock.wait_until(done, self._clock.now() + self.config.timeout)
            group.cancel_scope.cancel()
        return got[0] if got else None


def call_of(child: Child, message: Message) -> Call:
    """The ``tools/call`` ``message`` as a question names it: the child's server name, the tool, and
    whether the tool may write (it is not marked ``readOnlyHint`` in the child's tools/list)."""
    info = (child.init_result or {}).get("serverInfo")
    name = info.get("name") if isinstance(info, Mapping) else None
    params = message.get("params")
    tool = params.get("name") if isinstance(params, Mapping) else None
    tool = tool if isinstance(tool, str) else "?"
    server = name if isinstance(name, str) and name else "the wrapped server"
    return server, tool, tool not in child.read_only_tools
