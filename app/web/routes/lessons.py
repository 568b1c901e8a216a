"""The reading side of the site: the course index and the lesson pages, served from the in-memory Course."""

from __future__ import annotations

import asyncio
import logging
from contextlib import asynccontextmanager, suppress

import anyio.to_thread
from fastapi import APIRouter, FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import JSONResponse
from sqlalchemy.orm import Session
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.content.course import Course, load_course
from app.content.lessons import Lesson
from app.content.schema import ContentInvalid
from app.core.config import Settings
from app.learning import progress
from app.submissions.views import panel_state
from app.web.deps import CourseDep, LearnerId, SessionDep
from app.web.middleware import page_cache
from app.web.middleware.slashes import slash_redirect
from app.web.routes.comments import thread_view
from app.web.routes.progress import lesson_row
from app.web.templating import render, render_text

log = logging.getLogger(__name__)
router = APIRouter()


def load_site_course(settings: Settings) -> Course:
    """Load the course; in production broken content is refused with the same messages `course check` prints."""
    course = load_course(settings.lessons_dir, settings.exercises_dir, settings.static_dir)
    if course.errors and settings.env == "production":
        raise ContentInvalid(course.errors)
    for error in course.errors:
        log.warning("content: %s", error)
    return course


def _content_error_page(request: Request, course: Course):
    return render(request, "errors/content.html", status_code=500, errors=[str(e) for e in course.errors])


def not_found_page(request: Request, what: str):
    """Render the friendly 404 page: what is missing, and every lesson there is."""
    course: Course | None = getattr(request.app.state, "course", None)
    return render(request, "errors/404.html", status_code=404, what=what, lessons=course.lessons if course else [])


@router.get("/", name="index", include_in_schema=False)  # HTML pages are not the JSON API
def index(request: Request, course: CourseDep, session: SessionDep, learner: LearnerId):
    """List the lessons in course order, each with this visitor's progress."""
    if course.errors:
        return _content_error_page(request, course)
    mine = progress.learner_progress(session, learner_id=learner)
    badges = {lesson.slug: lesson_row(lesson, course, mine) for lesson in course.lessons}
    return render(request, "lessons/index.html", course=course, lessons=course.lessons, badges=badges)


@router.get("/lessons/{slug}", name="lesson", include_in_schema=False)
async def show_lesson(slug: str, request: Request):
    """Show one lesson with its exercises, or the friendly 404 page.

    Async so that a new visitor's page (from page_cache) costs no thread hop; computing the page for a known
    visitor queries the database, so it runs in a worker thread. The course is read from app.state directly:
    each dependency costs FastAPI a resolution step on every request.
    """
    course: Course = request.app.state.course
    if course.errors:
        return await anyio.to_thread.run_sync(_content_error_page, request, course)
    lesson = course.get(slug)
    if lesson is None:
        return not_found_page(request, f"There is no lesson called “{slug}”.")
    if getattr(request.state, "new_visitor", False) and not request.query_params:
        cache: page_cache.PageCache = request.app.state.page_cache
        render_shared = lambda: anyio.to_thread.run_sync(_first_visit_html, request, course, lesson)  # noqa: E731
        page = await cache.page((id(course), lesson.slug), render_shared)
        return page.response(request.state.csrf_token, getattr(request.state, "csp_nonce", ""))
    return await anyio.to_thread.run_sync(_lesson_response, request, course, lesson)


