"""Leases on the worker side: a heartbeat thread per worker, and the sweep that re-queues dead workers' jobs.

Every worker sweeps (each lease period) as well as renewing its own leases, so no extra process has to be
kept alive for the tier to heal: sweeps are guarded updates (app/submissions/leases.py) and any number may run at once.
`course sweep` runs one by hand or from cron.
"""

from __future__ import annotations

import json
import logging
import threading

from redis.exceptions import RedisError

from app.runner.celery_app import GRADE_TASK, QUEUES
from app.submissions import leases

log = logging.getLogger("course.worker")


def waiting_tasks(client) -> set[str] | None:
    """Return the ids of the job messages waiting on the queues (None if Redis cannot be read).

    Celery's Redis transport keeps each queue as a list of JSON messages whose headers carry the task id (the
    list Celery's monitoring guide reads with LLEN); COURSE_RUNNER_QUEUE_SIZE bounds each list.
    """
    try:
        messages = [m for queue in QUEUES for m in client.lrange(queue, 0, -1)]
    except RedisError as exc:
        log.warning("could not read the queues (%s); queued jobs are not swept this time", exc)
        return None
    ids = set()
    for message in messages:
        try:
            ids.add(json.loads(message)["headers"]["id"])
        except (ValueError, KeyError, TypeError):
            continue  # not one of ours
    return ids


def requeue(settings, db, celery, client) -> leases.Sweep:
    """Sweep once: store errors for runs that failed too often, send the rest to the queue again."""
    waiting = waiting_tasks(client)
    with db.session(write=True) as session, session.begin():
        found = leases.sweep(session, lease_s=settings.runner_lease_s, max_attempts=settings.runner_max_attempts,
                             waiting=waiting)
    for submission_id, attempt in found.requeue:
        queue = _queue_of(settings, db, submission_id)
        celery.send_task(GRADE_TASK, args=[submission_id, attempt], task_id=leases.task_id(submission_id, attempt),
                         queue=queue)
        with db.session(write=True) as session, session.begin():
            leases.mark_enqueued(session, submission_id=submission_id, attempt=attempt)
        log.warning("queued submission %s (attempt %d) on %s: its worker went quiet, or it was never sent",
                    submission_id, attempt, queue)
    for submission_id in found.failed:
        log.error("submission %s failed %d times; stored as an error", submission_id, settings.runner_max_attempts)
    return found


def _queue_of(settings, db, submission_id: str) -> str:
    """Return the queue a submission's exercise needs (gpu for an exercise that asks for one)."""
    from app.content.exercises import load_exercise
    from app.models import Submission

    with db.session() as session:
        slug = session.get(Submission, submission_id).exercise_slug
    try:
        needs_gpu = getattr(load_exercise(settings.exercises_dir / slug).spec, "needs_gpu", False)
    except (OSError, ValueError):
        needs_gpu = False  # gone from this host's content: the worker that takes it stores the error
    return "gpu" if needs_gpu else "cpu"


class Heartbeat:
    """Every third of a lease: renew this worker's leases, report it to Redis, sweep. Runs in its own thread."""

    def __init__(self, service, *, sweep: bool = True) -> None:
        import redis

        self.service = service
        self.redis = redis.Redis.from_url(service.settings.celery_broker_url, socket_connect_timeout=2,
                                          socket_timeout=5)
        self.sweep = sweep
        self.period_s = service.settings.runner_lease_s / 3
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="course-heartbeat", daemon=True)

    def start(self) -> None:
        """Beat once now (the worker shows up in Redis at once), then every period in the background."""
        self.beat()
        self._thread.start()

    def stop(self) -> None:
        """Stop beating (the leases then run out unless the jobs finished)."""
        self._stop.set()
        self._thread.join(self.period_s + 5)
        self.redis.close()

    def _loop(self) -> None:
        while not self._stop.wait(self.period_s):
            self.beat()

    def beat(self) -> None:
        """Renew leases (stopping jobs whose lease was lost), report the worker, sweep; log and go on on errors."""
        service = self.service
        try:
            before = service.holding()
            with service.db.session(write=True) as session, session.begin():
                held = leases.heartbeat(session, worker=service.name)
            service.drop_lost(before, held)
        except Exception:  # a database outage must not stop the beats that follow it
            log.exception("could not renew the leases of worker %s", service.name)
        try:
            service.report(json.dumps(service.status()), ttl_s=max(1, round(service.settings.runner_lease_s)))
        except Exception:  # noqa: BLE001 - Redis down: the worker's key expires, which is the truth
            log.warning("could not report worker %s to Redis", service.name)
        if self.sweep:
            try:
                requeue(service.settings, service.db, service.celery, self.redis)
            except Exception:  # the next beat sweeps again
                log.exception("sweep failed")


__all__ = ["Heartbeat", "requeue"]
