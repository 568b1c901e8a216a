"""Leases on submissions (app/submissions/leases.py), against SQLite and a real PostgreSQL: claims, heartbeats, the
guarded verdict and the sweep. Times are passed in, so no test waits for a lease to run out."""

from __future__ import annotations

from datetime import timedelta

import pytest

from app.core.db import Database
from app.learning import progress
from app.models import ExerciseProgress, Submission, utcnow
from app.submissions import leases

pytestmark = [pytest.mark.small_course, pytest.mark.both_databases]

LEASE_S = 30.0
PASSED = {"exercise": "alpha", "status": "passed", "checks": [], "stdout": "", "stderr": "", "duration_ms": 12,
          "device": "cpu"}


@pytest.fixture
def db(settings):
    from tests.helpers import migrate_database

    migrate_database(settings.database_url)
    database = Database(settings.database_url)
    yield database
    database.dispose()


def stored(db, **kw) -> str:
    with db.session(write=True) as session, session.begin():
        return progress.record_submission(session, learner_id="learner1", exercise_slug="alpha", code="pass",
                                          **kw).id


def step(db, fn, **kw):
    with db.session(write=True) as session, session.begin():
        return fn(session, **kw)


def load(db, submission_id: str) -> Submission:
    with db.session() as session:
        return session.get(Submission, submission_id)


def test_one_delivery_claims_an_attempt_and_a_second_stops(db):
    sid = stored(db)
    assert step(db, leases.claim, submission_id=sid, attempt=1, worker="a", lease_s=LEASE_S)
    assert not step(db, leases.claim, submission_id=sid, attempt=1, worker="b", lease_s=LEASE_S)
    assert not step(db, leases.claim, submission_id=sid, attempt=2, worker="b", lease_s=LEASE_S)
    assert load(db, sid).worker == "a" and load(db, sid).status == "running"


def test_a_run_whose_lease_ran_out_can_be_claimed_by_a_redelivery(db):
    sid = stored(db)
    step(db, leases.claim, submission_id=sid, attempt=1, worker="a", lease_s=LEASE_S)
    later = utcnow() + timedelta(seconds=LEASE_S + 1)
    assert step(db, leases.claim, submission_id=sid, attempt=1, worker="b", lease_s=LEASE_S, now=later)


def test_the_verdict_is_stored_once_by_the_holder_and_counts_the_pass(db):
    sid = stored(db)
    step(db, leases.claim, submission_id=sid, attempt=1, worker="a", lease_s=LEASE_S)
    assert step(db, leases.finish_attempt, submission_id=sid, attempt=1, worker="b", verdict=PASSED) is None
    assert step(db, leases.finish_attempt, submission_id=sid, attempt=1, worker="a", verdict=PASSED) is not None
    assert step(db, leases.finish_attempt, submission_id=sid, attempt=1, worker="a", verdict=PASSED) is None
    row = load(db, sid)
    assert row.status == "passed" and row.duration_ms == 12 and row.worker is None
    with db.session() as session:
        assert session.get(ExerciseProgress, ("learner1", "alpha")).passed_at is not None


def test_heartbeats_renew_only_the_workers_own_leases(db):
    mine, theirs = stored(db), stored(db)
    step(db, leases.claim, submission_id=mine, attempt=1, worker="a", lease_s=LEASE_S)
    step(db, leases.claim, submission_id=theirs, attempt=1, worker="b", lease_s=LEASE_S)
    later = utcnow() + timedelta(seconds=10)
    assert step(db, leases.heartbeat, worker="a", now=later) == {(mine, 1)}
    assert load(db, mine).heartbeat_at == later and load(db, theirs).heartbeat_at < later


