"""Glob patterns as the official filesystem server reads them (minimatch with ``dot: true``), matched in
time bounded by the pattern and the name (an automaton over path components, bit-parallel within one):
never by a backtracking regular expression.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

__all__ = [
    "MAX_ALTERNATIVES",
    "MAX_EXCLUDE_CHARS",
    "MAX_EXCLUDE_PATTERNS",
    "MAX_PATTERN_LENGTH",
    "Glob",
    "State",
    "compile_glob",
    "excluder",
]

#: A pattern is a few dozen characters in practice; this bounds the work and the alternation blow-up.
MAX_PATTERN_LENGTH = 1024
MAX_ALTERNATIVES = 256
#: excludePatterns of one call: how many, and how many characters all together.
MAX_EXCLUDE_PATTERNS = 64
MAX_EXCLUDE_CHARS = 8192

State = frozenset[int]
_MAX_MEMO_PLACES = 100_000

_BRACE = re.compile(r"\{([^{}]*)\}")  # no nested quantifier: linear


def _expand_braces(pattern: str) -> list[str]:
    """``a{b,c}d`` -> ``[abd, acd]``, innermost-first; a brace without a comma stays literal."""
    results = [pattern]
    for _ in range(MAX_ALTERNATIVES):
        expanded: list[str] = []
        changed = False
        for text in results:
            match = _BRACE.search(text)
            if match is None or "," not in match.group(1):
                expanded.append(text)
                continue
            changed = True
            for option in match.group(1).split(","):
                expanded.append(text[: match.start()] + option + text[match.end() :])
        results = expanded
        if len(results) > MAX_ALTERNATIVES:
            raise ValueError(f"glob pattern {pattern!r} expands to more than {MAX_ALTERNATIVES} alternatives")
        if not changed:
            return results
    return results


@dataclass(frozen=True)
class _Class:
    """``[...]``: single characters and ranges, maybe negated."""

    chars: frozenset[str]
    ranges: tuple[tuple[str, str], ...]
    negate: bool

    def matches(self, char: str) -> bool:
        inside = char in self.chars or any(low <= char <= high for low, high in self.ranges)
        return inside != self.negate


_STAR = object()  # any run of characters within the component
_ANY = object()  # '?': one character
_Token = str | _Class | object


def _parse_class(body: str, pattern: str) -> _Class:
    negate = body[:1] in ("!", "^")
    if negate:
        body = body[1:]
    chars: set[str] = set()
    ranges: list[tuple[str, str]] = []
    i = 0
    while i < len(body):
        if i + 2 < len(body) and body[i + 1] == "-":
            low, high = body[i], body[i + 2]
            if low > high:
                raise ValueError(
                    f"glob pattern {pattern!r} has the character range {low}-{high}, which is backwards "
                    f"(write {high}-{low})"
                )
            ranges.append((low, high))
            i += 3
            continue
        chars.add(body[i])
        i += 1
    return _Class(frozenset(chars), tuple(ranges), negate)


def _tokens(text: str, pattern: str) -> tuple[_Token, ...]:
    """The tokens of one path component (no '/' inside)."""
    out: list[_Token] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char == "*":
            while i + 1 < len(text) and text[i + 1] == "*":
                i += 1  # '**' inside a component is a plain '*'
            out.append(_STAR)
        elif char == "?":
            out.append(_ANY)
        elif char == "[":
            end = text.find("]", i + 2 if i + 1 < len(text) and text[i + 1] in "!^" else i + 1)
            if end == -1:
                out.append(char)
            else:
                body = text[i + 1 : end]
                if body in ("", "!", "^"):
                    raise ValueError(f"glob pattern {pattern!r} has an empty character class []")
                out.append(_parse_class(body, pattern))
                i = end
        elif char == "\\" and i + 1 < len(text):
            i += 1
            out.append(text[i])
        else:
            out.append(char)
        i += 1
    return tuple(out)


class _Component:
    """One component of a pattern, matched against one name in one pass over the name: the places a match
    may be at are the bits of one integer, all stepped at once per character (bit-parallel, "shift-and"),
    so no '*' is ever backtracked into. Work: len(name) steps of a few integer operations on
    len(pattern) bits."""

    __slots__ = (
        "_any",
        "_cache",
        "_classes",
        "_final",
        "_literal",
        "_stay",
        "exact",
        "prefix",
        "size",
        "suffix",
    )

    def __init__(self, tokens: tuple[_Token, ...]) -> None:
        literal = all(type(t) is str for t in tokens)
        self.exact: str | None = "".join(tokens) if literal else None  # type: ignore[arg-type]
        # '*' with literal text around it ('*.py', 'test_*'): a prefix and a suffix test.
        self.prefix: str | None = None
        self.suffix: str | None = None
        stars = [i for i, t in enumerate(tokens) if t is _STAR]
        if len(stars) == 1 and all(type(t) is str for t in tokens if t is not _STAR):
            self.prefix = "".join(tokens[: stars[0]])  # type: ignore[arg-type]
            self.suffix = "".join(tokens[stars[0] + 1 :])  # type: ignore[arg-type]
        # Bit i: the first i one-character tokens are matched. A '*' after token i lets bit i stay set.
        self._literal: dict[str, int] = {}
        self._any = 0
        self._classes: list[tuple[int, _Class]] = []
        self._stay = 0
        position = 0
        for token in tokens:
            if token is _STAR:
                self._stay |= 1 << position
                continue
            position += 1
            bit = 1 << position
            if token is _ANY:
                self._any |= bit
            elif isinstance(token, _Class):
                self._classes.append((bit, token))
            else:
                assert isinstance(token, str)
                self._literal[token] = self._literal.get(token, 0) | bit
        self.size = position  # the fewest characters a matching name has
        self._final = 1 << position
        self._cache: dict[str, int] = {}

    def _mask(self, char: str) -> int:
        """The bits of the tokens that take ``char``."""
        mask = self._cache.get(char)
        if mask is None:
            mask = self._literal.get(char, 0) | self._any
            for bit, klass in self._classes:
                if klass.matches(char):
                    mask |= bit
            if len(self._cache) < 4096:
                self._cache[char] = mask
        return mask

    def matches(self, name: str) -> bool:
        if self.exact is not None:
            return name == self.exact
        if self.prefix is not None and self.suffix is not None:
            return (
                len(name) >= len(self.prefix) + len(self.suffix)
                and name.startswith(self.prefix)
                and name.endswith(self.suffix)
            )
        if len(name) < self.size:
            return False
        state, stay = 1, self._stay
        for char in name:
            state = ((state << 1) & self._mask(char)) | (state & stay)
            if not state:
                return False
        return bool(state & self._final)


# What a place in the automaton does with the next name.
_MATCH = 0  # the name must match this component, then on to the next place
_SPAN = 1  # '**' before more components: takes any names, or none (the next place is reachable now)
_SPAN_LAST = 2  # '**' at the end: takes one name or more, then accepts
_REST = 3  # after a last '**': takes any names, accepts
_END = 4  # the whole pattern matched: accepts, takes no more names


class _Steps:
    """Where a state goes on a name, precomputed once per state: exact names by dictionary."""

    __slots__ = ("by_name", "stay", "tests")

    def __init__(self, glob: Glob, state: State) -> None:
        self.by_name: dict[str, set[int]] = {}
        self.tests: list[tuple[_Component, int]] = []
        stay: set[int] = set()
        for place in state:
            kind = glob.kinds[place]
            if kind == _MATCH:
                component = glob.components[place]
                assert component is not None
                if component.exact is not None:
                    self.by_name.setdefault(component.exact, set()).add(place + 1)
                else:
                    self.tests.append((component, place + 1))
            elif kind in (_SPAN, _REST):
                stay.add(place)
            elif kind == _SPAN_LAST:
                stay.add(place + 1)
        self.stay = frozenset(stay)


class Glob:
    """A compiled pattern (or several, for excludePatterns): ``start()``, ``step(state, name)`` for each
    path component in turn, ``accepts(state)``; an empty state can never match again.

    ``*`` and ``?`` stay inside one path component, ``**`` as a whole component spans any number of them,
    ``[...]`` is a character class (``!`` or ``^`` negates) and ``{a,b}`` alternates. The state is the set
    of places the match may be at; a walk carries its parent's state down, so a name costs one step, not a
    match of its whole path."""

    def __init__(self, alternatives: Sequence[str], source: str) -> None:
        self.source = source
        self.kinds: list[int] = []
        self.components: list[_Component | None] = []
        starts: list[int] = []
        interned: dict[tuple[_Token, ...], _Component] = {}
        for alternative in alternatives:
            parts = alternative.split("/")
            starts.append(len(self.kinds))
            for index, part in enumerate(parts):
                if part == "**":
                    self.kinds.append(_SPAN if index < len(parts) - 1 else _SPAN_LAST)
                    self.components.append(None)
                    continue
                tokens = _tokens(part, source)
                self.kinds.append(_MATCH)
                self.components.append(interned.setdefault(tokens, _Component(tokens)))
            if parts[-1] == "**":
                self.kinds.append(_REST)
                self.components.append(None)
            else:
                self.kinds.append(_END)
                self.components.append(None)
        self.accepting = frozenset(i for i, kind in enumerate(self.kinds) if kind in (_END, _REST))
        self._start = self._closure(starts)
        self._steps: dict[State, _Steps] = {}
        self._memo_places = 0

    def _closure(self, places: Sequence[int] | set[int]) -> State:
        out: set[int] = set()
        for place in places:
            while place not in out:
                out.add(place)
                if self.kinds[place] != _SPAN:
                    break
                place += 1  # '**' may take no names at all
        return frozenset(out)

    def start(self) -> State:
        return self._start

    def step(self, state: State, name: str) -> State:
        """The state after one more path component ``name``."""
        if not state:
            return state
        steps = self._steps.get(state)
        if steps is None:
            # A walk meets few distinct states; bound the memo anyway, by the places it holds.
            self._memo_places += len(state)
            if self._memo_places > _MAX_MEMO_PLACES:
                self._steps.clear()
                self._memo_places = len(state)
            steps = self._steps[state] = _Steps(self, state)
        reached = set(steps.stay)
        exact = steps.by_name.get(name)
        if exact is not None:
            reached |= exact
        for component, place in steps.tests:
            if place not in reached and component.matches(name):
                reached.add(place)
        return self._closure(reached) if reached else frozenset()

    def accepts(self, state: State) -> bool:
        return not self.accepting.isdisjoint(state)

    def fullmatch(self, path: str) -> bool:
        """Whether ``path`` (relative, '/'-separated) matches."""
        state = self._start
        for name in path.split("/"):
            state = self.step(state, name)
            if not state:
                return False
        return self.accepts(state)


def _check(pattern: object) -> str:
    if not isinstance(pattern, str) or not pattern:
        raise ValueError("a glob pattern must be a non-empty string")
    if len(pattern) > MAX_PATTERN_LENGTH:
        raise ValueError(f"glob pattern is longer than {MAX_PATTERN_LENGTH} characters")
    return pattern


@lru_cache(maxsize=256)
def compile_glob(pattern: str) -> Glob:
    """The compiled matcher of ``pattern``; ValueError naming the pattern if it is not usable."""
    return Glob(_expand_braces(_check(pattern)), pattern)


@lru_cache(maxsize=64)
def _excluder(patterns: tuple[str, ...], anywhere: bool) -> Glob:
    alternatives: list[str] = []
    for pattern in patterns:
        variants = [pattern]
        if anywhere and "*" not in pattern:
            variants += [f"**/{pattern}", f"**/{pattern}/**"]
        for variant in variants:
            alternatives += _expand_braces(variant)
        if len(alternatives) > 4 * MAX_ALTERNATIVES:
            raise ValueError(f"the patterns expand to more than {4 * MAX_ALTERNATIVES} alternatives")
    return Glob(alternatives, ", ".join(patterns))


def excluder(patterns: Sequence[str], *, anywhere: bool) -> Glob | None:
    """One matcher for a list of exclude patterns, or None when there are none.

    With ``anywhere`` (``directory_tree``), a pattern without ``*`` also excludes that name at any depth
    and everything below it (``node_modules`` excludes ``src/node_modules/x``), as the official server does.
    At most MAX_EXCLUDE_PATTERNS patterns of MAX_EXCLUDE_CHARS characters in all.
    """
    if not patterns:
        return None
    if len(patterns) > MAX_EXCLUDE_PATTERNS:
        raise ValueError(f"at most {MAX_EXCLUDE_PATTERNS} patterns; got {len(patterns)}")
    total = sum(len(p) if isinstance(p, str) else 0 for p in patterns)
    if total > MAX_EXCLUDE_CHARS:
        raise ValueError(f"at most {MAX_EXCLUDE_CHARS} characters of patterns in all; got {total:,}")
    for pattern in patterns:
        _check(pattern)
    return _excluder(tuple(patterns), anywhere)
