"""The worker tier's Celery tasks, bound to one process's WorkerService (a task is a thin call into it)."""

from __future__ import annotations

from app.runner.celery_app import GRADE_TASK, RUN_TASK


def register(celery, service) -> None:
    """Register the two tasks on `celery`, each running in `service`'s sandbox."""

    @celery.task(name=RUN_TASK)
    def run_job(job_id: str, message: dict, attempt: int = 1) -> str:
        return service.run_plain(job_id, message, attempt)

    @celery.task(name=GRADE_TASK)
    def grade_submission(submission_id: str, attempt: int) -> str:
        return service.grade(submission_id, attempt)


__all__ = ["register"]
