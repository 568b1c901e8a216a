"""A regrade's lease (app/submissions/regrade.py), against SQLite and a real PostgreSQL: a running regrade under a live
lease refuses a second start; once its lease ran out (its process died) the next start takes it over and resumes it,
and the old holder can write nothing more. Times are moved in the database, so no test waits for a lease."""

from __future__ import annotations

import pytest
from sqlalchemy import update

from app import ROOT
from app.content.exercises import load_exercise
from app.core.db import Database
from app.models import Regrade
from app.submissions import regrade
from app.submissions.finish import finish
from app.submissions.leases import db_clock

pytestmark = [pytest.mark.both_databases]

LEASE_S = 30.0
EXERCISE = load_exercise(ROOT / "exercises" / "same-device")


@pytest.fixture
def db(settings):
    from tests.helpers import migrate_database

    migrate_database(settings.database_url)
    database = Database(settings.database_url)
    yield database
    database.dispose()


def step(db, fn, **kw):
    with db.session(write=True) as session, session.begin():
        return fn(session, **kw)


def start(session, holder):
    row = regrade.start(session, exercise=EXERCISE, holder=holder, lease_s=LEASE_S)
    return row.id, row.resumed, row.holder


def age(db, regrade_id: int, seconds: float) -> None:
    with db.session(write=True) as session, session.begin():
        session.execute(update(Regrade).where(Regrade.id == regrade_id).values(heartbeat_at=db_clock(-seconds)))


def test_a_live_lease_refuses_a_second_start_and_a_stale_one_is_taken_over(db):
    regrade_id, resumed, holder = step(db, start, holder="web-a")
    assert (resumed, holder) == (False, "web-a")
    with pytest.raises(regrade.RegradeError) as refused:
        step(db, start, holder="web-b")
    assert refused.value.status_code == 409 and "already running" in refused.value.message
    assert step(db, regrade.renew, regrade_id=regrade_id, holder="web-a")
    age(db, regrade_id, LEASE_S + 1)  # web-a was killed: no heartbeat for a lease
    assert step(db, start, holder="web-b") == (regrade_id, True, "web-b")
    assert not step(db, regrade.renew, regrade_id=regrade_id, holder="web-a")  # web-a, if alive, stops
    with pytest.raises(regrade.LeaseLost):
        regrade._store(db, regrade_id, "any-submission", {}, "web-a")
    with pytest.raises(regrade.RegradeError):  # web-b's lease is live
        step(db, start, holder="web-c")


@pytest.mark.slow  # one regrade through a sandbox of its own
def test_course_regrade_resumes_a_regrade_whose_process_died(db, settings):
    """Before leases it exited 1 "already running" for good; now it takes the stalled row over and finishes it."""
    import os
    import subprocess
    import sys

    from app.learning import progress

    solution = (ROOT / "exercises" / "same-device" / "solution.py").read_text()
    with db.session(write=True) as session, session.begin():
        for learner in ("ann", "ben"):
            submission = progress.record_submission(session, learner_id=learner, exercise_slug="same-device",
                                                    code=solution)
            finish(session, submission_id=submission.id, verdict={
                "exercise": "same-device", "status": "passed", "checks": [], "stdout": "", "stderr": "",
                "duration_ms": 1, "device": "cpu"})
    regrade_id, _resumed, _holder = step(db, start, holder="killed-web")
    age(db, regrade_id, 600)
    env = {**os.environ, "COURSE_ENV": "test", "COURSE_SECRET_KEY": settings.secret_key,
           "COURSE_DATABASE_URL": settings.database_url}
    done = subprocess.run([sys.executable, "-m", "app.cli", "regrade", "same-device"], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert f"resuming regrade #{regrade_id} of same-device (0 of 2 done)" in done.stderr
    assert "same-device: regraded 2 submissions in" in done.stdout and f"(regrade #{regrade_id})" in done.stdout
