"""for_reader: untrusted text as a person reads it, each control, bidi control and line separator escaped,
and the cut to ``most`` characters, which never splits an escape (a naive cut after escaping does).
"""

from __future__ import annotations

import re

import pytest

from mcp_roots.paths._text import NOT_FOR_READER, for_reader, shorten

BIDI = (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))

# (text, what a reader is shown): each class of character, its boundaries, and a mix.
TABLE = [
    ("notes.txt", "notes.txt"),
    ("/srv/caf\u00e9/\u65e5\u672c/\U0001f600", "/srv/caf\u00e9/\u65e5\u672c/\U0001f600"),  # printable: as is
    ("a\x00b", "a\\x00b"),  # C0
    ("line\nforged\r", "line\\x0aforged\\x0d"),
    ("\x1b[2J\x07\x1f", "\\x1b[2J\\x07\\x1f"),
    (" ~", " ~"),  # the printable ASCII edges
    ("\x7f", "\\x7f"),  # DEL
    ("\x80\x85\x9b31m\x9f", "\\x80\\x85\\x9b31m\\x9f"),  # C1, CSI among them
    ("\xa0", "\xa0"),  # the first code point past C1 stays
    ("\u202eexe.txt", "\\u202eexe.txt"),  # a right-to-left override hiding a name's true end
    ("\u2066a\u2069\u061c\u200e\u200f", "\\u2066a\\u2069\\u061c\\u200e\\u200f"),
    ("\u200d\u2065\u206a\u202f", "\u200d\u2065\u206a\u202f"),  # next to the bidi controls, not one
    ("a\u2028b\u2029c", "a\\u2028b\\u2029c"),  # line and paragraph separators
    (
        "evil\x1b]0;pwned\x07\u202e\u2028\x9b2J\\x1b",
        "evil\\x1b]0;pwned\\x07\\u202e\\u2028\\x9b2J\\x1b",  # a backslash stays as it is
    ),
]


@pytest.mark.parametrize(("text", "shown"), TABLE)
def test_each_class_of_character_is_shown_as_the_table_says(text: str, shown: str) -> None:
    assert for_reader(text) == shown


def test_the_escaped_set_is_the_listed_classes_and_none_is_printable() -> None:
    listed = {*range(0x20), 0x7F, *range(0x80, 0xA0), *BIDI, 0x2028, 0x2029}
    assert listed == NOT_FOR_READER
    assert not any(chr(code).isprintable() for code in NOT_FOR_READER)  # so the printable fast path is sound
    for code in range(0x3000):
        ch = chr(code)
        escaped = for_reader(ch)
        if code in NOT_FOR_READER:
            assert escaped == (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
        else:
            assert escaped == ch


def test_without_most_nothing_is_cut() -> None:
    text = "\x1b" * 5000 + "x" * 5000
    assert for_reader(text) == "\\x1b" * 5000 + "x" * 5000


PIECE = r"(?:\\x[0-9a-f]{2}|\\u[0-9a-f]{4}|[^\\])*"


def whole_pieces(shown: str, escaped: str) -> bool:
    """Whether ``shown`` is a start and an end of ``escaped`` around '...', each made of whole escapes."""
    head, sep, tail = shown.partition("...")
    return (
        sep == "..."
        and escaped.startswith(head)
        and escaped.endswith(tail)
        and re.fullmatch(PIECE, head) is not None
        and re.fullmatch(PIECE, tail) is not None
    )


CUT_TEXTS = ["\x1b" * 100, "\u202e" * 60, "a\x1b" * 60, "ab\u2028" * 50, "/x/" + "\x9b\u2066" * 40 + "/n.txt"]


@pytest.mark.parametrize("text", CUT_TEXTS)
def test_the_cut_keeps_at_most_most_characters_and_never_splits_an_escape(text: str) -> None:
    escaped = text.translate({code: for_reader(chr(code)) for code in NOT_FOR_READER})
    # The control: cutting the escaped text as plain text splits an escape for some bound.
    assert not all(whole_pieces(shorten(escaped, most), escaped) for most in range(4, 80))
    for most in range(4, 80):
        shown = for_reader(text, most)
        assert len(shown) <= most, (most, shown)
        assert whole_pieces(shown, escaped), (most, shown)
        assert len(shown) >= most - 2 * 5  # each side gives up less than one escape (6) of its room


def test_the_cut_of_printable_text_is_shorten_and_keeps_the_name() -> None:
    text = "/srv/" + "deep/" * 100 + "name.txt"
    for most in (20, 80, 200):
        assert for_reader(text, most) == shorten(text, most)
    assert for_reader("/srv/" + "\x1b" * 100 + "/name.txt", 40).endswith("/name.txt")


def test_text_within_most_is_not_cut() -> None:
    assert for_reader("\x1b" * 5, 20) == "\\x1b" * 5
    assert for_reader("\x1b" * 6, 20) != "\\x1b" * 6


@pytest.mark.parametrize("most", [-1, 0, 3])
def test_a_most_without_room_for_the_ellipsis_and_a_character_is_refused(most: int) -> None:
    with pytest.raises(ValueError, match="most must be at least 4"):
        for_reader("text", most)
