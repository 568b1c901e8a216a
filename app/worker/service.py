"""One worker process: a warm sandbox, and the two tasks it runs (a plain job, a stored submission).

The sandbox is an embedded LocalRunner of its own (whatever COURSE_RUNNER says: it is the tier), owned by a
BlockingRunner: an event loop in a background thread. Celery runs tasks in a pool of threads of this same
process (celery_app.py says why not prefork); each task thread hands its job to that loop and waits. The fork
server is started with exec, never forked from this process, so CUDA and Celery's forks never meet it.

A submission's task, in order: claim the attempt (a guarded update; a second delivery stops here), write
`start` to its stream, grade (output lines stream as they come), store the verdict with a guarded update, and
write `verdict`. A job whose lease is lost while it runs (the sweeper gave it to another worker) is stopped
and its verdict is not stored.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import secrets
import socket

from app.content.exercises import Exercise, load_exercise
from app.core.db import Database
from app.models import Submission
from app.runner import BlockingRunner, Busy, Job, LocalRunner, OutputEvent, Rejected, Result, redis_streams
from app.runner.celery_app import make_celery
from app.runner.celery_runner import (
    CANCEL_PREFIX,
    JOB_ATTEMPT_PREFIX,
    JOB_DONE_PREFIX,
    WORKER_PREFIX,
    job_lease_key,
)
from app.sandbox.job_limits import Limits
from app.submissions import leases
from app.submissions.finish import error_verdict
from app.submissions.views import verdict_json

log = logging.getLogger("course.worker")

# seconds between checks whether a running job was cancelled
CANCEL_POLL_S = 0.5
# seconds the heartbeat waits for the sandbox to take a cancel (it only writes one frame to the fork server)
CANCEL_TIMEOUT_S = 10
SWEPT = "The worker running this was replaced (its lease ran out); the next attempt stores the verdict."


def worker_name() -> str:
    """Return a name unique to this process: host, pid and a nonce (a pid is reused after a restart)."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


