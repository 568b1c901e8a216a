"""The reading side of the site: the course index and the lesson pages, served from the in-memory Course."""

from __future__ import annotations

import asyncio
import logging
from contextlib import asynccontextmanager, suppress
from typing import Annotated

import anyio.to_thread
from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.config import Settings
from app.content.course import Course, load_course
from app.content.schema import ContentInvalid
from app.web import page_cache
from app.web.templating import render, templates

log = logging.getLogger(__name__)
router = APIRouter()


async def get_course(request: Request) -> Course:  # async: a sync dependency costs a thread hop per request
    """Return the course the app loaded at start-up (or last reloaded)."""
    return request.app.state.course


CourseDep = Annotated[Course, Depends(get_course)]


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


@router.get("/", name="index", include_in_schema=False)  # HTML pages are not the JSON API
def index(request: Request, course: CourseDep):
    """List the lessons in course order."""
    if course.errors:
        return _content_error_page(request, course)
    return render(request, "lessons/index.html", course=course, lessons=course.lessons)


@router.get("/lessons/{slug}", name="lesson", include_in_schema=False)
async def show_lesson(slug: str, request: Request):
    """Show one lesson with its exercises, or the friendly 404 page.

    Async so that a new visitor's page (from page_cache) costs no thread hop; rendering for a known visitor
    queries the database, so it runs in a worker thread. The course is read from app.state directly: each
    dependency costs FastAPI a resolution step on every request.
    """
    course: Course = request.app.state.course
    if course.errors:
        return await anyio.to_thread.run_sync(_content_error_page, request, course)
    lesson = course.get(slug)
    if lesson is None:
        return render(request, "errors/404.html", status_code=404, what=f"There is no lesson called “{slug}”.")
    previous, following = course.neighbours(lesson)
    context = dict(course=course, lesson=lesson, exercises=course.exercises, previous=previous, next=following,
                   number=course.position(lesson) + 1)
    if getattr(request.state, "new_visitor", False) and not request.query_params:
        cache: page_cache.PageCache = request.app.state.page_cache
        render_shared = lambda: anyio.to_thread.run_sync(_first_visit_html, request, context)  # noqa: E731
        page = await cache.page((id(course), lesson.slug), render_shared)
        return page.response(request.state.csrf_token)
    return await anyio.to_thread.run_sync(lambda: render(request, "lessons/lesson.html", **context))


def _first_visit_html(request: Request, context: dict) -> str:
    """Render the lesson page every new visitor shares, with the CSRF placeholder where their token goes."""
    token, request.state.csrf_token = request.state.csrf_token, page_cache.PLACEHOLDER
    try:
        return templates.get_template("lessons/lesson.html").render(request=request, **context)
    finally:
        request.state.csrf_token = token


@router.get("/healthz", name="healthz")
def healthz(course: CourseDep) -> dict:
    """Answer the container healthcheck: the site is up and its course is loaded."""
    return {"status": "ok" if not course.errors else "content-errors", "lessons": len(course.lessons)}


async def not_found(request: Request, exc: StarletteHTTPException):
    """Answer unknown pages with the friendly 404 page for browsers, and JSON for everything else."""
    if "text/html" in request.headers.get("accept", "") and request.method in ("GET", "HEAD"):
        return render(request, "errors/404.html", status_code=404, what="There is no page at this address.")
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
