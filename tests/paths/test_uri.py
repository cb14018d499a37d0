"""Every rule of the URI contract as a table, and path_to_uri round trips."""

from __future__ import annotations

from pathlib import Path, PureWindowsPath
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_roots import InvalidPath, InvalidRootURI, RootSet, path_to_uri, uri_to_path

# (uri, windows, expected path) for URIs that must be accepted.
ACCEPTED: list[tuple[str, bool, str]] = [
    ("file:///home/u/project", False, "/home/u/project"),
    ("file:///", False, "/"),
    ("file:/home/u", False, "/home/u"),
    ("file://localhost/home/u", False, "/home/u"),
    ("file://LOCALHOST/home/u", False, "/home/u"),
    ("file://LocalHost/home/u", False, "/home/u"),
    ("FILE:///home/u", False, "/home/u"),
    ("File:///home/u", False, "/home/u"),
    ("file:///home/u/", False, "/home/u/"),
    ("file:///a%20b", False, "/a b"),
    ("file:///a b", False, "/a b"),
    ("file:///report_50%25.pdf", False, "/report_50%.pdf"),
    ("file:///%252e%252e/x", False, "/%2e%2e/x"),  # decoded once only: '%252e' is the name '%2e'
    ("file:///a/%252F/b", False, "/a/%2F/b"),
    ("file:///caf%C3%A9", False, "/caf\u00e9"),
    ("file:///cafe%CC%81", False, "/cafe\u0301"),
    ("file:///caf\u00e9", False, "/caf\u00e9"),  # a raw non-ASCII character (IRI form) is its UTF-8
    ("file:///a%3Fb", False, "/a?b"),  # an encoded '?' is a name character
    ("file:///a%23b", False, "/a#b"),  # an encoded '#' is a name character
    ("file:///a%0Ab", False, "/a\nb"),  # an encoded newline is legal in a POSIX name
    ("file:///%2e%2etest", False, "/..test"),
    ("file:///...", False, "/..."),
    ("file:///paren(1)/x", False, "/paren(1)/x"),
    ("file:///a//b", False, "/a//b"),
    ("file:///C:/x", False, "/C:/x"),  # on POSIX a drive-like path is never rewritten
    ("file:///c:/x", False, "/c:/x"),
    ("file:///C:/x", True, "C:\\x"),
    ("file:///c:/x", True, "C:\\x"),
    ("file:///C:", True, "C:\\"),
    ("file:///C:/", True, "C:\\"),
    ("file://localhost/D:/a%20b/c", True, "D:\\a b\\c"),
]

