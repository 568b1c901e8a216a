"""Progress: the lesson-read beacon, GET /api/progress, the "My progress" page, and template helpers that the
lesson and index pages use through the partials in templates/progress/."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import RedirectResponse
from pydantic import BaseModel

from app import progress
from app.web.comments import known_lesson
from app.web.deps import LearnerId, SessionDep

router = APIRouter()


class ReadOut(BaseModel):
    lesson: str
    read: bool
    first_time: bool


class ExerciseProgressOut(BaseModel):
    attempts: int
    passed: bool
    passed_at: str | None
    first_attempt_at: str | None
    last_attempt_at: str | None


class ProgressOut(BaseModel):
    learner_id: str
    last_activity_at: str | None
    lessons: dict[str, dict[str, str | None]]
    exercises: dict[str, ExerciseProgressOut]


@router.post("/api/lessons/{slug}/read", response_model=ReadOut, tags=["progress"],
             responses={404: {"description": "No such lesson"}})  # fmt: skip
def api_mark_read(slug: str, request: Request, session: SessionDep, learner: LearnerId) -> ReadOut:
    """Mark a lesson read for this visitor (the page sends this when the reader reaches the end)."""
    if not known_lesson(request, slug):
        raise HTTPException(404, f"There is no lesson {slug[:100]!r}.")
    first = progress.mark_lesson_read(session, learner_id=learner, lesson_slug=slug)
    session.commit()
    return ReadOut(lesson=slug, read=True, first_time=first)


@router.post("/lessons/{slug}/read", include_in_schema=False)
def form_mark_read(slug: str, request: Request, session: SessionDep, learner: LearnerId):
    api_mark_read(slug, request, session, learner)
    return RedirectResponse(f"/lessons/{slug}#lesson-progress", status_code=303)


@router.get("/api/progress", response_model=ProgressOut, tags=["progress"])
def api_progress(session: SessionDep, learner: LearnerId) -> dict[str, Any]:
    """Return this visitor's lessons read and exercise attempts (anonymous visitors too)."""
    return progress.learner_progress(session, learner_id=learner).as_dict()


@router.get("/progress", include_in_schema=False)
def progress_page(request: Request, session: SessionDep, learner: LearnerId):
    from app.web.templating import render

    mine = progress.learner_progress(session, learner_id=learner)
    course = request.app.state.course
    rows = [lesson_row(lesson, course, mine) for lesson in course.lessons]
    return render(request, "progress/page.html", rows=rows, progress=mine,
                  submissions=progress.submission_count(session, learner_id=learner))  # fmt: skip


def lesson_row(lesson, course, mine: progress.Progress) -> dict[str, Any]:
    """Summarise one lesson for a learner: read when, and each exercise's attempts and pass."""
    exercises = []
    for slug in lesson.meta.exercises:
        row = mine.exercises.get(slug)
        exercise = course.exercises.get(slug)
        exercises.append({
            "slug": slug,
            "title": exercise.title if exercise else slug,
            "attempts": row.attempts if row else 0,
            "passed": bool(row and row.passed_at),
            "passed_at": row.passed_at if row else None,
            "last_attempt_at": row.last_attempt_at if row else None,
        })  # fmt: skip
    return {
        "lesson": lesson,
        "read_at": mine.lessons_read.get(lesson.slug),
        "exercises": exercises,
        "passed": sum(e["passed"] for e in exercises),
    }


# --- template helpers (registered as Jinja globals by app.web.deps.install) --------------------------------


def visitor_progress(request: Request) -> progress.Progress:
    """Return this visitor's progress, read once per request (the index asks for every lesson)."""
    cached = getattr(request.state, "progress", None)
    if cached is None:
        learner = getattr(request.state, "learner_id", None)
        if learner is None:
            return progress.Progress(learner_id="")
        with request.app.state.db.session() as session:
            cached = progress.learner_progress(session, learner_id=learner)
        request.state.progress = cached
    return cached


def lesson_progress(request: Request, lesson) -> dict[str, Any]:
    """Return one lesson's progress for this visitor: {"read_at", "exercises", "passed"} (see lesson_row)."""
    return lesson_row(lesson, request.app.state.course, visitor_progress(request))


TEMPLATE_GLOBALS = {"lesson_progress": lesson_progress, "visitor_progress": visitor_progress}
