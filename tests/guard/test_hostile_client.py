"""A hostile client, written by hand: raw JSON-RPC lines over the reference server's stdio, no SDK.

It declares the roots capability and answers the server's ``roots/list`` with payloads no honest client
sends: other schemes, remote hosts, encoded traversal, 100,000 roots, results that are not objects,
answers to ids never sent, answers out of order, no answer at all, errors. After each the server must stay
up, answer every tool call within a bounded time, never grant what an invalid root would have granted,
and still grant a valid root sent in the same list. Each case is one row of ``CASES``.
"""

from __future__ import annotations

import contextlib
import json
import queue
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import pytest

from mcp_roots import path_to_uri
from tests import forkserver
from tests.kit import FILE_SERVER, Dirs

ROOTS_TIMEOUT = 1.0  # the server's --timeout for roots/list: cases without an answer wait this long
CALL_TIMEOUT = 20.0  # every tool call must be answered within this (generous for a loaded CI machine)

Message = dict[str, Any]


class RawClient:
    """An MCP client that is nothing but JSON lines on a subprocess's stdin/stdout."""

    def __init__(self, args: list[str], stderr: TextIO) -> None:
        self.proc = subprocess.Popen(
            forkserver.command(str(FILE_SERVER), *args),  # a real process, forked warm
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            bufsize=1,
        )
        self._inbox: queue.Queue[Message | None] = queue.Queue()
        self._next_id = 0
        self.roots_requests: list[Message] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            # Anything on stdout that is not one JSON object per line is a protocol violation by the server.
            self._inbox.put(json.loads(line))
        self._inbox.put(None)

    def send(self, message: Message) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()

    def respond(self, request_id: Any, result: Any) -> None:
        self.send({"jsonrpc": "2.0", "id": request_id, "result": result})

    def notify(self, method: str) -> None:
        self.send({"jsonrpc": "2.0", "method": method})

    def request(self, method: str, params: Message, on_roots: Callable[[Message], None]) -> Message:
        """Send a request and wait (bounded) for its response; roots/list requests seen meanwhile go to
        ``on_roots``."""
        self._next_id += 1
        request_id = self._next_id
        self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        deadline = time.monotonic() + CALL_TIMEOUT
        while True:
            remaining = deadline - time.monotonic()
            try:
                message = self._inbox.get(timeout=max(remaining, 0))
            except queue.Empty:
                raise AssertionError(f"no answer to {method} within {CALL_TIMEOUT} s") from None
            if message is None:
                raise AssertionError(f"the server closed stdout (exit {self.proc.poll()}) during {method}")
            if message.get("method") == "roots/list" and "id" in message:
                self.roots_requests.append(message)
                on_roots(message)
            elif message.get("id") == request_id and "method" not in message:
                return message

    def call_tools(
        self, calls: list[tuple[str, Message]], on_roots: Callable[[Message], None]
    ) -> list[Message]:
        """Send every tools/call at once (the server handles them concurrently) and wait (bounded) for all
        of their results, in the order sent; roots/list requests seen meanwhile go to ``on_roots``."""
        ids = []
        for name, arguments in calls:
            self._next_id += 1
            ids.append(self._next_id)
            params = {"name": name, "arguments": arguments}
            self.send({"jsonrpc": "2.0", "id": self._next_id, "method": "tools/call", "params": params})
        responses: dict[int, Message] = {}
        deadline = time.monotonic() + CALL_TIMEOUT
        while len(responses) < len(ids):
            remaining = deadline - time.monotonic()
            try:
                message = self._inbox.get(timeout=max(remaining, 0))
            except queue.Empty:
                raise AssertionError(
                    f"no answer to {len(ids) - len(responses)} calls within {CALL_TIMEOUT} s"
                ) from None
            if message is None:
                raise AssertionError(f"the server closed stdout (exit {self.proc.poll()})")
            if message.get("method") == "roots/list" and "id" in message:
                self.roots_requests.append(message)
                on_roots(message)
            elif message.get("id") in ids and "method" not in message:
                responses[message["id"]] = message
        results = []
        for (name, arguments), request_id in zip(calls, ids, strict=True):
            response = responses[request_id]
            assert "result" in response, (
                f"{name}({arguments}) gave a JSON-RPC error, not a tool result: {response}"
            )
            results.append(response["result"])
        return results

    def initialize(self) -> None:
        params = {
            "protocolVersion": "2025-11-25",
            "capabilities": {"roots": {"listChanged": True}},
            "clientInfo": {"name": "hostile-raw-client", "version": "0"},
        }
        response = self.request("initialize", params, on_roots=lambda m: None)
        assert "result" in response, response
        self.notify("notifications/initialized")

    def call_tool(self, name: str, arguments: Message, on_roots: Callable[[Message], None]) -> Message:
        response = self.request("tools/call", {"name": name, "arguments": arguments}, on_roots)
        assert "result" in response, (
            f"{name}({arguments}) gave a JSON-RPC error, not a tool result: {response}"
        )
        result: Message = response["result"]
        return result

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)


