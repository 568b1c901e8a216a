"""Build the FastAPI application from one Settings object: the whole wiring of the site is in this file.

It is also the one backend switch: COURSE_RUNNER names a row of BACKENDS, which gives the runner (who runs the
jobs) and the submissions hub that goes with it (who grades and stores: app/submissions/hub.py). Nothing else
asks which runner is in force; the CLI, `course check` and the tests get theirs from `open_runner` here. A new
runner backend is one more row.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass

import anyio.to_thread
from fastapi import Depends, FastAPI
from sqlalchemy.exc import OperationalError
from starlette.middleware import Middleware

from app.core.config import Settings, get_settings
from app.core.db import Database
from app.lti import passback
from app.runner.base import Runner
from app.runner.local import LocalRunner
from app.submissions import regrade
from app.submissions.block_runs import BlockRuns
from app.submissions.hub import Hub
from app.submissions.live import LiveHub, fail_interrupted
from app.submissions.tier_hub import CeleryHub
from app.web import errors, readiness
from app.web.deps import make_limiter, open_database, own_verdicts_stored, require_csrf
from app.web.middleware import page_cache
from app.web.middleware.body_limit import BodyLimitMiddleware
from app.web.middleware.forms import Utf8FormMiddleware
from app.web.middleware.head import HeadAsGetMiddleware
from app.web.middleware.headers import SecurityHeadersMiddleware
from app.web.middleware.identity import SESSION_COOKIE, SESSION_MAX_AGE, IdentityMiddleware
from app.web.middleware.session import SessionCookie, SessionMiddleware
from app.web.routes import (
    account,
    auth,
    blocks,
    classroom,
    comments,
    downloads,
    exercises,
    instructor,
    lessons,
    lti,
    machines,
    moderation,
    openapi_pages,
    progress,
    reset,
)
from app.web.static import PublicStaticFiles
from app.web.templating import make_templates

log = logging.getLogger(__name__)


def _celery_runner(settings, **options) -> Runner:
    from app.runner.celery_runner import CeleryRunner  # Celery and kombu load only where they are used

    return CeleryRunner(settings, **options)


@dataclass(frozen=True)
class Backend:
    """A runner and the hub that goes with it."""

    runner: Callable[..., Runner]  # (settings, **options) -> a runner, not started
    hub: Callable[[Database, Runner], Hub]
    # True: this process runs every job and regrade, so whatever the database says is still running died with an
    # earlier server and is settled at start-up (with several processes sharing the database, that would fail
    # the runs of busy ones: the worker tier's leases and sweeper settle them instead)
    single_process: bool


BACKENDS: dict[str, Backend] = {
    "local": Backend(runner=LocalRunner, hub=LiveHub, single_process=True),
    "celery": Backend(runner=_celery_runner, hub=CeleryHub, single_process=False),
}


def backend(settings) -> Backend:
    """The backend COURSE_RUNNER names."""
    try:
        return BACKENDS[settings.runner]
    except KeyError:
        raise ValueError(f"COURSE_RUNNER={settings.runner!r} is not a runner; use one of "
                         f"{', '.join(map(repr, BACKENDS))}") from None


def make_runner(settings, **options) -> Runner:
    """Return the runner COURSE_RUNNER names, not started; `options` go to its constructor (tests, benchmarks)."""
    return backend(settings).runner(settings, **options)


@asynccontextmanager
async def open_runner(settings, **options) -> AsyncIterator[Runner]:
    """Start the configured runner for the duration of a block, and stop it however the block ends."""
    runner = make_runner(settings, **options)
    await runner.start()
    try:
        yield runner
    finally:
        await runner.stop()


def settle_unfinished(db: Database) -> None:
    """Store the runs an earlier server left queued or running as errors, and mark its regrades interrupted."""
    try:
        with db.session(write=True) as session, session.begin():
            failed = fail_interrupted(session)
            regrade.interrupt_running(session)
    except OperationalError as exc:  # not migrated yet: the site starts and says so (app.web.deps); nothing ran
        log.warning("could not look for runs left unfinished by an earlier server: %s", exc.orig)
        return
    if failed:
        log.warning("marked %d submission(s) left unfinished by an earlier server as errors", failed)


# A request is matched against each router's routes in this order, and FastAPI tests the matching router's routes
# twice (once to pick the router, again inside it): a submission's three requests (POST, its event stream, its row)
# tested ~43 routes each when exercises came seventh. The busiest routers go first: lessons (4 routes, the readers'
# pages), then exercises. No two routers' paths overlap (tests/web/test_routes_order.py), so the order decides
# only the cost, never which route answers.
ROUTERS = (lessons.router, exercises.router, progress.router, auth.router, account.router, reset.router,
           comments.router, machines.router, blocks.router, instructor.router, classroom.router, moderation.router,
           openapi_pages.router, downloads.router, lti.router)


def exercise_label(app: FastAPI) -> Callable[[str], str]:
    """An exercise's title in the course the app serves now (an LMS's gradebook column is named after it)."""

    def label(slug: str) -> str:
        exercise = app.state.course.exercises.get(slug)
        return exercise.title if exercise is not None else slug

    return label


def middleware(settings: Settings, db: Database) -> list[Middleware]:
    """Return the middleware, outermost first. Each one relies on those above it:

    1. FirstVisit: answers a new visitor's GET of a cached lesson page (no session cookie), with the cookie and the
       security headers 6 and 2 would add (the same functions make them); everything else goes on.
    2. SecurityHeaders: CSP, nosniff, ... on every other response, including the refusals of the ones below.
    3. HeadAsGet: a HEAD goes on as a GET (everything below sees GET) and loses its body on the way back.
    4. BodyLimit: refuses an oversized body (413) before anything reads it.
    5. Utf8Form: reads form bodies (within the limit) and refuses fields that are not UTF-8 (400).
    6. Session: the signed cookie, which the identity below reads and writes.
    7. Identity: learner id, CSRF token and user from the session (signed out if the account's session version
       moved on); says whether the visitor is new.
    """
    production = settings.env == "production"
    cookie = SessionCookie(settings.secret_key, name=SESSION_COOKIE, max_age=SESSION_MAX_AGE, same_site="lax",
                           https_only=production)
    return [
        Middleware(page_cache.FirstVisitMiddleware, cookie=cookie, production=production),
        Middleware(SecurityHeadersMiddleware, production=production),
        Middleware(HeadAsGetMiddleware),
        Middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes),
        Middleware(Utf8FormMiddleware),
        Middleware(SessionMiddleware, cookie=cookie),
        Middleware(IdentityMiddleware, db=db),
    ]


def create_app(settings: Settings | None = None, *, watch_content: bool = False) -> FastAPI:
    """Create the site: state, middleware, CSRF on every unsafe route, error handlers, static files, routers.

    Lessons are parsed once here (production refuses broken content: ContentInvalid); `watch_content` reloads
    them and the templates while the app runs (`course serve --reload`).
    """
    settings = settings or get_settings()
    course = lessons.load_site_course(settings)
    db = open_database(settings)

    chosen = backend(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        # Start-up: things that need the event loop (the sandbox runner, its hub) are started here, stopped after.
        if chosen.single_process:
            await anyio.to_thread.run_sync(settle_unfinished, db)
        app.state.runner = chosen.runner(settings)
        await app.state.runner.start()
        app.state.live = chosen.hub(db, app.state.runner)
        app.state.block_runs = BlockRuns(app.state.runner)  # lesson blocks run in the page: nothing is stored
        # warm the sandbox and a first graded job in the background: pages answer at once, /readyz once warm
        # (the test suite's apps start many and run little: their sandbox starts with the first job, unwarmed)
        app.state.readiness = readiness.plan(app.state.course, app.state.runner, warm=settings.env != "test",
                                             grades=chosen.single_process)
        warming = (asyncio.create_task(readiness.warm(app.state.readiness, app))
                   if app.state.readiness.waiting_for else None)
        # grades waiting for an LMS (app/lti/passback.py): the after-verdict hook queues them, this loop posts them
        sender = asyncio.get_running_loop().create_task(passback.run_sender(db, settings, exercise_label(app)))
        try:
            async with lessons.content_watcher(app, settings, watch_content):
                yield
        finally:
            if warming is not None:
                warming.cancel()
            sender.cancel()
            with suppress(asyncio.CancelledError):
                await sender
            try:
                await app.state.block_runs.close()
                await app.state.live.close()
            finally:
                await app.state.runner.stop()

    # docs_url/redoc_url None: openapi_pages serves both without a CDN or inline script; redirect_slashes False:
    # Starlette's redirect is absolute, built from the Host header; the 404 handler redirects relatively instead
    app = FastAPI(title="Devices and Tensor Placement", lifespan=lifespan, responses=errors.COMMON_RESPONSES,
                  middleware=middleware(settings, db),
                  dependencies=[Depends(require_csrf), Depends(own_verdicts_stored)], docs_url=None,
                  redoc_url=None, redirect_slashes=False)  # fmt: skip
    app.state.settings = settings
    app.state.db = db
    app.state.course = course
    app.state.templates = make_templates(settings, auto_reload=True if watch_content else None)
    app.state.limiter = make_limiter()
    app.state.page_cache = page_cache.PageCache()
    app.add_exception_handler(404, lessons.not_found)
    for error, handler in errors.HANDLERS.items():
        app.add_exception_handler(error, handler)
    app.mount("/static", PublicStaticFiles(directory=settings.static_dir), name="static")
    app.mount(openapi_pages.ASSETS_URL, openapi_pages.assets(), name="openapi-assets")
    for router in ROUTERS:
        app.include_router(router)
    return app