class WorkerService:
    """The warm sandbox and the leases of one `course worker` process."""

    def __init__(self, settings, *, queues: list[str], concurrency: int, name: str | None = None) -> None:
        self.settings = settings
        self.queues = queues
        self.concurrency = concurrency
        self.name = name or worker_name()
        local = settings.model_copy(update={"runner": "local", "runner_concurrency": concurrency,
                                            "runner_queue_size": concurrency})
        self.sandbox = BlockingRunner(local, runner=LocalRunner(local, eager=True))
        self.db = Database(settings.database_url)
        self.celery = make_celery(settings)
        self.redis = None
        self.info: dict = {}
        self._handles: dict[str, object] = {}  # job id -> the running job's handle (to stop it)
        self._held: dict[str, tuple[str, int]] = {}  # job id -> (submission id, attempt) while it runs
        self._exercises: dict[str, Exercise] = {}

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """Start the sandbox and wait until it is warm (no job is taken before)."""
        self.sandbox.__enter__()
        self.info = self.sandbox.call(self.sandbox.runner.ready())
        self.redis = self.sandbox.call(self._connect())

    async def _connect(self):
        return redis_streams.connect(self.settings.celery_broker_url)

    def stop(self) -> None:
        """Stop the sandbox (running jobs end as errors; their leases run out and the sweeper re-queues them)."""
        try:
            if self.redis is not None:
                self.sandbox.call(self.redis.delete(WORKER_PREFIX + self.name))
                self.sandbox.call(self.redis.aclose())
        except Exception:  # noqa: BLE001 - Redis down at shutdown: the worker's key expires by itself
            log.warning("could not remove worker %s from Redis", self.name)
        self.sandbox.__exit__(None, None, None)
        self.db.dispose()

    def status(self) -> dict:
        """Return what this worker reports to Redis (`course doctor`, operators)."""
        return {"queues": self.queues, "concurrency": self.concurrency, "running": len(self._handles),
                "info": self.info}

    def report(self, value: str, *, ttl_s: int) -> None:
        """Write this worker's report to Redis, expiring with its lease."""
        self.sandbox.call(self.redis.set(WORKER_PREFIX + self.name, value, ex=ttl_s))

    def holding(self) -> dict[str, tuple[str, int]]:
        """Return the submissions running here now (taken before a heartbeat, compared after it)."""
        return dict(self._held)

    def drop_lost(self, before: dict[str, tuple[str, int]], held: set[tuple[str, int]]) -> None:
        """Stop the submissions that ran here before the heartbeat and whose lease this worker no longer holds."""
        for job_id, attempt in before.items():
            handle = self._handles.get(job_id)
            if attempt not in held and handle is not None:
                log.warning("lost the lease of submission %s attempt %d; stopping it", *attempt)
                self.sandbox.call(handle.cancel(), timeout=CANCEL_TIMEOUT_S)

    # ------------------------------------------------------------------ a plain job
    def run_plain(self, job_id: str, message: dict, attempt: int = 1) -> str:
        """Run one attempt of a plain job under its lease; its output and Result go to its stream."""
        payload, limits = message["payload"], message.get("limits")
        # the job as it was sent, its host and ranks included; gpu is what the runner's GPU slots look at
        job = Job.from_payload(payload, Limits.from_dict(limits) if limits else None, bool(message.get("gpu")))
        job.key = message.get("key")  # the report key of a graded job (job_message says why it travels apart)
        result = self.sandbox.call(self._run_plain(job_id, job, attempt), timeout=None)
        return "skipped" if result is None else result.status

    async def _run_plain(self, job_id: str, job: Job, attempt: int) -> Result | None:
        if not await self._claim_plain(job_id, attempt):
            log.info("skipped job %s attempt %d: replaced, finished or running elsewhere", job_id, attempt)
            return None
        writer = redis_streams.EventWriter(self.redis, job_id, self.settings.runner_stream_ttl_s)
        writer.add("start", {"attempt": attempt, "worker": self.name})
        lease = asyncio.create_task(self._keep_plain_lease(job_id, attempt))
        try:
            handle = await self.sandbox.runner.submit(job)
        except Rejected as exc:
            result = Result(status="limit" if exc.limit_hit else "error", limit_hit=exc.limit_hit,
                            message=exc.message)
        else:
            async with self._following(job_id, handle, writer):
                async for event in handle.events():
                    if isinstance(event, OutputEvent):
                        writer.add("output", {"stream": event.stream, "line": event.line})
                result = await handle.result()
        finally:
            lease.cancel()
        await writer.send("done", dataclasses.asdict(result))
        await self._plain_done(job_id, attempt)
        return result

    def _lease_ms(self) -> int:
        return max(1, int(self.settings.runner_lease_s * 1000))

    async def _claim_plain(self, job_id: str, attempt: int) -> bool:
        """Take this attempt of a plain job: the one its caller wants, not finished, and held by nobody."""
        try:
            wanted = int(await self.redis.get(JOB_ATTEMPT_PREFIX + job_id) or 1)
            if wanted != attempt or await self.redis.exists(JOB_DONE_PREFIX + job_id):
                return False
            return bool(await self.redis.set(job_lease_key(job_id, attempt), self.name, nx=True,
                                             px=self._lease_ms()))
        except Exception:  # noqa: BLE001 - Redis down: run it (delivery is at least once); the caller waits anyway
            log.warning("could not take the lease of job %s attempt %d; running it", job_id, attempt)
            return True

    async def _keep_plain_lease(self, job_id: str, attempt: int) -> None:
        """Renew the lease every third of it; stop the job once its caller wants another attempt run."""
        while True:
            await asyncio.sleep(self.settings.runner_lease_s / 3)
            try:
                if int(await self.redis.get(JOB_ATTEMPT_PREFIX + job_id) or 1) != attempt:
                    log.warning("job %s attempt %d was replaced; stopping it", job_id, attempt)
                    handle = self._handles.get(job_id)
                    if handle is not None:
                        await handle.cancel()
                    return
                await self.redis.set(job_lease_key(job_id, attempt), self.name, px=self._lease_ms())
            except Exception:  # noqa: BLE001 - Redis down: the next period tries again
                log.warning("could not renew the lease of job %s attempt %d", job_id, attempt)

    async def _plain_done(self, job_id: str, attempt: int) -> None:
        try:
            await self.redis.set(JOB_DONE_PREFIX + job_id, attempt, ex=self.settings.runner_stream_ttl_s)
            await self.redis.delete(job_lease_key(job_id, attempt))
        except Exception:  # noqa: BLE001 - the lease expires by itself; the caller has read `done`
            log.warning("could not mark job %s done", job_id)

    # ------------------------------------------------------------------ a stored submission
    def grade(self, submission_id: str, attempt: int) -> str:
        """Claim, grade and store one attempt of a submission; return what happened (for the worker's log)."""
        with self.db.session(write=True) as session, session.begin():
            if not leases.claim(session, submission_id=submission_id, attempt=attempt, worker=self.name,
                                lease_s=self.settings.runner_lease_s):
                log.info("skipped submission %s attempt %d: taken, replaced or finished", submission_id, attempt)
                return "skipped"
            submission = session.get(Submission, submission_id)
            slug, code, machine = submission.exercise_slug, submission.code, submission.machine
        writer = redis_streams.EventWriter(self.redis, submission_id, self.settings.runner_stream_ttl_s)
        verdict = self.sandbox.call(self._grade(submission_id, attempt, slug, code, writer, machine), timeout=None)
        with self.db.session(write=True) as session, session.begin():
            stored = leases.finish_attempt(session, submission_id=submission_id, attempt=attempt,
                                           worker=self.name, verdict=verdict)
            event = verdict_json(stored) if stored is not None else None
        if event is None:
            log.warning("submission %s attempt %d: %s", submission_id, attempt, SWEPT)
            return "replaced"
        self.sandbox.call(writer.send("verdict", event), timeout=None)
        return event["status"]

    async def _grade(self, submission_id: str, attempt: int, slug: str, code: str, writer,
                     machine: str | None = None) -> dict:
        # grading loads the checks; only workers that grade need it
        from app.grading.grader import follow, prepare, refused

        writer.add("start", {"attempt": attempt, "worker": self.name})
        self._held[submission_id] = (submission_id, attempt)
        runner = self.sandbox.runner
        try:
            exercise = self._exercise(slug)
            grading = prepare(exercise, code, limits=runner.limits, machine=machine)
            try:
                handle = await runner.submit(grading.job)
            except (Busy, Rejected) as exc:
                return refused(exercise, exc).model_dump(mode="json")
            async with self._following(submission_id, handle, writer):  # flushed as it runs, and cancellable
                result = await follow(handle, lambda e: writer.add_line(e.stream, e.line))
            return grading.verdict(result).model_dump(mode="json")
        except Exception:  # a grader or content bug is stored as an error, not retried forever
            log.exception("grading submission %s failed", submission_id)
            return error_verdict(slug)
        finally:
            self._held.pop(submission_id, None)
            writer.end_output()
            await writer.flush()

    def _exercise(self, slug: str) -> Exercise:
        if slug not in self._exercises:
            self._exercises[slug] = load_exercise(self.settings.exercises_dir / slug)
        return self._exercises[slug]

    # ------------------------------------------------------------------ following a running job
    def _following(self, job_id: str, handle, writer):
        return _Following(self, job_id, handle, writer)

    async def cancelled(self, job_id: str) -> bool:
        """Say whether someone asked to stop this job (CeleryRunner.cancel); Redis down counts as no."""
        try:
            return bool(await self.redis.exists(CANCEL_PREFIX + job_id))
        except Exception:  # noqa: BLE001 - a cancel is best effort; the job's limits still end it
            return False


class _Following:
    """While a job runs: flush its output to the stream, and stop it when cancelled."""

    def __init__(self, service: WorkerService, job_id: str, handle, writer) -> None:
        self.service, self.job_id, self.handle, self.writer = service, job_id, handle, writer
        self._tasks: list[asyncio.Task] = []

    async def __aenter__(self):
        self.service._handles[self.job_id] = self.handle
        self._tasks = [asyncio.create_task(self.writer.flush_every()), asyncio.create_task(self._watch())]
        return self

    async def __aexit__(self, *exc) -> None:
        for task in self._tasks:
            task.cancel()
        self.service._handles.pop(self.job_id, None)
        await self.writer.flush()

    async def _watch(self) -> None:
        while not await self.service.cancelled(self.job_id):
            await asyncio.sleep(CANCEL_POLL_S)
        await self.handle.cancel()


__all__ = ["WorkerService", "worker_name"]
