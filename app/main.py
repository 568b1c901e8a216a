"""Build the FastAPI application from one Settings object: the whole wiring of the site is in this file."""

from __future__ import annotations

from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI
from starlette.middleware import Middleware
from starlette.middleware.sessions import SessionMiddleware

from app.core.config import Settings, get_settings
from app.core.db import Database
from app.runner import make_runner
from app.web import errors
from app.web.deps import make_limiter, open_database, require_csrf
from app.web.middleware import page_cache
from app.web.middleware.body_limit import BodyLimitMiddleware
from app.web.middleware.forms import Utf8FormMiddleware
from app.web.middleware.head import HeadAsGetMiddleware
from app.web.middleware.headers import SecurityHeadersMiddleware
from app.web.middleware.identity import SESSION_COOKIE, SESSION_MAX_AGE, IdentityMiddleware
from app.web.routes import (
    account,
    auth,
    comments,
    downloads,
    exercises,
    instructor,
    lessons,
    moderation,
    openapi_pages,
    progress,
    reset,
)
from app.web.static import PublicStaticFiles
from app.web.templating import make_templates

ROUTERS = (lessons.router, auth.router, account.router, reset.router, comments.router, progress.router,
           exercises.router, instructor.router, moderation.router, openapi_pages.router, downloads.router)


def middleware(settings: Settings, db: Database) -> list[Middleware]:
    """Return the middleware, outermost first. Each one relies on those above it:

    1. SecurityHeaders: CSP, nosniff, ... on every response, including the refusals of the ones below.
    2. HeadAsGet: a HEAD goes on as a GET (everything below sees GET) and loses its body on the way back.
    3. BodyLimit: refuses an oversized body (413) before anything reads it.
    4. Utf8Form: reads form bodies (within the limit) and refuses fields that are not UTF-8 (400).
    5. Session: the signed cookie, which the identity below reads and writes.
    6. Identity: learner id, CSRF token and user from the session (signed out if the account's session version
       moved on); says whether the visitor is new.
    7. FirstVisit: answers a new visitor's lesson page from the page cache, which needs 6's answer and token.
    """
    return [
        Middleware(SecurityHeadersMiddleware, production=settings.env == "production"),
        Middleware(HeadAsGetMiddleware),
        Middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes),
        Middleware(Utf8FormMiddleware),
        Middleware(SessionMiddleware, secret_key=settings.secret_key, session_cookie=SESSION_COOKIE,
                   max_age=SESSION_MAX_AGE, same_site="lax", https_only=settings.env == "production"),
        Middleware(IdentityMiddleware, db=db),
        Middleware(page_cache.FirstVisitMiddleware),
    ]


def create_app(settings: Settings | None = None, *, watch_content: bool = False) -> FastAPI:
    """Create the site: state, middleware, CSRF on every unsafe route, error handlers, static files, routers.

    Lessons are parsed once here (production refuses broken content: ContentInvalid); `watch_content` reloads
    them and the templates while the app runs (`course serve --reload`).
    """
    settings = settings or get_settings()
    course = lessons.load_site_course(settings)
    db = open_database(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        # Start-up: things that need the event loop (the sandbox runner) are started here and stopped after.
        app.state.runner = make_runner(settings)
        await app.state.runner.start()
        try:
            async with lessons.content_watcher(app, settings, watch_content):
                yield
        finally:
            await app.state.runner.stop()

    # docs_url/redoc_url None: openapi_pages serves both without a CDN or inline script; redirect_slashes False:
    # Starlette's redirect is absolute, built from the Host header; the 404 handler redirects relatively instead
    app = FastAPI(title="Devices and Tensor Placement", lifespan=lifespan, responses=errors.COMMON_RESPONSES,
                  middleware=middleware(settings, db), dependencies=[Depends(require_csrf)], docs_url=None,
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
