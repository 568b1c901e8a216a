"""Regrading: run an exercise's stored submissions again, through the real sandbox, under its current checks.

`course regrade SLUG [--since DATE]` and the dashboard's button both call `start` (a `Regrade` row counting
the submissions to grade) and then `run`, which grades them a few at a time and appends each new verdict to the
submission's history (`app.submissions.history`): the verdict the learner saw is never overwritten.

The progress rule. A regrade can give a pass and never takes one away:
- a submission that passes now gives its learner the exercise if they had not passed it, dated when they
  submitted the earliest code that passes (their last activity is left alone: they did nothing now);
- a learner whose passing code fails under the new checks keeps the pass they saw. The regrade counts them
  (`passes_kept`) and the exercise's page names them, so an instructor can write to them; nobody's progress
  moves backwards because a check was changed after they were told they had passed.

A lease, as submissions have on the worker tier. A running regrade names its `holder` (host:pid:nonce) and renews
`heartbeat_at` (the database's clock) every third of COURSE_RUNNER_LEASE_S while it runs. Once the lease has run
out (the web server or `course regrade` running it was killed), the next `start` of that exercise's regrade, from
the dashboard or the command line, takes the row over and resumes it: the submissions it graded keep their
verdicts, the rest are graded. A holder that finds its lease taken stops without writing another verdict.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import socket
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio.to_thread
from sqlalchemy import and_, func, or_, select, update
from sqlalchemy.orm import Session

from app.content.exercises import Exercise, read_exercise
from app.core.db import Database
from app.core.errors import Refusal
from app.learning import progress
from app.learning.dashboard import unsupported_passes
from app.models import Regrade, Submission, SubmissionVerdict, utcnow
from app.runner.base import Busy, Rejected
from app.submissions.finish import GRADER_FAILED_IN_REGRADE, error_verdict, finish
from app.submissions.leases import db_clock

log = logging.getLogger(__name__)

# statuses of stored submissions a regrade grades again: every run that ended (a run the site broke, "error",
# too: it gets the verdict it never had); "rejected" code never ran and unfinished runs are still running
REGRADED_STATUSES = ("passed", "failed", "timeout", "error")
# seconds to wait before offering a job again when the sandbox queue is full, at most
BUSY_WAIT_MAX_S = 2.0


# seconds a regrade's lease lasts without a heartbeat when the caller names none (COURSE_RUNNER_LEASE_S's default)
LEASE_S = 30.0


class RegradeError(Refusal):
    """A regrade that cannot start: one is running already (409), or the exercise's checks are broken (400)."""


class LeaseLost(Exception):
    """Another process took this regrade over (its lease had run out): stop, writing nothing more."""


def holder_name() -> str:
    """Return a name for this process's regrades: host, pid and a nonce (a restarted process is another)."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


def _to_regrade(exercise_slug: str, since: datetime | None):
    query = select(Submission.id).where(Submission.exercise_slug == exercise_slug,
                                        Submission.status.in_(REGRADED_STATUSES))
    return query.where(Submission.created_at >= since) if since is not None else query


def count_to_regrade(session: Session, *, exercise_slug: str, since: datetime | None = None) -> int:
    """Count the stored submissions a regrade of this exercise would grade."""
    return session.scalar(select(func.count()).select_from(_to_regrade(exercise_slug, since).subquery())) or 0


def start(session: Session, *, exercise: Exercise, since: datetime | None = None, requested_by: int | None = None,
          holder: str, lease_s: float = LEASE_S) -> Regrade:  # fmt: skip
    """Record a regrade of an exercise's stored submissions (created at or after `since`), held by `holder`, and
    return it; or take over a running one whose lease ran out, and return that (`resumed` is then True).

    Refuse (409) while another regrade of the exercise runs under a live lease, and (400) when its checks.py does
    not import.
    """
    running = session.scalar(select(Regrade).where(Regrade.exercise_slug == exercise.slug,
                                                   Regrade.status == "running"))
    if running is not None:
        if not _take_over(session, running.id, holder, lease_s):
            raise RegradeError(409, f"A regrade of {exercise.slug} is already running (#{running.id}, "
                                    f"{running.done} of {running.total} done); wait for it to finish.")
        session.refresh(running)
        log.warning("took over regrade #%d of %s (%d of %d done): its lease ran out", running.id,
                    exercise.slug, running.done, running.total)
        running.resumed = True
        return running
    _check_checks(exercise)
    total = count_to_regrade(session, exercise_slug=exercise.slug, since=since)
    regrade = Regrade(exercise_slug=exercise.slug, since=since, requested_by=requested_by, total=total,
                      holder=holder, heartbeat_at=db_clock())
    session.add(regrade)
    session.flush()
    session.refresh(regrade)
    return regrade


def _take_over(session: Session, regrade_id: int, holder: str, lease_s: float) -> bool:
    """Make `holder` the holder of a running regrade whose lease ran out (or that never had one)."""
    stale = or_(Regrade.heartbeat_at.is_(None), Regrade.heartbeat_at < db_clock(-lease_s))
    result = session.execute(update(Regrade).where(Regrade.id == regrade_id, Regrade.status == "running", stale)
                             .values(holder=holder, heartbeat_at=db_clock()),
                             execution_options={"synchronize_session": False})
    return result.rowcount == 1


def renew(session: Session, *, regrade_id: int, holder: str) -> bool:
    """Renew `holder`'s lease on a running regrade; False when it no longer holds it."""
    result = session.execute(update(Regrade).where(_held(regrade_id, holder)).values(heartbeat_at=db_clock()),
                             execution_options={"synchronize_session": False})
    return result.rowcount == 1


