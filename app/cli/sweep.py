"""`course sweep [--every SECONDS]`: re-queue worker-tier jobs whose worker died, store repeated failures as errors.

Every `course worker` already sweeps each lease period; this runs the same sweep by hand or from cron.
"""

from __future__ import annotations

import time

import click

from app.config import get_settings


@click.command()
@click.option("--every", type=float, default=None,
              help="Sweep again every SECONDS until stopped (default: once, then exit).")
def sweep(every: float | None) -> None:
    """Re-queue jobs whose lease ran out (their worker died); store those that failed too often as errors."""
    from app.db import Database
    from app.runner.celery_app import make_celery
    from app.worker.leasing import requeue

    settings = get_settings()
    db, celery = Database(settings.database_url), make_celery(settings)
    try:
        while True:
            found = requeue(settings, db, celery)
            click.echo(f"re-queued {len(found.requeue)}, stored {len(found.failed)} as errors")
            if every is None:
                return
            time.sleep(every)
    finally:
        db.dispose()