def test_the_sweep_requeues_a_dead_workers_run_and_its_old_attempt_cannot_store(db):
    sid = stored(db)
    step(db, leases.mark_enqueued, submission_id=sid, attempt=1)
    step(db, leases.claim, submission_id=sid, attempt=1, worker="a", lease_s=LEASE_S)
    later = utcnow() + timedelta(seconds=LEASE_S + 1)
    found = step(db, leases.sweep, lease_s=LEASE_S, waiting=set(), max_attempts=3, now=later)
    assert found.requeue == [(sid, 2)] and not found.failed
    again = step(db, leases.sweep, lease_s=LEASE_S, waiting=set(), max_attempts=3, now=later)
    assert again.requeue == [(sid, 2)]  # not sent yet (no mark_enqueued): sent again, same attempt
    assert step(db, leases.finish_attempt, submission_id=sid, attempt=1, worker="a", verdict=PASSED) is None
    assert step(db, leases.claim, submission_id=sid, attempt=2, worker="b", lease_s=LEASE_S)


def test_after_max_attempts_the_sweep_stores_an_error(db):
    sid = stored(db)
    for attempt in (1, 2, 3):
        step(db, leases.claim, submission_id=sid, attempt=attempt, worker="w", lease_s=LEASE_S)
        later = utcnow() + timedelta(seconds=LEASE_S * attempt + 1)
        found = step(db, leases.sweep, lease_s=LEASE_S, waiting=set(), max_attempts=3, now=later)
    assert found.failed == [sid] and not found.requeue
    row = load(db, sid)
    assert row.status == "error" and "started 3 times" in row.verdict["stderr"]


def test_a_run_never_sent_or_lost_by_the_broker_is_queued_again_and_one_on_the_queue_is_left(db):
    never_sent, lost, on_the_queue, just_sent = stored(db), stored(db), stored(db), stored(db)
    long_ago = utcnow() - timedelta(seconds=1000)
    for sid in (lost, on_the_queue):
        step(db, leases.mark_enqueued, submission_id=sid, attempt=1, at=long_ago)
    step(db, leases.mark_enqueued, submission_id=just_sent, attempt=1)
    later = utcnow() + timedelta(seconds=LEASE_S + 1)
    waiting = {leases.task_id(on_the_queue, 1)}
    found = step(db, leases.sweep, lease_s=LEASE_S, waiting=waiting, max_attempts=3, now=utcnow())
    assert sorted(found.requeue) == sorted([(lost, 2)])  # never_sent is not a lease old yet
    found = step(db, leases.sweep, lease_s=LEASE_S, waiting=waiting, max_attempts=3, now=later)
    assert sorted(found.requeue) == sorted([(never_sent, 1), (lost, 2), (just_sent, 2)])


def test_while_the_queues_cannot_be_read_a_queued_run_that_was_sent_is_left_alone(db):
    sid = stored(db)
    step(db, leases.mark_enqueued, submission_id=sid, attempt=1, at=utcnow() - timedelta(seconds=1000))
    assert step(db, leases.sweep, lease_s=LEASE_S, waiting=None, max_attempts=3).requeue == []


def test_lease_times_are_the_databases_clock_not_this_hosts(db, monkeypatch):
    """A host whose clock is a minute behind claims and renews at the database's "now": no sweep finds it stale."""
    from sqlalchemy import select

    behind = utcnow() - timedelta(seconds=60)
    from app.submissions import finish

    assert not hasattr(leases, "utcnow")  # leases never ask this host's clock ...
    monkeypatch.setattr(finish, "utcnow", lambda: behind)  # ... and storing a verdict, which does, moves no lease
    sid = stored(db)
    step(db, leases.claim, submission_id=sid, attempt=1, worker="a", lease_s=LEASE_S)
    claimed = load(db, sid).heartbeat_at
    step(db, leases.heartbeat, worker="a")
    with db.session() as session:
        database_now = session.scalar(select(leases.db_clock()))
    assert abs((claimed - database_now).total_seconds()) < 5 and load(db, sid).heartbeat_at >= claimed
    found = step(db, leases.sweep, lease_s=LEASE_S, waiting=set(), max_attempts=3)
    assert found.requeue == [] and found.failed == [] and load(db, sid).attempt == 1
    assert step(db, leases.sweep, lease_s=-1, waiting=set(), max_attempts=3).requeue == [(sid, 2)]  # it does sweep