def _held(regrade_id: int, holder: str | None):
    held = and_(Regrade.id == regrade_id, Regrade.status == "running")
    return held if holder is None else and_(held, Regrade.holder == holder)


def _check_checks(exercise: Exercise) -> None:
    from app.grading.grader import checks_module

    try:
        module = checks_module(exercise)
    except Exception as exc:  # noqa: BLE001 - whatever a broken checks.py raises, the instructor must see it
        raise RegradeError(400, f"{exercise.checks_path} does not import ({type(exc).__name__}: {exc}); fix it "
                                "(`course check` shows the problem too) before regrading.") from None
    if not callable(getattr(module, "evaluate", None)):
        raise RegradeError(400, f"{exercise.checks_path} defines no evaluate(facts); fix it before regrading.")


async def run(db: Database, runner: Any, *, exercise: Exercise, regrade_id: int, concurrency: int = 2,
              on_progress: Callable[[int, int], None] | None = None, holder: str | None = None,
              lease_s: float = LEASE_S) -> Regrade:  # fmt: skip
    """Grade every submission of a started regrade not graded by it yet, `concurrency` jobs at a time, renewing
    `holder`'s lease; return the finished row.

    Learners' runs share the sandbox with it: keeping at most `concurrency` jobs queued lets theirs in between.
    `on_progress(done, total)` is called after each submission (a resumed regrade starts at what it had done).
    A failure marks the regrade failed and raises; a lease taken over raises LeaseLost and writes nothing.
    """
    beats = asyncio.create_task(_heartbeat(db, regrade_id, holder, lease_s)) if holder else None
    try:
        ids, done = await anyio.to_thread.run_sync(_submission_ids, db, regrade_id)
        pending = iter(ids)
        total = done + len(ids)

        async def worker() -> None:
            nonlocal done
            for submission_id in pending:  # one shared iterator: each id is taken by exactly one worker
                code, machine = await anyio.to_thread.run_sync(_code, db, submission_id)
                verdict = await _grade(exercise, code, runner, machine)
                await anyio.to_thread.run_sync(_store, db, regrade_id, submission_id, verdict, holder)
                done += 1
                if on_progress is not None:
                    on_progress(done, total)

        work = asyncio.gather(*(worker() for _ in range(max(1, concurrency))))
        if beats is not None:
            await asyncio.wait([work, beats], return_when=asyncio.FIRST_COMPLETED)
            if beats.done():  # the lease was lost: stop grading
                work.cancel()
                await asyncio.gather(work, return_exceptions=True)
                beats.result()
        await work
        return await anyio.to_thread.run_sync(_finish, db, regrade_id, holder)
    except LeaseLost:
        log.warning("regrade #%d was taken over by another process; this one stops", regrade_id)
        raise
    except BaseException as exc:
        message = "interrupted: the server stopped" if isinstance(exc, asyncio.CancelledError) else \
            f"{type(exc).__name__}: {exc}"
        await asyncio.shield(anyio.to_thread.run_sync(_fail, db, regrade_id, message, holder))
        raise
    finally:
        if beats is not None:
            beats.cancel()


