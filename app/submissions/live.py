"""Live submissions: take a learner's code, grade it in the background, stream its events, keep the verdict.

One submission's life: `LiveHub.submit` has the grader build the job, submits it to the runner and returns as
soon as the runner has accepted it (or refused it: `Busy`, which the web layer turns into 429);
only an accepted job becomes a stored Submission row, so a full queue never costs the learner an attempt.
While the job runs, every output line is appended to an in-memory `LiveRun`, which any number of subscribers
replay from the start (a page that connects late still sees every line). When grading ends the verdict is pushed
as the last event, as the row will read once stored (`finish.as_stored`), and stored beside it
(`app.submissions.finish.finish`, which updates progress too); the LiveRun is kept a little longer for late
subscribers; after that, events are rebuilt from the stored row. Until the write is done, each request of that
learner waits for it first (`LiveHub.stored`, an app-wide dependency): what the page asks next (its attempts, the
solution's unlock) agrees with the verdict it was shown.

Database work runs in worker threads (`anyio.to_thread`): SQLite may wait in its busy timeout, and the event
loop that streams output to every learner must not wait with it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import anyio.to_thread
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.content.exercises import Exercise
from app.core.db import Database
from app.core.errors import Refusal
from app.core.storable import shows_unstorable
from app.learning import progress
from app.models import Submission, utcnow
from app.runner.base import JobHandle, OutputEvent, Rejected, Runner, check_source_text
from app.runner.batches import BATCH_S, Batch, OutputBatcher, parse_position, stored_batches
from app.submissions.finish import as_stored, error_verdict, finish
from app.submissions.views import (  # re-exported: the routes and the worker read submissions through here too
    SOLUTION_AFTER_FAILURES,
    attempt_summary,
    exercise_state,
    failed_attempts,
    learner_key,
    panel_state,
    verdict_json,
)

if TYPE_CHECKING:
    from app.grading.grader import Grading

log = logging.getLogger(__name__)

# seconds a finished run's events stay in memory for subscribers that connect late; later ones read the DB
LINGER_S = 30.0
# the verdict event's id: a page that reconnects with it has everything
VERDICT_ID = "verdict"
# the last event of a lesson block's run (app/submissions/block_runs.py), which has no verdict
DONE_ID = "done"
INTERRUPTED_MESSAGE = "The server restarted while this ran (not your code's fault); run it again."


class JsonText(str):
    """An event's data already written as JSON text (`encoded`): an event stream sends it as it is."""


def encoded(data: Any) -> Any:
    """`data` as JsonText when it is plain JSON (the bytes `json.dumps` gives), else `data` itself (a float that is
    not finite, a date: app/web/routes/exercises.py's sse_event sends those FastAPI's way).

    A verdict event is kept this way while its run lingers (LINGER_S): one str instead of the ~230 lists and dicts
    of training-loop's verdict, which the cyclic collector walked in every collection for those 30 s, for each of
    the runs a busy server holds, and one encoding for every page that follows the run instead of one each."""
    if isinstance(data, JsonText):
        return data
    try:
        return JsonText(json.dumps(data, allow_nan=False))
    except (TypeError, ValueError):
        return data


def shown(row: Submission, verdict: dict, at: datetime) -> Any:
    """A run's verdict event: the row as it will read once its verdict is stored (`as_stored`), as the learner
    reads it (`verdict_json`), encoded once (`encoded`).

    The row's verdict is read back through its stored text (json.dumps, then json.loads: 0.18 ms of training-loop's
    in the event loop) only where that can change it. A verdict is JSON data (`model_dump(mode="json")`, or
    `error_verdict`'s), which that trip gives back equal unless a string holds a NUL or a lone surrogate, the
    characters a column cannot hold (app/core/storable.py); the event's own text shows those as escapes. Where it
    shows one, or text that reads like one, the event is made from the row read back, as before."""
    event = encoded(verdict_json(as_stored(row, verdict, at, read_back=False)))
    if isinstance(event, JsonText) and not shows_unstorable(event):
        return event
    return encoded(verdict_json(as_stored(row, verdict, at)))


class Refused(Refusal):
    """Code the site will not run: `status_code` (413 too large, 400 not UTF-8) and a message a person can act on."""

    @classmethod
    def of(cls, rejected: Rejected) -> Refused:
        """Return the site's refusal for a runner's: 413 for source over the size limit, else 400."""
        return cls(413 if rejected.limit_hit == "source" else 400, rejected.message)


def check_code(code: str, *, source_bytes: int) -> None:
    """Refuse code the sandbox would refuse, before it costs an attempt: 413 too large, 400 not UTF-8."""
    try:
        check_source_text(code, source_bytes)
    except Rejected as exc:
        raise Refused.of(exc) from None


