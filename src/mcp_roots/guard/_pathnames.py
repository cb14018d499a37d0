"""The path-name rule: whether a parameter called NAME holds a path.
Judged by its name alone.
"""

# One rule for every place that judges names: the audit and the guard (``_annotations``, through the type
# walk), and the JSON-schema walk that finds paths in a tool's input schema. Its public function is
# :func:`is_path_name`. Pure: no I/O, no SDK.

from __future__ import annotations

import re

__all__ = ["is_path_name"]

#: A name that is one of these, as a whole, is a path.
_WHOLE = re.compile(r"(?:src|source|dest|dst|destination|target|uri)s?|cwd")

#: A name whose last word ends with one of these is a path (``path``, ``file_path``, ``workdir``).
_HEAD = re.compile(r"(?:path|pathname|file|filename|fname|dir|dirname|folder|root)s?$|director(?:y|ies)$")

#: Words that end like a path word but are not one.
_NOT_PATHS = frozenset({"profile", "profiles", "xpath", "jsonpath"})

#: ``file_name``, ``dir_name``, ``file_uri``: a path word, then one of these.
_WORDS = ("path", "file", "dir", "folder", "directory")

_NAME_WORDS = {"name": _WORDS, "names": _WORDS, "uri": (*_WORDS[1:], "root"), "uris": (*_WORDS[1:], "root")}

#: Trailing words that say "several of the above": ``file_list``, ``path_array``.
_CONTAINER_WORDS = frozenset({"list", "array", "arr", "set", "seq"})

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def is_path_name(name: str) -> bool:
    """Whether a parameter or field called ``name`` holds a path, judged by its name alone.

    The name is split into words (``filePath``, ``file-path`` and ``file_path`` are ``file path``), and a
    trailing ``list``/``array``/``set`` word is dropped (``file_list``). Then it is a path when:

    - the whole name is ``src``, ``source``, ``dest``, ``dst``, ``destination``, ``target``, ``cwd``, ``uri``
      (or their plurals): alone they name a place; as the last word of a longer name (``data_source``,
      ``build_target``) they mostly do not;
    - the last word ends with ``path``, ``file``, ``filename``, ``fname``, ``dir``, ``dirname``,
      ``directory``, ``folder``, ``root`` or their plurals: ``path``, ``src_path``, ``infile``, ``workdir``,
      ``project_root``, ``fnames``; except ``profile``, ``xpath``, ``jsonpath``;
    - the last two words are a path word and ``name`` (``file_name``, ``dir_name``, ``folder_names``) or a
      file/dir/root word and ``uri`` (``file_uri``).

    It leans to yes: a false positive costs a warning (or an exemption under ``strict=True``), a false
    negative an unchecked path. Words before the last are not judged (``file_size``, ``root_name``: no).
    """
    words = [w for w in re.split(r"[^a-z0-9]+", _CAMEL.sub("_", name).lower()) if w]
    while len(words) > 1 and words[-1] in _CONTAINER_WORDS:
        words.pop()
    if not words or _WHOLE.fullmatch("_".join(words)):
        return bool(words)
    last = words[-1]
    if _HEAD.search(last) and last not in _NOT_PATHS:
        return True
    before = _NAME_WORDS.get(last)
    return before is not None and len(words) > 1 and words[-2].endswith(before)
