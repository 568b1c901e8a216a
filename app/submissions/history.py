"""The verdict history of stored submissions: every verdict each has had, and which one is current.

A submission's row keeps the verdict its run produced, and a regrade never overwrites it: each verdict is a
`SubmissionVerdict` numbered by revision (0 the run's own, 1, 2, ... the regrades), and the newest is current.
Each row also carries what the dashboard counts, taken from the verdict once when the row is written (the first
failing check, the exception line), so the dashboard aggregates short columns in SQL instead of parsing every
verdict's JSON and output on each view.

Revision 0 is written lazily (`summarise_new_runs`), not when a run finishes: runs are finished by the web
process, by `fail_interrupted` and by other runners' workers, and one catch-up before the dashboard reads covers
them all, old rows included.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

from sqlalchemy import and_, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.models import FINAL_STATUSES, Submission, SubmissionVerdict, User, utcnow

# characters of an exception line kept for counting; longer ones are cut (the column holds 300)
ERROR_LINE_CHARS = 300
# submissions summarised per query when catching up; bounds the memory one batch of verdicts takes
CATCH_UP_BATCH = 500
# times a catch-up reads again after another process wrote some of the same rows first
MAX_CLASHES = 3
# the line Python prints last for an uncaught exception: `RuntimeError: Expected all tensors ...`
EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)\b(?::.*)?$", re.M)
# torchrun's prefixes of a rank's lines (`--tee 3`, then torch's own once the rank joined its group)
RANK_PREFIX = re.compile(r"(?:\[default(\d+)\]:)?(?:\[rank\d+\]: ?)?")
# the launcher's summary of a failed rank, not the learner's exception
LAUNCHER_ERRORS = ("torch.distributed.elastic.multiprocessing.errors.ChildFailedError",)


def first_failed_check(verdict: dict[str, Any] | None) -> str | None:
    """Return the id of the verdict's first failing check (in exercise.yaml's order), or None."""
    for check in (verdict or {}).get("checks") or []:
        if not check.get("passed"):
            return str(check.get("id"))[:100]
    return None


def exception_line(stderr: str | None) -> str | None:
    """Return the last exception line of a program's stderr (`KeyError: 'x'`), cut to ERROR_LINE_CHARS.

    A job of several ranks prefixes each rank's lines (`[default1]:[rank1]: ValueError: ...`) and ends with the
    launcher's own `ChildFailedError`; its exception is the one of the rank whose traceback comes first (the
    launcher shows the first failure first), without the prefixes."""
    lines = (stderr or "").splitlines()
    ranks: dict[str | None, list[str]] = {}  # in the order the ranks' lines first appear
    for line in lines:
        if (m := RANK_PREFIX.match(line)) and m.end() and EXCEPTION_LINE.match(line[m.end():]):
            ranks.setdefault(m.group(1), []).append(line[m.end():])
    found = next(iter(ranks.values()), None) or [
        line for line in lines if EXCEPTION_LINE.match(line) and not line.startswith(LAUNCHER_ERRORS)]
    return found[-1].strip()[:ERROR_LINE_CHARS] if found else None


def summary(status: str, verdict: dict[str, Any] | None) -> dict[str, Any]:
    """Return the columns a SubmissionVerdict keeps about a verdict: status, first failing check, exception."""
    return {"status": status, "first_failed_check": first_failed_check(verdict),
            "error_line": exception_line((verdict or {}).get("stderr"))}


def _unsummarised(exercise_slug: str | None):
    run_row = and_(SubmissionVerdict.submission_id == Submission.id, SubmissionVerdict.revision == 0)
    query = (select(Submission.id, Submission.status, Submission.verdict, Submission.finished_at)
             .outerjoin(SubmissionVerdict, run_row)
             .where(SubmissionVerdict.id.is_(None), Submission.status.in_(FINAL_STATUSES)))
    return query.where(Submission.exercise_slug == exercise_slug) if exercise_slug else query


def needs_catch_up(session: Session, *, exercise_slug: str | None = None) -> bool:
    """Say whether some finished submission has no revision 0 yet (a cheap read before taking the write lock)."""
    return session.execute(_unsummarised(exercise_slug).with_only_columns(Submission.id).limit(1)).first() is not None


def summarise_new_runs(session: Session, *, exercise_slug: str | None = None) -> int:
    """Write revision 0 for every finished submission that has none yet; return how many were written."""
    written, clashes = 0, 0
    while True:
        rows = session.execute(_unsummarised(exercise_slug).limit(CATCH_UP_BATCH)).all()
        try:
            with session.begin_nested():
                session.add_all(_run_row(submission_id, status, verdict, finished_at)
                                for submission_id, status, verdict, finished_at in rows)
        except IntegrityError:  # another process summarised some of them a moment ago: read again
            clashes += 1
            if clashes > MAX_CLASHES:
                raise
            continue
        written += len(rows)
        if len(rows) < CATCH_UP_BATCH:
            return written


def _run_row(submission_id: str, status: str, verdict: dict | None, finished_at) -> SubmissionVerdict:
    return SubmissionVerdict(submission_id=submission_id, revision=0, graded_at=finished_at or utcnow(),
                             **summary(status, verdict))


def current_verdicts(*, exercise_slug: str | None = None, learners_only: bool = False):
    """Return a subquery of every summarised submission with its current (newest) verdict's columns:
    submission_id, learner_id, exercise_slug, created_at, revision, status, first_failed_check, error_line, uncounted
    (why the attempt ran nothing new, app/learning/attempts.py; None when it counts).
    With `learners_only`, instructors' own submissions (trying their exercises) are left out."""
    newest = select(SubmissionVerdict.submission_id, func.max(SubmissionVerdict.revision).label("revision"))
    if exercise_slug is not None:
        newest = newest.join(Submission, Submission.id == SubmissionVerdict.submission_id).where(
            Submission.exercise_slug == exercise_slug)
    newest = newest.group_by(SubmissionVerdict.submission_id).subquery("newest")
    query = (select(Submission.id.label("submission_id"), Submission.learner_id, Submission.exercise_slug,
                    Submission.created_at, SubmissionVerdict.revision, SubmissionVerdict.status,
                    SubmissionVerdict.first_failed_check, SubmissionVerdict.error_line, Submission.uncounted)
             .join(SubmissionVerdict, SubmissionVerdict.submission_id == Submission.id)
             .join(newest, and_(newest.c.submission_id == SubmissionVerdict.submission_id,
                                newest.c.revision == SubmissionVerdict.revision)))
    if learners_only:
        query = query.where(Submission.learner_id.not_in(instructor_learner_ids()))
    return query.subquery("current")


