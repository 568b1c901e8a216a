"""The learner's code as a syntax tree, parsed in one place.

Why a lock: on CPython 3.11 (3.11.7 here) `ast.parse` keeps its recursion counter in state shared by every thread
of the interpreter, so two submissions parsed at once in the web server's worker threads can fail with
`SystemError: AST constructor recursion depth mismatch` (python/cpython#106905, fixed in later releases). Parsing
a learner's file takes well under a millisecond, so one parse at a time costs nothing measurable.
"""

from __future__ import annotations

import ast
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

_PARSE = threading.Lock()
# the latest trees by (code, filename): one verdict reads the learner's code four times (the placement map's loops,
# assignments and moves, the checks' unreachable lines); callers only read a tree, never change it
_TREES: dict[tuple[str, str], ast.Module | None] = {}
TREES_KEPT = 8
_UNPARSED = object()
# the latest trees' nodes in ast.walk's order (and by class), by tree: each of those four readings walked the whole
# tree again (~0.1 ms apiece for training-loop's 25 lines, 40% of a verdict's CPU outside the sandbox)
_NODES: dict[int, tuple[ast.Module, tuple[ast.AST, ...], dict[type, list[tuple[int, ast.AST]]]]] = {}


@dataclass(frozen=True)
class Source:
    """One program's tree and its nodes as `_walked` gives them, read ahead (`read_ahead`) and held by whoever
    will ask (`holding`): the cache above keeps the latest TREES_KEPT programs, and a web server grading a class's
    programs (each one different) reads more than that many between a submission and its verdict."""

    code: str
    tree: ast.Module | None
    nodes: tuple[ast.AST, ...]
    by_class: dict[type, list[tuple[int, ast.AST]]]
    # what the verdict's readings make of the tree (`derived`: the placement map's loops, assignments and moves,
    # the checks' unreachable lines), made once, when read ahead (Grading.read_source)
    tables: dict[str, object] = field(default_factory=dict, compare=False)


# the Source held while a verdict is decided (`holding`); per thread and per task
_HELD: ContextVar[Source | None] = ContextVar("held_source", default=None)


def read_ahead(code: str | None) -> Source:
    """Parse and walk `code` now, for `holding` later: a live submission does it in a worker thread while its job
    runs (app/submissions/live.py), so the verdict, decided in the web server's event loop, does not (0.3 ms of
    CPU for training-loop's solution in-process)."""
    nodes, by_class = _walked(code)
    return Source(code or "", syntax_tree(code), nodes, by_class)


def derived(code: str | None, name: str, make):
    """make(), once per held Source of `code` (kept in its `tables` under `name`), else made each time: each of
    the readings that asks treats what it gets as read-only."""
    held = _held(code)
    if held is None:
        return make()
    value = held.tables.get(name)
    if value is None:
        value = held.tables[name] = make()
    return value


@contextmanager
def holding(source: Source | None) -> Iterator[None]:
    """Answer readings of `source.code` in this context from `source` (None: from the cache, as without)."""
    token = _HELD.set(source)
    try:
        yield
    finally:
        _HELD.reset(token)


def _held(code: str | None) -> Source | None:
    held = _HELD.get()
    return held if held is not None and held.code == (code or "") else None


def syntax_tree(code: str | None, filename: str = "<unknown>") -> ast.Module | None:
    """The module's tree, or None when the code is not Python or is nested past what the parser takes."""
    held = _held(code)
    if held is not None and filename == "<unknown>":
        return held.tree
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


def _walked(code: str | None) -> tuple[tuple[ast.AST, ...], dict[type, list[tuple[int, ast.AST]]]]:
    """The tree's nodes in `ast.walk`'s order, and the same by node class as (position, node); empty when the code
    does not parse."""
    held = _held(code)
    if held is not None:
        return held.nodes, held.by_class
    tree = syntax_tree(code)
    if tree is None:
        return (), {}
    with _PARSE:
        kept = _NODES.get(id(tree))
        if kept is None or kept[0] is not tree:  # the id of a tree dropped from _TREES may come back
            if len(_NODES) >= TREES_KEPT:
                del _NODES[next(iter(_NODES))]
            nodes = tuple(ast.walk(tree))
            by_class: dict[type, list[tuple[int, ast.AST]]] = {}
            for i, node in enumerate(nodes):
                by_class.setdefault(type(node), []).append((i, node))
            kept = _NODES[id(tree)] = (tree, nodes, by_class)
        return kept[1], kept[2]


def syntax_nodes(code: str | None) -> tuple[ast.AST, ...]:
    """Every node of the module's tree, in `ast.walk`'s order; () when the code does not parse (syntax_tree)."""
    return _walked(code)[0]


def syntax_nodes_of(code: str | None, *classes: type) -> list[ast.AST]:
    """The nodes of these classes (or their subclasses) in `ast.walk`'s order: what
    `[n for n in syntax_nodes(code) if isinstance(n, classes)]` gives, without testing each of the tree's nodes
    (each reading of a verdict did, ~60% of a training-loop verdict's CPU in the web server)."""
    _nodes, by_class = _walked(code)
    found = [pair for cls, pairs in by_class.items() if issubclass(cls, classes) for pair in pairs]
    found.sort(key=_position)
    return [node for _i, node in found]


def _position(pair: tuple[int, ast.AST]) -> int:
    return pair[0]


__all__ = ["Source", "derived", "holding", "read_ahead", "syntax_nodes", "syntax_nodes_of", "syntax_tree"]