def text_of(result: Message) -> str:
    return "".join(c.get("text", "") for c in result.get("content", []))


def uri(path: Path) -> str:
    return path_to_uri(path)


# --- The hostile answers: each gets the client, the server's roots/list request and the directories ---


def roots_result(*uris: str) -> Message:
    return {"roots": [{"uri": u, "name": "r"} for u in uris]}


def beside_a_valid_entry(entry: object) -> Callable[[Dirs], Any]:
    """A roots answer with ``entry`` and a valid root for b."""
    return lambda d: {"roots": [entry, {"uri": uri(d.b), "name": "b"}]}


def answer_with(payload: Callable[[Dirs], Any]) -> Callable[[RawClient, Message, Dirs], None]:
    def answer(client: RawClient, request: Message, dirs: Dirs) -> None:
        client.respond(request["id"], payload(dirs))

    return answer


def answer_error(code: int, message: str) -> Callable[[RawClient, Message, Dirs], None]:
    def answer(client: RawClient, request: Message, dirs: Dirs) -> None:
        client.send({"jsonrpc": "2.0", "id": request["id"], "error": {"code": code, "message": message}})

    return answer


def answer_never(client: RawClient, request: Message, dirs: Dirs) -> None:
    return None


def answer_unknown_ids_first(client: RawClient, request: Message, dirs: Dirs) -> None:
    # Responses to requests the server never sent, granting the outside; then the real answer.
    for bogus in (987654321, "not-an-id", None, request["id"] + 1):
        client.respond(bogus, roots_result(uri(dirs.outside), "file:///"))
    client.respond(request["id"], roots_result(uri(dirs.a)))


def answer_twice(client: RawClient, request: Message, dirs: Dirs) -> None:
    # The same id answered twice: only the first answer may count.
    client.respond(request["id"], roots_result(uri(dirs.a)))
    client.respond(request["id"], roots_result(uri(dirs.outside), "file:///"))


def many_roots(dirs: Dirs) -> Message:
    entries: list[Any] = [{"uri": f"file://evil.example/{i}"} for i in range(99_999)]
    entries.append({"uri": uri(dirs.a), "name": "a"})
    return {"roots": entries}


@dataclass(frozen=True)
class Case:
    id: str
    answer: Callable[[RawClient, Message, Dirs], None]
    readable: Callable[[Dirs], list[Path]] = lambda d: []
    # The tool call must be answered within this many seconds after the hostile answer.
    bound: float = CALL_TIMEOUT
    # Paths that must stay refused on top of the outside file and /etc/passwd.
    refused: Callable[[Dirs], list[Path]] = lambda d: []
    # False: the server never sees an answer (none sent, or one the SDK drops as not a JSON-RPC response),
    # so the request stays outstanding for the rest of the connection, one of the cache's MAX_OUTSTANDING
    # (4). Four such rows on one connection leave it unable to ask again, and every later row would test
    # nothing; these rows each get a connection of their own.
    answered: bool = True


