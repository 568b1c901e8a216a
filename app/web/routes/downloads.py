"""Take it home: each lesson and each exercise as a Jupyter notebook and as a plain Python script.

The files are made from the course's content on each request (app/content/takehome.py); links in them point
back at this site, so they are made with the request's own base URL.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from app.content import takehome

router = APIRouter(tags=["take it home"])
NOT_FOUND = {404: {"description": "No lesson or exercise with this slug"}}
KINDS = {"notebook.ipynb": "application/x-ipynb+json", "script.py": "text/x-python; charset=utf-8"}


def _download(body: str, filename: str) -> Response:
    disposition = {"Content-Disposition": f'attachment; filename="{filename}"'}
    return Response(body, media_type=_kind(filename), headers=disposition)


def _kind(filename: str) -> str:
    return KINDS["notebook.ipynb"] if filename.endswith(".ipynb") else KINDS["script.py"]


def _missing(what: str) -> Response:
    return JSONResponse({"detail": what}, status_code=404)


def _base(request: Request) -> str:
    return str(request.base_url).rstrip("/")


@router.get("/lessons/{slug}/notebook.ipynb", responses=NOT_FOUND, response_class=Response)
def lesson_notebook(slug: str, request: Request):
    """The lesson as a Jupyter notebook: text as Markdown cells, its runnable blocks as code cells."""
    lesson = request.app.state.course.get(slug)
    if lesson is None:
        return _missing(f"no lesson `{slug}`")
    return _download(takehome.lesson_notebook(lesson, _base(request)), f"{slug}.ipynb")


@router.get("/lessons/{slug}/script.py", responses=NOT_FOUND, response_class=Response)
def lesson_script(slug: str, request: Request):
    """The lesson's runnable blocks as one Python script, a `# %%` cell per block."""
    lesson = request.app.state.course.get(slug)
    if lesson is None:
        return _missing(f"no lesson `{slug}`")
    return _download(takehome.lesson_script(lesson, _base(request)), f"{slug}.py")


@router.get("/exercises/{slug}/notebook.ipynb", responses=NOT_FOUND, response_class=Response)
def exercise_notebook(slug: str, request: Request):
    """The exercise as a Jupyter notebook: prompt, the checks as a checklist, the starter to edit."""
    exercise = request.app.state.course.exercises.get(slug)
    if exercise is None:
        return _missing(f"no exercise `{slug}`")
    return _download(takehome.exercise_notebook(exercise, _base(request)), f"{slug}.ipynb")


@router.get("/exercises/{slug}/script.py", responses=NOT_FOUND, response_class=Response)
def exercise_script(slug: str, request: Request):
    """The exercise's starter as a script, its prompt and checklist as comments above it."""
    exercise = request.app.state.course.exercises.get(slug)
    if exercise is None:
        return _missing(f"no exercise `{slug}`")
    return _download(takehome.exercise_script(exercise, _base(request)), f"{slug}.py")
