"""`course lti add-platform|platforms|rotate-key|send|roster`: connect the course to LMSs (LTI 1.3), rotate the
tool's signing key, send the grades waiting in the outbox, fetch an LMS course's roster."""

from __future__ import annotations

import click

from app.core.config import get_settings
from app.core.db import Database


def _database() -> Database:
    return Database(get_settings().database_url)


@click.group("lti")
def lti() -> None:
    """Connect the course to LMSs as an LTI 1.3 tool (run `course db upgrade` first)."""


@lti.command("add-platform")
@click.argument("name")
@click.option("--issuer", required=True, help="The platform's issuer (iss), e.g. https://canvas.instructure.com.")
@click.option("--client-id", required=True, help="The client id the LMS gave the course's registration.")
@click.option("--auth-login-url", required=True, help="The LMS's OIDC authorization endpoint.")
@click.option("--auth-token-url", required=True, help="The LMS's OAuth2 token endpoint (grades and roster).")
@click.option("--jwks-url", required=True, help="The URL of the LMS's public keys (JWKS).")
@click.option("--deployment", "deployments", multiple=True,
              help="A deployment id whose launches are accepted; repeat for several.")
def add_platform(name: str, issuer: str, client_id: str, auth_login_url: str, auth_token_url: str, jwks_url: str,
                 deployments: tuple[str, ...]) -> None:  # fmt: skip
    """Register the LMS called NAME (or update it: its deployments are added) and print what to enter in it."""
    from app.lti import keys, platforms

    settings = get_settings()
    db = _database()
    try:
        with db.session(write=True) as session:
            platform = platforms.add_platform(session, name=name, issuer=issuer, client_id=client_id,
                                              auth_login_url=auth_login_url, auth_token_url=auth_token_url,
                                              jwks_url=jwks_url, deployment_ids=list(deployments))
            keys.signing_key(session)  # the first key, so /lti/jwks has one to publish
            session.commit()
            click.echo(f"registered {platform.name} ({platform.issuer}, client id {platform.client_id}, "
                       f"deployments: {', '.join(platform.deployment_ids) or 'none yet'})")
    finally:
        db.dispose()
    site = settings.site_url()
    click.echo(f"in the LMS: login URL {site}/lti/login, redirect/launch URL {site}/lti/launch, "
               f"public keys (JWKS) URL {site}/lti/jwks")


@lti.command("platforms")
def list_platforms() -> None:
    """List the registered LMSs."""
    from sqlalchemy import select

    from app.models import LtiPlatform

    db = _database()
    try:
        with db.session() as session:
            for platform in session.scalars(select(LtiPlatform).order_by(LtiPlatform.name)):
                click.echo(f"{platform.name}: issuer {platform.issuer}, client id {platform.client_id}, deployments "
                           f"{', '.join(platform.deployment_ids) or 'none'}, keys {platform.jwks_url}")
    finally:
        db.dispose()


@lti.command("rotate-key")
def rotate_key() -> None:
    """Make a new signing key; the previous one stays published at /lti/jwks until the next rotation."""
    from app.lti import keys

    db = _database()
    try:
        with db.session(write=True) as session:
            row = keys.rotate(session)
            session.commit()
            click.echo(f"the tool now signs with key {row.kid}; /lti/jwks publishes it and the one before it")
    finally:
        db.dispose()


@lti.command("send")
@click.option("--every", type=float, default=None,
              help="Send again every SECONDS until stopped (default: one pass, then exit).")
def send(every: float | None) -> None:
    """Post the grades waiting in the outbox to their LMSs (the site does this every COURSE_LTI_SEND_INTERVAL_S)."""
    import time

    from app.content.exercises import load_exercises
    from app.lti import passback

    settings = get_settings()
    titles = {slug: exercise.title for slug, exercise in load_exercises(settings.exercises_dir).items()}
    db = _database()
    try:
        while True:
            done = passback.send_due(db, settings, label=lambda slug: titles.get(slug, slug))
            with db.session() as session:
                left = passback.waiting(session)
            click.echo(f"sent {done.sent}, failed {len(done.failed)}, waiting {left}")
            for line in done.failed:
                click.echo(f"  {line}", err=True)
            if every is None:
                raise SystemExit(1 if done.failed else 0)
            time.sleep(every)
    finally:
        db.dispose()


@lti.command("roster")
@click.argument("context_ids", nargs=-1, type=int)
@click.option("--all", "everything", is_flag=True, help="Fetch the roster of every LMS course with a roster service.")
def roster(context_ids: tuple[int, ...], everything: bool) -> None:
    """Fetch LMS courses' rosters (Names and Role Provisioning) into accounts, roles and sections; without
    CONTEXT_IDS or --all, list the LMS courses seen in launches with their ids."""
    from app.lti import roster as rosters
    from app.lti.services import LmsError

    settings = get_settings()
    db = _database()
    try:
        with db.session() as session:
            known = rosters.contexts(session)
        if not context_ids and not everything:
            for context_id, platform, title, service in known:
                click.echo(f"{context_id}: {title} ({platform}){'' if service else ' - no roster service'}")
            return
        wanted = [row[0] for row in known if row[3]] if everything else list(context_ids)
        failed = False
        for context_id in wanted:
            try:
                done = rosters.sync(db, settings, context_id)
            except LmsError as exc:
                click.echo(f"{context_id}: not fetched: {exc}", err=True)
                failed = True
                continue
            click.echo(f"{context_id}: section {done.section!r}: {done.learners} learners, {done.tas} TAs, "
                       f"{done.new_accounts} new accounts")
        if failed:
            raise SystemExit(1)
    finally:
        db.dispose()
