"""The layers of app/ stay layers: no import cycle between modules, the sandbox and the harness never reach up,
and the seams issue 24 made stay single: one function marks an exercise passed, one place picks the runner, no
runner proxies.

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
# what the sandbox (it runs untrusted code) may never import: the runner drives it, not the other way round, and
# the database is none of its business
ABOVE_THE_SANDBOX = ("app.runner", "app.web", "app.grading", "app.core.db", "app.models", "app.submissions")


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


def test_the_harness_imports_nothing_of_app_outside_itself():
    """It runs inside every job, in a process that cannot read the project's files: all it needs is its own."""
    graph = import_graph()
    outside = {name: sorted(t for t in targets if not t.startswith("app.harness"))
               for name, targets in graph.items() if name.startswith("app.harness")}
    outside = {name: targets for name, targets in outside.items() if targets}
    assert not outside, f"app/harness imports from outside itself: {outside}; move what it needs into app/harness"


def _functions(path: Path):
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def _writes_passed_at(function: ast.AST) -> bool:
    """True when the function assigns `x.passed_at = ...` or passes `passed_at=` (an UPDATE's values, a new row)."""
    for node in ast.walk(function):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Attribute) and t.attr == "passed_at" for t in targets):
                return True
        if isinstance(node, ast.Call) and any(k.arg == "passed_at" for k in node.keywords):
            return True
    return False


def test_exactly_one_function_marks_an_exercise_passed():
    writers = [f"{module_name(path)}.{f.name}" for path in MODULES.values() for f in _functions(path)
               if _writes_passed_at(f)]
    assert writers == ["app.learning.progress.mark_exercise_passed"], (
        f"functions writing a pass: {writers}; call progress.mark_exercise_passed (through finish()'s progress hook)")


def test_no_runner_proxies():
    """Grading builds the job and callers submit it: no class wraps a runner to watch what it is asked."""
    proxies = []
    for path in MODULES.values():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.ClassDef):
                methods = {f.name for f in node.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
                if "__getattr__" in methods and ("submit" in methods or "runner" in node.name.lower()):
                    proxies.append(f"{module_name(path)}.{node.name}")
    assert not proxies, f"runner proxies: {proxies}; submit the job yourself (app.grading.grader.prepare/follow)"


def test_only_app_main_asks_which_runner_is_in_force():
    """COURSE_RUNNER is read in one place, the BACKENDS table of app/main.py, which picks the hub with the runner."""
    readers = []
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Attribute) and node.attr == "runner" and isinstance(node.value, ast.Name) \
                    and node.value.id == "settings":
                readers.append(name)
    assert sorted(set(readers)) == ["app.main"], f"modules reading settings.runner: {sorted(set(readers))}"


def test_no_two_modules_share_a_name_where_their_meanings_differ():
    """The names that confused a reader once (streams, host, placement, messages, limits) are each one module."""
    stems = {}
    for name in MODULES:
        stems.setdefault(name.rsplit(".", 1)[-1], []).append(name)
    for stem in ("streams", "host", "simhost", "placement", "messages", "limits"):
        assert len(stems.get(stem, [])) <= 1, f"{stem}: {stems[stem]}"


def test_bench_imports_only_the_shared_support_of_tests():
    """bench/ and tests/ share what both run (tests/support/); bench imports nothing else of tests, and tests import
    bench only where they test bench itself (test_bench) or drive its load generators (tests/load)."""
    def imported(path: Path) -> set[str]:
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        names = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        return names | {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}

    bench = {str(p.relative_to(ROOT)): sorted(m for m in imported(p) if m.startswith("tests")
                                              and not m.startswith("tests.support"))
             for p in (ROOT / "bench").glob("*.py")}
    assert not {k: v for k, v in bench.items() if v}
    tests = {str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("*.py")
             if any(m == "bench" or m.startswith("bench.") for m in imported(p))}
    assert tests <= {"tests/test_bench.py", "tests/load/test_load.py", "tests/load/test_hostile_under_load.py"}, tests
