"""The one decision table of the roots layer (``GuardPolicy.roots_for``), row by row, on the facts an adapter
reports (``RequestFacts``): which roots a request gets, by era, capability and connection state. No SDK: a
legacy connection is any object, its ``roots/list`` a function that answers as a client would (the adapters'
own rows run on the real SDKs in tests/adapters/test_conformance.py and tests/mcp1/).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from mcp_roots import PathOutsideRoots, RootSet, RootsUnavailable, path_to_uri
from mcp_roots.roots._consent import ConsentConfig, ConsentLedger
from mcp_roots.roots._facts import READ, TOOL, NeedRoots, RequestFacts
from mcp_roots.roots._policy import GuardNotInstalled, GuardPolicy
from mcp_roots.roots._sources import SOURCE_UNCONFIGURED
from tests.kit import ManualClock

pytestmark = pytest.mark.anyio


class Connection:
    """A legacy connection's key (any object that lives as long as the connection)."""


class Client:
    """Answers ``roots/list`` with its one root, and counts the requests."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.asked = 0

    async def send(self, connection: object, waiting: Sequence[Any]) -> object:
        self.asked += 1
        return {"roots": [{"uri": path_to_uri(self.root)}]}


@pytest.fixture
def dirs(tmp_path: Path) -> dict[str, Path]:
    made = {name: tmp_path / name for name in ("fallback", "client", "ceiling")}
    for path in made.values():
        path.mkdir()
    (made["ceiling"] / "inside").mkdir()
    return made


def policy(fallback: Path | None, ceiling: Path | None = None) -> GuardPolicy:
    return GuardPolicy(
        fallback=RootSet.from_paths([fallback], source="test")
        if fallback is not None
        else RootSet.empty(source=SOURCE_UNCONFIGURED),
        ceiling=RootSet.from_paths([ceiling], source="ceiling") if ceiling is not None else None,
        debounce=0.0,
        max_wait=0.0,
        timeout=5.0,
        first_answer_timeout=5.0,
        how_to_configure="configure fallback roots",
    )


def legacy(
    connection: object | None, declared: bool | None, seen: bool | None, client: Client | None = None
) -> RequestFacts:
    return RequestFacts(
        "request",
        TOOL,
        modern=False,
        declared=declared,
        connection=connection,
        seen=seen,
        send=client.send if client is not None else None,
    )


def modern(declared: bool, answer: object | None = None, cannot_ask: str | None = None) -> RequestFacts:
    return RequestFacts(
        "request",
        READ if cannot_ask else TOOL,
        modern=True,
        declared=declared,
        connection=None,
        answer=answer,
        cannot_ask=cannot_ask,
    )


def paths(roots: RootSet) -> list[Path]:
    return [Path(p) for p in roots.paths]


async def test_no_request_is_refused(dirs: dict[str, Path]) -> None:
    facts = RequestFacts(None, TOOL, modern=False, declared=None, connection=None)
    with pytest.raises(RootsUnavailable, match="only during an MCP request"):
        await policy(dirs["fallback"]).roots_for(facts)


async def test_modern_rows(dirs: dict[str, Path]) -> None:
    guard = policy(dirs["fallback"])
    # no capability: the fallback; unconfigured: refused, telling the client only that it has no folders
    assert paths(await guard.roots_for(modern(False))) == [dirs["fallback"]]
    with pytest.raises(RootsUnavailable, match="This server has no folders for this client"):
        await policy(None).roots_for(modern(False))
    # the request carried roots: the client's answer
    answer = {"roots": [{"uri": path_to_uri(dirs["client"])}]}
    assert paths(await guard.roots_for(modern(True, answer))) == [dirs["client"]]
    # none carried: ask, or refuse with the port's reason where it cannot ask
    with pytest.raises(NeedRoots):
        await guard.roots_for(modern(True))
    with pytest.raises(RootsUnavailable, match="cannot ask here"):
        await guard.roots_for(modern(True, cannot_ask="cannot ask here"))


async def test_roots_sent_where_none_may_be_are_ignored(
    dirs: dict[str, Path], caplog: pytest.LogCaptureFixture
) -> None:
    guard = policy(dirs["fallback"])
    answer = {"roots": [{"uri": path_to_uri(dirs["client"])}]}
    with caplog.at_level(logging.WARNING, logger="mcp_roots"):
        assert paths(await guard.roots_for(modern(False, answer))) == [dirs["fallback"]]
        facts = legacy(None, None, None)
        facts.answer = answer
        assert await guard.answered_roots(facts) is None
    assert caplog.text.count("ignored roots sent with a request") == 2


async def test_legacy_rows(dirs: dict[str, Path]) -> None:
    guard = policy(dirs["fallback"])
    client = Client(dirs["client"])
    # the adapter proves it never saw the connection: not installed (never the fallback)
    with pytest.raises(GuardNotInstalled):
        await guard.roots_for(legacy(Connection(), True, False, client))
    # no handshake (stateless HTTP): the fallback
    assert paths(await guard.roots_for(legacy(Connection(), None, None))) == [dirs["fallback"]]
    # not opened, the adapter cannot tell: roots declared means the guard missed initialize
    with pytest.raises(GuardNotInstalled):
        await guard.roots_for(legacy(Connection(), True, None))
    assert paths(await guard.roots_for(legacy(Connection(), False, None))) == [dirs["fallback"]]
    # not opened, seen (a call before initialized was handled): opened now, then fresh once it is served
    lazy = Connection()
    got: list[RootSet] = []

    async def call() -> None:
        got.append(await guard.roots_for(legacy(lazy, True, True, client)))

    async with anyio.create_task_group() as tg:
        tg.start_soon(call)
        await anyio.wait_all_tasks_blocked()  # the call waits on the connection it opened
        assert guard.connections.get(lazy) is not None
        tg.start_soon(lambda: guard.connections.serve(lazy, cannot_ask=None, send_now=False))
        while not got:
            await anyio.lowlevel.checkpoint()
        assert paths(got[0]) == [dirs["client"]]
        assert client.asked == 1
        # opened: the lifecycle's fresh roots, then the fast lane, nothing sent again
        assert paths(await guard.roots_for(legacy(lazy, True, True, client))) == [dirs["client"]]
        roots_now = guard.roots_now(lazy)
        assert roots_now is not None
        assert paths(roots_now) == [dirs["client"]]
        assert client.asked == 1
        tg.cancel_scope.cancel()


async def test_a_connection_opened_at_initialize_is_served_from_its_cache(dirs: dict[str, Path]) -> None:
    guard = policy(None)
    client = Client(dirs["client"])
    connection = Connection()
    guard.connections.open(connection, client.send, declared=True, list_changed=True)
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: guard.connections.serve(connection, cannot_ask=None, send_now=True))
        facts = legacy(connection, True, None)  # an adapter that cannot tell (mcp 2.x): opened, so served
        assert paths(await guard.roots_for(facts)) == [dirs["client"]]
        tg.cancel_scope.cancel()
    assert guard.connections.get(connection) is None  # the connection's end forgets it


async def test_the_precheck_runs_before_any_wait_or_question(dirs: dict[str, Path]) -> None:
    guard = policy(None, ceiling=dirs["ceiling"])
    client = Client(dirs["ceiling"] / "inside")

    def outside() -> None:
        guard.ceiling.resolve(str(dirs["fallback"]))  # type: ignore[union-attr]

    with pytest.raises(PathOutsideRoots):
        await guard.roots_for(legacy(Connection(), True, True, client), outside)
    with pytest.raises(PathOutsideRoots):
        await guard.roots_for(modern(True), outside)
    assert client.asked == 0


class Lists:
    """Answers ``roots/list`` with the next of its lists (the last one again once they run out)."""

    def __init__(self, *lists: list[Path]) -> None:
        self.lists = list(lists)

    async def send(self, connection: object, waiting: Sequence[Any]) -> object:
        given = self.lists.pop(0) if len(self.lists) > 1 else self.lists[0]
        return {"roots": [{"uri": path_to_uri(path)} for path in given]}


async def roots_in_turn(guard: GuardPolicy, client: Lists, turns: int) -> list[list[Path] | str]:
    """The roots of one call after each of the client's answers (a list_changed between them), or the
    refusal's text."""
    connection = Connection()
    guard.connections.open(connection, client.send, declared=True, list_changed=True)
    seen: list[list[Path] | str] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: guard.connections.serve(connection, cannot_ask=None, send_now=True))
        for turn in range(turns):
            if turn:
                guard.connections.changed(connection)
            try:
                seen.append(paths(await guard.roots_for(legacy(connection, True, None))))
            except RootsUnavailable as exc:
                seen.append(str(exc))
        tg.cancel_scope.cancel()
    return seen


