"""The path layer (tier 2): a path's text, its root, and every operation on it.
Every operation is race-free.
"""

# Three kinds of module, lowest first:
#
# - Rules, no I/O: ``_text`` (lexical rules, each once) and ``_fold`` (how names compare), ``_uri`` (file:
#   URIs) and ``_index`` (canonical root paths by key: the innermost root of a path).
# - Mechanisms on descriptors: ``_beneath`` (open beneath a directory descriptor: the strategy, openat2 or the
#   walk, and its self-check) and ``_tree`` (down directories by descriptor: descend, list, walk),
#   ``_canonical`` (the name walk) and ``_descriptors`` (root descriptors, reference-counted), ``_root``
#   (one root, canonical and checked), then ``_router``: a path to its root (Go's doInRoot), the general
#   route and, beside it, the fast lanes that shortcut it for the common path (``common_path``, the one test
#   they all make); ``_access``: which writes a set refuses (read-only roots, the protected set).
# - The operations, by verb family as cap-std groups them: ``_open`` (open, open_fd, read, stat),
#   ``_write`` (the atomic replace), ``_dirs`` (list, scan, walk, mkdir), ``_remove``, ``_rename``; and
#   ``_rootset`` (RootSet), the public face, one delegating line per operation.
#
# The public names are re-exported by ``mcp_roots``; nothing here is imported by an application directly.
