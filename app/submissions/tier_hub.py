"""Live submissions on the worker tier (COURSE_RUNNER=celery): the web stores and sends, a worker grades and
stores the verdict, and any web server streams the job's events from Redis.

`CeleryHub` is a Hub (app/submissions/hub.py) like LiveHub, so the routes do not know which one they hold. What differs:
the submission row is stored *before* the job is sent (a worker needs it), so the queue's room is checked first
(`admit`: Busy -> 429, Redis down -> 503, nothing stored); a row whose job could not be sent after all stays queued
without `heartbeat_at`, and the sweeper sends it (app/submissions/leases.py). Events come from the job's Redis Stream,
with Redis's entry ids as SSE ids, so a page reconnecting to any web server with Last-Event-ID gets exactly the rest. An
output event's id also says how far into stdout and stderr it reaches (`<entry id>/<stdout lines>:<stderr lines>`), so
when Redis has nothing (it was down, or the stream expired) the stored row is the truth from exactly there: a finished
one sends the output past the page's position, then its verdict.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any, Protocol

import anyio.to_thread
from redis.exceptions import RedisError

from app.content.exercises import Exercise
from app.core.db import Database
from app.learning import progress
from app.models import Submission
from app.runner import redis_streams
from app.runner.base import Runner, Unavailable
from app.submissions import leases

log = logging.getLogger(__name__)

# seconds between looks at the stored row while the stream is quiet or Redis is unreachable
ROW_POLL_S = 1.0
RESTARTED = "The machine running this stopped; it is running again elsewhere (output starts over)."


class TierRunner(Runner, Protocol):
    """What CeleryHub needs of its runner beyond the Runner protocol (CeleryRunner, app/runner/celery_runner.py)."""

    redis: Any  # the asyncio Redis client the job streams are read from

    async def admit(self, queue: str) -> None:
        """Refuse a job the queue has no room for (Busy), or when Redis is down (Unavailable); store nothing."""
        ...

    async def send_submission(self, submission_id: str, attempt: int, *, gpu: bool) -> None:
        """Put one attempt of a stored submission on the workers' queue (Unavailable: not sent)."""
        ...


class CeleryHub:
    """Submissions graded by the worker tier; events read from Redis, verdicts from the database (a Hub,
    app/submissions/hub.py)."""

    def __init__(self, db: Database, runner: TierRunner) -> None:
        self.db = db
        self.runner = runner

    async def submit(self, *, exercise: Exercise, learner_id: str, code: str, machine: str | None = None) -> str:
        """Store the submission and send its job; return its id. Raises Busy or Unavailable (nothing stored)."""
        gpu = bool(getattr(exercise.spec, "needs_gpu", False))
        await self.runner.admit("gpu" if gpu else "cpu")
        submission_id = await anyio.to_thread.run_sync(self._record, learner_id, exercise.slug, code,
                                                       exercise.starter, machine)
        try:
            await self.runner.send_submission(submission_id, 1, gpu=gpu)
        except Unavailable as exc:  # stored but not sent: the sweeper sends it once Redis is back
            log.warning("submission %s stored but not queued (%s); the sweeper will queue it", submission_id, exc)
            return submission_id
        await anyio.to_thread.run_sync(self._enqueued, submission_id)
        return submission_id

    def _record(self, learner_id: str, exercise_slug: str, code: str, starter: str | None = None,
                machine: str | None = None) -> str:
        with self.db.session(write=True) as session, session.begin():
            return progress.record_submission(session, learner_id=learner_id, exercise_slug=exercise_slug,
                                              code=code, starter=starter, machine=machine).id

    def _enqueued(self, submission_id: str) -> None:
        with self.db.session(write=True) as session, session.begin():
            leases.mark_enqueued(session, submission_id=submission_id, attempt=1)

    async def events(self, submission_id: str, *, after: str | None = None) -> AsyncIterator[tuple[str, str, dict]]:
        """Yield (id, kind, data) from the entry after `after`: output lines, a `restart` when the job began again
        on another worker, then one `verdict`. Ends at the verdict, or when the row is gone.

        It does not give up on a run that is slow to finish: the sweeper finishes every run, at worst as an error.
        """
        follower = _Follower(self.runner.redis, submission_id, after)
        while True:
            entries = await follower.read()
            for event in follower.events(entries or []):
                yield event
                if event[1] == "verdict":
                    return
            if entries:
                continue
            submission = await anyio.to_thread.run_sync(self._load, submission_id)  # quiet, or Redis is down
            if submission is None:
                return
            if submission.finished:  # stored while we waited: what was written before it, then the verdict
                for event in follower.events(await follower.read(block_ms=None) or []):
                    yield event
                    if event[1] == "verdict":
                        return
                for event in _stored_events(submission, follower):
                    yield event
                return
            if entries is None:
                await asyncio.sleep(ROW_POLL_S)

    def _load(self, submission_id: str) -> Submission | None:
        with self.db.session() as session:
            return progress.get_submission(session, submission_id)

    def running_row(self, submission_id: str) -> None:
        """None: workers run the jobs, and this process holds no row of theirs."""
        return None

    async def stored(self, learner_id: str) -> None:
        """Nothing to wait for: a worker stores a verdict before it sends it."""

    async def close(self) -> None:
        """Nothing runs in this process: jobs go on on the workers and store their own verdicts."""