CASES = [
    Case(
        "non-file-schemes",
        answer_with(
            lambda d: roots_result(
                "https://evil.example/",
                f"http://localhost{d.outside}",
                f"ftp://localhost{d.outside}",
                "data:text/plain,/etc",
                "javascript:alert(1)",
                "urn:x:/etc",
                f"FILE-X:{d.outside}",
                uri(d.a),
            )
        ),
        readable=lambda d: [d.a / "a.txt"],
    ),
    Case(
        "remote-hosts",
        answer_with(
            lambda d: roots_result(
                f"file://evil.example{d.outside}",
                "file://evil.example/",
                f"file:////evil.example{d.outside}",
                f"file://localhost.evil.example{d.outside}",
                f"file://user@localhost{d.outside}",
                f"file://localhost:80{d.outside}",
                f"file://127.0.0.1{d.outside}",
                uri(d.a),
            )
        ),
        readable=lambda d: [d.a / "a.txt"],
    ),
    Case(
        "encoded-traversal",
        answer_with(
            lambda d: roots_result(
                f"{uri(d.a)}/%2e%2e/outside",
                f"{uri(d.a)}/%2E%2E/%2E%2E/",
                f"{uri(d.a)}%2F..%2Foutside",
                f"{uri(d.a)}/..%2Foutside",
                f"{uri(d.a)}/%252e%252e/outside",
                f"{uri(d.a)}%00/../outside",
                f"{uri(d.a)}/../outside",
                f"{uri(d.a)}/%5C..%5Coutside",
                f"{uri(d.a)}/%zz",
                uri(d.b),
            )
        ),
        readable=lambda d: [d.b / "b.txt"],
        refused=lambda d: [d.a / "a.txt"],
    ),
    Case(
        "query-fragment-and-refused-entries",
        # Well-formed entries that break a rule are dropped alone; the valid one is kept.
        answer_with(
            lambda d: {
                "roots": [
                    {"uri": f"{uri(d.outside)}?x=1"},
                    {"uri": f"{uri(d.outside)}#frag"},
                    {"uri": ""},
                    {"uri": "file:"},
                    {"uri": "outside"},
                    {"uri": uri(d.a), "name": 5},
                    {"uri": uri(d.b), "name": "b", "_meta": {"x": 1}},
                ]
            }
        ),
        readable=lambda d: [d.b / "b.txt"],
    ),
    # Entries that are not objects with a string uri break the schema: the whole answer is malformed and the
    # roots in force (c, from the honest round) stay; the valid entry beside them is not granted.
    *(
        Case(
            f"malformed-entry-{name}",
            answer_with(beside_a_valid_entry(entry)),
            readable=lambda d: [d.c / "c.txt"],
            refused=lambda d: [d.b / "b.txt"],
        )
        for name, entry in [
            ("no-uri", {"name": "no uri"}),
            ("uri-is-a-number", {"uri": 5}),
            ("uri-is-a-list", {"uri": ["file:///"]}),
            ("uri-is-null", {"uri": None}),
            ("a-string", "file:///"),
            ("a-number", 7),
            ("null", None),
            ("a-list", []),
        ]
    ),
    # A result that is not an object is not a JSON-RPC response to the SDK: dropped, never answered.
    Case("result-is-a-list", answer_with(lambda d: [{"uri": uri(d.outside)}]), answered=False),
    Case("result-is-a-string", answer_with(lambda d: uri(d.outside)), answered=False),
    Case("result-is-null", answer_with(lambda d: None), answered=False),
    Case("roots-is-a-string", answer_with(lambda d: {"roots": uri(d.outside)})),
    Case("roots-is-an-object", answer_with(lambda d: {"roots": {"uri": uri(d.outside)}})),
    # RootsCache refuses an answer of more than 1,000 entries as a whole (a malformed answer): the roots in
    # force stay, and the valid root at the end of the list is not granted either.
    Case("hundred-thousand-roots", answer_with(many_roots), refused=lambda d: [d.a / "a.txt"], bound=10),
    Case("answers-to-ids-never-sent", answer_unknown_ids_first, readable=lambda d: [d.a / "a.txt"]),
    Case("same-id-answered-twice", answer_twice, readable=lambda d: [d.a / "a.txt"]),
    # No answer: the call goes on within the timeout with the roots already in force.
    Case("no-answer-at-all", answer_never, bound=ROOTS_TIMEOUT + 5, answered=False),
    Case("internal-error", answer_error(-32603, "boom")),
    Case("error-with-junk-code", answer_error(12345, "x" * 10_000)),
]


def root_paths(client: RawClient, on_roots: Callable[[Message], None]) -> list[str]:
    result = client.call_tool("list_roots", {}, on_roots)
    assert result.get("isError") is not True, result
    return [root["path"] for root in result["structuredContent"]["result"]]


def check_refused(path: Path | str, result: Message) -> None:
    assert result.get("isError") is True, f"read of {path} was granted: {result}"
    assert "TOP SECRET" not in json.dumps(result)
    assert "root:" not in text_of(result)  # /etc/passwd content


def check_readable(path: Path, result: Message) -> None:
    assert result.get("isError") is not True, f"read of {path} was refused: {result}"
    assert text_of(result) == path.read_text()


