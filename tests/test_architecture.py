"""The layers of app/ stay layers: no import cycle between modules, and the sandbox never reaches up.

The graph is built from the source with `ast`, without importing anything. Imports inside functions count: a
lazy import is how a cycle hides. Imports under `if TYPE_CHECKING:` do not, since they never run. An edge goes
to the module an import names: `from app.sandbox import protocol` is an edge to app.sandbox.protocol, while
`from app.runner import Job` is an edge to the package app.runner (its __init__.py).
"""

from __future__ import annotations

import ast
from pathlib import Path

from app import ROOT

APP = ROOT / "app"
# what the sandbox (it runs untrusted code, and its harness runs inside every job) may never import
ABOVE_THE_SANDBOX = ("app.runner", "app.web", "app.grading")


def module_name(path: Path) -> str:
    """Return the dotted name of a module file under the project root (a package is named by its folder)."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(APP.rglob("*.py"))}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _import_nodes(node: ast.AST):
    """Yield every Import and ImportFrom in a tree, at any depth, except those under `if TYPE_CHECKING:`."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child):
            for other in child.orelse:
                yield from _import_nodes(ast.Module(body=[other], type_ignores=[]))
            continue
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            yield child
        yield from _import_nodes(child)


def _known(name: str) -> str | None:
    """Return the app module a dotted name lies in (itself or its nearest package), or None if it is not ours."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(name: str) -> set[str]:
    """Return the app modules that module `name` imports."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in _import_nodes(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found |= {_known(alias.name) for alias in node.names}
            continue
        base = node.module or ""
        if node.level:  # relative: from . import x, from ..y import z
            anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
            base = ".".join(anchor + ([node.module] if node.module else []))
        for alias in node.names:
            found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else _known(base))
    return {module for module in found if module is not None and module != name}


def import_graph() -> dict[str, set[str]]:
    """Return {module: the app modules it imports} for every module under app/."""
    return {name: imports_of(name) for name in MODULES}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Return the strongly connected components of more than one module (Tarjan), each as a sorted list."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    return found


def test_the_graph_sees_imports_at_every_depth():
    graph = import_graph()
    assert "app.runner" in graph["app.worker.service"]  # the package: `from app.runner import BlockingRunner`
    assert "app.sandbox.protocol" in graph["app.runner.local"]  # `from app.sandbox import protocol`
    assert "app.grading.grader" in graph["app.submissions.live"]  # an import inside a method
    assert "app.content.course" not in graph["app.content.validate"]  # only under `if TYPE_CHECKING:`


def test_cycles_are_found():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_module_of_app_imports_itself_back_through_others():
    found = cycles(import_graph())
    assert not found, ("import cycles in app/ (each list imports itself back, counting imports inside functions): "
                       f"{found}; move what both sides need into a module below them, or pass it in")


def test_the_sandbox_imports_nothing_above_it():
    graph = import_graph()
    reaching_up = {name: sorted(t for t in targets if t.startswith(ABOVE_THE_SANDBOX))
                   for name, targets in graph.items() if name.startswith("app.sandbox")}
    reaching_up = {name: targets for name, targets in reaching_up.items() if targets}
    assert not reaching_up, (f"app/sandbox imports from {ABOVE_THE_SANDBOX}: {reaching_up}; the sandbox is below "
                             "them: let the runner call the sandbox, never the other way round")
