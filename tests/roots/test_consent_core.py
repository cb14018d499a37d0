"""The pure core of folders by consent (``roots._consent``): the folders and accesses offered, the question's
text, the strict reading of an answer, and the ledger's bounds, on the kit's manual clock.
"""

from __future__ import annotations

import base64
import json

import pytest

from mcp_roots.roots._consent import (
    ACCEPT,
    CANCEL,
    DECLINE,
    INVALID,
    ConsentConfig,
    ConsentLedger,
    Question,
    access_choices,
    folder_choices,
    read_answer,
    shown,
)
from tests.kit import ManualClock


def test_folder_choices_stop_at_the_ceiling_entry_and_skip_root_and_home() -> None:
    assert folder_choices("/c/a/b", "/c") == ("/c/a/b", "/c/a", "/c")
    assert folder_choices("/c", "/c") == ("/c",)
    assert folder_choices("/elsewhere/x", "/c") == ()  # outside the entry: nothing
    assert folder_choices("/cc/x", "/c") == ()  # a sibling sharing a prefix is outside
    # `/` is never offered; the home folder and its ancestors only with allow_home
    assert folder_choices("/a", "/") == ("/a",)
    homes = ("/home/u",)
    assert folder_choices("/home/u/code/x", "/", homes=homes) == ("/home/u/code/x", "/home/u/code")
    assert folder_choices("/home/u/code/x", "/", homes=homes, allow_home=True) == (
        "/home/u/code/x",
        "/home/u/code",
        "/home/u",
        "/home",
    )
    deep = "/c/" + "/".join(f"d{i}" for i in range(40))
    assert len(folder_choices(deep, "/c")) == 12  # bounded, the narrowest kept


def test_access_offered_follows_what_the_tool_does() -> None:
    assert access_choices(writes=False) == ("read",)
    assert access_choices(writes=True) == ("read-write", "read")


def question(**changes: object) -> Question:
    fields: dict[str, object] = {
        "server": "notes",
        "tool": "read",
        "path": "/c/a/f.txt",
        "folders": ("/c/a", "/c"),
        "accesses": ("read-write", "read"),
    }
    fields.update(changes)
    return Question(**fields)  # type: ignore[arg-type]


def test_the_question_names_server_tool_path_and_folder_escaped() -> None:
    evil = "/c/x\x1b[2J\u202etxt.exe\r\nline"
    asked = question(server="srv\u2066", tool="t\x07", path=evil, folders=(evil, "/c"))
    message = asked.message()
    for raw in ("\x1b", "\u202e", "\r", "\n", "\x07", "\u2066"):
        assert raw not in message
    for escaped in ("\\x1b", "\\u202e", "\\x0d", "\\x0a", "\\x07", "\\u2066"):
        assert escaped in message
    assert "read and write" in message
    params = asked.params()
    schema = params["requestedSchema"]
    assert isinstance(schema, dict)
    folder = schema["properties"]["folder"]
    assert folder["enum"] == [evil, "/c"]  # answered by value
    assert all("\x1b" not in name for name in folder["enumNames"])  # shown escaped
    assert schema["properties"]["access"]["enum"] == ["read-write", "read"]
    assert set(schema["properties"]) == {"folder", "access"}  # flat: no nesting
    assert len(shown("x" * 5000)) <= 200


@pytest.mark.parametrize(
    ("raw", "action"),
    [
        ({"action": "accept", "content": {"folder": "/c/a", "access": "read"}}, ACCEPT),
        ({"action": "decline"}, DECLINE),
        ({"action": "cancel"}, CANCEL),
        ({"action": "accept", "content": {"folder": "/c/a/..", "access": "read"}}, INVALID),
        ({"action": "accept", "content": {"folder": "/", "access": "read"}}, INVALID),
        ({"action": "accept", "content": {"folder": "/c/a", "access": "admin"}}, INVALID),
        ({"action": "accept", "content": {"folder": "/c/a"}}, INVALID),
        ({"action": "accept", "content": {"folder": ["/c/a"], "access": "read"}}, INVALID),
        ({"action": "accept"}, INVALID),
        ({"action": "ACCEPT", "content": {"folder": "/c/a", "access": "read"}}, INVALID),
        ({"content": {"folder": "/c/a", "access": "read"}}, INVALID),
        ("accept", INVALID),
        (None, INVALID),
    ],
)
def test_an_answer_is_read_strictly(raw: object, action: str) -> None:
    assert read_answer(raw, question()).action == action


def test_the_ledger_keeps_grants_per_key_with_their_lifetime() -> None:
    clock = ManualClock()
    ledger = ConsentLedger(ConsentConfig(lifetime=60.0), clock)
    ledger.grant("k", "/c/a", "read", lasting=True)
    ledger.grant("j", "/c/b", "read-write", lasting=False)
    assert [g.folder for g in ledger.grants("k")] == ["/c/a"]
    assert ledger.keys() == ("k", "j")
    clock._now += 61
    assert ledger.grants("k") == ()  # expired
    assert [g.folder for g in ledger.grants("j")] == ["/c/b"]  # a connection's: until it ends
    ledger.forget("j")
    assert ledger.grants("j") == ()
    ledger.grant("k", "/c/a", "read", lasting=False)
    assert ledger.revoke("k", "/c/a") == 1
    assert ledger.grants("k") == ()
    with pytest.raises(ValueError, match="access"):
        ledger.grant("k", "/c/a", "admin", lasting=False)


