"""`course check` for exercises: the schema, then every solution and wrong answer through the real sandbox.

A solution must pass; a wrong answer must fail, and among its failed checks must be the one its first line names
(`# expect: <check_id>`). So a check that cannot fail, or a solution the grader rejects, is caught before a
learner meets it. Errors read "file:line: what to fix".
"""

from __future__ import annotations

from pathlib import Path

from app.content.exercises import Exercise, load_exercise
from app.grading.grader import checks_module, grade_submission

# the course's content standard (issue 5): three hint levels, at least one known-wrong answer
MIN_HINTS = 3
MIN_WRONG = 1


def static_errors(exercise: Exercise) -> list[str]:
    """Problems visible without running anything: missing parts, bad `# expect:` lines, unknown check ids."""
    errors, ids, spec_file = [], set(exercise.spec.check_ids), exercise.path / "exercise.yaml"
    if len(exercise.spec.hints) < MIN_HINTS:
        errors.append(f"{spec_file}:1: hints: give {MIN_HINTS} hints in order (the last nearly the answer); "
                      f"found {len(exercise.spec.hints)}")
    if not exercise.checks_path.is_file():
        errors.append(f"{exercise.checks_path}:1: missing; it decides the checks (`evaluate(facts)`)")
    else:
        try:
            if not callable(getattr(checks_module(exercise), "evaluate", None)):
                errors.append(f"{exercise.checks_path}:1: define `evaluate(facts)` returning the checks")
        except Exception as exc:  # noqa: BLE001 - an instructor's syntax error must be reported, not crash the command
            errors.append(f"{exercise.checks_path}:{getattr(exc, 'lineno', 1) or 1}: cannot import: {exc}")
    if len(exercise.wrong) < MIN_WRONG:
        errors.append(f"{exercise.path / 'wrong'}:1: add known-wrong answers (wrong/*.py starting with "
                      "`# expect: <check_id>`)")
    for wrong in exercise.wrong:
        if wrong.expect is None:
            errors.append(f"{wrong.path}:1: the first line must be `# expect: <check_id>`")
        elif wrong.expect not in ids:
            errors.append(f"{wrong.path}:1: expects `{wrong.expect}`, which is not a check of this exercise "
                          f"({', '.join(sorted(ids))})")
    return errors


async def grade_errors(exercise: Exercise, runner) -> list[str]:
    """Grade solution.py (must pass) and each wrong/*.py (must fail its named check) in the sandbox."""
    errors = []
    verdict = await grade_submission(exercise, exercise.solution, runner)
    if verdict.status != "passed":
        failed = "; ".join(f"{c.id}: {c.message}" for c in verdict.checks if not c.passed)
        line = next((c.line for c in verdict.checks if not c.passed and c.line), 1)
        errors.append(f"{exercise.path / 'solution.py'}:{line}: the solution does not pass "
                      f"(status {verdict.status}): {failed or verdict.stderr.strip()[-300:]}")
    for wrong in exercise.wrong:
        if wrong.expect is None:
            continue
        verdict = await grade_submission(exercise, wrong.code, runner)
        if verdict.status == "passed":
            errors.append(f"{wrong.path}:1: this wrong answer passes every check; `{wrong.expect}` cannot fail it")
        elif wrong.expect not in verdict.failed_ids():
            errors.append(f"{wrong.path}:1: expected to fail `{wrong.expect}`, but it failed "
                          f"{verdict.failed_ids() or [verdict.status]} (status {verdict.status})")
    return errors


def check_exercises(exercises_dir: Path, settings, *, grade: bool = True) -> list[str]:
    """Validate every exercise under exercises_dir and (with grade=True) grade its answers in the sandbox."""
    exercises, errors = [], []
    for folder in sorted(Path(exercises_dir).iterdir()) if Path(exercises_dir).is_dir() else []:
        if not (folder / "exercise.yaml").is_file():
            continue
        try:
            exercise = load_exercise(folder)
        except ValueError as exc:
            errors.append(_with_line(str(exc)))
            continue
        problems = static_errors(exercise)
        errors += problems
        if not problems:
            exercises.append(exercise)
    if grade and exercises:
        from app.runner import BlockingRunner

        with BlockingRunner(settings) as blocking:
            for exercise in exercises:
                errors += blocking.call(grade_errors(exercise, blocking.runner))
    return errors


def _with_line(message: str) -> str:
    """Loader errors read "path: detail"; give them a line so every error reads file:line: message."""
    path, _, detail = message.partition(": ")
    return f"{path}:1: {detail}" if detail else message
