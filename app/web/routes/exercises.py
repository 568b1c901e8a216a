"""Live exercises over HTTP: submit code, stream its run (SSE), read verdicts and the attempts history.

Thin routes over `app.submissions.live`. Who may read a submission is decided in dependencies, before a streaming
response starts: a check inside the event generator would run after the 200 is already sent.
A learner sees only their own submissions; instructors see everyone's. Someone else's submission answers 404,
the same as one that does not exist, so ids cannot be probed.
"""

from __future__ import annotations

import html
import json
import logging
from collections.abc import AsyncIterable
from contextlib import asynccontextmanager
from typing import Annotated, Any

import anyio.to_thread
from fastapi import APIRouter, Depends, FastAPI, HTTPException, Path, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse
from fastapi.sse import EventSourceResponse, ServerSentEvent

from app.content import machine_choices
from app.content.exercises import Exercise
from app.learning import progress, sections
from app.models import Submission
from app.runner.base import Busy, Unavailable
from app.submissions import views
from app.submissions.hub import Hub
from app.submissions.live import JsonText, Refused, check_code, encoded
from app.submissions.views import exercise_state, learner_key, verdict_json
from app.web.deps import LearnerId, OptionalUser, SessionDep, per_person_limits, waits_later
from app.web.routes import machines
from app.web.stream_slots import StreamSlots

log = logging.getLogger(__name__)

# bytes of JSON body per byte of source: the worst JSON escape (\u0000) turns 1 byte into 6; plus the envelope
BODY_PER_SOURCE_BYTE = 6
BODY_ENVELOPE_BYTES = 4096
# milliseconds the browser waits before reconnecting a dropped event stream
SSE_RETRY_MS = 1000


def sse_event(event_id: str | None, kind: str, data: Any) -> ServerSentEvent:
    """One event of a run's stream, its data already JSON text when it is plain JSON (a verdict always is).

    FastAPI encodes an event's `data` through `jsonable_encoder`, which walks every item: 16 ms for
    training-loop's verdict (its placement map and timeline) against 2.3 ms for `json.dumps` alone, the same bytes
    (in-process, load average 8), once per verdict in the web server's event loop. Data that is not plain JSON (a
    float that is not finite, a date) still takes FastAPI's way. A live run's verdict comes as JSON text already
    (app/submissions/live.py's `encoded`, the same bytes), encoded once for every page that follows the run."""
    raw = encoded(data)
    if not isinstance(raw, JsonText):
        return ServerSentEvent(event=kind, data=data, id=event_id, retry=SSE_RETRY_MS)
    return ServerSentEvent(event=kind, raw_data=raw, id=event_id, retry=SSE_RETRY_MS)


@asynccontextmanager
async def lifespan(app: FastAPI):
    """Bound the event streams of this process (the hub itself is app/main.py's, with the runner)."""
    settings = getattr(app.state, "settings", None)
    if settings is not None:
        app.state.stream_slots = StreamSlots(per_submission=settings.streams_per_submission,
                                             per_learner=settings.streams_per_learner)
    yield


router = APIRouter(tags=["exercises"], lifespan=lifespan)


# --- dependencies ---------------------------------------------------------------------------------------


async def get_exercise(slug: str, request: Request) -> Exercise:  # async: a lookup, no thread hop
    """Return the exercise named in the path; 404 if the course has none by that slug."""
    exercise = request.app.state.course.exercises.get(slug)
    if exercise is None:
        raise HTTPException(404, f"There is no exercise {slug!r}; the course has: "
                                 f"{', '.join(sorted(request.app.state.course.exercises)) or 'none'}.")
    return exercise


def owned_submission(submission_id: str, request: Request, learner: LearnerId, user: OptionalUser) -> Submission:
    """Return the submission if this visitor may read it (their own, any for an instructor, their sections'
    learners' for a teaching assistant); else 404."""
    with request.app.state.db.session() as session:
        submission = progress.get_submission(session, submission_id)
        # a teaching assistant reads the submissions of their sections' learners
        staff = user is not None and user.is_staff and submission is not None and \
            sections.may_see(session, user, submission.learner_id)
    if submission is None or (submission.learner_id != learner and not staff):
        raise HTTPException(404, f"No submission {submission_id} of yours: it does not exist or belongs to "
                                 "another learner.")
    return submission


