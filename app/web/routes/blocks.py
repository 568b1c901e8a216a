"""Run a lesson's code block in the page: POST starts it on the learner's "Run on" machine, GET streams its output.

Thin routes over app/submissions/block_runs.py. A run stores nothing (no submission, no progress); it counts
against the same per-person limits as exercise runs (one budget of sandbox runs per person, whichever the page
runs), is CSRF-protected like every POST, and is open to anonymous visitors as exercise runs are. The learner may
send their edited code (`code`); without it the block runs as the lesson wrote it. Without JavaScript, the block's
"Run on" form posts to `POST /lessons/{slug}/blocks/{block}/run`, which waits for the run's end and answers a page
with its output (and a form to edit the code and run it again).
"""

from __future__ import annotations

import html
from collections.abc import AsyncIterable
from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import HTMLResponse
from fastapi.sse import EventSourceResponse, ServerSentEvent

from app.content import machine_choices
from app.runner.base import Busy, Rejected, Unavailable
from app.submissions.block_runs import BlockRuns
from app.submissions.live import Refused, check_code
from app.web.deps import KnownLesson, LearnerId, per_person_limits
from app.web.routes import machines
from app.web.routes.exercises import DETAIL_TEXT, read_body, sse_event
from app.web.stream_slots import StreamSlots
from app.web.templating import render

router = APIRouter(tags=["lessons"])

# the same counters as exercise runs (scope "submission"): one budget of sandbox runs per person
RunLimits = per_person_limits("submission", "runs")

RUN_BODY = {"requestBody": {"required": False, "content": {"application/json": {"schema": {
    "type": "object", "properties": {
        "code": {"type": "string", "description": "The block as the learner edited it (absent: as the lesson has it)"},
        "machine": {"type": "string", "enum": [c.id for c in machine_choices.CHOICES],
                    "description": "Run on this machine (default: the learner's pick, else one H100)"}}}}}}}


def block_runs(request: Request) -> BlockRuns:
    """The app's block runs; 503 before the runner is up (an app without its lifespan)."""
    runs: BlockRuns | None = getattr(request.app.state, "block_runs", None)
    if runs is None or runs.runner is None:
        raise HTTPException(503, "The sandbox runner is not running; the operator should check `course doctor`.")
    return runs


@router.post("/api/lessons/{slug}/blocks/{block}/runs", status_code=202, dependencies=RunLimits,
             openapi_extra=RUN_BODY, responses={
                 400: {"description": "Not UTF-8 text, not JSON, or code with a NUL character"},
                 404: {"description": "No such lesson, or no runnable block by that number in it"},
                 413: {"description": "Code over the source limit"},
                 422: {"description": "Not a JSON object, `code` not a string, or an unknown machine",
                       "content": DETAIL_TEXT},
                 429: {"description": "Too many runs, or the sandbox queue is full (see Retry-After)"},
                 503: {"description": "The sandbox runner is not running, or the job queue is unreachable"}})
async def run_block(slug: KnownLesson, block: str, learner: LearnerId, request: Request) -> Any:
    """Run runnable block `block` (1 is the lesson's first) on the learner's machine; store nothing.

    Answers {"id", "events", "machine": {"id", "label", "machine", "gpus"}, "block", "edited"}; follow the run at
    `events`: `output` events as an exercise run's, then one `done` ({"status", "exit_code", "duration_ms",
    "limit_hit", "message", "machine", "machine_id", "devices"}).
    """
    runs = block_runs(request)
    code_block = lesson_block(request, slug, block)
    data = await read_body(request, empty={})
    code = data.get("code")
    code = code_block.code if code is None else code
    if not isinstance(code, str):
        raise HTTPException(422, 'Send the edited code as a string: {"code": "..."}, or no `code` to run the block '
                                 "as written.")
    check_code(code, source_bytes=request.app.state.settings.sandbox_source_bytes)
    choice = await picked_machine(request, learner, data.get("machine"))
    run_id = await runs.start(code=code, learner_id=learner, choice=choice, loopback=code_block.loopback)
    return {"id": run_id, "events": f"/api/runs/{run_id}/events", "machine": choice.as_dict(), "block": int(block),
            "edited": code != code_block.code}


def lesson_block(request: Request, slug: str, block: str):
    """Runnable block `block` of the lesson; 404 naming how many there are when it has no such block."""
    lesson = request.app.state.course.get(slug)
    code_block = lesson.runnable_block(block)
    if code_block is None:
        count = len(lesson.runnable_blocks)
        raise HTTPException(404, f"The lesson {slug!r} has no runnable block {block[:20]!r}; "
                                 + (f"its runnable blocks are numbered 1 to {count}." if count else
                                    "it has no runnable blocks."))
    return code_block