# (uri, windows, a fragment of the message: the rule broken) for URIs that must be refused.
REFUSED: list[tuple[object, bool, str]] = [
    # hosts
    ("file://evil.com/etc/passwd", False, "host 'evil.com' is not local"),
    ("file://127.0.0.1/etc", False, "is not local"),
    ("file://[::1]/etc", False, "is not local"),
    ("file://localhost.evil.com/etc", False, "is not local"),
    ("file://localhost:80/etc", False, "is not local"),
    ("file://user@localhost/etc", False, "is not local"),
    ("file://%6Cocalhost/etc", False, "is not local"),  # an encoded host is not decoded
    ("file://local%20host/etc", False, "is not local"),
    ("file://server/share", False, "is not local"),
    ("file:////server/share", False, "UNC"),
    ("file://///server/share", False, "UNC"),
    ("file:////server/share", True, "UNC"),
    ("file://localhost//server/share", False, "UNC"),
    # schemes and shape
    ("http://localhost/etc", False, "only file: URIs"),
    ("https:///etc", False, "only file: URIs"),
    ("/etc/passwd", False, "only file: URIs"),
    (" file:///etc", False, "only file: URIs"),
    ("files:///etc", False, "only file: URIs"),
    ("", False, "empty"),
    ("file:", False, "absolute"),
    ("file:etc/passwd", False, "absolute"),
    ("file://localhost", False, "absolute"),
    # queries and fragments
    ("file:///etc?x=1", False, "query"),
    ("file:///etc?", False, "query"),
    ("file:///etc#frag", False, "fragment"),
    ("file:///etc#", False, "fragment"),
    ("file:///a#b?c", False, "query"),
    # encoded separators and NUL
    ("file:///a%2Fb", False, "%2F"),
    ("file:///a%2fb", False, "%2F"),
    ("file:///..%2F..%2Fetc", False, "%2F"),
    ("file:///a%5Cb", False, "%5C"),
    ("file:///a%5cb", False, "%5C"),
    ("file:///C:/a%5Cb", True, "%5C"),
    ("file:///a%00b", False, "%00"),
    ("file:///a%00", False, "%00"),
    # dot segments, raw or encoded
    ("file:///a/../etc", False, "'..' segment"),
    ("file:///a/./b", False, "'..' segment"),
    ("file:///a/%2e%2e/etc", False, "'..' segment"),
    ("file:///a/%2E%2E/etc", False, "'..' segment"),
    ("file:///a/.%2e/etc", False, "'..' segment"),
    ("file:///a/%2e/b", False, "'..' segment"),
    ("file:///..", False, "'..' segment"),
    ("file:///C:/x/../..", True, "'..' segment"),
    # invalid UTF-8 and bad escapes
    ("file:///a%FF", False, "not valid UTF-8"),
    ("file:///a%C3%28", False, "not valid UTF-8"),
    ("file:///a%C0%AF", False, "not valid UTF-8"),  # overlong '/'
    ("file:///a%ED%A0%80", False, "not valid UTF-8"),  # an encoded surrogate
    ("file:///a%C3", False, "not valid UTF-8"),
    ("file:///a\udcff", False, "not valid UTF-8"),
    ("file:///a%", False, "two hex digits"),
    ("file:///a%4", False, "two hex digits"),
    ("file:///a%zz", False, "two hex digits"),
    ("file:///a%%41", False, "two hex digits"),
    ("file:///a%4g", False, "two hex digits"),
    ("file:///a%+1", False, "two hex digits"),
    # raw characters that change the meaning
    ("file:///a\\..\\etc", False, "backslash"),
    ("file:///C:\\x", True, "backslash"),
    ("file:///a\x00b", False, "control character"),
    ("file:///a\nb", False, "control character"),
    ("file:///a\tb", False, "control character"),
    ("file:///a\x7fb", False, "control character"),
    # Windows forms
    ("file:///x/y", True, "drive letter"),
    ("file:///C|/x", True, "drive letter"),
    ("file:///CC:/x", True, "drive letter"),
    ("file:///C:x", True, "drive letter"),
    ("file:///C:/a:stream", True, "alternate data stream"),
    ("file:///C:/a%3Astream", True, "alternate data stream"),
    # not a string
    (None, False, "must be a string"),
    (b"file:///etc", False, "must be a string"),
    (42, False, "must be a string"),
    (Path("/etc"), False, "must be a string"),
]


@pytest.mark.parametrize(("uri", "windows", "expected"), ACCEPTED)
def test_accepted_uri(uri: str, windows: bool, expected: str) -> None:
    assert uri_to_path(uri, windows=windows) == expected


@pytest.mark.parametrize(("uri", "windows", "rule"), REFUSED)
def test_refused_uri(uri: Any, windows: bool, rule: str) -> None:  # a client's value, not only strings
    with pytest.raises(InvalidRootURI) as info:
        uri_to_path(uri, windows=windows)
    assert isinstance(info.value, ValueError)
    message = str(info.value)
    assert rule in message
    if isinstance(uri, str) and uri:
        assert repr(uri) in message, "the message names the URI"


def test_the_host_default_decides_windows_forms() -> None:
    # On this (POSIX) host the default is windows=False: a drive-like path stays a POSIX path.
    assert uri_to_path("file:///C:/x") == "/C:/x"


