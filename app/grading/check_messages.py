"""One cause, one sentence: the verdict's messages tidied after an exercise's checks.py decided them.

Each check words its own finding, and several checks often find the same cause: a dropped `.to()` copy fails
both "the batch reached the model on the host" and "two devices met"; a note such as "There is no global
`device`; pick one: ..." is true for every check that mentions the device. A learner reading the verdict should
meet each cause once, at the line to change. The rules, the same for every exercise:

* a failed check whose cause (`CheckResult.cause`, set by the checks that can tell: the same wrong `return`,
  the same dropped `.to()` copy, the same host tensor at the same line) an earlier failed check explained says
  so in one short sentence instead of explaining it again (`runs`, which reports the crash itself, is left as
  it is);
* a sentence that an earlier check already said is left out of a later message;
* a failed check that points at a `return` (or `raise`, `break`, `continue`) with code after it in the same
  block says that this code never runs.
"""

from __future__ import annotations

import ast

from app.grading.facts import at
from app.grading.syntax import derived, syntax_nodes_of
from app.grading.verdict import CheckResult

# the check that reports a crash as such: others may share its line and still explain the crash
CRASH_CHECK = "runs"
# the syntax classes that may hold a block of statements (a `def`'s, a loop's or an `if`'s body, an `else:`, a
# `finally:`); no other node has those fields
WITH_BLOCKS = tuple(cls for cls in vars(ast).values() if isinstance(cls, type) and issubclass(cls, ast.AST)
                    and {"body", "orelse", "finalbody"} & set(getattr(cls, "_fields", ())))


def tidy(results: list[CheckResult], code: str | None) -> list[CheckResult]:
    """Return the results with each cause said once and unreachable code named."""
    results = _same_cause_once(results)
    results = _sentences_once(results)
    return _name_unreachable(results, code)


def _replace(result: CheckResult, message: str) -> CheckResult:
    return result.model_copy(update={"message": message})


def _same_cause_once(results: list[CheckResult]) -> list[CheckResult]:
    first: dict[str, str] = {}
    out = []
    for r in results:
        if r.passed or r.cause is None or r.id == CRASH_CHECK:
            out.append(r)
        elif r.cause in first:
            out.append(_replace(r, f"{at(r.line)}the same cause as `{first[r.cause]}` above."))
        else:
            first[r.cause] = r.id
            out.append(r)
    return out


def sentences(text: str) -> list[str]:
    """Split a message into sentences; a full stop inside `code` (`torch.device("cpu")`) ends none."""
    parts, start, in_code = [], 0, False
    for i, ch in enumerate(text):
        if ch == "`":
            in_code = not in_code
        elif ch in ".!?" and not in_code and text[i + 1:i + 2] == " ":
            parts.append(text[start:i + 1].strip())
            start = i + 1
    tail = text[start:].strip()
    return parts + ([tail] if tail else [])


def _sentences_once(results: list[CheckResult]) -> list[CheckResult]:
    said: set[str] = set()
    out = []
    for r in results:
        parts = sentences(r.message)
        kept = [p for p in parts if p not in said] if len(parts) > 1 else parts
        said.update(parts)
        out.append(r if kept == parts else _replace(r, " ".join(kept or parts[:1])))
    return out


def unreachable_after(code: str | None) -> dict[int, tuple[int, int, str]]:
    """_unreachable_after(code), once per Source read ahead (syntax.derived)."""
    return derived(code, "unreachable_after", lambda: _unreachable_after(code))


def _unreachable_after(code: str | None) -> dict[int, tuple[int, int, str]]:
    """Map each line that ends its block early (`return`, `raise`, ...) to the lines after it that never run."""
    ends: dict[int, tuple[int, int, str]] = {}
    for node in syntax_nodes_of(code, *WITH_BLOCKS):
        for name in ("body", "orelse", "finalbody"):
            block = getattr(node, name, None)
            if not isinstance(block, list):
                continue
            for i, stmt in enumerate(block[:-1]):
                if isinstance(stmt, (ast.Return, ast.Raise, ast.Break, ast.Continue)):
                    rest = block[i + 1:]
                    keyword = type(stmt).__name__.lower()
                    ends[stmt.lineno] = (rest[0].lineno, max(s.end_lineno or s.lineno for s in rest), keyword)
                    break
    return ends


def _name_unreachable(results: list[CheckResult], code: str | None) -> list[CheckResult]:
    ends = unreachable_after(code)
    out, named = [], set()
    for r in results:
        end = ends.get(r.line) if not r.passed and r.line is not None else None
        if end is None or r.line in named:
            out.append(r)
            continue
        named.add(r.line)
        first, last, keyword = end
        lines = f"line {first}" if first == last else f"lines {first}-{last}"
        out.append(_replace(r, f"{r.message} The code after this `{keyword}` ({lines}) never runs."))
    return out


__all__ = ["tidy", "sentences", "unreachable_after"]
