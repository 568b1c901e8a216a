"""Store a verdict: the one writer of how a submission's run ended, however it ended.

Every verdict is stored by `finish()` and nowhere else: a live run on the embedded runner (LiveHub), a run on
the worker tier (its lease guards the write), a run the sweeper gives up on, runs an earlier server left
unfinished, and a regrade. A run's verdict goes on the submission's row; a regrade's is appended to the
submission's history (`app.submissions.history`), so the verdict the learner saw is never overwritten. A run's
own verdict enters the history lazily, as revision 0 (`history.summarise_new_runs`, before the dashboard reads).

After the write, in the same transaction, every after-verdict hook runs (app/submissions/hooks.py): the
learner's progress is one, and an LMS grade passback hangs there too.

The error verdict of a run the site broke (not the learner's fault) is composed here too, once: `error_verdict`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, update
from sqlalchemy.orm import Session

from app.core.storable import storable_json
from app.models import FINAL_STATUSES, Submission, utcnow
from app.submissions import history, hooks

# the learner reads it: the run broke on our side, and what to do about it
GRADER_FAILED = ("The grader failed on this run (not your code's fault); run again, and tell the course staff if "
                 "it keeps happening.")
# a regrade's error is read by the instructor, beside the server's log
GRADER_FAILED_IN_REGRADE = ("The grader failed on this submission during a regrade (checks.py raised); see the "
                            "server log.")
UNFINISHED = ("queued", "running")


def error_verdict(exercise_slug: str, message: str = GRADER_FAILED) -> dict:
    """Return the Verdict JSON for a run the site itself failed (not the learner's fault)."""
    return {"exercise": exercise_slug, "status": "error", "checks": [], "stdout": "", "stderr": message,
            "duration_ms": 0, "device": "cpu"}


@dataclass(frozen=True)
class Stored:
    """A verdict finish() stored, as the after-verdict hooks and the caller see it."""

    submission: Submission
    verdict: dict[str, Any]
    at: datetime  # when it was stored
    regrade_id: int | None = None  # the regrade that produced it; None: the run's own verdict
    before: str | None = None  # the submission's current status before a regrade's verdict; None for a run

    @property
    def status(self) -> str:
        return self.verdict["status"]


def finish(session: Session, *, submission_id: str, verdict: dict[str, Any], guard: tuple = (),
           regrade_id: int | None = None, at: datetime | None = None) -> Stored | None:  # fmt: skip
    """Store a verdict and run the after-verdict hooks; return what was stored, or None when nothing was.

    A run's verdict is stored on an unfinished submission only (finishing twice changes nothing the second
    time); `guard` adds conditions on the row (a worker's lease: attempt, status, worker). With `regrade_id`,
    the verdict is that regrade's, appended to the finished submission's history. A verdict whose status is not
    final is refused (ValueError): it is a bug, not a run. `at`: when it ended (default now; LiveHub passes the
    time it already showed the learner, app/submissions/live.py).
    """
    status = verdict.get("status")
    if status not in FINAL_STATUSES:
        raise ValueError(f"verdict status {status!r} is not one of {', '.join(FINAL_STATUSES)}")
    now = at or utcnow()
    if regrade_id is not None:
        stored = _append_regrade(session, submission_id, verdict, regrade_id, now)
    else:
        stored = _store_run(session, submission_id, verdict, guard, now)
    if stored is not None:
        hooks.after_verdict(session, stored)
    return stored


def _finished_values(verdict: dict[str, Any], now: datetime) -> dict[str, Any]:
    """The columns a run's verdict sets on its row (the one statement of them: _store_run and as_stored)."""
    duration = verdict.get("duration_ms")
    return {"status": verdict["status"], "verdict": verdict, "finished_at": now, "worker": None,
            "duration_ms": int(duration) if duration is not None else None}


# a run's verdict on its unfinished row, the statement built once (a guard adds conditions: built per call)
_STORE_RUN = (update(Submission).where(Submission.id == bindparam("submission_id"), Submission.status.in_(UNFINISHED))
              .values({key: bindparam(key) for key in ("status", "verdict", "finished_at", "worker", "duration_ms")})
              .returning(Submission))
_STORE_OPTIONS = {"synchronize_session": False, "populate_existing": True}


def _store_run(session: Session, submission_id: str, verdict: dict[str, Any], guard: tuple,
               now: datetime) -> Stored | None:  # fmt: skip
    # a guarded UPDATE changes one row or none: whoever changed none (finished already, a lease lost) stops. It
    # returns the row as it leaves it (RETURNING, SQLite >= 3.35), over any copy the session holds: a SELECT after
    # it cost 0.1 ms of a verdict's write (app/submissions/live.py), in a worker thread of the web server. Unguarded
    # (the embedded runner's runs), the statement is built once: 0.13 ms of CPU less per verdict in-process, the
    # same SQL and the same stored text
    values = _finished_values(verdict, now)
    if guard:
        statement = (update(Submission).where(Submission.id == submission_id, Submission.status.in_(UNFINISHED),
                                              *guard).values(**values).returning(Submission))
        submission = session.scalars(statement, execution_options=_STORE_OPTIONS).one_or_none()
    else:
        submission = session.scalars(_STORE_RUN, {"submission_id": submission_id, **values},
                                     execution_options=_STORE_OPTIONS).one_or_none()
    if submission is None:
        return None
    return Stored(submission=submission, verdict=verdict, at=now)


def as_stored(submission: Submission, verdict: dict[str, Any], at: datetime, *, read_back: bool = True
              ) -> Submission:
    """Return a detached copy of an unfinished submission's row as `finish(verdict=verdict, at=at)` will leave it,
    read back: the verdict as its JSON column reads it (NUL and lone surrogates replaced, app/core/storable.py).
    What a learner is shown before the write is done must be what they read afterwards.

    read_back=False: the verdict as given, for a caller that shows it only where that is the same
    (app/submissions/live.py's `shown`)."""
    columns = {column.key: getattr(submission, column.key) for column in Submission.__table__.columns}
    copy = Submission(**{**columns, **_finished_values(verdict, at)})
    copy.verdict = json.loads(storable_json(verdict)) if read_back else verdict
    return copy


def _append_regrade(session: Session, submission_id: str, verdict: dict[str, Any], regrade_id: int,
                    now: datetime) -> Stored | None:  # fmt: skip
    submission = session.get(Submission, submission_id)
    if submission is None:
        return None
    before, _ = history.add_regrade_verdict(session, submission=submission, regrade_id=regrade_id, verdict=verdict)
    return Stored(submission=submission, verdict=verdict, at=now, regrade_id=regrade_id, before=before)


__all__ = ["finish", "as_stored", "Stored", "error_verdict", "GRADER_FAILED", "GRADER_FAILED_IN_REGRADE"]
