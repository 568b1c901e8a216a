"""Hints and the reference solution: each look recorded on the server with its time, and the rule that decides
when the solution may be served.

The server serves the solution only when the exercise's unlock rule allows it (app/core/unlock.py: after N
counted failed attempts, after the deadline, never; a pass unlocks it unless the rule is "never"), and records
every look. The dashboard, the learner page and the CSV compare the first look with the first pass: "solution
seen before passing". A hint is not held back (the page carries them), but showing one is recorded too.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.core.unlock import UnlockRule, parse_unlock
from app.learning.deadlines import deadline_for
from app.learning.progress import ensure_learner
from app.models import ExerciseProgress, Reveal, Submission, utcnow

# statuses that count as the learner's own failed attempt ("error" is the grader's fault, "rejected" never ran)
FAILED_STATUSES = ("failed", "timeout")


def rule_for(exercise, course_rule: str) -> UnlockRule:
    """Return the exercise's unlock rule: its own `solution_unlock:`, else the course's COURSE_SOLUTION_UNLOCK."""
    return parse_unlock(getattr(exercise.spec, "solution_unlock", None) or course_rule)


def counted_failures(session: Session, *, learner_id: str, exercise_slug: str) -> int:
    """Count the learner's failed attempts that ran something new (app/learning/attempts.py)."""
    return session.scalar(select(func.count()).select_from(Submission).where(
        Submission.learner_id == learner_id, Submission.exercise_slug == exercise_slug,
        Submission.status.in_(FAILED_STATUSES), Submission.uncounted.is_(None)))


@dataclass(frozen=True)
class Unlock:
    """Whether the solution may be served to this learner now, and the sentences that say why or why not."""

    unlocked: bool
    reason: str | None  # why it is open
    lock: str | None  # why it is not, and what opens it
    failures: int  # counted failed attempts
    failures_to_unlock: int  # more counted failures that open it (0 when open, or when failures do not open it)


def unlock_state(session: Session, *, learner_id: str, exercise, passed: bool, course_rule: str,
                 now: datetime | None = None) -> Unlock:  # fmt: skip
    """Decide whether the solution is open to this learner, by the exercise's rule."""
    rule = rule_for(exercise, course_rule)
    failures = counted_failures(session, learner_id=learner_id, exercise_slug=exercise.slug)
    if rule.kind == "never":
        return Unlock(False, None, "The reference solution of this exercise is not shown.", failures, 0)
    if passed:
        return Unlock(True, "You passed; here is the reference solution to compare with yours.", None, failures, 0)
    if rule.kind == "failures":
        if failures >= rule.after:
            return Unlock(True, f"After {failures} failed attempts, here is the reference solution.", None,
                          failures, 0)
        left = rule.after - failures
        return Unlock(False, None, f"The reference solution appears after a pass or after {left} more failed "
                                   f"attempt{'s' if left != 1 else ''} (runs of unchanged or already tried code, or "
                                   "of code that is not valid Python, do not count).", failures, left)
    due = deadline_for(session, learner_id=learner_id, exercise_slug=exercise.slug)
    if due is not None and (now or utcnow()) > due:
        return Unlock(True, "The deadline has passed; here is the reference solution.", None, failures, 0)
    return Unlock(False, None, "The reference solution appears after a pass or after the deadline"
                               f"{' (' + due.strftime('%Y-%m-%d %H:%M UTC') + ')' if due else ''}.", failures, 0)


def record_reveal(session: Session, *, learner_id: str, exercise_slug: str, kind: str, hint: int | None = None,
                  at: datetime | None = None) -> Reveal:  # fmt: skip
    """Record one look at a hint (1 = the first) or at the solution."""
    ensure_learner(session, learner_id)
    row = Reveal(learner_id=learner_id, exercise_slug=exercise_slug, kind=kind, hint=hint, at=at or utcnow())
    session.add(row)
    session.flush()
    return row


def first_solution_look(session: Session, *, learner_id: str, exercise_slug: str) -> datetime | None:
    """Return when the learner first saw the solution of the exercise, or None."""
    return session.scalar(select(func.min(Reveal.at)).where(
        Reveal.learner_id == learner_id, Reveal.exercise_slug == exercise_slug, Reveal.kind == "solution"))


def looks(session: Session, *, learner_ids=None, exercise_slug: str | None = None) -> dict[tuple[str, str], dict]:
    """Return, per (learner, exercise), {"solution_at": first solution look or None, "hints": hints shown (the
    highest hint number), "hints_at": first hint look or None} in one query."""
    query = (select(Reveal.learner_id, Reveal.exercise_slug, Reveal.kind, func.min(Reveal.at), func.max(Reveal.hint))
             .group_by(Reveal.learner_id, Reveal.exercise_slug, Reveal.kind))
    if learner_ids is not None:
        query = query.where(Reveal.learner_id.in_(learner_ids))
    if exercise_slug is not None:
        query = query.where(Reveal.exercise_slug == exercise_slug)
    found: dict[tuple[str, str], dict] = {}
    for learner_id, slug, kind, first, highest in session.execute(query):
        entry = found.setdefault((learner_id, slug), {"solution_at": None, "hints": 0, "hints_at": None})
        if kind == "solution":
            entry["solution_at"] = aware(first)
        else:
            entry["hints"], entry["hints_at"] = highest or 0, aware(first)
    return found


def seen_before_passing(solution_at: datetime | None, passed_at: datetime | None) -> bool:
    """True when the solution was seen and the exercise was not passed before that (or not passed at all)."""
    return solution_at is not None and (passed_at is None or solution_at < passed_at)


def solution_first_by_exercise(session: Session, *, learners=None) -> dict[str, int]:
    """Count, per exercise, the learners who passed it after seeing its solution (`learners`: a subquery of learner
    ids to leave out, such as instructors'); two queries for the whole class."""
    seen = looks(session)
    query = select(ExerciseProgress.learner_id, ExerciseProgress.exercise_slug, ExerciseProgress.passed_at).where(
        ExerciseProgress.passed_at.is_not(None))
    if learners is not None:
        query = query.where(ExerciseProgress.learner_id.not_in(learners))
    counts: dict[str, int] = {}
    for learner_id, slug, passed_at in session.execute(query):
        entry = seen.get((learner_id, slug))
        if entry and seen_before_passing(entry["solution_at"], aware(passed_at)):
            counts[slug] = counts.get(slug, 0) + 1
    return counts


def aware(value) -> datetime | None:
    """Return a timestamp as an aware datetime (SQLite hands an aggregate of a column back as naive text)."""
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value if value.tzinfo else value.replace(tzinfo=UTC)


__all__ = ["FAILED_STATUSES", "rule_for", "counted_failures", "Unlock", "unlock_state", "record_reveal",
           "first_solution_look", "looks", "seen_before_passing", "solution_first_by_exercise", "aware"]