def assert_refused(client: RawClient, path: Path | str, on_roots: Callable[[Message], None]) -> None:
    check_refused(path, client.call_tool("read_text", {"path": str(path)}, on_roots))


def assert_readable(client: RawClient, path: Path, on_roots: Callable[[Message], None]) -> None:
    check_readable(path, client.call_tool("read_text", {"path": str(path)}, on_roots))


def check_after_hostile_answer(client: RawClient, dirs: Dirs, case: Case) -> None:
    """The hostile answer is in the server's hands; whatever it made of it, nothing invalid is granted.

    Every check is a tool call sent after the list_changed, so each one waits for the refresh it triggered
    (the hostile answer). They are sent at once: a refresh that never settles costs one bounded wait, not
    one per check."""
    asked: list[Message] = []

    def hostile(request: Message) -> None:
        asked.append(request)
        case.answer(client, request, dirs)

    refused: list[Path | str] = [
        dirs.outside / "secret.txt",
        "/etc/passwd",
        "/etc/hostname",
        f"{dirs.a}/../outside/secret.txt",
        *case.refused(dirs),
    ]
    readable = case.readable(dirs)
    calls: list[tuple[str, Message]] = [("read_text", {"path": str(p)}) for p in [*refused, *readable]]
    started = time.monotonic()
    results = client.call_tools([*calls, ("list_roots", {})], hostile)
    assert time.monotonic() - started < case.bound
    for path, result in zip(refused, results, strict=False):
        check_refused(path, result)
    for path, result in zip(readable, results[len(refused) :], strict=False):
        check_readable(path, result)
    listed = results[-1]
    assert listed.get("isError") is not True, listed
    granted = [root["path"] for root in listed["structuredContent"]["result"]]
    assert not {str(dirs.outside), str(dirs.base), "/", "/etc"} & set(granted), granted
    # This row's hostile answer was really asked for: a connection that can no longer ask (its requests
    # at the cap) passes every check above with the roots of the honest round, and tests nothing.
    assert asked, "the server sent no roots/list for this row's list_changed"


def honest_round(client: RawClient, dirs: Dirs) -> None:
    """list_changed answered honestly with root c: in force on the next call (the server recovered)."""

    def honest(request: Message) -> None:
        client.respond(request["id"], roots_result(uri(dirs.c)))

    client.notify("notifications/roots/list_changed")
    assert_readable(client, dirs.c / "c.txt", honest)
    assert_refused(client, dirs.outside / "secret.txt", honest)
    assert root_paths(client, honest) == [str(dirs.c)]


@contextlib.contextmanager
def raw_server(base: Path, *extra: str) -> Iterator[tuple[RawClient, Dirs]]:
    """The reference server over stdio with a RawClient initialized on it; its log must hold no traceback."""
    dirs = Dirs.make(base / "tree")
    log_path = base / "server.log"
    with log_path.open("w") as log:
        client = RawClient(
            ["--roots", str(dirs.fallback), "--timeout", str(ROOTS_TIMEOUT), *extra], stderr=log
        )
        try:
            client.initialize()
            yield client, dirs
            assert client.proc.poll() is None, "the server exited"
        finally:
            client.close()
    assert "Traceback" not in log_path.read_text(), log_path.read_text()[-4000:]


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RawClient, Dirs]]:
    # One server for the whole table (a server start costs more than all the rounds): each case is a roots
    # refresh on the same connection, between two honest rounds that prove it recovered.
    with raw_server(tmp_path_factory.mktemp("hostile")) as (client, dirs):
        honest_round(client, dirs)
        yield client, dirs


def hostile_refresh_round(client: RawClient, dirs: Dirs, case: Case) -> None:
    honest_round(client, dirs)
    client.notify("notifications/roots/list_changed")
    check_after_hostile_answer(client, dirs, case)
    honest_round(client, dirs)
    assert client.proc.poll() is None


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_hostile_roots_refresh_grants_nothing_and_server_stays_up(
    case: Case, shared: tuple[RawClient, Dirs], tmp_path: Path
) -> None:
    if case.answered:
        hostile_refresh_round(*shared, case)
        return
    with raw_server(tmp_path) as (client, dirs):  # see Case.answered
        honest_round(client, dirs)
        hostile_refresh_round(client, dirs, case)


