"""Each submission counts one attempt on the learner's progress row (app/learning/progress.py `record_submission`),
on a real SQLite file: the row is made by the first, counted by the next whether the session holds a copy of it or
not (a copy held reads the new count), and the first attempt's time stays."""

from __future__ import annotations

from app.core.db import Database
from app.learning import progress
from app.models import ExerciseProgress
from tests.helpers import make_settings


def submit(db: Database, learner: str, code: str, *, hold: bool = False) -> ExerciseProgress | None:
    with db.session(write=True) as session, session.begin():
        held = session.get(ExerciseProgress, (learner, "ex")) if hold else None
        submission = progress.record_submission(session, learner_id=learner, exercise_slug="ex", code=code,
                                                status="running")
        if held is not None:
            assert held.attempts is not None and held.last_attempt_at == submission.created_at
        return held


def stored(db: Database, learner: str) -> ExerciseProgress:
    with db.session() as session:
        return session.get(ExerciseProgress, (learner, "ex"))


def test_each_submission_counts_one_attempt(tmp_path):
    db = Database(make_settings(tmp_path, migrate=True).database_url)
    submit(db, "ann", "x = 1")
    first = stored(db, "ann")
    assert first.attempts == 1 and first.first_attempt_at == first.last_attempt_at

    submit(db, "ann", "x = 2")
    held = submit(db, "ann", "x = 3", hold=True)
    assert held.attempts == 3
    row = stored(db, "ann")
    assert row.attempts == 3 and row.first_attempt_at == first.first_attempt_at
    assert row.last_attempt_at > first.last_attempt_at

    with db.session(write=True) as session, session.begin():  # a pass first makes the row with no attempt
        progress.mark_exercise_passed(session, learner_id="bob", exercise_slug="ex", at=first.first_attempt_at)
    submit(db, "bob", "y = 1")
    row = stored(db, "bob")
    assert row.attempts == 1 and row.first_attempt_at == row.last_attempt_at and row.passed_at is not None