async def _heartbeat(db: Database, regrade_id: int, holder: str, lease_s: float) -> None:
    """Renew the lease every third of it until cancelled; raise LeaseLost once another process holds it."""
    def beat() -> bool:
        with db.session(write=True) as session, session.begin():
            return renew(session, regrade_id=regrade_id, holder=holder)

    while True:
        await asyncio.sleep(lease_s / 3)
        try:
            held = await anyio.to_thread.run_sync(beat)
        except Exception:  # a database outage: try again next period; the lease may run out meanwhile
            log.exception("could not renew the lease of regrade #%d", regrade_id)
            continue
        if not held:
            raise LeaseLost(regrade_id)


async def _grade(exercise: Exercise, code: str, runner: Any, machine: str | None = None) -> dict:
    """Grade one stored submission on the machine it ran on; a full queue means wait and offer the job again,
    never give up."""
    from app.grading.grader import follow, prepare, refused  # imported late: grading loads the checks

    try:
        grading = prepare(exercise, code, limits=runner.limits, machine=machine)
        while True:
            try:
                handle = await runner.submit(grading.job)
                break
            except Busy as exc:
                await asyncio.sleep(min(max(exc.retry_after, 0.1), BUSY_WAIT_MAX_S))
            except Rejected as exc:
                return refused(exercise, exc).model_dump(mode="json")
        return grading.verdict(await follow(handle)).model_dump(mode="json")
    except Exception:
        log.exception("regrading a submission of %s failed", exercise.slug)
        return error_verdict(exercise.slug, GRADER_FAILED_IN_REGRADE)


def _submission_ids(db: Database, regrade_id: int) -> tuple[list[str], int]:
    """Return the submissions still to grade and how many this regrade graded already (a resumed one has some),
    and make their sum the regrade's total (a run may have finished since it was counted)."""
    with db.session(write=True) as session, session.begin():
        regrade = session.get(Regrade, regrade_id)
        query = _to_regrade(regrade.exercise_slug, regrade.since).order_by(Submission.created_at, Submission.id)
        graded = set(session.scalars(select(SubmissionVerdict.submission_id)
                                     .where(SubmissionVerdict.regrade_id == regrade_id)))
        ids = [i for i in session.scalars(query) if i not in graded]
        regrade.total, regrade.done = len(ids) + len(graded), len(graded)
        return ids, len(graded)


def _code(db: Database, submission_id: str) -> tuple[str, str | None]:
    """The stored code and the "Run on" choice it ran on."""
    with db.session() as session:
        row = session.execute(select(Submission.code, Submission.machine).where(Submission.id == submission_id)).one()
        return row.code, row.machine


def _store(db: Database, regrade_id: int, submission_id: str, verdict: dict, holder: str | None = None) -> None:
    """Store one verdict with finish() (appended to the submission's history; its progress hook applies the
    progress rule) and count it on the regrade, in one commit; raise LeaseLost, storing nothing, when `holder`
    no longer holds the regrade."""
    with db.session(write=True) as session, session.begin():
        if holder is not None and session.scalar(select(Regrade.id).where(_held(regrade_id, holder))
                                                 .with_for_update()) is None:
            raise LeaseLost(regrade_id)
        submission = session.get(Submission, submission_id)
        had_passed = progress.has_passed(session, learner_id=submission.learner_id,
                                         exercise_slug=submission.exercise_slug)
        stored = finish(session, submission_id=submission_id, verdict=verdict, regrade_id=regrade_id)
        status, before = stored.status, stored.before
        counts = {"done": Regrade.done + 1}
        if status != before:
            counts["changed"] = Regrade.changed + 1
        if status == "passed" and before != "passed":
            counts["now_passing"] = Regrade.now_passing + 1
        if before == "passed" and status != "passed":
            counts["now_failing"] = Regrade.now_failing + 1
        if status == "error":
            counts["errors"] = Regrade.errors + 1
        if status == "passed" and not had_passed:  # finish()'s progress hook gave the pass
            counts["passes_added"] = Regrade.passes_added + 1
        session.execute(update(Regrade).where(Regrade.id == regrade_id).values(**counts))


def _finish(db: Database, regrade_id: int, holder: str | None = None) -> Regrade:
    with db.session(write=True) as session, session.begin():
        regrade = session.get(Regrade, regrade_id)
        if holder is not None and regrade.holder != holder:
            raise LeaseLost(regrade_id)
        regrade.passes_kept = len(unsupported_passes(session, exercise_slug=regrade.exercise_slug))
        regrade.status = "finished"
        regrade.finished_at = utcnow()
        return regrade