class _Follower:
    """Reads one job's stream from a cursor, turning a `start` after output into a `restart` event."""

    def __init__(self, client, job_id: str, after: str | None) -> None:
        cursor, position = redis_streams.resume_point(after) or ("0", None)
        self.client, self.job_id, self.cursor = client, job_id, cursor
        self.seen = cursor != "0"  # the page holds output lines of an attempt (a reconnecting page does)
        # how far into stdout and stderr the page is in this attempt; None: it holds output, but not how much
        self.position: tuple[int, int] | None = position if self.seen else (0, 0)

    async def read(self, block_ms: int | None = redis_streams.BLOCK_MS):
        """Return the next entries ([] when quiet), or None when Redis cannot be reached."""
        try:
            return await redis_streams.read(self.client, self.job_id, self.cursor, block_ms=block_ms)
        except (RedisError, OSError) as exc:
            log.warning("reading the events of %s: %s", self.job_id, exc)
            return None

    def events(self, entries):
        """Yield the events of these entries, moving the cursor past each."""
        for entry_id, kind, data in entries:
            self.cursor = entry_id
            if kind == "start":  # an attempt begins; after output of an earlier one, the page starts over
                if self.seen:
                    yield entry_id, "restart", {"attempt": data.get("attempt"), "message": RESTARTED}
                self.seen, self.position = False, (0, 0)
                continue
            upto = None
            if kind == "output":
                self.seen = True
                upto = data.pop("upto", None)
                upto = self.position = tuple(upto) if upto else None
            yield redis_streams.event_id(entry_id, upto), kind, data


def _stored_events(submission: Submission, follower: _Follower) -> list[tuple[str, str, dict]]:
    """The stored row's events as (id, kind, data): the output past the page's position, then the verdict.

    After a Redis outage mid-run the page holds the lines it read before; the rest of the output, the traceback
    the checks point at included, is in the stored verdict. Only a page that holds output but not its position
    (an id without one) gets the verdict alone, rather than lines twice.
    """
    from app.submissions.live import stored_events

    events = stored_events(submission)
    if follower.position is None:
        events = events[-1:]
    seen = follower.position or (0, 0)
    out = []
    for index, (kind, data) in enumerate(events):
        if kind == "output":
            rest = data.after(seen)
            if rest is not None:
                out.append((f"stored-{index}", kind, rest.data()))
        else:
            out.append((f"stored-{index}", kind, data))
    return out


__all__ = ["CeleryHub", "RESTARTED", "TierRunner"]
