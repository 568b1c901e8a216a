"""`course sweep [--every SECONDS]`: re-queue worker-tier jobs whose worker died, store repeated failures as errors.

Every `course worker` already sweeps each lease period; this runs the same sweep by hand or from cron.
"""

from __future__ import annotations

import time

import click

from app.core.config import get_settings


@click.command()
@click.option("--every", type=float, default=None,
              help="Sweep again every SECONDS until stopped (default: once, then exit).")
def sweep(every: float | None) -> None:
    """Re-queue jobs whose lease ran out (their worker died); store those that failed too often as errors."""
    import redis

    from app.core.db import Database
    from app.runner.celery_app import make_celery
    from app.worker.leasing import requeue

    settings = get_settings()
    db, celery = Database(settings.database_url), make_celery(settings)
    client = redis.Redis.from_url(settings.celery_broker_url, socket_connect_timeout=2, socket_timeout=5)
    try:
        while True:
            found = requeue(settings, db, celery, client)
            click.echo(f"re-queued {len(found.requeue)}, stored {len(found.failed)} as errors")
            if every is None:
                return
            time.sleep(every)
    finally:
        client.close()
        db.dispose()
