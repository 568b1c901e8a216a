"""Progress: lessons read, exercise attempts and passes, stored submissions, and merging an anonymous learner
into an account. Every function takes the session as a keyword and leaves committing to the caller.

A submission's life (app/submissions/) calls `record_submission` when a learner submits code (counts one
attempt) and `start_submission` when the sandbox picks it up (the embedded runner's runs are stored "running" at
once: their job starts first); when grading ends, `finish()` stores the verdict
and its progress hook (app/submissions/hooks.py) touches the learner and, for a pass, calls
`mark_exercise_passed`, the one function that marks an exercise passed. `latest_submission` restores a learner's
last code and `list_submissions` gives the attempts history.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session
from sqlalchemy.orm.util import identity_key

from app.models import FINAL_STATUSES, ExerciseProgress, Learner, LessonRead, Reveal, Submission, User, utcnow


def ensure_learner(session: Session, learner_id: str) -> Learner:
    """Return the learner row for this id, creating it on first use (anonymous visitors have no row yet)."""
    learner = session.get(Learner, learner_id)
    if learner is None:
        try:
            with session.begin_nested():
                learner = Learner(id=learner_id)
                session.add(learner)
        except IntegrityError:  # another request of the same visitor created it first
            learner = session.get(Learner, learner_id)
    return learner


# a learner's last activity, the statement built once: each submission's write and each verdict's runs it
_TOUCH = (update(Learner.__table__).where(Learner.__table__.c.id == bindparam("learner_id"))
          .values(last_activity_at=bindparam("at")))


def touch(session: Session, learner_id: str, at: datetime | None = None) -> None:
    """Record activity now for this learner (creating the row if needed).

    One UPDATE where the row is there (every learner's after their first write), which also updates a copy the
    session holds: reading the row first was one SELECT more in each submission's write and each verdict's, in the
    web server's worker threads (~50 us of CPU apiece in-process).

    Where the session holds no copy (those two writes), the UPDATE is the table's, built once: the ORM's own
    (built per call, its criteria evaluated against the session's objects) cost 120 us of CPU against 35 in-process,
    for the same statement. A copy held takes the ORM's, which updates it; a session with changes not yet written
    writes them first either way (the ORM's statement would autoflush)."""
    at = at or utcnow()
    if session.identity_map.get(identity_key(Learner, learner_id)) is not None:
        updated = session.execute(update(Learner).where(Learner.id == learner_id).values(last_activity_at=at))
    else:
        if session.autoflush:
            session.flush()
        updated = session.execute(_TOUCH, {"learner_id": learner_id, "at": at})
    if updated.rowcount == 0:
        ensure_learner(session, learner_id).last_activity_at = at


def remember_machine(session: Session, *, learner_id: str, machine: str) -> None:
    """Remember the learner's "Run on" choice (already validated by the caller) for their next runs."""
    ensure_learner(session, learner_id).machine = machine


# the learner's "Run on" choice, the statement built once: each submission reads it before its job starts
_REMEMBERED = select(Learner.machine).where(Learner.id == bindparam("learner_id"))


def remembered_machine(session: Session, *, learner_id: str) -> str | None:
    """The learner's last "Run on" choice; None when they never picked one (or have no row yet)."""
    return session.scalar(_REMEMBERED, {"learner_id": learner_id})


def mark_lesson_read(session: Session, *, learner_id: str, lesson_slug: str) -> bool:
    """Mark a lesson read; return True the first time, False if it already was."""
    touch(session, learner_id)
    if session.get(LessonRead, (learner_id, lesson_slug)) is not None:
        return False
    session.add(LessonRead(learner_id=learner_id, lesson_slug=lesson_slug))
    session.flush()
    return True


def _exercise_row(session: Session, learner_id: str, exercise_slug: str) -> ExerciseProgress:
    row = session.get(ExerciseProgress, (learner_id, exercise_slug))
    if row is None:
        row = ExerciseProgress(learner_id=learner_id, exercise_slug=exercise_slug, attempts=0)
        session.add(row)
    return row


def record_submission(
    session: Session, *, learner_id: str, exercise_slug: str, code: str, status: str = "queued",
    machine: str | None = None,
    starter: str | None = None,
) -> Submission:
    """Store a new submission (status "queued"; "running" when its job has started already, as LiveHub's have;
    "rejected" for code refused before running) and count one attempt on the exercise. Return it; its `.id` is a
    random 32-hex-digit string.

    Whether it ran nothing new (the exercise's `starter` unchanged, code already tried, a syntax error only) is
    decided here, once (app/learning/attempts.py)."""
    from app.learning.attempts import uncounted_reason

    code_digest, uncounted = uncounted_reason(session, learner_id=learner_id, exercise_slug=exercise_slug, code=code,
                                              starter=starter)
    now = utcnow()
    touch(session, learner_id, now)
    row = _exercise_row(session, learner_id, exercise_slug)
    row.attempts = (row.attempts or 0) + 1
    row.first_attempt_at = row.first_attempt_at or now
    row.last_attempt_at = now
    submission = Submission(
        id=secrets.token_hex(16),
        learner_id=learner_id,
        exercise_slug=exercise_slug,
        code=code,
        status=status,
        machine=machine,
        created_at=now,
        code_digest=code_digest,
        uncounted=uncounted,
    )
    if status in FINAL_STATUSES:
        submission.finished_at = now
    session.add(submission)
    session.flush()
    return submission


def start_submission(session: Session, *, submission_id: str) -> Submission | None:
    """Mark a queued submission as running; return it (None if unknown)."""
    submission = session.get(Submission, submission_id)
    if submission is not None and submission.status == "queued":
        submission.status = "running"
    return submission


def mark_exercise_passed(session: Session, *, learner_id: str, exercise_slug: str, at: datetime) -> bool:
    """Mark an exercise passed at `at`; return True if it was not passed before. The only writer of a pass.

    An earlier pass wins (a regrade dates its pass by the code it passed, which may be older than a pass the
    learner has; a run's pass is now, later than any before it). The learner's last activity is not touched:
    the caller decides whether the learner did something now (app/submissions/hooks.py).
    """
    row = session.get(ExerciseProgress, (learner_id, exercise_slug))
    if row is None:
        ensure_learner(session, learner_id)  # the row's learner first (a progress row has one: its foreign key)
        row = _exercise_row(session, learner_id, exercise_slug)
    first = row.passed_at is None
    row.passed_at = at if first else min(row.passed_at, at)
    row.attempts = row.attempts or 0
    session.flush()
    return first


def has_passed(session: Session, *, learner_id: str, exercise_slug: str) -> bool:
    """Say whether the learner has passed the exercise."""
    row = session.get(ExerciseProgress, (learner_id, exercise_slug))
    return row is not None and row.passed_at is not None


def get_submission(session: Session, submission_id: str) -> Submission | None:
    """Return a submission by id, or None."""
    return session.get(Submission, submission_id)


def list_submissions(
    session: Session, *, learner_id: str, exercise_slug: str | None = None, limit: int = 20
) -> list[Submission]:
    """Return a learner's submissions, newest first (optionally for one exercise)."""
    query = select(Submission).where(Submission.learner_id == learner_id)
    if exercise_slug is not None:
        query = query.where(Submission.exercise_slug == exercise_slug)
    query = query.order_by(Submission.created_at.desc(), Submission.id).limit(limit)
    return list(session.scalars(query))


def latest_submission(session: Session, *, learner_id: str, exercise_slug: str) -> Submission | None:
    """Return the learner's newest submission to an exercise (to restore their code), or None."""
    found = list_submissions(session, learner_id=learner_id, exercise_slug=exercise_slug, limit=1)
    return found[0] if found else None


def _earliest(a: datetime | None, b: datetime | None) -> datetime | None:
    return min(x for x in (a, b) if x is not None) if (a or b) else None


def _latest(a: datetime | None, b: datetime | None) -> datetime | None:
    return max(x for x in (a, b) if x is not None) if (a or b) else None


def merge_learners(session: Session, *, source_id: str, target_id: str) -> bool:
    """Move an anonymous learner's progress into another learner (an account's) and delete the source.

    Lessons read and passes are unions (earliest time wins), attempts add up, submissions and the looks at hints
    and solutions move over. A source
    that belongs to an account is never merged (logging in as B while signed in as A must not give B A's
    progress). Return True if anything was merged.
    """
    if source_id == target_id:
        return False
    source = session.get(Learner, source_id)
    if source is None or session.scalar(select(User.id).where(User.learner_id == source_id)) is not None:
        return False
    target = ensure_learner(session, target_id)
    _merge_reads(session, source_id, target_id)
    _merge_exercises(session, source_id, target_id)
    session.execute(
        update(Submission).where(Submission.learner_id == source_id).values(learner_id=target_id),
        execution_options={"synchronize_session": False},
    )
    # the hints and solutions seen move too: signing in must not wipe "solution seen before passing"
    session.execute(
        update(Reveal).where(Reveal.learner_id == source_id).values(learner_id=target_id),
        execution_options={"synchronize_session": False},
    )
    target.last_activity_at = _latest(target.last_activity_at, source.last_activity_at)
    session.delete(source)
    session.flush()
    session.expire_all()  # bulk update above bypassed the identity map
    return True


def _merge_reads(session: Session, source_id: str, target_id: str) -> None:
    for read in session.scalars(select(LessonRead).where(LessonRead.learner_id == source_id)).all():
        existing = session.get(LessonRead, (target_id, read.lesson_slug))
        if existing is not None:
            existing.read_at = _earliest(existing.read_at, read.read_at)
        else:
            session.add(LessonRead(learner_id=target_id, lesson_slug=read.lesson_slug, read_at=read.read_at))
        session.delete(read)


def _merge_exercises(session: Session, source_id: str, target_id: str) -> None:
    rows = session.scalars(select(ExerciseProgress).where(ExerciseProgress.learner_id == source_id)).all()
    for row in rows:
        existing = _exercise_row(session, target_id, row.exercise_slug)
        existing.attempts = (existing.attempts or 0) + (row.attempts or 0)
        existing.first_attempt_at = _earliest(existing.first_attempt_at, row.first_attempt_at)
        existing.last_attempt_at = _latest(existing.last_attempt_at, row.last_attempt_at)
        session.delete(row)
        if row.passed_at is not None:  # the earliest pass wins, as mark_exercise_passed keeps it
            session.flush()
            mark_exercise_passed(session, learner_id=target_id, exercise_slug=row.exercise_slug, at=row.passed_at)


@dataclass
class Progress:
    """What one learner has done: lessons read (slug -> when), exercises (slug -> row), last activity."""

    learner_id: str
    lessons_read: dict[str, datetime] = field(default_factory=dict)
    exercises: dict[str, ExerciseProgress] = field(default_factory=dict)
    last_activity_at: datetime | None = None

    @property
    def exercises_passed(self) -> set[str]:
        return {slug for slug, row in self.exercises.items() if row.passed_at is not None}

    def as_dict(self) -> dict[str, Any]:
        """Return the JSON shape of GET /api/progress."""
        iso = lambda t: t.isoformat() if t else None  # noqa: E731
        return {
            "learner_id": self.learner_id,
            "last_activity_at": iso(self.last_activity_at),
            "lessons": {slug: {"read_at": iso(at)} for slug, at in sorted(self.lessons_read.items())},
            "exercises": {
                slug: {
                    "attempts": row.attempts,
                    "passed": row.passed_at is not None,
                    "passed_at": iso(row.passed_at),
                    "first_attempt_at": iso(row.first_attempt_at),
                    "last_attempt_at": iso(row.last_attempt_at),
                }
                for slug, row in sorted(self.exercises.items())
            },
        }


def learner_progress(session: Session, *, learner_id: str) -> Progress:
    """Return everything this learner has done (empty for a learner with no row yet)."""
    progress = Progress(learner_id=learner_id)
    learner = session.get(Learner, learner_id)
    if learner is None:
        return progress
    progress.last_activity_at = learner.last_activity_at
    reads = session.scalars(select(LessonRead).where(LessonRead.learner_id == learner_id))
    progress.lessons_read = {r.lesson_slug: r.read_at for r in reads}
    rows = session.scalars(select(ExerciseProgress).where(ExerciseProgress.learner_id == learner_id))
    progress.exercises = {r.exercise_slug: r for r in rows}
    return progress


def submission_count(session: Session, *, learner_id: str) -> int:
    """Return how many submissions a learner has made."""
    return session.scalar(select(func.count()).select_from(Submission).where(Submission.learner_id == learner_id))
