"""The unlock rule on a real SQLite file: `deadline` opens the solution once the learner's deadline (their
section's, else everyone's) has passed, `never` not even after a pass, `failures:N` after N counted failures only;
and signing in carries an anonymous learner's looks at the solution into the account."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from app.core.db import Database
from app.learning import deadlines, progress, reveals, sections
from app.models import utcnow
from app.submissions.finish import finish
from tests.helpers import make_settings

ANN, BOB = "a" * 32, "b" * 32


class Spec:
    def __init__(self, rule):
        self.solution_unlock = rule


class Exercise:
    slug = "demo"

    def __init__(self, rule=None):
        self.spec = Spec(rule)


def failed(session, learner: str, code: str) -> None:
    submission = progress.record_submission(session, learner_id=learner, exercise_slug="demo", code=code,
                                            starter="pass\n")
    finish(session, submission_id=submission.id, verdict={"exercise": "demo", "status": "failed", "checks": [],
                                                          "stdout": "", "stderr": "", "duration_ms": 1,
                                                          "device": "cpu"})


def test_each_rule_opens_the_solution_when_it_says(tmp_path):
    db = Database(make_settings(tmp_path, migrate=True).database_url)
    now = utcnow()
    with db.session(write=True) as session, session.begin():
        sections.set_members(session, "Lab B", [BOB])
        deadlines.set_deadline(session, exercise_slug="demo", due_at=now + timedelta(days=1))
        deadlines.set_deadline(session, exercise_slug="demo", due_at=now - timedelta(days=1), section="Lab B")
        for code in ["pass\n", "x = 1\n", "x = 1  # same\n", "def f(:\n", "x = 2\n"]:
            failed(session, ANN, code)
    with db.session() as session:
        state = lambda learner, rule, passed=False: reveals.unlock_state(  # noqa: E731
            session, learner_id=learner, exercise=Exercise(rule), passed=passed, course_rule="failures:5")
        ann = state(ANN, "deadline")
        assert not ann.unlocked and (now + timedelta(days=1)).strftime("%Y-%m-%d %H:%M UTC") in ann.lock
        assert state(BOB, "deadline").unlocked  # Lab B's deadline has passed
        assert state(ANN, None).failures == 2 and not state(ANN, None).unlocked  # the starter, a repeat, a syntax
        assert state(ANN, "failures:2").unlocked  # error: three runs that do not count
        assert not state(ANN, "never", passed=True).unlocked and state(ANN, "failures:9", passed=True).unlocked
    db.dispose()


def test_signing_in_keeps_the_solution_seen_before_passing(tmp_path):
    db = Database(make_settings(tmp_path, migrate=True).database_url)
    seen = datetime(2026, 3, 1, tzinfo=UTC)
    with db.session(write=True) as session, session.begin():
        progress.ensure_learner(session, BOB)
        reveals.record_reveal(session, learner_id=ANN, exercise_slug="demo", kind="solution", at=seen)
        assert progress.merge_learners(session, source_id=ANN, target_id=BOB)
    with db.session() as session:
        assert reveals.first_solution_look(session, learner_id=BOB, exercise_slug="demo") == seen
    db.dispose()
