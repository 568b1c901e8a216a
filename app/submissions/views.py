"""Reading submissions: the Verdict JSON a learner reads, the attempts history, and what an exercise panel shows.

Plain functions over the database session (no HTTP, no running jobs: those are app/submissions/live.py's LiveHub).
Everything here is what a learner may see, so stored verdicts pass through `verdict_for_learner` (no server
paths) on their way out.
"""

from __future__ import annotations

import hashlib

from sqlalchemy.orm import Session

from app.content.exercises import Exercise
from app.content.markdown import highlight_code
from app.core.errors import Refusal
from app.grading.paths import verdict_for_learner
from app.harness.machine import chrome_trace
from app.learning import progress, reveals
from app.learning.reveals import FAILED_STATUSES
from app.models import Submission

# failed attempts after which the reference solution is shown by default (COURSE_SOLUTION_UNLOCK, failures:5)
SOLUTION_AFTER_FAILURES = 5
DEFAULT_UNLOCK = f"failures:{SOLUTION_AFTER_FAILURES}"


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


class NoTrace(Refusal):
    """A run without a modeled timeline to download."""


def trace_json(submission: Submission) -> dict:
    """The run's modeled timeline as a Chrome trace (chrome://tracing, ui.perfetto.dev), built from the stored
    verdict's `timeline` by the function `course run --trace` uses; NoTrace (404) when the run has none (it ran on
    no simulated GPU, or is not finished)."""
    timeline = (submission.verdict or {}).get("timeline") if submission.finished else None
    if not timeline or not timeline.get("rows"):
        raise NoTrace(404, f"Submission {submission.id} has no modeled timeline: only a finished run on a simulated "
                           "GPU has one (a run stored before the page drew timelines has only its figures).")
    return chrome_trace.of_timeline(timeline)


def attempt_summary(submission: Submission) -> dict:
    """Return one line of the attempts history (no code, no output)."""
    checks = (submission.verdict or {}).get("checks") or []
    return {"id": submission.id, "status": submission.status, "created_at": iso(submission.created_at),
            "finished_at": iso(submission.finished_at), "duration_ms": submission.duration_ms,
            "checks_passed": sum(1 for c in checks if c.get("passed")), "checks_total": len(checks)}


def failed_attempts(session: Session, *, learner_id: str, exercise_slug: str) -> int:
    """Count the learner's failed attempts at an exercise that ran something new (those the unlock counts)."""
    return reveals.counted_failures(session, learner_id=learner_id, exercise_slug=exercise_slug)


def learner_key(learner_id: str) -> str:
    """The name of a learner's drafts and hint progress in browser storage: a digest, not the id itself."""
    return hashlib.sha256(f"course-drafts:{learner_id}".encode()).hexdigest()[:16]


def exercise_state(session: Session, *, learner_id: str, exercise: Exercise, limit: int = 20,
                   unlock: str = DEFAULT_UNLOCK) -> dict:  # fmt: skip
    """Return what the panel shows a learner: attempts (newest first), last code, and the solution once seen.

    Whether the solution is open is the exercise's unlock rule (`unlock`: the course's COURSE_SOLUTION_UNLOCK,
    unless exercise.yaml says otherwise; app/learning/reveals.py). Open, it is still served only by asking for it
    (POST /api/exercises/{slug}/solution), which records the look; once seen it is part of this state. So the
    page never holds an answer the learner has not earned, nor one they did not ask to see.
    """
    attempts = progress.list_submissions(session, learner_id=learner_id, exercise_slug=exercise.slug, limit=limit)
    row = progress.learner_progress(session, learner_id=learner_id).exercises.get(exercise.slug)
    passed = row is not None and row.passed_at is not None
    state = reveals.unlock_state(session, learner_id=learner_id, exercise=exercise, passed=passed,
                                 course_rule=unlock)
    looked = reveals.looks(session, learner_ids=[learner_id], exercise_slug=exercise.slug).get(
        (learner_id, exercise.slug), {"solution_at": None, "hints": 0})
    seen = looked["solution_at"]
    shown = state.unlocked and seen is not None
    return {
        "exercise": exercise.slug,
        "attempts": [attempt_summary(s) for s in attempts],
        "latest_code": attempts[0].code if attempts else None,
        "passed": passed,
        "failed_attempts": state.failures,
        "solution_unlocked": state.unlocked,
        "solution_reason": state.reason,
        "solution_lock": state.lock,
        "solution_seen_at": iso(seen),
        "hints_seen": looked["hints"],
        "solution": exercise.solution if shown else None,
        "solution_html": highlight_code(exercise.solution, "python") if shown else None,
        "failures_to_unlock": state.failures_to_unlock,
    }


class RevealRefused(Refusal):
    """A look at a solution that is not open, or at a hint the exercise lacks."""


def reveal_solution(session: Session, *, learner_id: str, exercise: Exercise, unlock: str = DEFAULT_UNLOCK) -> dict:
    """Record a look at the solution and return it; Refusal(403) with the lock's sentence while it is closed."""
    row = progress.learner_progress(session, learner_id=learner_id).exercises.get(exercise.slug)
    state = reveals.unlock_state(session, learner_id=learner_id, exercise=exercise,
                                 passed=row is not None and row.passed_at is not None, course_rule=unlock)
    if not state.unlocked:
        raise RevealRefused(403, state.lock or "The reference solution is not open to you yet.")
    look = reveals.record_reveal(session, learner_id=learner_id, exercise_slug=exercise.slug, kind="solution")
    return {"exercise": exercise.slug, "solution": exercise.solution,
            "solution_html": highlight_code(exercise.solution, "python"), "solution_reason": state.reason,
            "seen_at": iso(look.at)}


def reveal_hint(session: Session, *, learner_id: str, exercise: Exercise, hint: int) -> dict:
    """Record that the learner showed hint number `hint` (1 = the first); 404 for a hint the exercise lacks."""
    if not 1 <= hint <= len(exercise.spec.hints):
        raise RevealRefused(404, f"The exercise {exercise.slug!r} has {len(exercise.spec.hints)} hints; there is no "
                           f"hint {hint}.")
    look = reveals.record_reveal(session, learner_id=learner_id, exercise_slug=exercise.slug, kind="hint", hint=hint)
    return {"exercise": exercise.slug, "hint": hint, "seen_at": iso(look.at)}


def panel_state(session: Session, *, learner_id: str, exercise: Exercise, unlock: str = DEFAULT_UNLOCK) -> dict:
    """Return what a lesson page's exercise panel shows this learner: exercise_state, plus last code and verdict."""
    state = exercise_state(session, learner_id=learner_id, exercise=exercise, unlock=unlock)
    latest = progress.latest_submission(session, learner_id=learner_id, exercise_slug=exercise.slug)
    state["code"] = state["latest_code"]
    state["last"] = verdict_json(latest) if latest is not None and latest.finished else None
    return state


__all__ = ["verdict_json", "trace_json", "NoTrace", "attempt_summary", "failed_attempts", "learner_key",
           "exercise_state", "panel_state", "iso", "SOLUTION_AFTER_FAILURES", "FAILED_STATUSES", "DEFAULT_UNLOCK",
           "reveal_solution", "reveal_hint", "RevealRefused"]
