"""The Celery application both sides share: the web tier sends tasks by name, `course worker` runs them.

Every setting that decides whether a job can be lost or run twice is here, with the reason it is set:
- `task_acks_late` + `worker_prefetch_multiplier=1`: a message is acknowledged after its job ends, and a
  worker holds no more messages than it runs, so a worker that dies loses none (Redis gives them back).
- `task_reject_on_worker_lost`: a pool process killed mid-job (SIGKILL, OOM) has its message requeued instead
  of acknowledged (a loop, were it not for the attempt cap in app/submissions/leases.py).
- the Redis `visibility_timeout` (how long a taken message may stay unacknowledged before Redis hands it to
  another worker) is derived from the sandbox limits below, never typed: too short and every long job runs
  twice (celery#5935), too long and a dead worker's job waits. The lease (COURSE_RUNNER_LEASE_S) is far
  shorter, so the sweeper re-queues a dead worker's job first; the redelivered message then finds its attempt
  replaced and is dropped.
- `worker_pool="threads"`: the warm sandbox lives in one worker process (see app/worker); Celery's prefork
  pool would fork that process, and a fork server must never be in Celery's fork path.
"""

from __future__ import annotations

from celery import Celery

from app.runner.local import GPU_PREPARE_GRACE_S, SERVER_HANG_GRACE_S, SERVER_START_TIMEOUT_S

RUN_TASK = "course.run_job"  # a plain job (course grade/run/check/doctor): output and Result on its stream
GRADE_TASK = "course.grade_submission"  # a stored submission: its verdict goes to the database, then the stream
QUEUES = ("cpu", "gpu")


def job_seconds(settings) -> float:
    """Return the longest one job can hold a worker slot: a server (re)start, a GPU slot's preparation, the wall
    clock, and the grace after which the runner presumes its server stuck (the LocalRunner's own bounds)."""
    return SERVER_START_TIMEOUT_S + GPU_PREPARE_GRACE_S + settings.sandbox_wall_s + SERVER_HANG_GRACE_S


def visibility_timeout_s(settings) -> int:
    """Return the broker's visibility timeout: the longest a taken job runs before its runner gives up on it (a
    GPU slot's preparation, the wall clock, the hang grace: a worker takes jobs only with its sandbox warm, and
    takes no more than it runs), plus one lease."""
    return int(GPU_PREPARE_GRACE_S + settings.sandbox_wall_s + SERVER_HANG_GRACE_S + settings.runner_lease_s)


def make_celery(settings) -> Celery:
    """Return the Celery app for these settings (not set as the process's current app)."""
    app = Celery("course", broker=settings.celery_broker_url, set_as_current=False)
    app.conf.update(
        task_acks_late=True,
        worker_prefetch_multiplier=1,
        task_reject_on_worker_lost=True,
        broker_transport_options={"visibility_timeout": visibility_timeout_s(settings)},
        worker_pool="threads",
        # results travel on the job's Redis Stream and in the database, never in a Celery result backend
        task_ignore_result=True,
        task_serializer="json",
        accept_content=["json"],
        task_default_queue="cpu",
        # a web request must not hang on a dead broker: two quick retries, then the site answers 503
        broker_connection_timeout=2,
        task_publish_retry_policy={"max_retries": 2, "interval_start": 0.1, "interval_step": 0.2,
                                   "interval_max": 0.5},
        broker_connection_retry_on_startup=True,
        # on a lost broker connection the running jobs go on: their verdicts are guarded by attempt, and a
        # redelivered message finds its attempt already claimed or finished
        worker_cancel_long_running_tasks_on_connection_loss=False,
        worker_hijack_root_logger=False,
        worker_redirect_stdouts=False,
    )
    return app


__all__ = ["make_celery", "visibility_timeout_s", "job_seconds", "RUN_TASK", "GRADE_TASK", "QUEUES"]
