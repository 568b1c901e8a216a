"""CeleryRunner: jobs go to `course worker` processes through Celery on Redis; their events come back on a
Redis Stream per job (redis_streams.py), so any web server can follow any job.

Two kinds of task (celery_app.py): a plain job (`submit`, the Runner protocol, for `course grade`, `run`,
`check` and `doctor` pointed at the worker tier), and a stored submission (`send_submission`, used by
app/submissions/live.py), whose worker also grades it and stores the verdict. Each goes to the queue the job needs,
`cpu` or `gpu`. Back-pressure is the queue's length in Redis (what Celery's monitoring guide reads with LLEN):
past COURSE_RUNNER_QUEUE_SIZE waiting jobs a submit raises Busy; a broker that cannot be reached raises
Unavailable.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
from typing import AsyncIterator

import anyio.to_thread
from kombu.exceptions import OperationalError as KombuOperationalError
from redis.exceptions import RedisError

from app.runner import redis_streams
from app.runner.base import Busy, DoneEvent, Event, Job, OutputEvent, Result, Unavailable, check_source, new_job_id
from app.runner.celery_app import GRADE_TASK, RUN_TASK, job_seconds, make_celery
from app.sandbox.job_limits import Limits

log = logging.getLogger("course.runner")

WORKER_PREFIX = "course:worker:"  # one key per live worker (app/worker/service.py), expiring with its lease
CANCEL_PREFIX = "course:cancel:"  # set by cancel(); the worker running the job stops it
# A plain job's lease, in Redis (it has no database row): the worker running attempt N of job J holds
# JOB_LEASE_PREFIX + "J:N", renewed every third of COURSE_RUNNER_LEASE_S; JOB_ATTEMPT_PREFIX + J is the attempt the
# caller wants run (a worker given another stops), and JOB_DONE_PREFIX + J says the job is over.
JOB_LEASE_PREFIX = "course:joblease:"
JOB_ATTEMPT_PREFIX = "course:jobattempt:"
JOB_DONE_PREFIX = "course:jobdone:"
# what the caller's output shows between a lost run's lines and the rerun's
RERUN_MARKER = "the worker stopped; running it again"
# seconds the set of queues live workers take is trusted before it is read again from Redis
SERVED_CACHE_S = 2.0
# seconds one job is estimated to hold a worker slot, for the Retry-After of a busy refusal
RETRY_SECONDS_PER_JOB = 1


def queue_for(job: Job) -> str:
    """Return the queue a job goes to: `gpu` when it asks for a GPU, else `cpu`."""
    return "gpu" if getattr(job, "gpu", False) else "cpu"


def job_message(job: Job, limits: Limits | None) -> dict:
    """Return the JSON a plain job travels as (the worker rebuilds the Job from it).

    A graded job's report key travels beside the payload, as it does to the fork server: the job never reads
    it from there (it cannot reach Redis), and without it the worker's run would report under another key and
    every `course grade`, `course check` or regrade on the tier would fail.
    """
    return {"payload": job.payload(), "limits": limits.to_dict() if limits else None,
            "gpu": bool(getattr(job, "gpu", False)), "key": getattr(job, "key", None)}


def job_lease_key(job_id: str, attempt: int) -> str:
    """Return the Redis key of the lease on one attempt of a plain job."""
    return f"{JOB_LEASE_PREFIX}{job_id}:{attempt}"


class CeleryJobHandle:
    """A plain job on the worker tier: its events are read from its stream.

    Once a worker has started the job, its lease says it is alive; when the lease runs out before the job's
    `done` (the worker died), the handle sends the job again as the next attempt, up to COURSE_RUNNER_MAX_ATTEMPTS
    runs, and yields RERUN_MARKER on stderr before the new run's output.
    """

    def __init__(self, runner: CeleryRunner, job_id: str, deadline_s: float, *, message: dict | None = None,
                 queue: str = "cpu") -> None:
        self.id = job_id
        self.attempt = 1
        self._runner = runner
        self._deadline_s = deadline_s
        self._message, self._queue = message, queue
        self._result: Result | None = None

    async def events(self) -> AsyncIterator[Event]:
        """Yield OutputEvents as the worker writes them, then exactly one DoneEvent."""
        after, deadline = "0", time.monotonic() + self._deadline_s
        started = False  # the current attempt's `start` was read: its output follows, and its lease counts
        while self._result is None:
            if time.monotonic() > deadline:
                self._result = Result(status="error", message=(
                    f"no worker finished this job within {self._deadline_s:.0f} s; check that `course worker` "
                    "runs for its queue and can reach Redis"))
                break
            try:
                entries = await redis_streams.read(self._runner.redis, self.id, after)
            except (RedisError, OSError) as exc:
                log.warning("reading job %s: %s; retrying", self.id, exc)
                await asyncio.sleep(0.5)
                continue
            for after, kind, data in entries:
                if kind == "start":
                    started = data.get("attempt", 1) == self.attempt
                elif kind == "output" and started:
                    yield OutputEvent(data["stream"], data["line"])
                elif kind == "done" and started:
                    self._result = Result.from_dict(data)
            if not entries and started and await self._worker_gone():
                started = False
                if self.attempt >= self._runner.settings.runner_max_attempts:
                    self._result = Result(status="error", message=(
                        f"this job was started {self.attempt} times and each time the worker running it stopped; "
                        "run it again, and see the workers' logs if it keeps happening"))
                    break
                await self._run_again()
                deadline = time.monotonic() + self._deadline_s
                yield OutputEvent("stderr", RERUN_MARKER)
        yield DoneEvent(self._result)

    async def _worker_gone(self) -> bool:
        """Say whether the current attempt's lease ran out before the job was done (Redis unreachable: no, we
        cannot tell). The worker marks the job done before it lets the lease go, so a finished job is never run
        twice."""
        if self._message is None:
            return False
        try:
            redis = self._runner.redis
            return not await redis.exists(job_lease_key(self.id, self.attempt), JOB_DONE_PREFIX + self.id)
        except (RedisError, OSError):
            return False

    async def _run_again(self) -> None:
        """Send the job again as the next attempt; a worker still holding an older one stops it."""
        self.attempt += 1
        log.info("job %s: its worker stopped (lease ran out); sending attempt %d", self.id, self.attempt)
        await self._runner.redis.set(JOB_ATTEMPT_PREFIX + self.id, self.attempt,
                                     ex=self._runner.settings.runner_stream_ttl_s)
        await self._runner.send(RUN_TASK, [self.id, self._message, self.attempt],
                                task_id=f"{self.id}-{self.attempt}", queue=self._queue)

    async def result(self) -> Result:
        """Wait for and return the result (draining the events if nobody read them)."""
        if self._result is None:
            async for _event in self.events():
                pass
        return self._result  # type: ignore[return-value]

    async def cancel(self) -> None:
        """Stop the job: a queued one is skipped, a running one is killed by its worker."""
        await self._runner.cancel(self.id)


class CeleryRunner:
    """Sends jobs to the worker tier; refuses with Busy past `runner_queue_size` waiting jobs."""

    def __init__(self, settings, **_options) -> None:
        self.settings = settings
        self.limits = Limits.from_settings(settings)
        self.queue_size = max(0, settings.runner_queue_size)
        self.celery = make_celery(settings)
        self.redis = None
        self._served_queues: set[str] = set()
        self._served_at = -SERVED_CACHE_S

    async def start(self) -> None:
        """Open the Redis client; nothing is contacted yet (the first submit says if Redis is unreachable)."""
        self.redis = redis_streams.connect(self.settings.celery_broker_url)

    async def stop(self) -> None:
        """Close the connections; jobs on the tier go on and store their verdicts."""
        if self.redis is not None:
            await self.redis.aclose()
        await anyio.to_thread.run_sync(self.celery.close)

    async def ready(self) -> dict:
        """Wait until a worker is up; return its sandbox's report plus the tier's (`course doctor` shows it)."""
        deadline = time.monotonic() + job_seconds(self.settings)
        while time.monotonic() < deadline:
            workers = await self.workers()
            if workers:
                first = next(iter(workers.values()))
                return {**first.get("info", {}), "runner": "celery", "workers": workers}
            await asyncio.sleep(0.5)
        raise RuntimeError(f"no `course worker` reported to Redis at {self._broker()} within "
                           f"{job_seconds(self.settings):.0f} s; start one (docs/operations.md#scaling-out)")

    async def workers(self) -> dict[str, dict]:
        """Return every live worker's last report (name -> queues, concurrency, running, sandbox info)."""
        try:
            keys = [k async for k in self.redis.scan_iter(match=WORKER_PREFIX + "*")]
            values = await self.redis.mget(keys) if keys else []
        except (RedisError, OSError) as exc:
            raise self._unreachable(exc) from None
        return {k.decode()[len(WORKER_PREFIX):]: json.loads(v) for k, v in zip(keys, values) if v}

    async def admit(self, queue: str) -> None:
        """Raise Busy when `queue` already holds runner_queue_size waiting jobs; Unavailable when Redis is down
        or no live worker takes jobs from `queue` (they would wait for nobody)."""
        try:
            waiting = await self.redis.llen(queue)
            served = await self._served(queue)
        except (RedisError, OSError) as exc:
            raise self._unreachable(exc) from None
        if not served:
            raise Unavailable(f"no machine takes `{queue}` jobs right now (the operator should start "
                              f"`course worker --queues {queue}`)", retry_after=30)
        if waiting >= self.queue_size:
            concurrency = max(1, self.settings.runner_concurrency)
            raise Busy(max(1, math.ceil((waiting + 1) * RETRY_SECONDS_PER_JOB / concurrency)))

    async def _served(self, queue: str) -> bool:
        """Say whether a live worker takes `queue` (the workers' reports, re-read at most every SERVED_CACHE_S)."""
        if time.monotonic() - self._served_at > SERVED_CACHE_S:
            workers = (await self.workers()).values()
            self._served_queues = {q for worker in workers for q in worker.get("queues", ())}
            self._served_at = time.monotonic()
        return queue in self._served_queues

    async def send(self, task: str, args: list, *, task_id: str, queue: str) -> None:
        """Put one task on a queue; raise Unavailable if the broker cannot be reached."""
        def publish() -> None:
            self.celery.send_task(task, args=args, task_id=task_id, queue=queue)

        try:
            await anyio.to_thread.run_sync(publish)
        except (KombuOperationalError, RedisError, OSError) as exc:
            raise self._unreachable(exc) from None

    async def submit(self, job: Job) -> CeleryJobHandle:
        """Queue a plain job; raise Busy when its queue is full, Rejected for bad source, Unavailable."""
        limits = job.limits or self.limits
        check_source(job, limits)
        queue = queue_for(job)
        await self.admit(queue)
        job_id, message = new_job_id(), job_message(job, job.limits)
        await self.send(RUN_TASK, [job_id, message], task_id=job_id, queue=queue)
        return CeleryJobHandle(self, job_id, deadline_s=job_seconds(self.settings) * 2, message=message, queue=queue)

    async def send_submission(self, submission_id: str, attempt: int, *, gpu: bool = False) -> None:
        """Queue the grading of a stored submission's attempt (no capacity check: it was admitted already)."""
        await self.send(GRADE_TASK, [submission_id, attempt], task_id=f"{submission_id}-{attempt}",
                        queue="gpu" if gpu else "cpu")

    async def cancel(self, job_id: str) -> None:
        """Ask the worker running (or about to run) a job to stop it."""
        try:
            await self.redis.set(CANCEL_PREFIX + job_id, "1", ex=self.settings.runner_stream_ttl_s)
        except (RedisError, OSError) as exc:
            raise self._unreachable(exc) from None

    def _unreachable(self, exc: Exception) -> Unavailable:
        return Unavailable("its job queue cannot be reached", detail=f"Redis at {self._broker()}: {exc}")

    def _broker(self) -> str:
        """The broker's address without its password, for messages."""
        from kombu.utils.url import maybe_sanitize_url

        return maybe_sanitize_url(self.settings.celery_broker_url)


__all__ = ["CeleryRunner", "CeleryJobHandle", "queue_for", "job_message", "job_lease_key", "WORKER_PREFIX",
           "CANCEL_PREFIX", "JOB_LEASE_PREFIX", "JOB_ATTEMPT_PREFIX", "JOB_DONE_PREFIX", "RERUN_MARKER"]
