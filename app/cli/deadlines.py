"""`course deadlines set|list|clear`: when each exercise is due, for everyone or for one section. A submission
after its learner's deadline is graded as any other and flagged late in the dashboard, the learner page and the
CSV (app/learning/deadlines.py)."""

from __future__ import annotations

from datetime import UTC, datetime

import click

from app.cli.terminal import echo
from app.content.course import load_course
from app.core.config import get_settings
from app.core.db import Database
from app.learning import deadlines as rules


def _when(text: str) -> datetime:
    try:
        value = datetime.fromisoformat(text.strip().replace(" ", "T", 1))
    except ValueError:
        raise click.BadParameter(f"{text!r} is not a date and time; write it as 2026-12-18T23:59 (UTC) or with "
                                 "its zone, 2026-12-18T23:59+01:00") from None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _known(slug: str) -> str:
    settings = get_settings()
    exercises = load_course(settings.lessons_dir, settings.exercises_dir, settings.static_dir).exercises
    if slug not in exercises:
        raise click.BadParameter(f"there is no exercise {slug!r}; the course has: {', '.join(sorted(exercises))}")
    return slug


@click.group("deadlines")
def deadlines() -> None:
    """Set, list and clear exercises' deadlines (per exercise, and per section)."""


@deadlines.command("set")
@click.argument("exercise")
@click.argument("when")
@click.option("--section", help="Only for this section (it wins over the deadline for everyone).")
def set_(exercise: str, when: str, section: str | None) -> None:
    """Make EXERCISE due at WHEN (2026-12-18T23:59, UTC unless a zone is given)."""
    due = _when(when)
    _known(exercise)
    db = Database(get_settings().database_url)
    try:
        with db.session(write=True) as session:
            rules.set_deadline(session, exercise_slug=exercise, due_at=due, section=section)
            session.commit()
    finally:
        db.dispose()
    echo(f"{exercise} is due {due.astimezone(UTC):%Y-%m-%d %H:%M} UTC"
              f"{f' for section {section}' if section else ' for everyone'}")


@deadlines.command("list")
def list_() -> None:
    """List every deadline: exercise, section (or everyone), when (UTC)."""
    db = Database(get_settings().database_url)
    try:
        with db.session() as session:
            found = rules.list_deadlines(session)
    finally:
        db.dispose()
    if not found:
        echo("no deadlines; `course deadlines set EXERCISE WHEN` sets one")
    for slug, section, due in found:
        echo(f"{slug}\t{section or '(everyone)'}\t{due.astimezone(UTC):%Y-%m-%d %H:%M} UTC")


@deadlines.command("clear")
@click.argument("exercise")
@click.option("--section", help="Clear this section's deadline instead of the one for everyone.")
def clear(exercise: str, section: str | None) -> None:
    """Remove EXERCISE's deadline (for everyone, or one section's)."""
    db = Database(get_settings().database_url)
    try:
        with db.session(write=True) as session:
            found = rules.clear_deadline(session, exercise_slug=exercise, section=section)
            session.commit()
    finally:
        db.dispose()
    if not found:
        raise click.ClickException(f"{exercise} had no deadline{f' for section {section}' if section else ''}")
    echo(f"{exercise}: deadline cleared{f' for section {section}' if section else ''}")
