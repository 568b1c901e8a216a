"""Leases on submissions run by a worker tier (COURSE_RUNNER=celery): claim, heartbeat, store once, sweep.

Delivery is at least once: Celery redelivers a job whose worker died, and the sweeper queues a job again when
its lease ran out. So every write here is a guarded UPDATE on (submission id, attempt, status[, worker]) that
changes one row or none, and whoever changed none stops: two deliveries of one attempt never both run, and a
run of an attempt the sweeper has replaced never stores its verdict. `attempt` numbers a submission's runs;
the job message carries it.

A submission's life on the tier: the web stores it "queued" (heartbeat_at None), sends the job and calls
`mark_enqueued`; a worker `claim`s it ("running", its name, a heartbeat), renews the lease with `heartbeat`
while it runs, and stores the verdict with `finish_attempt` (`finish()`, guarded by the lease). `sweep` finds
runs whose worker went quiet (or that were never queued) and says which to queue again; after `max_attempts`
runs it stores an error instead.
Every function takes the session as a keyword and leaves committing to the caller.

Lease times (claims, heartbeats, the sweep's "stale") are the database's clock, `db_clock()`, evaluated by the
database in the statement, never a worker's: a worker whose clock is a minute behind renews its leases at the same
"now" as every other, and no sweeper takes its jobs for stale. The `now` arguments are for tests that move time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, or_, select, update
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.orm import Session
from sqlalchemy.sql.expression import ColumnElement, FunctionElement, literal

from app.models import Submission, UTCDateTime
from app.submissions.finish import error_verdict, finish

REPEATED_FAILURE = ("This run was started {n} times and each time the machine running it stopped (not your "
                    "code's fault, unless it uses far more memory than the exercise needs); run it again.")


class db_clock(FunctionElement):  # a SQL function, named like one
    """The database's current time plus `offset_s` seconds (negative: earlier), as the database computes it."""

    type = UTCDateTime()
    inherit_cache = True
    name = "db_clock"

    def __init__(self, offset_s: float = 0.0) -> None:
        super().__init__(literal(float(offset_s)))


@compiles(db_clock, "postgresql")
def _postgres_clock(element, compiler, **kw) -> str:
    # now() is the transaction's start, on the server's clock: one "now" for every statement of a lease step
    return f"(now() + {compiler.process(element.clauses, **kw)} * interval '1 second')"


@compiles(db_clock, "sqlite")
def _sqlite_clock(element, compiler, **kw) -> str:
    # the format SQLAlchemy stores DateTime in on SQLite (UTC, microseconds), so comparisons are text comparisons
    offset = compiler.process(element.clauses, **kw)
    return f"strftime('%Y-%m-%d %H:%M:%f000', 'now', printf('%+.3f seconds', {offset}))"


def _clock(now: datetime | None, offset_s: float = 0.0) -> ColumnElement | datetime:
    """Return the database's clock offset by offset_s seconds, or a test's `now` offset likewise."""
    return db_clock(offset_s) if now is None else now + timedelta(seconds=offset_s)


def _guarded(session: Session, *conditions, **values) -> bool:
    """Update the one submission matching every condition; say whether it did (False: someone else moved it)."""
    result = session.execute(update(Submission).where(*conditions).values(**values),
                             execution_options={"synchronize_session": False})
    return result.rowcount == 1


def mark_enqueued(session: Session, *, submission_id: str, attempt: int, at: datetime | None = None) -> bool:
    """Record that this attempt is on the queue now (its queue wait starts)."""
    return _guarded(session, Submission.id == submission_id, Submission.attempt == attempt,
                    Submission.status == "queued", heartbeat_at=_clock(at))


def claim(session: Session, *, submission_id: str, attempt: int, worker: str, lease_s: float,
          now: datetime | None = None) -> bool:
    """Take this attempt for `worker`: it must be queued, or running under a lease that ran out."""
    stale = _clock(now, -lease_s)
    return _guarded(
        session, Submission.id == submission_id, Submission.attempt == attempt,
        or_(Submission.status == "queued", and_(Submission.status == "running", Submission.heartbeat_at < stale)),
        status="running", worker=worker, heartbeat_at=_clock(now))