# --- the live event buffer ---------------------------------------------------------------------------------


@dataclass
class LiveRun:
    """Every event of one running submission, in order, for any number of subscribers to replay.

    Output lines go through an OutputBatcher (app/runner/batches.py): one `output` event per short interval or
    size, the live stream capped; the events hold `Batch`es, so a reconnecting page can be given the rest.
    """

    events: list[tuple[str, Any]] = field(default_factory=list)
    done: bool = False
    batcher: OutputBatcher = field(default_factory=OutputBatcher)
    _wake: asyncio.Event = field(default_factory=asyncio.Event)
    _timer: asyncio.TimerHandle | None = None
    row: Submission | None = None  # the submission's row as stored when the run began (LiveHub.running_row)

    def push(self, kind: str, data: Any) -> None:
        """Append one event and wake every subscriber."""
        self.events.append((kind, data))
        self._wake.set()
        self._wake = asyncio.Event()

    def add_line(self, stream: str, line: str) -> None:
        """Take one output line; it goes out with its batch (when full, or BATCH_S after the batch's first line)."""
        batch = self.batcher.add(stream, line)
        if batch is not None:
            self.push("output", batch)
        elif self.batcher.pending and self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(BATCH_S, self._flush)

    def _flush(self) -> None:
        self._timer = None
        batch = self.batcher.take()
        if batch is not None:
            self.push("output", batch)

    def finish(self, verdict: dict, kind: str = "verdict") -> None:
        """Send what output is left (the tail of a capped stream), then the verdict (a lesson block's run: its
        `done`, app/submissions/block_runs.py), and end the run."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for batch in self.batcher.close():
            self.push("output", batch)
        self.push(kind, verdict)
        self.close()

    def close(self) -> None:
        """Mark the run finished; subscribers drain what is left and stop."""
        self.done = True
        self._wake.set()

    async def replay(self) -> AsyncIterator[tuple[str, Any]]:
        """Yield every event from the first, then new ones as they come, until the run is done."""
        sent = 0
        while True:
            wake = self._wake
            while sent < len(self.events):
                yield self.events[sent]
                sent += 1
            if self.done:
                return
            await wake.wait()


def stored_events(submission: Submission) -> list[tuple[str, Any]]:
    """Rebuild the events of a finished submission from its stored verdict: output batches, then the verdict."""
    verdict = verdict_json(submission) if submission.verdict else error_verdict(
        submission.exercise_slug, "This run has no stored verdict.")
    batches = stored_batches(verdict.get("stdout") or "", verdict.get("stderr") or "")
    return [("output", batch) for batch in batches] + [("verdict", verdict_json(submission))]


def sse_events(events, after: str | None):
    """Turn (kind, Batch or dict) events into SSE (id, kind, data), leaving out what a page at `after` has seen.

    Output ids are positions in the output (app/runner/batches.py); the last event's id is its kind (VERDICT_ID,
    or DONE_ID for a lesson block's run), after which nothing is left to send.
    """
    if after in (VERDICT_ID, DONE_ID):
        return
    seen = parse_position(after) or (0, 0)
    for kind, data in events:
        if isinstance(data, Batch):
            rest = data.after(seen)
            if rest is not None:
                yield rest.id, kind, rest.data()
        else:
            yield kind, kind, data  # the last event (VERDICT_ID, DONE_ID), or a `restart`


# --- running submissions ---------------------------------------------------------------------------------


# the learner id of the warm-up's rehearsal, which is rolled back: no row ever holds it
REHEARSAL_LEARNER = "warm-up-rehearsal"


class LiveHub:
    """The submissions this process is grading: start them, stream them, store them (a Hub, app/submissions/hub.py)."""

    def __init__(self, db: Database, runner: Runner | None) -> None:
        self.db = db
        self.runner = runner
        self.runs: dict[str, LiveRun] = {}
        self._tasks: set[asyncio.Task] = set()
        # verdicts shown and being stored, by learner: that learner's requests wait for them (`stored`)
        self._writes: dict[str, set[asyncio.Task]] = {}

    async def submit(self, *, exercise: Exercise, learner_id: str, code: str, machine: str | None = None) -> str:
        """Start grading; return the stored submission's id once the runner took the job.

        Raises Busy or Rejected when the runner refuses the job: nothing is stored, so a full queue costs the
        learner no attempt.
        """
        from app.grading.grader import prepare  # imported late: grading pulls in the exercises' checks

        grading = prepare(exercise, code, limits=self.runner.limits, machine=machine)
        handle = await self.runner.submit(grading.job)
        try:
            # the job runs already; its row, which counts this attempt against the ones before, follows their writes
            await self.stored(learner_id)
            row = await anyio.to_thread.run_sync(self._record_row, learner_id, exercise.slug, code,
                                                 exercise.starter, machine, grading)
        except BaseException:  # the database failed, or the request went away: stop the run too
            await asyncio.shield(handle.cancel())
            raise
        submission_id = row.id
        run = self.runs[submission_id] = LiveRun(row=row)
        task = asyncio.create_task(self._grade(grading, handle, row, run))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return submission_id

    def _record_row(self, learner_id: str, exercise_slug: str, code: str, starter: str | None = None,
                    machine: str | None = None, grading: Grading | None = None) -> Submission:
        """Store the submission and return its row as read back, which its verdict's event is made from (read
        while the job runs: the learner does not wait for it).

        Read back inside the transaction that writes it: the row as it commits, without a second session (a
        connection, BEGIN, ROLLBACK: 0.35 ms of the web server's CPU per submission, in-process). Stored as
        "running" from its INSERT: its job started before this write, and no one could see it "queued" between
        the two statements of one transaction (an UPDATE and a flush less, ~0.1 ms).

        `grading`'s code is parsed here first, for its verdict (which the event loop decides) and for this row's
        digest (app/learning/attempts.py), which finds the tree parsed: once for both, in this thread."""
        if grading is not None:
            grading.read_source()
        with self.db.session(write=True) as session, session.begin():
            submission = progress.record_submission(session, learner_id=learner_id, exercise_slug=exercise_slug,
                                                    code=code, starter=starter, machine=machine, status="running")
            session.refresh(submission)
        return submission

    def running_row(self, submission_id: str) -> Submission | None:
        """The stored row of a run this process is grading now (as it was stored: "running"), else None."""
        run = self.runs.get(submission_id)
        return run.row if run is not None and not run.done else None

    def rehearse(self, *, exercise_slug: str, code: str, verdict: dict) -> None:
        """Store a submission and its verdict as a run does, then roll it all back: nothing stays.

        SQLAlchemy compiles each statement on its first use (tens of ms here), which the first learner's
        submission would otherwise pay: the reads its routes make too (the remembered machine, the submission
        read back by its event stream). The server's warm-up (app/web/readiness.py) calls this once.
        """
        with self.db.session(write=True) as session:
            transaction = session.begin()
            try:
                progress.remembered_machine(session, learner_id=REHEARSAL_LEARNER)  # the submit route's pick
                submission = progress.record_submission(session, learner_id=REHEARSAL_LEARNER,
                                                        exercise_slug=exercise_slug, code=code, status="running")
                progress.get_submission(session, submission.id)  # the event stream's check of its owner
                stored = finish(session, submission_id=submission.id, verdict=verdict)
                verdict_json(stored.submission if stored else submission)
            finally:
                transaction.rollback()

    async def _grade(self, grading: Grading, handle: JobHandle, row: Submission, run: LiveRun) -> None:
        """Follow the job in the background, push output as it comes, then push the verdict and store it."""
        from app.grading.grader import follow

        def on_output(event: OutputEvent) -> None:
            run.add_line(event.stream, event.line)

        try:
            verdict = grading.verdict(await follow(handle, on_output)).model_dump(mode="json")
        except Exception:
            log.exception("grading %s failed", grading.exercise.slug)
            verdict = error_verdict(grading.exercise.slug)
        # The write (a worker thread, 2-5 ms; longer behind another writer) is no longer between the learner and
        # the verdict. It is a task of its own, which stopping the app does not cancel (`close` waits for it), and
        # it is registered before the push: the learner's next request waits for it (`stored`).
        at = utcnow()
        write = asyncio.create_task(anyio.to_thread.run_sync(self._finish, row.id, verdict, at))
        self._writes.setdefault(row.learner_id, set()).add(write)
        write.add_done_callback(lambda task: self._written(row, task))
        run.finish(shown(row, verdict, at))
        # The run lingers for late subscribers; this task ends here. A task that slept out LINGER_S kept its frame
        # alive for those 30 s, and with it the job's decoded report and trace, the grading's syntax tree and the
        # verdict: thousands of objects per run, which every cyclic collection walked while a busy server holds a
        # thousand such runs (bench/README.md, "The web's share of a verdict, third pass").
        asyncio.get_running_loop().call_later(LINGER_S, self.runs.pop, row.id, None)

    def _written(self, row: Submission, write: asyncio.Task) -> None:
        writes = self._writes.get(row.learner_id)
        if writes is not None:
            writes.discard(write)
            if not writes:
                del self._writes[row.learner_id]
        if not write.cancelled() and write.exception() is not None:
            # the learner was shown the verdict; the row stays unfinished, and the next start marks it an error
            log.error("storing the verdict of submission %s failed", row.id, exc_info=write.exception())

    async def stored(self, learner_id: str) -> None:
        """Wait until every verdict this learner was shown is stored (at once when none is being stored)."""
        writes = self._writes.get(learner_id)
        if writes:
            await asyncio.wait(list(writes))

    def _finish(self, submission_id: str, verdict: dict, at: datetime) -> None:
        with self.db.session(write=True) as session, session.begin():
            if finish(session, submission_id=submission_id, verdict=verdict, at=at) is None:
                # only this hub finishes its runs, and `close` waits for this write: a bug, said where it shows
                log.error("submission %s was finished already; the verdict its learner was shown is not stored",
                          submission_id)

    async def events(self, submission_id: str, *, after: str | None = None, poll_s: float = 0.25,
                     timeout_s: float = 120.0) -> AsyncIterator[tuple[str, str, dict]]:
        """Yield a submission's (id, kind, data) events after event `after` (from the first if None).

        Output ids say how far into stdout and stderr an event reaches, so a page reconnecting with
        Last-Event-ID gets exactly the lines after it, from the live run or rebuilt from the stored row.
        """
        async for kind, data in self._events(submission_id, poll_s=poll_s, timeout_s=timeout_s):
            for event in sse_events([(kind, data)], after):
                yield event

    async def _events(self, submission_id: str, *, poll_s: float, timeout_s: float):
        """Yield a submission's events from the first: live if this process runs it, else from the database.

        A run this process does not hold may belong to another web worker; wait for its stored verdict, and
        give up with an error verdict after `timeout_s` (its process went away mid-run).
        """
        deadline = time.monotonic() + timeout_s
        while True:
            run = self.runs.get(submission_id)
            if run is not None:
                async for event in run.replay():
                    yield event
                return
            submission = await anyio.to_thread.run_sync(self._load, submission_id)
            if submission is None:
                return
            if submission.finished:
                for event in stored_events(submission):
                    yield event
                return
            if time.monotonic() > deadline:
                yield "verdict", {**verdict_json(submission), **error_verdict(
                    submission.exercise_slug, "This run was interrupted (the server restarted); run it again.")}
                return
            await asyncio.sleep(poll_s)

    def _load(self, submission_id: str) -> Submission | None:
        with self.db.session() as session:
            return progress.get_submission(session, submission_id)

    async def close(self) -> None:
        """Cancel every run still in progress (the app is stopping) and store them as errors, not left running."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        # verdicts already shown are stored as shown, not replaced by the error below
        await asyncio.gather(*[write for writes in list(self._writes.values()) for write in writes],
                             return_exceptions=True)
        for submission_id, run in list(self.runs.items()):
            if not run.done:
                await anyio.to_thread.run_sync(self._abandon, submission_id)

    def _abandon(self, submission_id: str) -> None:
        with self.db.session(write=True) as session, session.begin():
            submission = progress.get_submission(session, submission_id)
            if submission is not None:
                finish(session, submission_id=submission_id, verdict=error_verdict(
                    submission.exercise_slug, "The server stopped while this ran (not your code's fault); "
                                              "run it again."))


def fail_interrupted(session: Session) -> int:
    """Mark every queued or running submission as an error (its run died with the server); return how many.

    Call it once when a deployment starts, before it accepts submissions: runs live in the memory of the process
    that took them, so after a crash or SIGKILL nothing will ever finish them. With several web workers sharing
    one database this must not run as each worker starts (a worker restarted beside busy ones would fail their
    runs): the app calls it only with the embedded local runner, and a deployment with several workers must run it
    once per deployment start instead.
    """
    unfinished = session.scalars(select(Submission).where(Submission.status.in_(("queued", "running")))).all()
    for submission in unfinished:
        finish(session, submission_id=submission.id, verdict=error_verdict(submission.exercise_slug,
                                                                          INTERRUPTED_MESSAGE))
    return len(unfinished)


__all__ = ["LiveHub", "LiveRun", "JsonText", "encoded", "Refused", "check_code", "verdict_json", "attempt_summary",
           "exercise_state", "panel_state", "failed_attempts", "stored_events", "sse_events", "error_verdict",
           "fail_interrupted", "learner_key", "SOLUTION_AFTER_FAILURES", "VERDICT_ID", "DONE_ID"]
