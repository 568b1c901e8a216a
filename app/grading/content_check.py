"""`course check` for exercises: the course's standard, then every solution and wrong answer in the real sandbox.

A solution must pass; a wrong answer must fail, and among its failed checks must be the one its first line names
(`# expect: <check_id>`). So a check that cannot fail, or a solution the grader rejects, is caught before a
learner meets it. Exercises arrive loaded (app.content.exercises reports the ones that do not load); every
problem is a ContentError, printed as "file:line: what to fix".
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from pathlib import Path

from app.content.exercises import Exercise, read_exercises
from app.content.schema import ContentError
from app.grading.grader import checks_module, grade_submission
from app.runner import Runner

# the course's content standard (issue 5): three hint levels, at least one known-wrong answer
MIN_HINTS = 3
MIN_WRONG = 1


def static_errors(exercise: Exercise) -> list[ContentError]:
    """Problems visible without running anything: too few hints or wrong answers, checks.py, `# expect:` lines."""
    errors = []
    if len(exercise.spec.hints) < MIN_HINTS:
        errors.append(ContentError(exercise.path / "exercise.yaml", 1, f"hints: give {MIN_HINTS} hints in order (the "
                                   f"last nearly the answer); found {len(exercise.spec.hints)}"))
    errors += _checks_py_errors(exercise)
    if len(exercise.wrong) < MIN_WRONG:
        errors.append(ContentError(exercise.path / "wrong", 1, "add known-wrong answers (wrong/*.py starting with "
                                                               "`# expect: <check_id>`)"))
    ids = set(exercise.spec.check_ids)
    for wrong in exercise.wrong:
        if wrong.expect is None:
            errors.append(ContentError(wrong.path, 1, "the first line must be `# expect: <check_id>`"))
        elif wrong.expect not in ids:
            errors.append(ContentError(wrong.path, 1, f"expects `{wrong.expect}`, which is not a check of this "
                                                      f"exercise ({', '.join(sorted(ids))})"))
    return errors


def _checks_py_errors(exercise: Exercise) -> list[ContentError]:
    path = exercise.checks_path
    if not path.is_file():
        return [ContentError(path, 1, "missing; it decides the checks (`evaluate(facts)`)")]
    try:
        if not callable(getattr(checks_module(exercise), "evaluate", None)):
            return [ContentError(path, 1, "define `evaluate(facts)` returning the checks")]
    except Exception as exc:  # noqa: BLE001 - an instructor's syntax error must be reported, not crash the command
        return [ContentError(path, getattr(exc, "lineno", 1) or 1, f"cannot import: {exc}")]
    return []


async def grade_errors(exercise: Exercise, runner: Runner) -> list[ContentError]:
    """Grade solution.py (must pass) and each wrong/*.py (must fail its named check) in the sandbox."""
    errors = []
    verdict = await grade_submission(exercise, exercise.solution, runner)
    if verdict.status != "passed":
        failed = "; ".join(f"{c.id}: {c.message}" for c in verdict.checks if not c.passed)
        line = next((c.line for c in verdict.checks if not c.passed and c.line), 1)
        errors.append(ContentError(exercise.path / "solution.py", line, f"the solution does not pass (status "
                                   f"{verdict.status}): {failed or verdict.stderr.strip()[-300:]}"))
    for wrong in exercise.wrong:
        if wrong.expect is None:
            continue
        verdict = await grade_submission(exercise, wrong.code, runner)
        if verdict.status == "passed":
            errors.append(ContentError(wrong.path, 1, f"this wrong answer passes every check; `{wrong.expect}` "
                                                      "cannot fail it"))
        elif wrong.expect not in verdict.failed_ids():
            errors.append(ContentError(wrong.path, 1, f"expected to fail `{wrong.expect}`, but it failed "
                                                      f"{verdict.failed_ids() or [verdict.status]} (status "
                                                      f"{verdict.status})"))
    return errors


async def _grade_all(exercises: list[Exercise], settings) -> list[ContentError]:
    from app.main import open_runner  # the runner COURSE_RUNNER names (imported late: it is the whole site)

    async with open_runner(settings) as runner:
        return [error for exercise in exercises for error in await grade_errors(exercise, runner)]


def check_loaded(exercises: Iterable[Exercise], settings, *, grade: bool = True) -> list[ContentError]:
    """Check loaded exercises against the standard and (grade=True) grade the answers of those that meet it."""
    errors, gradable = [], []
    for exercise in exercises:
        problems = static_errors(exercise)
        errors += problems
        if not problems:
            gradable.append(exercise)
    if grade and gradable:
        errors += asyncio.run(_grade_all(gradable, settings))
    return errors


def check_exercises(exercises_dir: Path, settings, *, grade: bool = True) -> list[ContentError]:
    """Load every exercise under exercises_dir and check it; problems loading come first."""
    exercises, errors = read_exercises(Path(exercises_dir))
    return errors + check_loaded(exercises.values(), settings, grade=grade)
