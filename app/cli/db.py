"""`course db upgrade|downgrade`: apply the Alembic migrations to the configured database."""

from __future__ import annotations

import click
from sqlalchemy.engine import make_url

from app.core import db as database
from app.core.config import get_settings


def shown_url(url: str) -> str:
    """Return the database URL as an operator may read it: the password replaced by ***."""
    return make_url(url).render_as_string(hide_password=True)


@click.group("db")
def db() -> None:
    """Create or migrate the database (COURSE_DATABASE_URL; default var/course.db)."""


@db.command("upgrade")
@click.argument("revision", default="head")
def upgrade(revision: str) -> None:
    """Migrate the database up to REVISION (default: head, the newest)."""
    url = get_settings().database_url
    database.upgrade(url, revision)
    click.echo(f"database at {shown_url(url)} is at {revision}")


@db.command("downgrade")
@click.argument("revision", default="-1")
def downgrade(revision: str) -> None:
    """Migrate the database down to REVISION (default: -1, one step back; `base` empties it)."""
    url = get_settings().database_url
    database.downgrade(url, revision)
    click.echo(f"database at {shown_url(url)} is at {revision}")
