"""The learner's code as a syntax tree, parsed in one place.

Why a lock: on CPython 3.11 (3.11.7 here) `ast.parse` keeps its recursion counter in state shared by every thread
of the interpreter, so two submissions parsed at once in the web server's worker threads can fail with
`SystemError: AST constructor recursion depth mismatch` (python/cpython#106905, fixed in later releases). Parsing
a learner's file takes well under a millisecond, so one parse at a time costs nothing measurable.
"""

from __future__ import annotations

import ast
import threading

_PARSE = threading.Lock()
# the latest trees by (code, filename): one verdict reads the learner's code four times (the placement map's loops,
# assignments and moves, the checks' unreachable lines); callers only read a tree, never change it
_TREES: dict[tuple[str, str], ast.Module | None] = {}
TREES_KEPT = 8
_UNPARSED = object()


def syntax_tree(code: str | None, filename: str = "<unknown>") -> ast.Module | None:
    """The module's tree, or None when the code is not Python or is nested past what the parser takes."""
    key = (code or "", filename)
    with _PARSE:
        tree = _TREES.get(key, _UNPARSED)
        if tree is _UNPARSED:
            try:
                tree = ast.parse(key[0], filename)
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                tree = None
            if len(_TREES) >= TREES_KEPT:
                del _TREES[next(iter(_TREES))]
            _TREES[key] = tree
        return tree


__all__ = ["syntax_tree"]
