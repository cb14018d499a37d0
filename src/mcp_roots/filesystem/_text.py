"""Text work of the filesystem tools, on bytes and strings only (no paths): the first or last lines of a
stream, binary detection, the official server's edit rules, and its git-style unified diff.
"""

from __future__ import annotations

import codecs
import difflib
import re
from collections.abc import Sequence
from typing import IO, Any

__all__ = [
    "BinaryFile",
    "EditNotFound",
    "apply_edits",
    "decode_text",
    "head_lines",
    "tail_lines",
    "unified_diff",
]

CHUNK = 64 * 1024


class BinaryFile(ValueError):
    """The file holds NUL bytes: it is not text (read it with read_media_file)."""


class EditNotFound(ValueError):
    """An edit's ``oldText`` was found neither exactly nor line by line ignoring indentation."""


def _check_text(chunk: bytes) -> None:
    if b"\x00" in chunk:
        raise BinaryFile("it is a binary file (it contains NUL bytes); use read_media_file to read it")


def decode_text(data: bytes) -> str:
    """``data`` as text: refused if binary, undecodable UTF-8 sequences shown as U+FFFD (as Node does)."""
    _check_text(data)
    return data.decode("utf-8", "replace")


def head_lines(stream: IO[Any], count: int) -> str:
    """The first ``count`` lines, joined by '\\n' (no trailing newline); a last line without a newline
    counts as a line. Reads only as far as needed."""
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    lines: list[str] = []
    pending = ""
    while len(lines) < count:
        chunk = stream.read(CHUNK)
        if not chunk:
            break
        _check_text(chunk)
        pending += decoder.decode(chunk)
        *complete, pending = pending.split("\n")
        lines += complete[: count - len(lines)]
    pending += decoder.decode(b"", final=True)
    if pending and len(lines) < count:
        lines.append(pending.split("\n", 1)[0])
    return "\n".join(lines)


def tail_lines(stream: IO[Any], size: int, count: int) -> str:
    """The last ``count`` lines of a seekable stream of ``size`` bytes, CRLF read as LF, keeping the
    file's final newline if it has one. Reads backwards only as far as needed."""
    if size == 0 or count <= 0:
        return ""
    chunks: list[bytes] = []
    position = size
    newlines = 0
    # One more newline than lines wanted (plus the file's own final one) marks the start of the first line.
    needed = count + 1
    while position > 0:
        step = min(CHUNK, position)
        position -= step
        stream.seek(position)
        chunk = stream.read(step)
        _check_text(chunk)
        chunks.append(chunk)
        newlines += chunk.count(b"\n")
        if newlines - (1 if chunks[0].endswith(b"\n") else 0) >= needed:
            break
    text = b"".join(reversed(chunks)).decode("utf-8", "replace").replace("\r\n", "\n")
    final_newline = text.endswith("\n")
    lines = (text[:-1] if final_newline else text).split("\n")
    return "\n".join(lines[-count:]) + ("\n" if final_newline else "")


_INDENT = re.compile(r"^\s*")


def _indent(line: str) -> str:
    match = _INDENT.match(line)
    return match.group(0) if match else ""


def apply_edits(content: str, edits: Sequence[tuple[str, str]]) -> str:
    """Apply ``(oldText, newText)`` edits in order, as the official server does: the first exact
    occurrence is replaced; failing that, a run of lines equal to ``oldText``'s lines up to surrounding
    whitespace is replaced, keeping the indentation of the first matched line. CRLF is read as LF."""
    text = content.replace("\r\n", "\n")
    for old_raw, new_raw in edits:
        old = old_raw.replace("\r\n", "\n")
        new = new_raw.replace("\r\n", "\n")
        if old in text:
            text = text.replace(old, new, 1)
            continue
        old_lines = old.split("\n")
        lines = text.split("\n")
        wanted = [line.strip() for line in old_lines]
        for start in range(len(lines) - len(old_lines) + 1):
            if [line.strip() for line in lines[start : start + len(old_lines)]] != wanted:
                continue
            base = _indent(lines[start])
            replacement = []
            for j, line in enumerate(new.split("\n")):
                if j == 0:
                    replacement.append(base + line.lstrip())
                    continue
                old_indent = _indent(old_lines[j]) if j < len(old_lines) else ""
                new_indent = _indent(line)
                if old_indent and new_indent:
                    extra = max(0, len(new_indent) - len(old_indent))
                    replacement.append(base + " " * extra + line.lstrip())
                else:
                    replacement.append(line)
            lines[start : start + len(old_lines)] = replacement
            text = "\n".join(lines)
            break
        else:
            raise EditNotFound(f"Could not find exact match for edit:\n{old_raw}")
    return text


def _tokens(text: str) -> list[str]:
    # Lines end at '\n' only (str.splitlines would also split at '\r', '\x0c', U+2028...).
    return _LINE.findall(text)


_LINE = re.compile(r"[^\n]*\n|[^\n]+$")


def unified_diff(old: str, new: str, name: str, context: int = 4) -> str:
    """A git-style unified diff of ``old`` -> ``new`` in the official server's format (jsdiff's
    ``createTwoFilesPatch``: an ``Index:`` line, ``original``/``modified`` headers, 4 lines of context,
    ``\\ No newline at end of file`` markers)."""
    old = old.replace("\r\n", "\n")
    new = new.replace("\r\n", "\n")
    a, b = _tokens(old), _tokens(new)
    out = [
        f"Index: {name}",
        "=" * 67,
        f"--- {name}\toriginal",
        f"+++ {name}\tmodified",
    ]
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for group in matcher.get_grouped_opcodes(context):
        i1, i2 = group[0][1], group[-1][2]
        j1, j2 = group[0][3], group[-1][4]
        old_len, new_len = i2 - i1, j2 - j1
        out.append(f"@@ -{i1 + 1 if old_len else i1},{old_len} +{j1 + 1 if new_len else j1},{new_len} @@")
        for tag, x1, x2, y1, y2 in group:
            if tag == "equal":
                out += _marked(" ", a[x1:x2])
                continue
            out += _marked("-", a[x1:x2])
            out += _marked("+", b[y1:y2])
    return "\n".join(out) + "\n"


def _marked(sign: str, lines: list[str]) -> list[str]:
    out = []
    for line in lines:
        if line.endswith("\n"):
            out.append(sign + line[:-1])
        else:
            out += [sign + line, "\\ No newline at end of file"]
    return out