def heartbeat(session: Session, *, worker: str, now: datetime | None = None) -> set[tuple[str, int]]:
    """Renew every lease `worker` holds; return the (submission id, attempt) pairs it still holds."""
    session.execute(update(Submission).where(Submission.worker == worker, Submission.status == "running")
                    .values(heartbeat_at=_clock(now)), execution_options={"synchronize_session": False})
    rows = session.execute(select(Submission.id, Submission.attempt).where(
        Submission.worker == worker, Submission.status == "running"))
    return {(row.id, row.attempt) for row in rows}


def finish_attempt(session: Session, *, submission_id: str, attempt: int, worker: str,
                   verdict: dict[str, Any]) -> Submission | None:
    """Store the verdict of the attempt `worker` holds (finish(), guarded by the lease); None if the lease was
    lost (nothing written)."""
    stored = finish(session, submission_id=submission_id, verdict=verdict,
                    guard=(Submission.attempt == attempt, Submission.status == "running", Submission.worker == worker))
    return stored.submission if stored is not None else None


@dataclass
class Sweep:
    """What one sweep decided: attempts to put on the queue, and submissions stored as errors."""

    requeue: list[tuple[str, int]] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)


def sweep(session: Session, *, lease_s: float, max_attempts: int, waiting: set[str] | None,
          now: datetime | None = None) -> Sweep:
    """Find runs that need a worker again; bump their attempt (or store an error) and return what to queue.

    - running, no heartbeat for lease_s: its worker died; the next attempt is queued.
    - queued and sent over lease_s ago, but its message is not among `waiting` (the task ids on the broker's
      queues): a worker took it and lost it (it died, or dropped what it had reserved when Redis went away) or
      Redis lost it; the next attempt is queued. `waiting` None (Redis unreachable) skips this rule.
    - queued, never sent, for lease_s (the web server died, or Redis was down, between storing and sending):
      the same attempt is queued.
    The caller sends each returned attempt and then calls `mark_enqueued`. Concurrent sweepers are safe: each
    change is guarded, and only the sweeper that made it returns it.
    """
    result = Sweep()
    stale = _clock(now, -lease_s)
    quiet = session.execute(select(Submission.id, Submission.attempt, Submission.status, Submission.exercise_slug)
                            .where(Submission.status.in_(("running", "queued")), Submission.heartbeat_at < stale))
    for row in quiet.all():
        if row.status == "queued" and (waiting is None or task_id(row.id, row.attempt) in waiting):
            continue  # waiting its turn on the queue (or we cannot tell)
        guard = (Submission.attempt == row.attempt, Submission.status == row.status)
        if row.attempt >= max_attempts:
            verdict = error_verdict(row.exercise_slug, REPEATED_FAILURE.format(n=row.attempt))
            if finish(session, submission_id=row.id, verdict=verdict, guard=guard):
                result.failed.append(row.id)
        elif _guarded(session, Submission.id == row.id, *guard, attempt=row.attempt + 1, status="queued",
                      worker=None, heartbeat_at=None):
            result.requeue.append((row.id, row.attempt + 1))
    # Rows this sweep just moved match too (same transaction): they are listed once. A row another sweeper moved
    # and has not sent yet may be sent twice; the claim lets one delivery run.
    never_sent = session.execute(select(Submission.id, Submission.attempt).where(
        Submission.status == "queued", Submission.heartbeat_at.is_(None), Submission.created_at < stale)).all()
    result.requeue += [(row.id, row.attempt) for row in never_sent if (row.id, row.attempt) not in result.requeue]
    return result


def task_id(submission_id: str, attempt: int) -> str:
    """Return the broker's id of one attempt's job message."""
    return f"{submission_id}-{attempt}"


__all__ = ["db_clock", "task_id", "claim", "heartbeat", "finish_attempt", "mark_enqueued", "sweep", "Sweep",
           "REPEATED_FAILURE"]
