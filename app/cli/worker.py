"""`course worker [--queues cpu,gpu] [--concurrency N]`: run jobs from the worker tier's queues (COURSE_RUNNER=celery
on the web side) in this machine's warm sandbox."""

from __future__ import annotations

import logging

import click

from app.core.config import get_settings

log = logging.getLogger("course.worker")


def _queues(value: str) -> list[str]:
    from app.runner.celery_app import QUEUES

    queues = [q.strip() for q in value.split(",") if q.strip()]
    unknown = sorted(set(queues) - set(QUEUES))
    if not queues or unknown:
        raise click.BadParameter(f"{', '.join(unknown) or 'nothing'} is not a queue; use {' or '.join(QUEUES)} "
                                 "(comma-separated for both)")
    return queues


@click.command()
@click.option("--queues", "-Q", default="cpu", show_default=True,
              help="Queues to take jobs from: cpu, gpu or cpu,gpu (GPU hosts: gpu).")
@click.option("--concurrency", "-c", type=int, default=None,
              help="Jobs run at once (default: COURSE_RUNNER_CONCURRENCY); about one per core, one per GPU slot.")
@click.option("--sweep/--no-sweep", default=True, show_default=True,
              help="Also re-queue jobs whose worker died (safe on every worker; see docs/operations.md).")
@click.option("--loglevel", default="INFO", show_default=True, help="Celery's log level.")
def worker(queues: str, concurrency: int | None, sweep: bool, loglevel: str) -> None:
    """Run jobs from Redis in this machine's warm sandbox until stopped (SIGTERM finishes running jobs first)."""
    from app.runner.celery_app import make_celery
    from app.worker.leasing import Heartbeat
    from app.worker.service import WorkerService
    from app.worker.tasks import register

    settings = get_settings()
    names = _queues(queues)
    concurrency = max(1, concurrency or settings.runner_concurrency)
    logging.basicConfig(level=loglevel.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    service = WorkerService(settings, queues=names, concurrency=concurrency)
    click.echo(f"course worker {service.name}: starting the sandbox ({concurrency} slot(s), queues "
               f"{','.join(names)})", err=True)
    service.start()
    heartbeat = Heartbeat(service, sweep=sweep)
    heartbeat.start()
    celery = make_celery(settings)
    register(celery, service)
    try:
        celery.worker_main(["worker", "--queues", ",".join(names), "--concurrency", str(concurrency),
                            "--pool", "threads", "--hostname", f"course@{service.name}", "--without-gossip",
                            "--without-mingle", "--loglevel", loglevel])
    finally:
        heartbeat.stop()
        service.stop()