def test_the_ledger_bounds_questions_on_its_clock() -> None:
    clock = ManualClock()
    ledger = ConsentLedger(ConsentConfig(per_minute=3), clock)
    assert ledger.may_ask("k") is None
    assert "waiting for an answer" in (ledger.may_ask("k") or "")  # one in flight
    ledger.done("k")
    assert ledger.may_ask("k", hold=False) is None
    assert ledger.may_ask("k", hold=False) is None
    assert "at most 3 questions a minute" in (ledger.may_ask("k", hold=False) or "")
    assert ledger.may_ask("other", hold=False) is None  # per key
    clock._now += 20  # a third of a minute: one more
    assert ledger.may_ask("k", hold=False) is None
    assert ledger.may_ask("k", hold=False) is not None
    ledger.decline("k", "/c/a")
    assert ledger.declined("k", "/c/a")
    assert not ledger.declined("k", "/c/b")


def test_a_sealed_state_is_bound_fresh_and_spent_once() -> None:
    clock = ManualClock()
    ledger = ConsentLedger(ConsentConfig(state_lifetime=60.0), clock)
    asked = question()
    state = ledger.seal(asked, principal="alice", method="tools/call read")
    # another question, principal or method: refused
    assert ledger.open(state, question(folders=("/c",)), principal="alice", method="tools/call read")
    assert ledger.open(state, asked, principal="bob", method="tools/call read")
    assert ledger.open(state, asked, principal="alice", method="tools/call write")
    # forged: the body changed (a longer lifetime) without the key, or another server's key
    data, mac = state.split(".")
    body = json.loads(base64.urlsafe_b64decode(data))
    body["e"] += 3600
    forged = base64.urlsafe_b64encode(json.dumps(body).encode()).decode() + "." + mac
    assert "not made by this server" in (
        ledger.open(forged, asked, principal="alice", method="tools/call read") or ""
    )
    other = ConsentLedger(ConsentConfig(), clock).seal(asked, principal="alice", method="tools/call read")
    assert ledger.open(other, asked, principal="alice", method="tools/call read")
    for junk in (None, "", "x", "a.b.c", 7):
        assert ledger.open(junk, asked, principal="alice", method="tools/call read")
    # the real one, once
    assert ledger.open(state, asked, principal="alice", method="tools/call read") is None
    assert "used already" in (ledger.open(state, asked, principal="alice", method="tools/call read") or "")
    # expired
    late = ledger.seal(asked, principal="alice", method="tools/call read")
    clock._now += 61
    assert "expired" in (ledger.open(late, asked, principal="alice", method="tools/call read") or "")


def test_spent_states_are_never_forgotten_before_they_expire(monkeypatch: pytest.MonkeyPatch) -> None:
    from mcp_roots.roots import _consent

    monkeypatch.setattr(_consent, "_MAX_SPENT", 2)
    clock = ManualClock()
    ledger = ConsentLedger(ConsentConfig(state_lifetime=60.0), clock)
    asked = question()
    states = [ledger.seal(asked, principal=None, method="m") for _ in range(3)]
    assert ledger.open(states[0], asked, principal=None, method="m") is None
    assert ledger.open(states[1], asked, principal=None, method="m") is None
    assert "too many answers" in (ledger.open(states[2], asked, principal=None, method="m") or "")
    assert "used already" in (ledger.open(states[0], asked, principal=None, method="m") or "")  # still known
    clock._now += 61  # the spent ones expire, and so does the unanswered one
    assert "expired" in (ledger.open(states[2], asked, principal=None, method="m") or "")
    fresh = ledger.seal(asked, principal=None, method="m")
    assert ledger.open(fresh, asked, principal=None, method="m") is None


def test_a_question_is_bound_to_its_method_and_says_what_asks() -> None:
    call = question(accesses=("read",), tool="file:///c/a/f.txt")
    read = question(accesses=("read",), tool="file:///c/a/f.txt", method="resources/read")
    prompt = question(accesses=("read",), tool="file:///c/a/f.txt", method="prompts/get")
    # the same server, name, folders and access: three questions, three digests
    assert len({call.digest(), read.digest(), prompt.digest()}) == 3
    clock = ManualClock()
    ledger = ConsentLedger(ConsentConfig(), clock)
    state = ledger.seal(call, principal=None, method="tools/call file:///c/a/f.txt")
    why = ledger.open(state, read, principal=None, method="resources/read file:///c/a/f.txt")
    assert "another question, caller or method" in (why or "")
    # the texts say what asks: a read names the resource, escaped like every name
    evil = question(accesses=("read",), tool="file:///c/\x1b[2J\u202e", method="resources/read")
    assert "for a read of the resource file:///c/\\x1b[2J\\u202e" in evil.message()
    assert "\x1b" not in evil.message()
    assert "for its prompt" in prompt.message()
    assert "for its tool" in call.message()
