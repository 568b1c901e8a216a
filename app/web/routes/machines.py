"""The machine picker: "Run on" a laptop, a Mac, Colab's T4, one or two H100s. Thin routes over
app/content/machine_choices.py (what may be picked) and app/learning/progress.py (the learner's remembered pick).

Two doors to the same change: a JSON API for the page's script and a plain form for a page without JavaScript.
Both are CSRF-protected by the app-wide dependency. An unknown machine, or one the named exercise does not offer,
is a 422 naming the machines there are.
"""

from __future__ import annotations

import html
import json
from typing import Any

import anyio
from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse

from app.content import machine_choices
from app.learning import progress
from app.web.deps import LearnerId

router = APIRouter(tags=["machines"])

PICK_BODY = {"requestBody": {"required": True, "content": {"application/json": {"schema": {
    "type": "object", "required": ["machine"],
    "properties": {"machine": {"type": "string", "enum": [c.id for c in machine_choices.CHOICES]},
                   "exercise": {"anyOf": [{"type": "string"}, {"type": "null"}],
                                "description": "The exercise the pick is for (null or absent: a lesson's code)"}}}}}}}


def offered(request: Request, exercise_slug: str | None) -> tuple[tuple[machine_choices.MachineChoice, ...], str]:
    """The choices offered where the learner picks (an exercise's, or every one for a lesson block) and the words
    for that place; 404 for an exercise the course does not have."""
    if not exercise_slug:
        return machine_choices.CHOICES, "a lesson's code"
    exercise = request.app.state.course.exercises.get(exercise_slug)
    if exercise is None:
        raise HTTPException(404, f"There is no exercise {exercise_slug!r} to pick a machine for.")
    return machine_choices.for_exercise(exercise.spec), f"the exercise {exercise_slug!r}"


def choose(request: Request, wanted: Any, exercise_slug: Any) -> machine_choices.MachineChoice:
    """The choice asked for, checked against the place it is asked from; 422 with the choices there otherwise."""
    if exercise_slug is not None and not isinstance(exercise_slug, str):
        raise HTTPException(422, 'Send the exercise as its slug, a string: {"machine": "t4", "exercise": "..."}.')
    choices, where = offered(request, exercise_slug)
    if not isinstance(wanted, str) or not wanted:
        raise HTTPException(422, f"Say which machine to run on: one of {machine_choices.describe(choices)}.")
    try:
        return machine_choices.pick(choices, wanted, strict=True, where=where)
    except machine_choices.UnknownMachine as exc:
        raise HTTPException(422, str(exc)) from None


def _remember(request: Request, learner: str, machine: str) -> None:
    with request.app.state.db.session(write=True) as session, session.begin():
        progress.remember_machine(session, learner_id=learner, machine=machine)


async def remembered(request: Request, learner: str) -> str | None:
    """The learner's remembered pick (None: never picked)."""
    def read() -> str | None:
        with request.app.state.db.session() as session:
            return progress.remembered_machine(session, learner_id=learner)
    return await anyio.to_thread.run_sync(read)


@router.post("/api/machine", openapi_extra=PICK_BODY, responses={
    400: {"description": "Not JSON"}, 404: {"description": "No such exercise"},
    422: {"description": "An unknown machine, or one the exercise does not offer"}})
async def pick_machine(learner: LearnerId, request: Request) -> dict:
    """Remember the learner's "Run on" choice for their next runs; `exercise` (optional) checks it is offered there.

    Answers the choice: {"machine": {"id", "label", "machine", "gpus"}}.
    """
    try:
        data = json.loads(await request.body())
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        raise HTTPException(400, 'The request body is not JSON; send {"machine": "h100"}.') from None
    if not isinstance(data, dict):
        raise HTTPException(422, 'Send a JSON object: {"machine": "h100"}.')
    choice = choose(request, data.get("machine"), data.get("exercise"))
    await anyio.to_thread.run_sync(_remember, request, learner, choice.id)
    return {"machine": choice.as_dict()}


@router.post("/machine", include_in_schema=False)
async def pick_machine_form(learner: LearnerId, request: Request) -> Any:
    """The picker without JavaScript: remember the choice and go back to where it was made (`next`, a path here)."""
    form = await request.form()
    back = form.get("next")
    back = back if isinstance(back, str) and back.startswith("/") and not back.startswith("//") else "/"
    try:
        choice = choose(request, form.get("machine"), form.get("exercise") or None)
    except HTTPException as exc:
        body = (f"<!doctype html><title>Machine not picked</title><p>{html.escape(str(exc.detail))}</p>"
                f'<p><a href="{html.escape(back)}">Go back</a></p>')
        return HTMLResponse(body, status_code=exc.status_code)
    await anyio.to_thread.run_sync(_remember, request, learner, choice.id)
    return RedirectResponse(back, status_code=303)