@pytest.mark.parametrize("until_roots", [False, True])
async def test_an_empty_list_before_any_roots_keeps_the_fallback(
    dirs: dict[str, Path], until_roots: bool
) -> None:
    """The official filesystem server's rule (``fallback_until_roots``): a client that answers an empty
    list (the MCP Inspector does) keeps the command-line folders until it lists one; after that, an empty
    list revokes, with a refusal that says so. Without the option (the control), the first empty list
    leaves no roots at all."""
    guard = policy(dirs["fallback"])
    guard.fallback_until_roots = until_roots
    seen = await roots_in_turn(guard, Lists([], [], [dirs["client"]], []), 4)
    if until_roots:
        assert seen[:3] == [[dirs["fallback"]], [dirs["fallback"]], [dirs["client"]]]
        assert isinstance(seen[3], str)
        assert "revoked every folder" in seen[3]
    else:
        assert seen == [[], [], [dirs["client"]], []]


async def test_a_list_clipped_to_nothing_is_not_an_empty_list(dirs: dict[str, Path]) -> None:
    """A non-empty list whose roots all lie outside the ceiling is no empty list: the fallback does not come
    back (that would widen what the client asked for)."""
    guard = policy(dirs["ceiling"] / "inside", ceiling=dirs["ceiling"])
    guard.fallback_until_roots = True
    seen = await roots_in_turn(guard, Lists([dirs["client"]], []), 2)
    assert seen[0] == []
    assert isinstance(seen[1], str)
    assert "revoked every folder" in seen[1]


