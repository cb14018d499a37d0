"""Locators: places inside a parameter's value (``cfg.path``, ``items[].src``, ``opts{}.path``), their steps,
how one is written and read back. Pure: no I/O, no SDK.
"""

from __future__ import annotations

import re
import typing
from dataclasses import dataclass

__all__ = [
    "EACH",
    "KEYS",
    "MAX_DEPTH",
    "OPAQUE",
    "VALUES",
    "Locator",
    "Step",
    "as_locator",
    "parse_locator",
    "render",
]

MAX_DEPTH = 8  # the most steps in a locator (the parameter's own name included)

OPAQUE = "..."  # the end of a locator that path_locators could not follow (too deep, recursive, unresolved)

StepKind = typing.Literal["field", "each", "index", "values", "keys"]


@dataclass(frozen=True)
class Step:
    """One step of a locator: ``field`` (``.name``: a record's field or a mapping's key), ``each`` (``[]``:
    every element of a list, tuple or set), ``index`` (``[N]``: one element), ``values`` (``{}``: every
    value of a mapping), ``keys`` (``{key}``: every key of a mapping; last only, a key is a path or nothing).
    """

    kind: StepKind
    name: str = ""
    index: int = 0

    def __str__(self) -> str:
        texts = {"field": "." + self.name, "each": "[]", "values": "{}", "keys": "{key}"}
        return texts.get(self.kind, f"[{self.index}]")


EACH, VALUES, KEYS = Step("each"), Step("values"), Step("keys")


@dataclass(frozen=True)
class Locator:
    """Places inside a value, relative to it: ``""`` is the value itself, ``cfg.path`` the field (or key)
    ``path`` of ``cfg``, ``items[].src`` the ``src`` of every element of ``items``, ``opts{}.path`` that of
    every value of the mapping ``opts``. Applied to a call's bound arguments, the first name is the
    parameter. At most ``MAX_DEPTH`` steps; ``path_locators`` ends a locator with ``...`` where paths lie
    deeper or inside a recursive type: no ``@guard.paths`` can name that place, so it stays unguarded.
    """

    steps: tuple[Step, ...] = ()

    @property
    def parameter(self) -> str | None:
        """The first field's name: the parameter, when the locator applies to bound arguments."""
        return self.steps[0].name if self.steps and self.steps[0].kind == "field" else None

    def within(self) -> Locator:
        """This locator without its first step (relative to the parameter's value)."""
        return Locator(self.steps[1:])

    def __str__(self) -> str:
        return render(self.steps)


def render(steps: typing.Sequence[Step | str]) -> str:
    text = "".join(map(str, steps))
    return text[1:] if steps and isinstance(steps[0], Step) and steps[0].kind == "field" else text


_NAME = r"[^.\[\]{}\s]+"

_TOKEN = re.compile(
    rf"(?P<first>{_NAME})|\.(?P<field>{_NAME})|\[(?P<index>[0-9]{{0,9}})\]|\{{(?P<key>(key)?)\}}"
)

_SYNTAX = f"""a locator is a name, then '.name' (a field or key), '[]' (each element), '[N]' (one), '{{}}' \
(each value of a mapping), '{{key}}' (each key, last only); at most {MAX_DEPTH} steps; e.g. 'items[].src'"""


def parse_locator(text: str) -> Locator:
    """The locator written ``text`` (``""``, ``path``, ``cfg.path``, ``items[].src``, ``opts{}.path``).

    Raises ``ValueError`` naming ``text`` and the rule for anything else (a ``...`` locator included).
    """
    if text.endswith(OPAQUE):
        raise ValueError(
            f"locator {text!r}: the paths at '...' lie too deep or in a recursive type, and "
            "cannot be guarded by name; exempt the tool or flatten the type"
        )
    steps: list[Step] = []
    pos = 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None or match["first" if pos else "field"] is not None:  # 'a' first, '.a' after
            raise ValueError(f"bad locator {text!r} at offset {pos}: {_SYNTAX}")
        pos = match.end()
        if match["first"] is not None or match["field"] is not None:
            steps.append(Step("field", match["first"] or match["field"]))
        elif match["index"] is not None:
            steps.append(Step("index", index=int(match["index"])) if match["index"] else EACH)
        else:
            steps.append(KEYS if match["key"] else VALUES)
    if len(steps) > MAX_DEPTH:
        raise ValueError(f"bad locator {text!r}: {len(steps)} steps; {_SYNTAX}")
    if KEYS in steps[:-1]:
        raise ValueError(f"bad locator {text!r}: '{{key}}' must be the last step; {_SYNTAX}")
    return Locator(tuple(steps))


def as_locator(locator: Locator | str) -> Locator:
    return locator if isinstance(locator, Locator) else parse_locator(locator)
