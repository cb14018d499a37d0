"""The files/* protocol definitions: error codes, path rule, content codec, chunking, capability check."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import mcp_types
import pytest

from mcp_roots import BrokerError
from mcp_roots.broker import _protocol as p

# --- error codes -------------------------------------------------------------------------------------


def test_error_codes_are_distinct_and_clear_of_jsonrpc_and_mcp_codes() -> None:
    codes = list(p.ERROR_CODES.values())
    assert len(set(codes)) == len(codes)
    sdk_codes = {
        value
        for name, value in vars(mcp_types).items()
        if name.isupper() and isinstance(value, int) and not isinstance(value, bool) and value < 0
    }
    assert sdk_codes, "mcp_types exports its error codes as module constants"
    for code in codes:
        assert not -32768 <= code <= -32000, f"{code} is in JSON-RPC's reserved range"
        assert code not in sdk_codes
    assert set(p.ERROR_CODES) == {
        "FILE_LOCKED",
        "FILE_NOT_FOUND",
        "PERMISSION_DENIED",
        "INVALID_PATH",
        "IO_ERROR",
        "TIMEOUT",
        "CONCURRENCY_CONFLICT",
        "QUOTA_EXCEEDED",
    }


@pytest.mark.parametrize("reason", [*p.ERROR_CODES, "INVALID_PARAMS"])
def test_errors_round_trip_through_the_jsonrpc_error_object(reason: p.Reason) -> None:
    error = p.broker_error(reason, "it went wrong", path="a/b")
    wire = p.error_data(error)
    assert wire["data"] == {"reason": reason, "path": "a/b"}
    assert wire["code"] == (p.INVALID_PARAMS if reason == "INVALID_PARAMS" else p.ERROR_CODES[reason])
    back = p.error_from_response(wire["code"], wire["message"], wire["data"])
    assert (back.reason, back.code, back.message, back.data) == (
        reason,
        error.code,
        error.message,
        error.data,
    )
    assert isinstance(back, BrokerError)


def test_an_error_without_a_known_reason_is_classified_by_code() -> None:
    assert p.error_from_response(-31101, "gone").reason == "FILE_NOT_FOUND"
    assert p.error_from_response(-31101, "gone", {"reason": "MADE_UP"}).reason == "FILE_NOT_FOUND"
    unknown = p.error_from_response(-32601, "Method not found", "files/read")
    assert (unknown.reason, unknown.code) == ("IO_ERROR", -32601)


def test_unknown_reason_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="unknown files/\\* error reason 'NOPE'"):
        p.broker_error("NOPE", "x")  # type: ignore[arg-type]


# --- paths ---------------------------------------------------------------------------------------------

GOOD_PATHS = [
    ("", ""),
    (".", ""),
    ("a", "a"),
    ("a/b/c.txt", "a/b/c.txt"),
    ("./a//b/./c", "a/b/c"),
    ("a/", "a"),
    ("report_50%.pdf", "report_50%.pdf"),
    ("%2e%2e/x", "%2e%2e/x"),  # not percent-decoded: an ordinary name
    ("...", "..."),
    ("a..b", "a..b"),
    ("naïve/файл", "naïve/файл"),
]

BAD_PATHS = [
    ("..", "'..' segment"),
    ("a/../../b", "'..' segment"),
    ("a/..", "'..' segment"),
    ("/etc/passwd", "absolute"),
    ("//server/share", "absolute"),
    ("C:/Windows", "absolute"),
    ("c:x", "absolute"),
    ("a\\..\\b", "'\\\\'"),
    ("a\x00b", "control character"),
    ("a\nb", "control character"),
    ("x" * 5000, "longer than 4095 bytes"),
    (None, "not a string"),
    (b"a", "not a string"),
]


@pytest.mark.parametrize(("raw", "canonical"), GOOD_PATHS)
def test_relative_paths_are_accepted_in_canonical_form(raw: str, canonical: str) -> None:
    assert p.check_relative_path(raw) == canonical


@pytest.mark.parametrize(("raw", "rule"), BAD_PATHS)
def test_paths_that_could_leave_the_root_are_invalid(raw: object, rule: str) -> None:
    with pytest.raises(BrokerError, match=rule) as info:
        p.check_relative_path(raw)
    assert info.value.reason == "INVALID_PATH"
    assert info.value.code == -31103


# --- content codec -------------------------------------------------------------------------------------


@pytest.mark.parametrize("data", [b"", bytes(range(256)), os.urandom(4099), "héllo\n".encode()])
def test_base64_content_round_trips(data: bytes) -> None:
    wire = p.encode_content(data)
    assert wire == base64.b64encode(data).decode()
    assert p.decode_content(wire) == data


def test_utf8_content_round_trips_and_refuses_invalid_bytes() -> None:
    assert p.decode_content(p.encode_content("żółw ✓".encode(), "utf-8"), "utf-8") == "żółw ✓".encode()
    with pytest.raises(UnicodeDecodeError):
        p.encode_content(b"\xff", "utf-8")
    with pytest.raises(BrokerError, match="lone surrogate"):
        p.decode_content("\udcff", "utf-8")


@pytest.mark.parametrize(
    "bad",
    ["aGVsbG8", "aGVs bG8=", "aGVsbG8=\n", "a-_b", "aGVsbG8==", "é", "====", 12],
)
def test_malformed_base64_is_refused_not_guessed(bad: object) -> None:
    with pytest.raises(BrokerError) as info:
        p.decode_content(bad)
    assert info.value.reason == "INVALID_PARAMS"
    assert info.value.code == -32602


def test_oversized_chunk_is_quota_exceeded_before_decoding() -> None:
    assert p.decode_content(p.encode_content(b"x" * 10), max_bytes=10) == b"x" * 10
    for size in (11, 12, 13, 1000):
        with pytest.raises(BrokerError, match="larger than 10 bytes") as info:
            p.decode_content(p.encode_content(b"x" * size), max_bytes=10)
        assert info.value.reason == "QUOTA_EXCEEDED"
        assert info.value.data["limit"] == 10
    with pytest.raises(BrokerError, match="larger than 10 bytes"):
        p.decode_content("x" * 11, "utf-8", max_bytes=10)


def test_unknown_encoding_is_invalid_params() -> None:
    for call in (lambda: p.decode_content("", "hex"), lambda: p.encode_content(b"", "latin-1")):
        with pytest.raises(BrokerError, match="unknown content encoding") as info:
            call()
        assert info.value.reason == "INVALID_PARAMS"


# --- chunking ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("size", "chunk", "spans"),
    [
        (0, 4, [(0, 0)]),
        (1, 4, [(0, 1)]),
        (4, 4, [(0, 4)]),
        (9, 4, [(0, 4), (4, 4), (8, 1)]),
    ],
)
def test_chunk_spans_cover_the_file_exactly(size: int, chunk: int, spans: list[tuple[int, int]]) -> None:
    assert list(p.chunk_spans(size, chunk)) == spans


def test_default_chunks_are_one_mebibyte_and_rejoin() -> None:
    data = os.urandom(3 * p.DEFAULT_CHUNK_SIZE + 17)
    chunks = list(p.iter_chunks(data))
    assert [len(c) for c in chunks] == [p.DEFAULT_CHUNK_SIZE] * 3 + [17]
    assert b"".join(chunks) == data
    assert p.DEFAULT_CHUNK_SIZE == 1 << 20
    assert p.DEFAULT_TIMEOUT == 60.0


def test_chunk_spans_refuse_nonsense() -> None:
    with pytest.raises(ValueError, match="chunk_size must be positive"):
        list(p.chunk_spans(10, 0))
    with pytest.raises(ValueError, match="size must not be negative"):
        list(p.chunk_spans(-1))


# --- capability and etag -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("caps", "offered"),
    [
        ({"roots": {"filesystemBrokering": True}}, True),
        ({"roots": {"listChanged": True, "filesystemBrokering": True}}, True),
        ({"roots": {"filesystemBrokering": "true"}}, False),
        ({"roots": {"filesystemBrokering": 1}}, False),
        ({"roots": {}}, False),
        ({"filesystemBrokering": True}, False),
        ({"roots": True}, False),
        ({}, False),
        (None, False),
        ("roots", False),
    ],
)
def test_only_a_literal_true_under_roots_offers_brokering(caps: object, offered: bool) -> None:
    assert p.offers_brokering(caps) is offered


def test_etag_changes_when_a_file_is_replaced_or_resized(tmp_path: Path) -> None:
    f = tmp_path / "f"
    f.write_bytes(b"one")
    first = p.etag_of(f.stat())
    assert p.etag_of(f.stat()) == first
    f.write_bytes(b"longer")
    second = p.etag_of(f.stat())
    assert second != first
    replacement = tmp_path / "g"
    replacement.write_bytes(b"longer")
    os.replace(replacement, f)  # same size, new inode: what an atomic write does
    assert p.etag_of(f.stat()) != second