@pytest.mark.parametrize("case_id", ["result-is-a-string", "malformed-entry-uri-is-a-number"])
def test_junk_first_answer_grants_nothing_not_even_the_fallback(tmp_path: Path, case_id: str) -> None:
    # Before any roots are known (the first answer): nothing is in force, so every call is refused.
    case = next(c for c in CASES if c.id == case_id)
    with raw_server(tmp_path) as (client, dirs):

        def hostile(request: Message) -> None:
            case.answer(client, request, dirs)

        for path in (dirs.outside / "secret.txt", dirs.fallback / "fallback.txt", dirs.b / "b.txt"):
            assert_refused(client, path, hostile)
        result = client.call_tool("list_roots", {}, hostile)
        assert result.get("isError") is True
        assert text_of(result).startswith("the client has not sent its roots yet")
        honest_round(client, dirs)


def test_ceiling_drops_a_client_root_outside_it(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    ceiling = ",".join(str(tree / name) for name in ("a", "b", "c", "fallback"))
    case = Case(
        "root-outside-ceiling",
        # Also the first answer: invalid entries beside a valid one, before any roots are known.
        answer_with(
            lambda d: roots_result(
                "file:///etc",
                f"file://evil.example{d.outside}",
                "https://evil.example/",
                uri(d.outside),
                uri(d.a),
            )
        ),
        readable=lambda d: [d.a / "a.txt"],
    )
    with raw_server(tmp_path, "--ceiling", ceiling) as (client, dirs):
        check_after_hostile_answer(client, dirs, case)
        assert root_paths(client, lambda m: None) == [str(dirs.a)]


def test_method_not_found_is_refused_and_switching_roots_back_on_applies(tmp_path: Path) -> None:
    # enable / disable / enable over stdio: -32601 never means the fallback, and is not permanent.
    with raw_server(tmp_path) as (client, dirs):

        def not_found(request: Message) -> None:
            client.send({"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32601, "message": "nope"}})

        def grants_a(request: Message) -> None:
            client.respond(request["id"], roots_result(uri(dirs.a)))

        assert_refused(client, dirs.fallback / "fallback.txt", not_found)
        assert_refused(client, dirs.outside / "secret.txt", not_found)
        client.notify("notifications/roots/list_changed")  # switched on
        assert_readable(client, dirs.a / "a.txt", grants_a)
        client.notify("notifications/roots/list_changed")  # switched off: the last roots stay
        assert_readable(client, dirs.a / "a.txt", not_found)
        assert_refused(client, dirs.fallback / "fallback.txt", not_found)
        client.notify("notifications/roots/list_changed")  # on again, with other roots

        def grants_b(request: Message) -> None:
            client.respond(request["id"], roots_result(uri(dirs.b)))

        assert_readable(client, dirs.b / "b.txt", grants_b)
        assert_refused(client, dirs.a / "a.txt", grants_b)
        assert root_paths(client, grants_b) == [str(dirs.b)]


def test_repeated_initialized_is_ignored_quietly(tmp_path: Path) -> None:
    with raw_server(tmp_path) as (client, dirs):

        def grants_a(request: Message) -> None:
            client.respond(request["id"], roots_result(uri(dirs.a)))

        for _ in range(20):
            client.notify("notifications/initialized")
        assert_readable(client, dirs.a / "a.txt", grants_a)
        assert root_paths(client, grants_a) == [str(dirs.a)]
    # raw_server asserts that the server log holds no traceback.


def test_no_answer_then_answers_out_of_order(tmp_path: Path) -> None:
    held: list[Message] = []
    with raw_server(tmp_path) as (client, dirs):
        # The first roots/list is never answered (yet): after the timeout the call is refused, never given
        # the fallback roots.
        started = time.monotonic()
        assert_refused(client, dirs.fallback / "fallback.txt", held.append)
        assert time.monotonic() - started < ROOTS_TIMEOUT + 5
        assert held
        assert_refused(client, dirs.a / "a.txt", held.append)
        assert_refused(client, dirs.outside / "secret.txt", held.append)

        def newest_first(request: Message) -> None:
            # Answer the newest request, then the old one late, granting the outside.
            client.respond(request["id"], roots_result(uri(dirs.b)))
            for old in held:
                client.respond(old["id"], roots_result(uri(dirs.outside), "file:///"))

        client.notify("notifications/roots/list_changed")
        assert_readable(client, dirs.b / "b.txt", newest_first)
        assert_refused(client, dirs.outside / "secret.txt", newest_first)
        assert_refused(client, dirs.a / "a.txt", newest_first)
        assert root_paths(client, newest_first) == [str(dirs.b)]
