"""The reading side of the site: the course index and the lesson pages, served from the in-memory Course."""

from __future__ import annotations

import asyncio
import logging
from contextlib import asynccontextmanager, suppress
from typing import Annotated

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.config import Settings
from app.content.course import Course, load_course
from app.content.schema import ContentInvalid
from app.web.templating import render

log = logging.getLogger(__name__)
router = APIRouter()


def get_course(request: Request) -> Course:
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
def show_lesson(slug: str, request: Request, course: CourseDep):
    """Show one lesson with its exercises, or the friendly 404 page."""
    if course.errors:
        return _content_error_page(request, course)
    lesson = course.get(slug)
    if lesson is None:
        return render(request, "errors/404.html", status_code=404, what=f"There is no lesson called “{slug}”.")
    previous, following = course.neighbours(lesson)
    return render(request, "lessons/lesson.html", course=course, lesson=lesson, exercises=course.exercises,
                  previous=previous, next=following, number=course.lessons.index(lesson) + 1)


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
