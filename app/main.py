"""Build the FastAPI application from one Settings object."""

from __future__ import annotations

from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from fastapi.staticfiles import StaticFiles

from app.config import Settings, get_settings
from app.runner import make_runner
from app.web import auth as auth_routes
from app.web import comments as comment_routes
from app.web import deps, errors, forms, lessons, page_cache, templating
from app.web import exercises as exercise_routes
from app.web import progress as progress_routes
from app.web.limits import BodyLimitMiddleware


def create_app(settings: Settings | None = None, *, watch_content: bool = False) -> FastAPI:
    """Create the site: routers, static files, middleware, and the runner's lifespan.

    Lessons are parsed once here (production refuses broken content: ContentInvalid); `watch_content` reloads
    them while the app runs (`course serve --reload`).
    """
    settings = settings or get_settings()
    templating.configure(settings, auto_reload=True if watch_content else None)
    course = lessons.load_site_course(settings)

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

    app = FastAPI(title="Devices and Tensor Placement", lifespan=lifespan, responses=errors.COMMON_RESPONSES)
    app.state.settings = settings
    app.add_middleware(page_cache.FirstVisitMiddleware)  # added before deps.install: runs inside identity
    deps.install(app, settings)  # database, sessions, identity, CSRF on every unsafe route, rate limiter
    app.add_middleware(forms.Utf8FormMiddleware)  # form fields that are not UTF-8: 400 before any route reads them
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes)  # outermost: before any reading
    app.state.course = course
    app.state.page_cache = page_cache.PageCache()
    app.mount("/static", StaticFiles(directory=settings.static_dir), name="static")
    app.add_exception_handler(404, lessons.not_found)
    app.add_exception_handler(400, errors.bad_request)
    app.add_exception_handler(405, errors.method_not_allowed)
    app.add_exception_handler(RequestValidationError, errors.validation_error)
    app.include_router(lessons.router)
    app.include_router(auth_routes.router)
    app.include_router(comment_routes.router)
    app.include_router(progress_routes.router)
    app.include_router(exercise_routes.router)
    return app
