"""The docs build's two checks on Sphinx roles (mkdocs.yml names both).

The docstrings cross-reference in Sphinx's style (``:func:`name` ``), which mkdocstrings renders as literal
text. ``SphinxRoles`` (a griffe extension, run by mkdocstrings as it loads the sources) turns each role into
inline code before the docstring is rendered; ``on_page_content`` (a mkdocs hook) fails the build when a
literal role still reaches a page, from a docstring or from a page's own Markdown.
"""

from __future__ import annotations

import re
from typing import Any

from griffe import Extension
from mkdocs.exceptions import PluginError

ROLE = re.compile(
    r":(?:py:)?(?:func|class|meth|attr|exc|data|mod|obj|const|ref|term|doc|envvar|file):`~?([^`]+)`"
)
# A role as it reaches the HTML: the role's name, then the backquoted part rendered as <code>.
LITERAL = re.compile(
    r":(?:py:)?(?:func|class|meth|attr|exc|data|mod|obj|const|ref|term|doc|envvar|file):(?:<code>|`)"
)


def _inline(match: re.Match[str]) -> str:
    target = match.group(1)
    return f"`{target.rsplit('.', 1)[-1] if match.group(0).count('~') else target}`"


class SphinxRoles(Extension):
    def on_instance(self, *, obj: Any, **kwargs: Any) -> None:
        docstring = getattr(obj, "docstring", None)
        if docstring is not None and ":" in docstring.value:
            docstring.value = ROLE.sub(_inline, docstring.value)


def on_page_content(html: str, page: Any, **kwargs: Any) -> str:
    found = LITERAL.search(html)
    if found:
        start = max(found.start() - 60, 0)
        raise PluginError(
            f"{page.file.src_path}: a literal Sphinx role in the page: {html[start : found.end() + 40]!r}"
        )
    return html
