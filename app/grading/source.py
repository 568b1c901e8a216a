"""What the learner's source says where the trace cannot: where a name was written, not where it was used.

The harness sees calls as they run, so it knows the line where a hard-coded "cuda" first put a tensor on a GPU,
or where a model ran its forward pass; the fix belongs on another line, the one that wrote the "cuda" or built
the model. These helpers read the learner's code (with `ast`, never running it) to find that line. Each returns
None (or an empty list) when the code does not parse or says nothing clear, and the check keeps the trace's line.
"""

from __future__ import annotations

import ast

from app.grading.placement_map import loop_lines
from app.grading.syntax import syntax_tree

# device strings a learner hard-codes for an accelerator
ACCELERATOR_LITERALS = ("cuda", "mps")
# calls that make the host wait for the device when their tensor lives there
SYNC_CALLS = ("item", "tolist", "cpu", "numpy")


def _tree(code: str | None) -> ast.Module | None:
    return syntax_tree(code)


def _is_accelerator_literal(node: ast.AST) -> bool:
    return (isinstance(node, ast.Constant) and isinstance(node.value, str)
            and node.value.split(":")[0] in ACCELERATOR_LITERALS)


def hard_coded_device_line(code: str | None, used_at: int | None) -> int | None:
    """The line that writes an accelerator's name ("cuda", "cuda:0", "mps") as a literal, at or before `used_at`.

    A literal on the line where the tensor moved wins (`x.to("cuda")`); otherwise the first one above it
    (`device = torch.device("cuda")`). A literal inside a conditional expression (`"cuda" if ... else "cpu"`)
    is an answer to a question, not a hard-coded device, and is skipped."""
    tree = _tree(code)
    if tree is None:
        return None
    asked = {id(n.body) for n in ast.walk(tree) if isinstance(n, ast.IfExp)}
    lines = sorted(n.lineno for n in ast.walk(tree) if _is_accelerator_literal(n) and id(n) not in asked
                   and (used_at is None or n.lineno <= used_at))
    if not lines:
        return None
    return used_at if used_at in lines else lines[0]


def built_at(code: str | None, name: str) -> int | None:
    """The first line that assigns `name` the result of a call (`model = nn.Sequential(...)`), or None."""
    tree = _tree(code)
    if tree is None:
        return None
    found = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call)
             and any(ast.unparse(t) == name for t in n.targets)]
    return min(found) if found else None


def batch_names(code: str | None, name: str) -> list[str]:
    """The names a `for xb, yb in loader:` loop unpacks, when `name` is one of them; else [name]."""
    tree = _tree(code)
    if tree is not None:
        for node in ast.walk(tree):
            if isinstance(node, (ast.For, ast.AsyncFor)) and isinstance(node.target, (ast.Tuple, ast.List)):
                names = [ast.unparse(t) for t in node.target.elts if isinstance(t, ast.Name)]
                if name in names:
                    return names
    return [name]


def syncs_in_loops(code: str | None) -> list[tuple[int, str]]:
    """(line, how) for each `print(...)`, `.item()`, `.tolist()` ... inside a loop's body, in line order."""
    tree = _tree(code)
    if tree is None:
        return []
    inside = loop_lines(code)
    found: dict[int, str] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or node.lineno not in inside:
            continue
        if isinstance(node.func, ast.Name) and node.func.id == "print":
            found.setdefault(node.lineno, "`print(...)`")
        elif isinstance(node.func, ast.Attribute) and node.func.attr in SYNC_CALLS:
            found[node.lineno] = f"`.{node.func.attr}()`"
    return sorted(found.items())


__all__ = ["hard_coded_device_line", "built_at", "batch_names", "syncs_in_loops"]
