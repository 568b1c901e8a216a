"""Warm everything the first learner's job would otherwise pay for, before the site says it is ready.

A fresh `course serve` answers pages at once, but FastAPI has not built its routes yet (it does on the first
request), its sandbox server still imports torch and forks its first children, and this process has never
prepared, followed or judged a graded job (the grader's imports, an exercise's checks.py, the first dispatch
through the runner). The first learner used to wait for all of it (4.75 s
against 0.08 s for the next one, bench/README.md). The lifespan starts `warm` in the background; `GET /readyz`
answers 503 with what it still waits for until it is done, then 200, so that a load balancer or a healthcheck
sends learners only to a warm server.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from dataclasses import dataclass, field

import anyio.to_thread

from app.grading.grader import checks_module, grade_submission, prepare

log = logging.getLogger(__name__)

ROUTES = "the site's routes (FastAPI builds each one's dependencies on the first request)"
SANDBOX = "the sandbox server (importing torch, forking its first children)"
FIRST_GRADE = ("a first graded job ({slug}'s solution) and its verdict stored and rolled back, so that no "
               "learner's job is the first")


@dataclass
class Readiness:
    """What the server still waits for before it is ready; one writer, `warm`."""

    waiting_for: list[str] = field(default_factory=list)
    error: str = ""
    warm_job: dict | None = None  # the warm-up grade: exercise, status, milliseconds
    warm_s: float | None = None
    runner: object = None  # its cold_starts (LocalRunner: jobs that waited for a sandbox server to start), if any

    @property
    def ready(self) -> bool:
        return not self.waiting_for and not self.error

    def describe(self) -> dict:
        """Return what GET /readyz answers (its status code is 200 when `ready`, else 503)."""
        body: dict = {"status": "ready" if self.ready else ("failed" if self.error else "warming"),
                      "waiting_for": list(self.waiting_for)}
        if self.error:
            body["error"] = self.error
        if self.warm_job is not None:
            body["warm_job"] = self.warm_job
        if self.warm_s is not None:
            body["warm_s"] = self.warm_s
        if (cold := getattr(self.runner, "cold_starts", None)) is not None:
            body["cold_starts"] = cold
        return body


def plan(course, runner, *, warm: bool, grades: bool) -> Readiness:
    """Return the readiness of a server about to start: nothing to wait for when it does not warm (COURSE_ENV=test,
    whose sandbox starts with the first job); else the sandbox, and, where this process grades, one job."""
    if not warm:
        return Readiness(runner=runner)
    waiting = [ROUTES, SANDBOX]
    if grades and (slug := warm_exercise(course)):
        waiting.append(FIRST_GRADE.format(slug=slug))
    return Readiness(waiting_for=waiting, runner=runner)


def warm_exercise(course) -> str | None:
    """The exercise the warm-up grades: the course's first (any will do: what it warms is shared by all)."""
    return next(iter(course.exercises), None)


RETRY_S = 5.0  # seconds between tries of a runner that could not start

# a path no route has: matching it walks, and so builds, every route
WARM_PATH = "/readyz/warm-up"


# the event stream of a submission that does not exist: its route answers 404 after its dependencies ran
WARM_STREAM_PATH = "/api/submissions/00000000-0000-0000-0000-000000000000/events"


async def warm_routes(app, path: str = WARM_PATH) -> None:
    """Send one GET through the whole app, in this process, for a path no route answers (or one that answers 404).

    FastAPI builds a router's routes (each one's dependencies, parameters and body model) the first time a request
    is matched against them: 0.9 s for this site on the 2-core machine, which the first learner's request paid.
    """
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
             "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
             "headers": [(b"host", b"localhost"), (b"accept", b"application/json")],
             "client": ("127.0.0.1", 0), "server": ("localhost", 80)}

    async def receive() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict) -> None:
        pass

    await app(scope, receive, send)


async def sandbox_ready(readiness: Readiness, runner) -> None:
    """Wait until the runner can run jobs, retrying while it cannot (the worker tier's workers may start later)."""
    while True:
        try:
            await runner.ready()
        except Exception as exc:  # noqa: BLE001 - said by /readyz until it works
            readiness.error = f"{exc}; retrying every {RETRY_S:.0f} s"
            log.warning("the sandbox is not ready: %s", exc)
            await asyncio.sleep(RETRY_S)
            continue
        readiness.error = ""
        readiness.waiting_for = [w for w in readiness.waiting_for if w != SANDBOX]
        return


def settle_heap() -> None:
    """Collect once, then move every object alive now out of the cyclic collector's sight (`gc.freeze`).

    This process holds about 440,000 objects once warm (torch, FastAPI, SQLAlchemy, the course), nearly all of
    them for its whole life. Python's full collection walks every one of them each time it runs (1.5 s measured
    on the loaded 2-core machine, a few hundred ms idle), stopping every request in the event loop meanwhile:
    the first learner after a start met the first one, and page p99 the later ones. Frozen, they are never
    walked again; a full collection then walks only what requests left behind.
    """
    gc.collect()
    gc.freeze()


async def warm(readiness: Readiness, app) -> None:
    """Build the routes, start the runner's sandbox and wait for it, then grade one exercise's solution, store its
    verdict as a run would and roll that back (nothing stays), and import every exercise's checks."""
    runner, course, hub = readiness.runner, app.state.course, app.state.live
    started = time.monotonic()
    try:
        await warm_routes(app)
        readiness.waiting_for = [w for w in readiness.waiting_for if w != ROUTES]
        await sandbox_ready(readiness, runner)
        if readiness.waiting_for and (slug := warm_exercise(course)):
            exercise = course.exercises[slug]
            job_started = time.monotonic()
            verdict = await grade_submission(exercise, exercise.solution, runner)
            readiness.warm_job = {"exercise": slug, "status": verdict.status,
                                  "ms": round((time.monotonic() - job_started) * 1000, 1)}
            if verdict.status not in ("passed", "failed"):  # the sandbox could not run it: say so, stay unready
                raise RuntimeError(f"the warm-up job ended {verdict.status}: {verdict.stderr.strip()[-300:]}")
            if callable(rehearse := getattr(hub, "rehearse", None)):
                await anyio.to_thread.run_sync(lambda: rehearse(exercise_slug=slug, code=exercise.solution,
                                                                verdict=verdict.model_dump(mode="json")))
            # what the first learner's submission still paid once (first job after ready, timed part by part: its
            # POST 63 ms against ~30 for later ones, its event stream's opening 27 against ~12): each exercise's
            # job built once (its machine, its limits, its checks imported), the event stream's route
            for other in course.exercises.values():
                checks_module(other)
                prepare(other, other.solution, limits=getattr(runner, "limits", None))
            await warm_routes(app, WARM_STREAM_PATH)
        settle_heap()
        readiness.waiting_for = []
        readiness.warm_s = round(time.monotonic() - started, 3)
        log.info("warm and ready in %.1f s", readiness.warm_s)
    except Exception as exc:  # said by /readyz and the log; the server keeps serving pages
        readiness.error = str(exc) or type(exc).__name__
        log.exception("the server could not warm up; /readyz answers 503")