async def followed_submission(submission_id: str, request: Request, learner: LearnerId, user: OptionalUser
                              ) -> Submission:
    """owned_submission for an event stream: a run this process is grading for the learner who asks is theirs
    without a database read (the hub holds its row); anything else is owned_submission's, in a worker thread.
    The stream reads only the row's id: the row held may say "running" of a run whose verdict is being stored."""
    hub: Hub | None = getattr(request.app.state, "live", None)
    row = hub.running_row(submission_id) if hub is not None else None
    if row is not None and row.learner_id == learner:
        return row
    return await anyio.to_thread.run_sync(owned_submission, submission_id, request, learner, user)


ExerciseDep = Annotated[Exercise, Depends(get_exercise)]
OwnedSubmission = Annotated[Submission, Depends(owned_submission)]
FollowedSubmission = Annotated[Submission, Depends(followed_submission)]


async def stream_slot(submission: FollowedSubmission, learner: LearnerId, request: Request):
    """Hold one of the learner's event-stream slots while the stream is open; 429 past the caps."""
    slots: StreamSlots | None = getattr(request.app.state, "stream_slots", None)
    if slots is None:
        yield
        return
    with slots.hold(learner, submission.id):
        yield

NO_EXERCISE = {404: {"description": "No such exercise"}}
NOT_YOURS = {404: {"description": "No such submission, or another learner's"}}
SubmissionRateLimits = per_person_limits("submission", "submissions")