def _fail(db: Database, regrade_id: int, message: str, holder: str | None = None) -> None:
    with db.session(write=True) as session, session.begin():
        regrade = session.get(Regrade, regrade_id)
        if regrade is not None and regrade.running and (holder is None or regrade.holder == holder):
            regrade.status = "interrupted" if message.startswith("interrupted") else "failed"
            regrade.message = message
            regrade.finished_at = utcnow()


class BackgroundRegrades:
    """The regrades this web process runs for the dashboard's button, each an asyncio task; progress lives in
    the database, so any web worker can show it. `close` cancels them (they are marked interrupted)."""

    def __init__(self, db: Database, runner: Any, concurrency: int, lease_s: float = LEASE_S) -> None:
        self.db = db
        self.runner = runner
        self.concurrency = concurrency
        self.lease_s = lease_s
        self.holder = holder_name()  # the holder of every regrade this process starts or takes over
        self._loop = asyncio.get_running_loop()  # made in the app's lifespan; routes call launch from threads
        self._tasks: set[asyncio.Task] = set()

    def launch(self, exercise: Exercise, regrade_id: int) -> None:
        """Run a started regrade in the background (callable from the event loop or a worker thread)."""
        self._loop.call_soon_threadsafe(self._create, exercise, regrade_id)

    def _create(self, exercise: Exercise, regrade_id: int) -> None:
        task = self._loop.create_task(run(self.db, self.runner, exercise=exercise, regrade_id=regrade_id,
                                          concurrency=self.concurrency, holder=self.holder, lease_s=self.lease_s))
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None and not isinstance(task.exception(), LeaseLost):
            log.error("a regrade failed", exc_info=task.exception())

    async def close(self) -> None:
        """Cancel every regrade still running and wait until each is marked interrupted."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


def current_exercise(exercises_dir: Path, slug: str) -> Exercise:
    """Read an exercise from its folder as it is now (its checks may have changed since the site loaded it)."""
    exercise, errors = read_exercise(Path(exercises_dir) / slug)
    if exercise is None:
        raise RegradeError(400, f"The exercise {slug} is broken; fix it before regrading: "
                                + "; ".join(str(e) for e in errors))
    return exercise


def interrupt_running(session: Session) -> int:
    """Mark every running regrade as interrupted (they ran in a process that is gone); return how many.

    Like `app.submissions.live.fail_interrupted`, call it once when a deployment with the embedded runner starts.
    """
    result = session.execute(update(Regrade).where(Regrade.status == "running").values(
        status="interrupted", finished_at=utcnow(), message="interrupted: the server restarted; regrade again"))
    return result.rowcount or 0


def get(session: Session, regrade_id: int) -> Regrade:
    """Return a regrade; raise RegradeError 404 for an unknown id."""
    regrade = session.get(Regrade, regrade_id)
    if regrade is None:
        raise RegradeError(404, f"There is no regrade {regrade_id}.")
    return regrade


def recent(session: Session, *, exercise_slug: str | None = None, limit: int = 5) -> list[Regrade]:
    """Return the newest regrades (of one exercise, if given), newest first."""
    query = select(Regrade).order_by(Regrade.started_at.desc(), Regrade.id.desc()).limit(limit)
    return list(session.scalars(query.where(Regrade.exercise_slug == exercise_slug) if exercise_slug else query))


def as_json(regrade: Regrade) -> dict[str, Any]:
    """Return a regrade as GET /api/instructor/regrades/{id} answers it."""
    iso = lambda t: t.isoformat() if t else None  # noqa: E731
    return {"id": regrade.id, "exercise": regrade.exercise_slug, "status": regrade.status, "since": iso(regrade.since),
            "total": regrade.total, "done": regrade.done, "changed": regrade.changed,
            "now_passing": regrade.now_passing, "now_failing": regrade.now_failing, "errors": regrade.errors,
            "passes_added": regrade.passes_added, "passes_kept": regrade.passes_kept, "message": regrade.message,
            "started_at": iso(regrade.started_at), "finished_at": iso(regrade.finished_at)}


__all__ = ["RegradeError", "LeaseLost", "holder_name", "renew",
           "BackgroundRegrades", "current_exercise", "count_to_regrade", "start", "run",
           "interrupt_running", "get", "recent", "as_json", "REGRADED_STATUSES"]
