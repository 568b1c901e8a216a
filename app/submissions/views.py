"""Reading submissions: the Verdict JSON a learner reads, the attempts history, and what an exercise panel shows.

Plain functions over the database session (no HTTP, no running jobs: those are app/submissions/live.py's LiveHub).
Everything here is what a learner may see, so stored verdicts pass through `verdict_for_learner` (no server
paths) on their way out.
"""

from __future__ import annotations

import hashlib

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.content.exercises import Exercise
from app.content.markdown import highlight_code
from app.grading.paths import verdict_for_learner
from app.learning import progress
from app.models import Submission

# failed attempts after which the reference solution is shown (a pass shows it at once)
SOLUTION_AFTER_FAILURES = 5
# statuses that count as the learner's own failed attempt ("error" is the grader's fault, "rejected" never ran)
FAILED_STATUSES = ("failed", "timeout")


def iso(value) -> str | None:
    """Format a timestamp for JSON."""
    return value.isoformat() if value else None


def verdict_json(submission: Submission) -> dict:
    """Return the Verdict JSON of a submission (docs/grading.md, "The verdict"), plus its id, code and timings.

    While it is not finished, status is "queued" or "running" and checks are empty. Server paths are replaced
    (app/grading/paths.py) even in verdicts stored before that was done at grading time.
    """
    verdict = verdict_for_learner(submission.verdict) if submission.verdict else {
        "exercise": submission.exercise_slug, "checks": [], "stdout": "", "stderr": "", "duration_ms": None,
        "device": None}
    # machine_id: the "Run on" choice it ran on (None: stored before the picker, the exercise's own machine)
    return {**verdict, "id": submission.id, "status": submission.status, "code": submission.code,
            "machine_id": submission.machine,
            "created_at": iso(submission.created_at), "finished_at": iso(submission.finished_at)}


def attempt_summary(submission: Submission) -> dict:
    """Return one line of the attempts history (no code, no output)."""
    checks = (submission.verdict or {}).get("checks") or []
    return {"id": submission.id, "status": submission.status, "created_at": iso(submission.created_at),
            "finished_at": iso(submission.finished_at), "duration_ms": submission.duration_ms,
            "checks_passed": sum(1 for c in checks if c.get("passed")), "checks_total": len(checks)}


def failed_attempts(session: Session, *, learner_id: str, exercise_slug: str) -> int:
    """Count the learner's attempts at an exercise that ran and failed."""
    return session.scalar(select(func.count()).select_from(Submission).where(
        Submission.learner_id == learner_id, Submission.exercise_slug == exercise_slug,
        Submission.status.in_(FAILED_STATUSES)))


def learner_key(learner_id: str) -> str:
    """The name of a learner's drafts and hint progress in browser storage: a digest, not the id itself."""
    return hashlib.sha256(f"course-drafts:{learner_id}".encode()).hexdigest()[:16]


def exercise_state(session: Session, *, learner_id: str, exercise: Exercise, limit: int = 20) -> dict:
    """Return what the panel shows a learner: attempts (newest first), last code, and the solution when earned.

    The solution unlocks after a pass or after SOLUTION_AFTER_FAILURES failed attempts; the server decides,
    so the page never holds an answer the learner has not earned.
    """
    attempts = progress.list_submissions(session, learner_id=learner_id, exercise_slug=exercise.slug, limit=limit)
    row = progress.learner_progress(session, learner_id=learner_id).exercises.get(exercise.slug)
    passed = row is not None and row.passed_at is not None
    failures = failed_attempts(session, learner_id=learner_id, exercise_slug=exercise.slug)
    unlocked = passed or failures >= SOLUTION_AFTER_FAILURES
    reason = ("You passed; here is the reference solution to compare with yours." if passed else
              f"After {failures} failed attempts, here is the reference solution." if unlocked else None)
    return {
        "exercise": exercise.slug,
        "attempts": [attempt_summary(s) for s in attempts],
        "latest_code": attempts[0].code if attempts else None,
        "passed": passed,
        "failed_attempts": failures,
        "solution_unlocked": unlocked,
        "solution_reason": reason,
        "solution": exercise.solution if unlocked else None,
        "solution_html": highlight_code(exercise.solution, "python") if unlocked else None,
        "failures_to_unlock": max(0, SOLUTION_AFTER_FAILURES - failures) if not unlocked else 0,
    }


def panel_state(session: Session, *, learner_id: str, exercise: Exercise) -> dict:
    """Return what a lesson page's exercise panel shows this learner: exercise_state, plus last code and verdict."""
    state = exercise_state(session, learner_id=learner_id, exercise=exercise)
    latest = progress.latest_submission(session, learner_id=learner_id, exercise_slug=exercise.slug)
    state["code"] = state["latest_code"]
    state["last"] = verdict_json(latest) if latest is not None and latest.finished else None
    return state


__all__ = ["verdict_json", "attempt_summary", "failed_attempts", "learner_key", "exercise_state", "panel_state",
           "iso", "SOLUTION_AFTER_FAILURES", "FAILED_STATUSES"]