async def read_body(request: Request, *, empty: dict | None = None) -> dict:
    """Read a JSON object that carries code: 413 if too large, 400 if not UTF-8 or not JSON, 422 if not an object.
    An empty body is `empty` when given (a lesson block's Run may send none), else not JSON.

    The body is read up to a cap derived from the source limit, so a huge body is refused without being held;
    the code it carries is then checked against the limit itself (check_code, the one statement of that rule).
    """
    source_bytes = request.app.state.settings.sandbox_source_bytes
    cap = source_bytes * BODY_PER_SOURCE_BYTE + BODY_ENVELOPE_BYTES
    too_large = Refused(413, f"The code is over the limit of {source_bytes / 1024:.0f} KiB; shorten it and run again.")
    if int(request.headers.get("content-length") or 0) > cap:
        raise too_large
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > cap:
            raise too_large
    if not body and empty is not None:
        return empty
    try:
        data = json.loads(body.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise Refused(400, f"The code is not valid UTF-8 text (byte {exc.start} of the request); save it as "
                           "UTF-8 and run again.") from None
    except json.JSONDecodeError as exc:
        raise Refused(400, f"The request body is not JSON ({exc.msg}); send {{\"code\": \"...\"}}.") from None
    except RecursionError:  # the parser recurses per level: "[" * 300000 is valid-looking and bottomless
        raise Refused(400, 'The request body nests JSON too deep to read; send one flat object: {"code": "..."}.') \
            from None
    if not isinstance(data, dict):
        raise HTTPException(422, 'Send a JSON object with the program as a string: {"code": "..."}.')
    return data


async def read_code(request: Request) -> tuple[str, str | None]:
    """Read the JSON body {"code": str, "machine": str (optional)} (read_body's refusals), 422 without a code.
    Returns the code and the machine asked for (None: the learner's remembered pick)."""
    data = await read_body(request)
    if not isinstance(data.get("code"), str):
        raise HTTPException(422, 'Send a JSON object with the program as a string: {"code": "..."}.')
    check_code(data["code"], source_bytes=request.app.state.settings.sandbox_source_bytes)
    return data["code"], data.get("machine")


async def run_on(request: Request, exercise: Exercise, learner: str, wanted: Any = None
                 ) -> machine_choices.MachineChoice:
    """The machine this run goes to: the one asked for in the request (422 when the exercise does not offer it),
    else the learner's remembered pick where the exercise offers it, else the exercise's default."""
    if wanted is not None:
        return machines.choose(request, wanted, exercise.slug)
    picked = await machines.remembered(request, learner)
    return machine_choices.pick(machine_choices.for_exercise(exercise.spec), picked, strict=False)


# --- routes ---------------------------------------------------------------------------------------------

# read_code's own 422 is one sentence, not FastAPI's list of validation errors
DETAIL_TEXT = {"application/json": {"schema": {"type": "object", "required": ["detail"],
                                               "properties": {"detail": {"type": "string"}}}}}
SUBMIT_BODY = {"requestBody": {"required": True, "content": {"application/json": {"schema": {
    "type": "object", "required": ["code"], "properties": {
        "code": {"type": "string"},
        "machine": {"type": "string", "enum": [c.id for c in machine_choices.CHOICES],
                    "description": "Run on this machine (default: the learner's pick, else one H100)"}}}}}}}


@router.post("/api/exercises/{slug}/submissions", status_code=202, dependencies=SubmissionRateLimits,
             openapi_extra=SUBMIT_BODY, responses={
                 400: {"description": "Not UTF-8 text, or not JSON"}, 404: {"description": "No such exercise"},
                 413: {"description": "Code over the source limit"},
                 422: {"description": "Not a JSON object with a string `code`, or a machine the exercise does not "
                                      "offer", "content": DETAIL_TEXT},
                 429: {"description": "Too many submissions, or the sandbox queue is full (see Retry-After)"},
                 503: {"description": "The job queue (worker tier) is unreachable (see Retry-After)"}})
@waits_later
async def submit(exercise: ExerciseDep, learner: LearnerId, request: Request) -> Any:
    """Grade the code in the background; return its id at once. Follow it at /api/submissions/{id}/events."""
    hub: Hub = request.app.state.live
    if hub.runner is None:
        raise HTTPException(503, "The sandbox runner is not running; the operator should check `course doctor`.")
    code, wanted = await read_code(request)
    choice = await run_on(request, exercise, learner, wanted)
    submission_id = await hub.submit(exercise=exercise, learner_id=learner, code=code, machine=choice.id)
    return {"id": submission_id, "url": f"/api/submissions/{submission_id}",
            "events": f"/api/submissions/{submission_id}/events", "machine": choice.as_dict()}


@router.get("/api/exercises/{slug}/submissions", responses=NO_EXERCISE)
def exercise_submissions(exercise: ExerciseDep, learner: LearnerId, session: SessionDep, user: OptionalUser,
                         request: Request) -> dict:  # fmt: skip
    """Return this learner's attempts (newest first), their last code, and the solution once it is earned.

    `learner_key` names this learner's drafts and hint progress in the browser's storage (not the learner id
    itself); `signed_in` says whether an account is signed in.
    """
    unlock = request.app.state.settings.solution_unlock
    return {**exercise_state(session, learner_id=learner, exercise=exercise, unlock=unlock),
            "learner_key": learner_key(learner), "signed_in": user is not None}


@router.post("/api/exercises/{slug}/solution", responses={
    403: {"description": "The solution is not open to this learner (the sentence says what opens it)"},
    **NO_EXERCISE})
def reveal_solution(exercise: ExerciseDep, learner: LearnerId, session: SessionDep, request: Request) -> dict:
    """Show the reference solution once the exercise's unlock rule allows it; the look is recorded with its time."""
    shown = views.reveal_solution(session, learner_id=learner, exercise=exercise,
                                  unlock=request.app.state.settings.solution_unlock)
    session.commit()
    return shown


@router.post("/api/exercises/{slug}/hints/{hint}", responses={404: {"description": "No such exercise or hint"}})
def reveal_hint(exercise: ExerciseDep, hint: Annotated[int, Path(ge=1, le=1000)], learner: LearnerId,
                session: SessionDep) -> dict:  # fmt: skip
    """Record that the learner showed hint number `hint` (1 = the first), with its time."""
    shown = views.reveal_hint(session, learner_id=learner, exercise=exercise, hint=hint)
    session.commit()
    return shown


@router.post("/exercises/{slug}/solution", include_in_schema=False)
def reveal_solution_form(exercise: ExerciseDep, learner: LearnerId, session: SessionDep, request: Request) -> Any:
    """Without JavaScript: record the look and go back to the panel, which now shows the solution."""
    views.reveal_solution(session, learner_id=learner, exercise=exercise,
                          unlock=request.app.state.settings.solution_unlock)
    session.commit()
    return RedirectResponse(f"{_lesson_url(request, exercise)}#exercise-{exercise.slug}", status_code=303)


@router.get("/api/submissions/{submission_id}", responses=NOT_YOURS)
async def get_submission(submission: OwnedSubmission) -> dict:
    """Return the submission's Verdict JSON (status "queued"/"running" until it is done), code and timings.

    async: owned_submission has read the row in a worker thread already; a plain `def` here was a second hop into
    the thread pool and back for a dict built from that row (a verdict's event is built in the event loop too)."""
    return verdict_json(submission)


@router.get("/api/submissions/{submission_id}/trace", responses={
    200: {"description": "The Chrome trace, as a download", "content": {"application/json": {}}},
    404: {"description": "No such submission, another learner's, or a run without a modeled timeline"}})
def get_submission_trace(submission: OwnedSubmission) -> JSONResponse:
    """Download the run's modeled timeline as a Chrome trace JSON (opens in ui.perfetto.dev, chrome://tracing)."""
    name = f"{submission.exercise_slug}-{submission.id[:8]}-trace.json"
    return JSONResponse(views.trace_json(submission),
                        headers={"Content-Disposition": f'attachment; filename="{name}"'})


@router.get("/api/submissions/{submission_id}/events", response_class=EventSourceResponse,
            dependencies=[Depends(stream_slot)],
            responses={**NOT_YOURS, 429: {"description": "Too many open event streams (see Retry-After)"}})
async def submission_events(submission: FollowedSubmission, request: Request) -> AsyncIterable[ServerSentEvent]:
    """Stream the run: `output` events ({"stream", "line"}) in order from the first, then one `verdict`.

    A late subscriber gets every event from the start; a reconnecting EventSource (Last-Event-ID) gets the rest.
    On the worker tier a `restart` event ({"attempt", "message"}) says the run started over on another worker.
    """
    hub: Hub = request.app.state.live
    async for event_id, kind, data in hub.events(submission.id, after=request.headers.get("last-event-id")):
        yield sse_event(event_id, kind, data)


# --- without JavaScript: a plain form post, and the panel's state rendered on the server -----------------


@router.post("/exercises/{slug}/run", dependencies=SubmissionRateLimits, include_in_schema=False)
@waits_later
async def run_form(exercise: ExerciseDep, learner: LearnerId, request: Request) -> Any:
    """Grade the form's code, wait for the verdict, and go back to the lesson, where the panel shows it."""
    hub: Hub = request.app.state.live
    code = (await request.form()).get("code")
    try:
        if not isinstance(code, str) or hub.runner is None:
            raise Refused(400, "Send the code in the form's `code` field." if hub.runner else
                          "The sandbox runner is not running.")
        code = code.replace("\r\n", "\n")  # browsers send textarea lines with CRLF
        check_code(code, source_bytes=request.app.state.settings.sandbox_source_bytes)
        choice = await run_on(request, exercise, learner)
        submission_id = await hub.submit(exercise=exercise, learner_id=learner, code=code, machine=choice.id)
    except Refused as exc:
        return _form_refusal(request, exercise, exc.status_code, exc.message)
    except Busy as exc:
        return _form_refusal(request, exercise, 429, f"The course is busy; go back and run again in "
                                                     f"{exc.retry_after} s.", {"Retry-After": str(exc.retry_after)})
    except Unavailable as exc:
        return _form_refusal(request, exercise, 503, f"The course cannot take code right now: {exc.why}. Go back "
                                                     f"and run again in {exc.retry_after} s.",
                             {"Retry-After": str(exc.retry_after)})
    async for _id, kind, _data in hub.events(submission_id):
        if kind == "verdict":
            break
    return RedirectResponse(f"{_lesson_url(request, exercise)}#exercise-{exercise.slug}", status_code=303)


def _lesson_url(request: Request, exercise: Exercise) -> str:
    lesson = request.app.state.course.get(exercise.spec.lesson)
    return lesson.url if lesson is not None else "/"


def _form_refusal(request: Request, exercise: Exercise, status: int, message: str, headers=None) -> HTMLResponse:
    back = html.escape(f"{_lesson_url(request, exercise)}#exercise-{exercise.slug}")
    body = (f"<!doctype html><title>Not run</title><p>{html.escape(message)}</p>"
            f'<p><a href="{back}">Back to the exercise</a></p>')
    return HTMLResponse(body, status_code=status, headers=headers)