def instructor_learner_ids():
    """Return a subquery of the learner ids of instructors' accounts."""
    return select(User.learner_id).where(User.role == "instructor")


def history(session: Session, *, submission_ids: list[str]) -> dict[str, list[SubmissionVerdict]]:
    """Return each submission's verdicts, oldest first (one query for them all)."""
    found: dict[str, list[SubmissionVerdict]] = defaultdict(list)
    if submission_ids:
        query = (select(SubmissionVerdict).where(SubmissionVerdict.submission_id.in_(submission_ids))
                 .order_by(SubmissionVerdict.submission_id, SubmissionVerdict.revision))
        for row in session.scalars(query):
            found[row.submission_id].append(row)
    return found


def verdict_of(submission: Submission, row: SubmissionVerdict) -> dict[str, Any] | None:
    """Return the Verdict JSON a history row stands for (revision 0's lives on the submission)."""
    return submission.verdict if row.revision == 0 else row.verdict


def add_regrade_verdict(session: Session, *, submission: Submission, regrade_id: int,
                        verdict: dict[str, Any]) -> tuple[str, SubmissionVerdict]:  # fmt: skip
    """Append a regrade's verdict to a submission's history; return its status before and the new row."""
    rows = history(session, submission_ids=[submission.id]).get(submission.id)
    if not rows:  # never summarised yet: its run's verdict becomes revision 0 first, so history is whole
        try:
            with session.begin_nested():
                session.add(_run_row(submission.id, submission.status, submission.verdict, submission.finished_at))
        except IntegrityError:
            pass  # the dashboard summarised it at the same moment
        rows = history(session, submission_ids=[submission.id])[submission.id]
    status = verdict["status"]
    row = SubmissionVerdict(submission_id=submission.id, revision=rows[-1].revision + 1, regrade_id=regrade_id,
                            verdict=verdict, graded_at=utcnow(), **summary(status, verdict))
    session.add(row)
    session.flush()
    return rows[-1].status, row


__all__ = ["first_failed_check", "exception_line", "summary", "needs_catch_up", "summarise_new_runs",
           "current_verdicts", "instructor_learner_ids", "history", "verdict_of", "add_regrade_verdict"]
