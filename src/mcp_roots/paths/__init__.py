"""The path layer (tier 2): a path's text, its root, and every operation on it, race-free.

Lowest first: ``_text`` (lexical rules, each once) and ``_fold`` (how names compare), ``_uri`` (file: URIs),
``_beneath`` (open beneath a directory descriptor: the strategy, openat2 or the walk) and ``_tree`` (going
down directories by descriptor), ``_canonical`` (the name walk), ``_fileops`` (what is done to one name in an
open directory) and ``_descriptors`` (root descriptors, reference-counted), ``_router`` (a path to its root:
Go's doInRoot), ``_ops`` (the operations' bodies), ``_rootset`` (Root and RootSet). The public names are
re-exported by ``mcp_roots``; nothing here is imported by an application directly.
"""