def test_from_uris_applies_the_uri_rules(tmp_path: Path) -> None:
    good = path_to_uri(str(tmp_path))
    with pytest.raises(InvalidRootURI, match="not local"):
        RootSet.from_uris([good, "file://evil.com" + str(tmp_path)])
    lenient = RootSet.from_uris([good, "file://evil.com" + str(tmp_path), "file:///x%2Fy"], strict=False)
    assert lenient.paths == (tmp_path.resolve(),)


# -- path_to_uri --

ROUND_TRIPS = [
    "/",
    "/home/u/project",
    "/a b/c d",
    "/report_50%.pdf",
    "/%2e%2e/%2F",
    "/caf\u00e9/cafe\u0301",
    "/\u65e5\u672c\u8a9e/\U0001f600",
    "/a#b",
    "/a?b",
    "/a;b=c&d+e,f",
    "/paren(1)/[x]/{y}",
    "/~user/$HOME/`cmd`",
    "/a\nb",
    "/C:/x",
    "/trailing/",
    "/a//b",
]


@pytest.mark.parametrize("path", ROUND_TRIPS)
def test_path_to_uri_round_trips(path: str) -> None:
    uri = path_to_uri(path, windows=False)
    assert uri.startswith("file:///")
    assert not set("?# ") & set(uri)
    assert uri_to_path(uri, windows=False) == path


@pytest.mark.parametrize(
    ("path", "uri"),
    [
        ("/a b", "file:///a%20b"),
        ("/50%", "file:///50%25"),
        ("/a#b?c", "file:///a%23b%3Fc"),
        ("/caf\u00e9", "file:///caf%C3%A9"),
        ("//a", "file:///a"),
    ],
)
def test_path_to_uri_encodes(path: str, uri: str) -> None:
    assert path_to_uri(path, windows=False) == uri


@pytest.mark.parametrize(
    ("path", "uri"),
    [("C:\\Users\\u\\My Docs", "file:///C:/Users/u/My%20Docs"), ("d:\\", "file:///d:/")],
)
def test_path_to_uri_windows(path: str, uri: str) -> None:
    assert path_to_uri(path, windows=True) == uri
    assert PureWindowsPath(uri_to_path(uri, windows=True)) == PureWindowsPath(path)


@pytest.mark.parametrize(
    ("path", "windows", "rule"),
    [
        ("relative/x", False, "not absolute"),
        ("", False, "not absolute"),
        ("/a\x00b", False, "NUL"),
        ("/a\\b", False, "backslash"),
        ("/a/../b", False, "'..' segment"),
        ("/a/./b", False, "'..' segment"),
        ("/\udcff", False, "not valid UTF-8"),
        ("\\\\server\\share\\x", True, "not an absolute drive path"),
        ("C:relative", True, "not an absolute drive path"),
        ("/x", True, "not an absolute drive path"),
        ("C:\\a:stream", True, "alternate data stream"),
    ],
)
def test_path_to_uri_refuses_what_cannot_round_trip(path: str, windows: bool, rule: str) -> None:
    with pytest.raises(InvalidPath, match=rule):
        path_to_uri(path, windows=windows)


def test_path_to_uri_refuses_non_text() -> None:
    with pytest.raises(TypeError):
        path_to_uri(b"/etc", windows=False)  # type: ignore[arg-type]


_name_chars = st.characters(
    exclude_categories=["Cs"], exclude_characters="/\\\x00", min_codepoint=1, max_codepoint=0x2FFFF
)
_names = st.text(_name_chars, min_size=1, max_size=8).filter(lambda s: s not in (".", ".."))


@settings(max_examples=300, deadline=None)
@given(st.lists(_names, min_size=0, max_size=5))
def test_any_normalized_path_round_trips(names: list[str]) -> None:
    path = "/" + "/".join(names)
    uri = path_to_uri(path, windows=False)
    assert all(32 < ord(c) < 127 for c in uri), "the URI is plain ASCII"
    assert uri_to_path(uri, windows=False) == path