# --- consent: a source of roots for a client without roots that can be asked ----------------------------


def consenting(fallback: Path | None, ceiling: Path) -> GuardPolicy:
    made = policy(fallback, ceiling)
    made.consent = ConsentLedger(ConsentConfig(), ManualClock())
    return made


def consent_facts(
    era: str, *, declared: bool | None, elicit: bool, connection: object | None
) -> RequestFacts:
    return RequestFacts(
        "request", TOOL, modern=era == "modern", declared=declared, connection=connection, elicit=elicit
    )


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_consent_rows(dirs: dict[str, Path], era: str) -> None:
    connection = Connection()
    granted = dirs["ceiling"] / "inside"
    # can be asked: the fallback (granted up front) plus the key's grants; unconfigured: no folders yet,
    # not a refusal (the guarded call asks)
    asked = consent_facts(era, declared=False, elicit=True, connection=connection)
    if era == "modern":
        asked.stream = connection
    guard = consenting(None, dirs["ceiling"])
    assert paths(await guard.roots_for(asked)) == []
    assert guard.consent is not None
    key = guard.consent_key(asked)
    assert key is not None
    assert guard.consent_key(consent_facts(era, declared=False, elicit=True, connection=Connection())) != key
    guard.consent.grant(key, str(granted), "read", lasting=era == "modern")
    roots = await guard.roots_for(asked)
    assert paths(roots) == [granted]
    assert not roots.writable(granted / "x")
    with_fallback = consenting(dirs["fallback"], dirs["ceiling"])
    assert paths(await with_fallback.roots_for(asked)) == [dirs["fallback"]]
    # cannot be asked: the fallback as before, or refused in words that say why
    mute = consent_facts(era, declared=False, elicit=False, connection=connection)
    assert paths(await with_fallback.roots_for(mute)) == [dirs["fallback"]]
    with pytest.raises(RootsUnavailable, match="this client cannot be asked"):
        await guard.roots_for(mute)
    # a client that declared roots is never a consent row: its roots are the only authority (legacy: its
    # lifecycle answers, here not served yet; never the grants)
    if era == "modern":
        declared = consent_facts(era, declared=True, elicit=True, connection=connection)
        declared.answer = {"roots": [{"uri": path_to_uri(dirs["ceiling"])}]}
        assert paths(await guard.roots_for(declared)) == [dirs["ceiling"]]
    else:
        declared = legacy(Connection(), True, True, Client(dirs["ceiling"]))
        declared.elicit = True
        with pytest.raises(RootsUnavailable, match="has not sent its roots yet"):
            await guard.roots_for(declared)


async def test_consent_grants_are_kept_per_key(dirs: dict[str, Path]) -> None:
    guard = consenting(None, dirs["ceiling"])
    assert guard.consent is not None
    principal = consent_facts("modern", declared=False, elicit=True, connection=None)
    principal.principal = "alice"
    nobody = consent_facts("modern", declared=False, elicit=True, connection=None)
    assert guard.consent_key(principal) == ("principal", "alice")
    assert guard.consent_key(nobody) is None  # no principal, no stream: nothing kept across requests
    guard.consent.grant(("principal", "alice"), str(dirs["ceiling"] / "inside"), "read-write", lasting=True)
    assert paths(await guard.roots_for(principal)) == [dirs["ceiling"] / "inside"]
    assert paths(await guard.roots_for(nobody)) == []
