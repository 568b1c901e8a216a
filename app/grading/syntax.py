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


def syntax_tree(code: str | None, filename: str = "<unknown>") -> ast.Module | None:
    """The module's tree, or None when the code is not Python or is nested past what the parser takes."""
    try:
        with _PARSE:
            return ast.parse(code or "", filename)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


__all__ = ["syntax_tree"]
