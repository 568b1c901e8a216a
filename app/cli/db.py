"""`course db upgrade|downgrade`: apply the Alembic migrations to the configured database."""

from __future__ import annotations

import click

from app import db as database
from app.config import get_settings


@click.group("db")
def db() -> None:
    """Create or migrate the database (COURSE_DATABASE_URL; default var/course.db)."""


@db.command("upgrade")
@click.argument("revision", default="head")
def upgrade(revision: str) -> None:
    """Migrate the database up to REVISION (default: head, the newest)."""
    url = get_settings().database_url
    database.upgrade(url, revision)
    click.echo(f"database at {url} is at {revision}")


@db.command("downgrade")
@click.argument("revision", default="-1")
def downgrade(revision: str) -> None:
    """Migrate the database down to REVISION (default: -1, one step back; `base` empties it)."""
    url = get_settings().database_url
    database.downgrade(url, revision)
    click.echo(f"database at {url} is at {revision}")