# how a run ended, in the words of the page's script (static/js/lesson-block.js, ENDED)
ENDED = {"ok": "Finished", "failed": "Stopped with an error (exit status {exit_code})", "cancelled": "Stopped"}


@router.post("/lessons/{slug}/blocks/{block}/run", dependencies=RunLimits, include_in_schema=False)
async def run_block_form(slug: KnownLesson, block: str, learner: LearnerId, request: Request) -> Any:
    """Run a block without JavaScript: its "Run on" form (`machine`, and `code` once edited on the answer page)
    runs it to its end; the answer is a page with its output and a form to run it again. Stores nothing."""
    runs = block_runs(request)
    code_block = lesson_block(request, slug, block)
    lesson = request.app.state.course.get(slug)
    back = f"{lesson.url}#block-{int(block)}"
    form = await request.form()
    code = form.get("code")
    try:
        if code is not None and not isinstance(code, str):
            raise Refused(400, "Send the code in the form's `code` field, as text.")
        code = code_block.code if code is None else code.replace("\r\n", "\n")  # textareas send CRLF
        check_code(code, source_bytes=request.app.state.settings.sandbox_source_bytes)
        choice = await picked_machine(request, learner, form.get("machine"))
        output, done = await runs.run_to_end(code=code, choice=choice, loopback=code_block.loopback)
    except Refused as exc:
        return _refusal(exc.status_code, exc.message, back)
    except HTTPException as exc:
        return _refusal(exc.status_code, str(exc.detail), back)
    except (Busy, Unavailable) as exc:
        return _refusal(429 if isinstance(exc, Busy) else 503, f"The course cannot run code right now; go back and "
                        f"run again in {exc.retry_after} s.", back, {"Retry-After": str(exc.retry_after)})
    except Rejected as exc:
        return _refusal(400, exc.message, back)
    ended = ENDED.get(done["status"], "").format(**done) or done["message"] or "The sandbox failed; run it again"
    return render(request, "lessons/block_run.html", lesson=lesson, block_number=int(block), code=code,
                  edited=code != code_block.code, output=output, done=done, ended=ended, choice=choice, back=back)


def _refusal(status: int, message: str, back: str, headers: dict | None = None) -> HTMLResponse:
    body = (f"<!doctype html><title>Not run</title><p>{html.escape(message)}</p>"
            f'<p><a href="{html.escape(back)}">Back to the lesson</a></p>')
    return HTMLResponse(body, status_code=status, headers=headers)


async def picked_machine(request: Request, learner: str, wanted: Any) -> machine_choices.MachineChoice:
    """The machine asked for in the request (422 when unknown), else the learner's remembered pick, else one H100."""
    if wanted is not None:
        return machines.choose(request, wanted, None)
    picked = await machines.remembered(request, learner)
    return machine_choices.pick(machine_choices.CHOICES, picked, strict=False)


def own_run(run_id: str, request: Request, learner: LearnerId) -> str:
    """The run's id if it is this learner's and this process follows it; else 404 (someone else's looks the same
    as one that never was, so ids cannot be probed)."""
    runs: BlockRuns | None = getattr(request.app.state, "block_runs", None)
    if runs is None or runs.owner(run_id) != learner:
        raise HTTPException(404, f"No run {run_id[:40]} of yours here: it does not exist, ended over a minute ago "
                                 "(nothing is stored: run the block again), or belongs to another learner.")
    return run_id


async def stream_slot(request: Request, learner: LearnerId, run_id: str = Depends(own_run)):
    """Hold one of the learner's event-stream slots (shared with exercise runs) while the stream is open."""
    slots: StreamSlots | None = getattr(request.app.state, "stream_slots", None)
    if slots is None:
        yield
        return
    with slots.hold(learner, run_id):
        yield


@router.get("/api/runs/{run_id}/events", response_class=EventSourceResponse, dependencies=[Depends(stream_slot)],
            responses={404: {"description": "No such run of yours (or it ended over a minute ago)"},
                       429: {"description": "Too many open event streams (see Retry-After)"}})
async def run_events(request: Request, run_id: str = Depends(own_run)) -> AsyncIterable[ServerSentEvent]:
    """Stream a lesson block's run: `output` events ({"lines": [{"stream", "line"}], ...}) from the first, then
    one `done`. A reconnecting EventSource (Last-Event-ID) gets the rest."""
    runs: BlockRuns = request.app.state.block_runs
    async for event_id, kind, data in runs.events(run_id, after=request.headers.get("last-event-id")):
        yield sse_event(event_id, kind, data)
