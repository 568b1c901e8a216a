"""`course regrade SLUG [--since DATE]`: grade an exercise's stored submissions again under its current checks.

The same regrade as the dashboard's button (`app.submissions.regrade`), on a runner of its own, with a progress bar on
stderr. Exit 0 when every submission got a verdict from its code, 1 when the regrade failed or some runs broke
(status "error"), 2 on a usage error.
"""

from __future__ import annotations

import asyncio
import sys
import time
from datetime import UTC, datetime

import click

from app.cli.grade import find_exercise
from app.cli.terminal import visible
from app.core.config import get_settings
from app.core.db import Database
from app.submissions import regrade as regrading

DATE_FORMATS = ["%Y-%m-%d", "%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S"]


def _start(db: Database, exercise, since: datetime | None, holder: str, lease_s: float):
    with db.session(write=True) as session, session.begin():
        try:
            return regrading.start(session, exercise=exercise, since=since, holder=holder, lease_s=lease_s)
        except regrading.RegradeError as exc:
            raise click.ClickException(visible(exc.message)) from None


def _run(db: Database, settings, exercise, row, bar, holder: str) -> object:
    from app.main import open_runner

    async def main():
        async with open_runner(settings) as runner:
            await runner.ready()
            return await regrading.run(db, runner, exercise=exercise, regrade_id=row.id,
                                       concurrency=settings.runner_concurrency,
                                       on_progress=lambda done, total: bar.update(1), holder=holder,
                                       lease_s=settings.runner_lease_s)

    return asyncio.run(main())


def _report(result, seconds: float) -> None:
    click.echo(f"{result.exercise_slug}: regraded {result.done} submissions in {seconds:.1f} s (regrade #{result.id})")
    click.echo(f"  changed: {result.changed} ({result.now_passing} now pass, {result.now_failing} now fail); "
               f"errors: {result.errors}")
    click.echo(f"  progress: {result.passes_added} learners given a pass; {result.passes_kept} keep a pass no "
               f"current verdict supports (listed at /instructor/exercises/{result.exercise_slug})")


@click.command()
@click.argument("slug")
@click.option("--since", type=click.DateTime(DATE_FORMATS), metavar="DATE",
              help="Only submissions created at or after DATE (UTC), e.g. 2026-03-01 or 2026-03-01T14:00.")
def regrade(slug: str, since: datetime | None) -> None:
    """Grade the stored submissions of exercise SLUG again under its current checks, through the sandbox."""
    settings = get_settings()
    exercise = find_exercise(slug, settings.exercises_dir)
    db = Database(settings.database_url)
    try:
        holder = regrading.holder_name()
        row = _start(db, exercise, since.replace(tzinfo=UTC) if since else None, holder, settings.runner_lease_s)
        if row.resumed:
            click.echo(f"resuming regrade #{row.id} of {slug} ({row.done} of {row.total} done): the process running "
                       "it stopped", err=True)
        if row.total == 0:
            click.echo(f"{slug}: no stored submissions to regrade" + (f" since {since:%Y-%m-%d %H:%M}" if since
                                                                      else ""))
            return
        click.echo(f"starting the sandbox to regrade {row.total} submissions of {slug} ...", err=True)
        started = time.perf_counter()
        with click.progressbar(length=row.total, label=f"regrade #{row.id}", file=sys.stderr,
                               show_pos=True) as bar:  # fmt: skip
            bar.update(row.done)
            try:
                result = _run(db, settings, exercise, row, bar, holder)
            except Exception as exc:  # noqa: BLE001 - the regrade is marked failed; say why and exit 1
                raise click.ClickException(visible(f"regrade #{row.id} failed: {type(exc).__name__}: {exc}")) from None
        _report(result, time.perf_counter() - started)
    finally:
        db.dispose()
    sys.exit(1 if result.errors else 0)
