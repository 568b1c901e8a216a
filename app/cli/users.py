"""`course users create|promote|reset-link`: make accounts from the command line (the first instructor starts
here) and hand out password reset links where the site sends no mail."""

from __future__ import annotations

import click

from app.accounts import password_reset
from app.accounts import users as accounts
from app.cli.terminal import echo
from app.core.config import get_settings
from app.core.db import Database

ROLE_WORDS = {"learner": "a learner", "ta": "a teaching assistant", "instructor": "an instructor"}


def _database() -> Database:
    return Database(get_settings().database_url)


@click.group("users")
def users() -> None:
    """Create accounts and give them roles (run `course db upgrade` first)."""


@users.command("create")
@click.argument("email")
@click.option("--name", "display_name", help="Display name shown beside comments (default: the email's name).")
@click.option("--instructor", is_flag=True, help="Make the account an instructor (can hide and delete comments).")
@click.option(
    "--password",
    prompt=True,
    hide_input=True,
    confirmation_prompt=True,
    envvar="COURSE_NEW_USER_PASSWORD",
    help="Asked for when omitted; or set COURSE_NEW_USER_PASSWORD.",
)
def create(email: str, display_name: str | None, instructor: bool, password: str) -> None:
    """Create an account for EMAIL."""
    if not accounts.EMAIL_RE.match(email.strip()):
        raise click.UsageError(f"{email!r} does not look like an email address (name@example.org)")
    if len(password) < 8:
        raise click.UsageError("the password is shorter than 8 characters")
    db = _database()
    try:
        with db.session(write=True) as session:
            user = accounts.create_user(
                session, email=email, password=password, display_name=display_name or email.split("@")[0],
                role="instructor" if instructor else "learner",
            )  # fmt: skip
            session.commit()
            click.echo(f"created {user.role} {user.email} (id {user.id})")
    except accounts.EmailTaken:
        raise click.ClickException(f"an account for {email} exists already; `course users promote` changes roles")
    finally:
        db.dispose()


@users.command("promote")
@click.argument("email")
@click.option("--demote", is_flag=True, help="Make the instructor (or teaching assistant) a learner again.")
@click.option("--ta", is_flag=True, help="Make the account a teaching assistant (sees the learners of the sections "
                                         "it assists) instead of an instructor.")
def promote(email: str, demote: bool, ta: bool) -> None:
    """Make the account for EMAIL an instructor (a teaching assistant with --ta, a learner again with --demote)."""
    role = "learner" if demote else "ta" if ta else "instructor"
    db = _database()
    try:
        with db.session(write=True) as session:
            user = accounts.set_role(session, email=email, role=role)
            session.commit()
            click.echo(f"{user.email} is now {ROLE_WORDS[role]}")
    except accounts.UnknownUser:
        raise click.ClickException(f"no account for {email}; create it with `course users create {email}`")
    finally:
        db.dispose()


@users.command("reset-link")
@click.argument("email")
def reset_link(email: str) -> None:
    """Print a one-time link that lets the owner of EMAIL choose a new password (it expires; see
    COURSE_RESET_LINK_TTL_S). Send it to them yourself; only a hash of it is stored."""
    settings = get_settings()
    db = Database(settings.database_url)
    try:
        with db.session(write=True) as session:
            user = accounts.find_by_email(session, email)
            if user is None:
                raise click.ClickException(f"no account for {email}; `course users create {email}` makes one")
            token = password_reset.issue_token(session, user=user, ttl_s=settings.reset_link_ttl_s)
            session.commit()
    finally:
        db.dispose()
    minutes = settings.reset_link_ttl_s // 60
    click.echo(password_reset.reset_url(settings.site_url(), token))
    click.echo(f"(works once, for {minutes} minutes; any older link for {user.email} no longer works)", err=True)


@users.command("import")
@click.argument("roster", type=click.Path(exists=True, dir_okay=False))
def import_(roster: str) -> None:
    """Import ROSTER (CSV: email, name, section, role learner|ta): accounts for new people, the TA role, and each
    section it names holding exactly the people it lists for it (importing it again changes nothing)."""
    from pathlib import Path

    from app.learning.roster import RosterError, import_roster, read_roster

    try:
        rows = read_roster(Path(roster).read_text(encoding="utf-8"))
    except (RosterError, UnicodeDecodeError) as exc:
        raise click.ClickException(f"{roster}: {exc}") from None
    db = _database()
    try:
        with db.session(write=True) as session:
            report = import_roster(session, rows)
            session.commit()
    finally:
        db.dispose()
    echo(f"{len(rows)} people: {len(report.created)} new accounts, {len(report.tas)} made teaching assistants")
    for name, (learners, tas) in sorted(report.sections.items()):
        echo(f"section {name}: {learners} learners, {tas} teaching assistants")
    if report.created:
        echo("new accounts have a random password: their owners choose one with \"Forgot your password?\" or a "
             "link from `course users reset-link EMAIL`", err=True)
