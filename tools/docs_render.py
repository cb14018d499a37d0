"""The docs build's checks that a page renders as written (mkdocs.yml names this file as a hook).

A list written right under its lead-in line (Python-Markdown needs a blank line) renders as running text:
``on_page_content`` fails the build on it. ``on_post_page`` fails it on a script or style sheet fetched from
another host: the site reads and highlights offline.
"""

from __future__ import annotations

import html as html_module
import re
import sys
from pathlib import Path
from typing import Any

_PARAGRAPH = re.compile(r"<p\b[^>]*>(.*?)</p>", re.S)
# An item marker at the start of a line inside a paragraph: "- ", "* ", "+ ", "1. ", "1) ".
_MARKER = re.compile(r"\n[ \t]*(?:[-*+]|\d{1,3}[.)])[ \t]+\S")
_TAG = re.compile(r"<[^>]+>")


def flattened_lists(html: str) -> list[str]:
    """The paragraphs of ``html`` that hold a list marker after a line break, as text (tags removed)."""
    found = []
    for match in _PARAGRAPH.finditer(html):
        text = html_module.unescape(_TAG.sub("", match.group(1)))
        if _MARKER.search(text):
            found.append(text)
    return found


_FLATTENED: dict[str, list[str]] = {}


def on_pre_build(**kwargs: Any) -> None:
    _FLATTENED.clear()


def on_page_content(html: str, page: Any, **kwargs: Any) -> str:
    found = flattened_lists(html)
    if found:
        _FLATTENED[page.file.src_path] = found
    return html


def on_post_build(**kwargs: Any) -> None:
    """Fail the build naming every page with a flattened list (not only the first)."""
    if _FLATTENED:
        from mkdocs.exceptions import PluginError

        lines = [
            f"  {path}: {' / '.join(line.strip() for line in text.strip().splitlines()[:2])!r}"
            for path, found in _FLATTENED.items()
            for text in found
        ]
        raise PluginError(
            "lists rendered as running text (a list needs a blank line before it):\n" + "\n".join(lines)
        )


# A script or style sheet loaded from another host (a CDN): offline, the page would lose it.
_REMOTE = re.compile(r"<(?:script\b[^>]*\bsrc|link\b[^>]*\bhref)=\"(?:https?:)?//[^\"]+\"[^>]*>")


def remote_assets(html: str) -> list[str]:
    """The ``<script src>`` and ``<link href>`` tags of ``html`` that load from another host."""
    return [
        tag for tag in _REMOTE.findall(html) if "<link" not in tag or "stylesheet" in tag or "preload" in tag
    ]


def on_post_page(output: str, page: Any, **kwargs: Any) -> str:
    found = remote_assets(output)
    if found:
        from mkdocs.exceptions import PluginError

        raise PluginError(f"{page.file.src_path}: the page loads from another host: {found[0]!r}")
    return output


_ITEM = re.compile(r"^\s*(?:[-*+]|\d{1,3}[.)])\s+\S")


def fix(text: str) -> str:
    """``text`` (Markdown) with a blank line before every list that follows its lead-in line directly."""
    out: list[str] = []
    fenced = in_list = False
    for line in text.split("\n"):
        if line.lstrip().startswith(("```", "~~~")):
            fenced, in_list = not fenced, False
        elif not fenced and _ITEM.match(line):
            previous = out[-1] if out else ""
            if previous.strip() and not in_list and not previous.lstrip().startswith(("#", "|", ">")):
                out.append("")
            in_list = True
        elif not fenced and line.strip() and not line.startswith((" ", "\t")):
            in_list = False
        out.append(line)
    return "\n".join(out)


if __name__ == "__main__":  # python3 tools/docs_render.py --fix PAGE.md...: write the blank lines in
    if sys.argv[1:2] != ["--fix"]:
        sys.exit("usage: python3 tools/docs_render.py --fix PAGE.md...")
    for name in sys.argv[2:]:
        page = Path(name)
        page.write_text(fix(page.read_text(encoding="utf-8")), encoding="utf-8")
