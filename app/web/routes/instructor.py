"""The instructor dashboard: how learners do on each exercise and lesson, an exercise's recent submissions, the
progress export, and regrading. Thin routes over `app.learning.dashboard` and `app.submissions.regrade`.

Every route here is for instructors only: the router's dependency answers a visitor 401 (a browser asking for a
page goes to the log-in form) and a learner 403, before any path parameter is looked at, so a route added to
this router later is guarded too (tests/web/test_instructor_access.py walks them all).
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from datetime import UTC, date, datetime, time
from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Depends, FastAPI, Form, Path, Query, Request, Response
from fastapi.responses import RedirectResponse
from pydantic import BaseModel, Field

from app.content.course import Course
from app.core.db import Database
from app.learning import dashboard
from app.learning.csv_export import csv_text
from app.submissions import history, regrade
from app.web.deps import CourseDep, InstructorUser, SessionDep, instructor
from app.web.routes.exercises import ExerciseDep
from app.web.templating import render


@asynccontextmanager
async def lifespan(app: FastAPI):
    """Hold the regrades this process runs (those an earlier server left running: app.main's settle_unfinished)."""
    settings = app.state.settings
    app.state.regrades = regrade.BackgroundRegrades(app.state.db, getattr(app.state, "runner", None),
                                                    settings.runner_concurrency, settings.runner_lease_s)
    try:
        yield
    finally:
        await app.state.regrades.close()


router = APIRouter(dependencies=[Depends(instructor)], tags=["instructor"], lifespan=lifespan)


def summarised(request: Request) -> None:
    """Summarise runs finished since the last look (app.submissions.history), so the figures count every submission."""
    db: Database = request.app.state.db
    with db.session() as session:
        if not history.needs_catch_up(session):
            return
    with db.session(write=True) as session, session.begin():
        history.summarise_new_runs(session)


Summarised = Depends(summarised)


# --- the dashboard --------------------------------------------------------------------------------------------


@router.get("/instructor", include_in_schema=False, dependencies=[Summarised])
def dashboard_page(request: Request, session: SessionDep, course: CourseDep):
    """Show every exercise's figures, every lesson's readers and comments, and the latest regrades."""
    exercises = dashboard.exercises_in_order(course)
    return render(request, "instructor/dashboard.html",
                  exercises=dashboard.exercise_figures(session, exercises=exercises),
                  lessons=dashboard.lesson_figures(session, course=course),
                  regrades=regrade.recent(session, limit=5), titles=_titles(course))  # fmt: skip


def _titles(course: Course) -> dict[str, str]:
    return {slug: exercise.title for slug, exercise in course.exercises.items()}


@router.get("/instructor/exercises/{slug}", include_in_schema=False, dependencies=[Summarised])
def exercise_page(request: Request, exercise: ExerciseDep, session: SessionDep,
                  check: Annotated[str | None, Query(max_length=100)] = None,
                  page: Annotated[int, Query(ge=1, le=100_000)] = 1):  # fmt: skip
    """Show one exercise: its figures, regrading, and its recent submissions (newest first, filtered by check)."""
    check = check if check in exercise.spec.check_ids else None
    submissions, older = dashboard.recent_submissions(session, exercise_slug=exercise.slug, check=check, page=page)
    return render(request, "instructor/exercise.html", exercise=exercise,
                  figures=dashboard.exercise_figures(session, exercises=[exercise])[0],
                  submissions=submissions, older=older, check=check, page=page,
                  regrades=regrade.recent(session, exercise_slug=exercise.slug),
                  kept=dashboard.unsupported_passes(session, exercise_slug=exercise.slug),
                  to_regrade=regrade.count_to_regrade(session, exercise_slug=exercise.slug),
                  error=request.query_params.get("regrade_error"))  # fmt: skip


class ExerciseFiguresOut(BaseModel):
    slug: str
    learners: int = Field(description="Learners with at least one attempt (a run that passed, failed or timed out).")
    passed_learners: int = Field(description="Learners with an attempt whose current verdict passed.")
    pass_rate: float | None = Field(description="passed_learners / learners; null when nobody tried.")
    attempts: int
    median_attempts_to_pass: float | None = Field(description="Over learners who passed: attempts up to the first "
                                                              "pass, that one included.")
    failing_checks: dict[str, int] = Field(description="Check id -> failed attempts whose first failing check it is "
                                                       "(attempts that ran nothing new left out).")
    uncounted_failures: dict[str, int] = Field(description="Failed attempts that ran nothing new, by why: starter "
                                                           "(unchanged), repeat (code already tried), syntax.")
    passed_after_seeing_solution: int = Field(description="Learners who passed after seeing the reference solution.")
    late_passes: int | None = Field(description="Learners whose pass came after their deadline; null without one.")


@router.get("/api/instructor/exercises", response_model=list[ExerciseFiguresOut], dependencies=[Summarised],
            responses={401: {"description": "Not signed in"}, 403: {"description": "Not an instructor"}})
def api_exercises(session: SessionDep, course: CourseDep) -> list[dict]:
    """Return how learners do on each exercise, in course order."""
    figures = dashboard.exercise_figures(session, exercises=dashboard.exercises_in_order(course))
    return [f.as_json() for f in figures]


@router.get("/api/instructor/progress.csv", dependencies=[Summarised], response_class=Response,
            responses={200: {"content": {"text/csv": {}}, "description": "One row per learner and exercise"},
                       401: {"description": "Not signed in"}, 403: {"description": "Not an instructor"}})
def api_progress_csv(session: SessionDep, course: CourseDep) -> Response:
    """Export every learner's progress on every exercise as CSV (one row per learner and exercise)."""
    body = csv_text(dashboard.PROGRESS_COLUMNS, dashboard.progress_rows(session, course=course))
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M")
    return Response(body, media_type="text/csv; charset=utf-8",
                    headers={"Content-Disposition": f'attachment; filename="progress-{stamp}.csv"'})


# --- regrading ------------------------------------------------------------------------------------------------


class RegradeIn(BaseModel):
    since: datetime | None = Field(default=None, description="Only submissions created at or after this time "
                                                             "(UTC when no zone is given).")


class RegradeOut(BaseModel):
    id: int
    exercise: str
    status: str = Field(description="running, finished, failed or interrupted")
    since: str | None
    total: int
    done: int
    changed: int
    now_passing: int
    now_failing: int
    errors: int
    passes_added: int = Field(description="Learners given a pass by this regrade.")
    passes_kept: int = Field(description="Learners keeping a pass that no current verdict supports.")
    message: str | None
    started_at: str | None
    finished_at: str | None


REGRADE_ERRORS = {400: {"description": "The exercise's checks are broken"}, 401: {"description": "Not signed in"},
                  403: {"description": "Not an instructor"}, 404: {"description": "No such exercise"},
                  409: {"description": "A regrade of this exercise is running"},
                  503: {"description": "No runner"}}  # fmt: skip


@router.post("/api/instructor/exercises/{slug}/regrades", status_code=202, response_model=RegradeOut,
             responses=REGRADE_ERRORS)  # fmt: skip
def api_regrade(exercise: ExerciseDep, request: Request, session: SessionDep, user: InstructorUser,
                data: RegradeIn | None = None) -> dict:  # fmt: skip
    """Regrade the exercise's stored submissions under its current checks; follow it at the regrade's URL."""
    since = data.since if data else None
    return regrade.as_json(_launch(request, session, exercise.slug, user.id,
                                   since.replace(tzinfo=since.tzinfo or UTC) if since else None))


@router.post("/instructor/exercises/{slug}/regrade", include_in_schema=False)
def form_regrade(exercise: ExerciseDep, request: Request, session: SessionDep, user: InstructorUser,
                 since: Annotated[str, Form()] = ""):  # fmt: skip
    back = f"/instructor/exercises/{quote(exercise.slug)}"
    try:
        _launch(request, session, exercise.slug, user.id, _form_date(since))
    except regrade.RegradeError as exc:
        return RedirectResponse(f"{back}?regrade_error={quote(exc.message)}#regrade", status_code=303)
    return RedirectResponse(f"{back}#regrade", status_code=303)


def _form_date(text: str) -> datetime | None:
    """Read the form's date (YYYY-MM-DD, from <input type=date>) as the start of that day in UTC."""
    if not text.strip():
        return None
    try:
        return datetime.combine(date.fromisoformat(text.strip()), time(), UTC)
    except ValueError:
        raise regrade.RegradeError(400, f"{text!r} is not a date; pick one or write it as YYYY-MM-DD.") from None


def _launch(request: Request, session, slug: str, user_id: int, since: datetime | None):
    background: regrade.BackgroundRegrades = request.app.state.regrades
    if background.runner is None:
        raise regrade.RegradeError(503, "The sandbox runner is not running; the operator should check "
                                        "`course doctor`.")
    exercise = regrade.current_exercise(request.app.state.settings.exercises_dir, slug)
    started = regrade.start(session, exercise=exercise, since=since, requested_by=user_id,
                            holder=background.holder, lease_s=background.lease_s)
    session.commit()
    background.launch(exercise, started.id)
    return started


@router.get("/api/instructor/regrades/{regrade_id}", response_model=RegradeOut,
            responses={401: {"description": "Not signed in"}, 403: {"description": "Not an instructor"},
                       404: {"description": "No such regrade"}})  # fmt: skip
def api_regrade_status(regrade_id: Annotated[int, Path(ge=1, le=2**31 - 1)], session: SessionDep) -> dict:
    """Return how far a regrade got and what it changed (the page's progress bar reads this)."""
    return regrade.as_json(regrade.get(session, regrade_id))
