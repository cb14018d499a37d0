"""Text work of the filesystem tools, on bytes and strings only (no paths): the first or last lines of a
stream, binary detection, the official server's edit rules, and its git-style unified diff.
"""

from __future__ import annotations

import codecs
import difflib
import re
import threading
from collections import Counter
from collections.abc import Sequence
from typing import IO, Any

__all__ = [
    "BinaryFile",
    "EditNotFound",
    "OverBudget",
    "TooManyBytes",
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


class TooManyBytes(ValueError):
    """The lines asked for (head or tail) hold more bytes than the read cap."""


class OverBudget(ValueError):
    """Text work was cancelled with its call."""


def _too_many(count: int, cap: int) -> TooManyBytes:
    return TooManyBytes(f"its {count:,} lines asked for are more than {cap:,} bytes; ask for fewer lines")


def _check_text(chunk: bytes) -> None:
    if b"\x00" in chunk:
        raise BinaryFile("it is a binary file (it contains NUL bytes); use read_media_file to read it")


def decode_text(data: bytes) -> str:
    """``data`` as text: refused if binary, undecodable UTF-8 sequences shown as U+FFFD (as Node does)."""
    _check_text(data)
    return data.decode("utf-8", "replace")


def head_lines(stream: IO[Any], count: int, *, max_bytes: int | None = None) -> str:
    """The first ``count`` lines, joined by '\\n' (no trailing newline); a last line without a newline
    counts as a line. Reads only as far as needed, and never more than ``max_bytes`` (TooManyBytes)."""
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    lines: list[str] = []
    pending: list[str] = []  # the start of a line not yet ended, in pieces (no quadratic joining)
    read = 0
    while len(lines) < count:
        chunk = stream.read(CHUNK)
        if not chunk:
            break
        read += len(chunk)
        _check_text(chunk)
        *complete, rest = decoder.decode(chunk).split("\n")
        if complete:
            complete[0] = "".join(pending) + complete[0]
            pending.clear()
            lines += complete[: count - len(lines)]
        pending.append(rest)
        if max_bytes is not None and read > max_bytes and len(lines) < count:
            # The lines asked for are not all in the cap (the ones given count toward it too).
            raise _too_many(count, max_bytes)
    last = "".join(pending) + decoder.decode(b"", final=True)
    if last and len(lines) < count:
        lines.append(last.split("\n", 1)[0])
    text = "\n".join(lines)
    if max_bytes is not None and len(text) > max_bytes:
        raise _too_many(count, max_bytes)
    return text


def tail_lines(stream: IO[Any], size: int, count: int, *, max_bytes: int | None = None) -> str:
    """The last ``count`` lines of a seekable stream of ``size`` bytes, CRLF read as LF, keeping the
    file's final newline if it has one. Reads backwards only as far as needed, and never more than
    ``max_bytes`` (TooManyBytes)."""
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
        if max_bytes is not None and size - position > max_bytes:
            raise _too_many(count, max_bytes)
    text = b"".join(reversed(chunks)).decode("utf-8", "replace").replace("\r\n", "\n")
    final_newline = text.endswith("\n")
    lines = (text[:-1] if final_newline else text).split("\n")
    out = "\n".join(lines[-count:]) + ("\n" if final_newline else "")
    if max_bytes is not None and len(out) > max_bytes:
        raise _too_many(count, max_bytes)
    return out


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
        start = _find_lines([line.strip() for line in lines], [line.strip() for line in old_lines])
        if start >= 0:
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
        else:
            raise EditNotFound(f"Could not find exact match for edit:\n{old_raw}")
    return text


def _find_lines(lines: list[str], wanted: list[str]) -> int:
    """The first index where ``wanted`` is a run of ``lines`` (none holds a newline), or -1: one
    substring search of the joined texts, linear, where comparing run by run is quadratic."""
    haystack = "\n" + "\n".join(lines) + "\n"
    position = haystack.find("\n" + "\n".join(wanted) + "\n")
    return -1 if position < 0 else haystack.count("\n", 0, position)


def _tokens(text: str) -> list[str]:
    # Lines end at '\n' only (str.splitlines would also split at '\r', '\x0c', U+2028...).
    return _LINE.findall(text)


_LINE = re.compile(r"[^\n]*\n|[^\n]+$")


def unified_diff(
    old: str,
    new: str,
    name: str,
    context: int = 4,
    *,
    max_work: int | None = None,
    stop: threading.Event | None = None,
) -> str:
    """A git-style unified diff of ``old`` -> ``new`` in the official server's format (jsdiff's
    ``createTwoFilesPatch``: an ``Index:`` line, ``original``/``modified`` headers, 4 lines of context,
    ``\\ No newline at end of file`` markers).

    The lines both sides share at the start and at the end are set aside first (linear); the rest is
    matched line by line only while that costs at most ``max_work`` comparisons, else it is shown as
    removed and added whole (a correct diff, not the shortest). ``stop`` set: OverBudget."""
    old = old.replace("\r\n", "\n")
    new = new.replace("\r\n", "\n")
    a, b = _tokens(old), _tokens(new)
    out = [
        f"Index: {name}",
        "=" * 67,
        f"--- {name}\toriginal",
        f"+++ {name}\tmodified",
    ]
    for group in _grouped_opcodes(a, b, context, max_work, stop):
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


_Opcode = tuple[str, int, int, int, int]


def _grouped_opcodes(
    a: list[str], b: list[str], context: int, max_work: int | None, stop: threading.Event | None
) -> list[list[_Opcode]]:
    head = 0
    limit = min(len(a), len(b))
    while head < limit and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < limit - head and a[len(a) - 1 - tail] == b[len(b) - 1 - tail]:
        tail += 1
    mid_a, mid_b = a[head : len(a) - tail], b[head : len(b) - tail]
    # SequenceMatcher (autojunk off) looks, for each line of one side, at every equal line of the other:
    # its work is about the sum below, which is quadratic for many equal lines.
    counts = Counter(mid_b)
    work = sum(counts[line] for line in mid_a)
    if stop is not None and stop.is_set():
        raise OverBudget("cancelled")
    middle: list[_Opcode]
    if max_work is not None and work > max_work:
        # Many equal lines: the shortest edit script (Myers), whose work grows with the number of lines
        # changed, not with the equal ones; past the budget, the changed part shown whole.
        found = _shortest_edit(mid_a, mid_b, max_work, stop)
        middle = found if found is not None else [("replace", 0, len(mid_a), 0, len(mid_b))]
    else:
        matcher = difflib.SequenceMatcher(None, mid_a, mid_b, autojunk=False)
        middle = [(tag, x1, x2, y1, y2) for tag, x1, x2, y1, y2 in matcher.get_opcodes()]
    codes: list[_Opcode] = []
    if head:
        codes.append(("equal", 0, head, 0, head))
    codes += [
        (tag, x1 + head, x2 + head, y1 + head, y2 + head)
        for tag, x1, x2, y1, y2 in middle
        if x1 != x2 or y1 != y2
    ]
    if tail:
        codes.append(("equal", len(a) - tail, len(a), len(b) - tail, len(b)))
    merged: list[_Opcode] = []
    for code in codes:  # adjacent equal runs (a shared head next to an equal start of the middle) as one
        if merged and merged[-1][0] == code[0] == "equal":
            last = merged.pop()
            code = ("equal", last[1], code[2], last[3], code[4])
        merged.append(code)
    return _grouped(merged, context)


def _shortest_edit(
    a: list[str], b: list[str], max_work: int, stop: threading.Event | None
) -> list[_Opcode] | None:
    """Myers' greedy shortest edit script of ``a`` -> ``b`` as opcodes, or None once it has cost
    ``max_work`` steps (or ``stop`` is set). Time O((N+M)·D) and memory O(D²) for D lines changed, both
    bounded by ``max_work``: the furthest point of each diagonal k is kept per round d, as a list."""
    n, m = len(a), len(b)
    limit = min(n + m, max_work)
    offset = limit + 1  # diagonal k lives at index k + offset
    frontier = [0] * (2 * limit + 3)
    trace: list[list[int]] = []  # trace[d][k + d + 1]: the frontier of diagonals -d-1..d+1 before round d
    work = 0
    for d in range(limit + 1):
        trace.append(frontier[offset - d - 1 : offset + d + 2])
        for k in range(-d, d + 1, 2):
            if k == -d or (k != d and frontier[offset + k - 1] < frontier[offset + k + 1]):
                x = frontier[offset + k + 1]
            else:
                x = frontier[offset + k - 1] + 1
            y = x - k
            start = x
            while x < n and y < m and a[x] == b[y]:
                x += 1
                y += 1
            work += 1 + x - start
            frontier[offset + k] = x
            if x >= n and y >= m:
                return _opcodes(_path(trace, n, m))
        work += d  # the round's copy of the frontier
        if work > max_work or (stop is not None and stop.is_set()):
            return None
    return None


def _path(trace: list[list[int]], x: int, y: int) -> list[tuple[str, int, int]]:
    """The edit script's single steps, first to last: ("equal" | "delete" | "insert", i, j)."""
    steps: list[tuple[str, int, int]] = []
    for d in range(len(trace) - 1, -1, -1):
        frontier = trace[d]
        k = x - y
        if k == -d or (k != d and frontier[k - 1 + d + 1] < frontier[k + 1 + d + 1]):
            previous_k = k + 1
        else:
            previous_k = k - 1
        previous_x = frontier[previous_k + d + 1] if d > 0 else 0
        previous_y = previous_x - previous_k if d > 0 else 0
        while x > previous_x and y > previous_y:
            x -= 1
            y -= 1
            steps.append(("equal", x, y))
        if d > 0:
            steps.append(("insert", x, y - 1) if x == previous_x else ("delete", x - 1, y))
        x, y = previous_x, previous_y
    steps.reverse()
    return steps


def _opcodes(steps: list[tuple[str, int, int]]) -> list[_Opcode]:
    """Single steps as SequenceMatcher's opcodes: runs of equal lines, and what changed between them."""
    codes: list[_Opcode] = []
    i = j = 0
    index = 0
    while index < len(steps):
        kind = steps[index][0]
        end = index
        if kind == "equal":
            while end < len(steps) and steps[end][0] == "equal":
                end += 1
            count = end - index
            codes.append(("equal", i, i + count, j, j + count))
            i, j = i + count, j + count
        else:
            while end < len(steps) and steps[end][0] != "equal":
                end += 1
            removed = sum(1 for step in steps[index:end] if step[0] == "delete")
            added = end - index - removed
            tag = "replace" if removed and added else ("delete" if removed else "insert")
            codes.append((tag, i, i + removed, j, j + added))
            i, j = i + removed, j + added
        index = end
    return codes


def _grouped(codes: list[_Opcode], n: int) -> list[list[_Opcode]]:
    """The hunks of ``codes`` with ``n`` lines of context (``SequenceMatcher.get_grouped_opcodes``)."""
    codes = codes or [("equal", 0, 1, 0, 1)]
    if codes[0][0] == "equal":
        tag, i1, i2, j1, j2 = codes[0]
        codes[0] = tag, max(i1, i2 - n), i2, max(j1, j2 - n), j2
    if codes[-1][0] == "equal":
        tag, i1, i2, j1, j2 = codes[-1]
        codes[-1] = tag, i1, min(i2, i1 + n), j1, min(j2, j1 + n)
    groups: list[list[_Opcode]] = []
    group: list[_Opcode] = []
    for tag, i1, i2, j1, j2 in codes:
        if tag == "equal" and i2 - i1 > n + n:
            group.append((tag, i1, min(i2, i1 + n), j1, min(j2, j1 + n)))
            groups.append(group)
            group = []
            i1, j1 = max(i1, i2 - n), max(j1, j2 - n)
        group.append((tag, i1, i2, j1, j2))
    if group and not (len(group) == 1 and group[0][0] == "equal"):
        groups.append(group)
    return groups


def _marked(sign: str, lines: list[str]) -> list[str]:
    out = []
    for line in lines:
        if line.endswith("\n"):
            out.append(sign + line[:-1])
        else:
            out += [sign + line, "\\ No newline at end of file"]
    return out