def lesson_context(session: Session, request: Request, course: Course, lesson: Lesson) -> dict:
    """Compute everything the lesson page shows this visitor: exercise panels, their progress, the comments."""
    learner, viewer = request.state.learner_id, getattr(request.state, "user", None)
    previous, following = course.neighbours(lesson)
    slugs = [s for s in dict.fromkeys(lesson.placed_exercises() + lesson.meta.exercises) if s in course.exercises]
    mine = progress.learner_progress(session, learner_id=learner)
    thread = thread_view(session, lesson_slug=lesson.slug, viewer=viewer, page=_comments_page(request),
                         max_chars=request.app.state.settings.comment_max_chars,
                         error=request.query_params.get("comment_error"))  # fmt: skip
    return dict(course=course, lesson=lesson, exercises=course.exercises, previous=previous, next=following,
                number=course.position(lesson) + 1, lesson_progress=lesson_row(lesson, course, mine), thread=thread,
                panels={s: panel_state(session, learner_id=learner, exercise=course.exercises[s],
                                        unlock=request.app.state.settings.solution_unlock) for s in slugs},
                picked_machine=progress.remembered_machine(session, learner_id=learner))


def _comments_page(request: Request) -> int:
    try:
        return max(1, int(request.query_params.get("comments_page", "1")))
    except ValueError:
        return 1


def _lesson_response(request: Request, course: Course, lesson: Lesson):
    with request.app.state.db.session() as session:
        context = lesson_context(session, request, course, lesson)
    return render(request, "lessons/lesson.html", **context)


def _first_visit_html(request: Request, course: Course, lesson: Lesson) -> str:
    """Render the lesson page every new visitor shares, with the CSRF placeholder where their token goes.

    It renders from a copy of the request with state of its own: a refresh runs after the request that started it
    was answered (page_cache.PageCache.page), and that answer carries the request's own token and nonce."""
    state = {**request.scope.get("state", {}), "csrf_token": page_cache.PLACEHOLDER,
             "csp_nonce": page_cache.NONCE_PLACEHOLDER}
    shared = Request({**request.scope, "state": state})
    with request.app.state.db.session() as session:
        context = lesson_context(session, shared, course, lesson)
    return render_text(shared, "lessons/lesson.html", **context)


@router.get("/healthz", name="healthz")
def healthz(course: CourseDep) -> dict:
    """Answer the container healthcheck: the site is up and its course is loaded."""
    return {"status": "ok" if not course.errors else "content-errors", "lessons": len(course.lessons)}


@router.get("/readyz", name="readyz", responses={503: {"description": "Still warming up, or warming failed"}})
def readyz(request: Request) -> JSONResponse:
    """Answer whether a learner's first job would find the sandbox warm: 503 with what it waits for, then 200."""
    state = getattr(request.app.state, "readiness", None)
    if state is None:  # the lifespan has not run (an app without its start-up): nothing is warm
        return JSONResponse({"status": "warming", "waiting_for": ["the server's start-up"]}, 503,
                            headers={"Retry-After": "1"})
    return JSONResponse(state.describe(), 200 if state.ready else 503,
                        headers={} if state.ready else {"Retry-After": "1"})


async def not_found(request: Request, exc: StarletteHTTPException):
    """Answer unknown pages with the friendly 404 page for browsers, and JSON for everything else.

    An address that is a page but for its trailing slash is redirected there first (relative:
    app/web/middleware/slashes.py).
    """
    if (redirect := slash_redirect(request)) is not None:
        return redirect
    if "text/html" in request.headers.get("accept", "") and request.method in ("GET", "HEAD"):
        return not_found_page(request, "There is no page at this address.")
    return await http_exception_handler(request, exc)


async def _watch(app: FastAPI, settings: Settings) -> None:
    from watchfiles import awatch

    folders = [p for p in (settings.lessons_dir, settings.exercises_dir, settings.templates_dir) if p.exists()]
    async for changes in awatch(*folders):
        log.info("content changed (%d files); reloading the course", len(changes))
        app.state.course = await asyncio.to_thread(
            load_course, settings.lessons_dir, settings.exercises_dir, settings.static_dir)


@asynccontextmanager
async def content_watcher(app: FastAPI, settings: Settings, enabled: bool):
    """While the app runs, reload the course whenever lessons/, exercises/ or templates/ change (`--reload`)."""
    task = asyncio.create_task(_watch(app, settings)) if enabled else None
    try:
        yield
    finally:
        if task is not None:
            task.cancel()
            with suppress(asyncio.CancelledError):
                await task
