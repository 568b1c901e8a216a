"""Runs of the lessons' code blocks in the page: a block's program (as written, or as the learner edited it) runs
in the sandbox on the learner's "Run on" machine, its output streams like an exercise run's, and nothing is stored.

A block run is a plain job (no grading, no probe, no submission row, no progress). It reuses the exercise run's
streaming path: the runner's handle is followed by `follow` (server paths scrubbed), lines go into a `LiveRun`
(batched as an exercise run's are, app/runner/batches.py), and the page reads them as SSE through `sse_events`,
ending with one `done` event ({"status", "exit_code", "duration_ms", "limit_hit", "message", "machine",
"machine_id", "devices"}) where an exercise run ends with its verdict. Since nothing is stored, a run's events live
in the memory of the web process that took it, for LINGER_S after it ends; the page opens its stream at once.
Runs go to whatever runner the app has (the embedded sandbox, or the worker tier's plain jobs), so the process
following a run is the one that took it: on the worker tier with several web processes, a load balancer must send
a learner's requests to one of them (sticky sessions), or the stream answers 404 elsewhere.
"""

from __future__ import annotations

import asyncio
import logging
import re
import secrets
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from app.content.machine_choices import BY_ID, MachineChoice
from app.content.runnable import output_error, outputs_of
from app.content.schema import ContentError
from app.core.config import get_settings
from app.harness.contract import job_host
from app.runner.base import Job, JobHandle, OutputEvent, Result, Runner, run_job
from app.submissions.live import DONE_ID, LINGER_S, LiveRun, sse_events

log = logging.getLogger(__name__)

SANDBOX_FAILED = "The sandbox failed while running this (not your code's fault); run it again."


def block_job(code: str, choice: MachineChoice, *, limits=None, loopback: bool = False) -> Job:
    """The sandbox job that runs a lesson block's code on a "Run on" choice: a plain run (as `course run --machine
    ID` is), always on the simulated machine (a block never takes one of the host's real GPU slots: it is a
    few lines of example, and the machine it shows is the one picked, not the server's). loopback: the block is
    marked `loopback` (a one-process gloo group; DataLoader workers need no mark), so its job gets its own
    loopback, as `course run --loopback` does."""
    host = job_host(get_settings(), machine=choice.machine, gpus=choice.gpus)
    return Job(code=code, filename="main.py", mode="run", limits=limits, host=host, loopback=loopback)


def done_event(result: Result, choice: MachineChoice, job: Job) -> dict:
    """The last event of a block's run: how it ended, and on which machine (its label and devices)."""
    from app.grading.grader import machine_words  # imported late: grading pulls in the exercises' checks

    machine, devices = machine_words(job.host, choice.id)
    return {"status": result.status, "exit_code": result.exit_code, "duration_ms": result.duration_ms,
            "limit_hit": result.limit_hit, "message": result.message, "machine": machine, "machine_id": choice.id,
            "devices": devices}


@dataclass
class BlockRun:
    """One block's run in memory: whose it is and its events."""

    learner_id: str
    live: LiveRun = field(default_factory=LiveRun)
    handle: JobHandle | None = None


class BlockRuns:
    """The lesson-block runs this process follows: start them, stream them, forget them (nothing is stored)."""

    def __init__(self, runner: Runner | None) -> None:
        self.runner = runner
        self.runs: dict[str, BlockRun] = {}
        self._tasks: set[asyncio.Task] = set()

    async def start(self, *, code: str, learner_id: str, choice: MachineChoice, loopback: bool = False) -> str:
        """Submit the block's job (loopback: the block is marked so); return the run's id once the runner took
        it. Busy, Unavailable or Rejected when it did not (nothing is kept)."""
        job = block_job(code, choice, limits=self.runner.limits, loopback=loopback)
        started = time.perf_counter()
        handle = await self.runner.submit(job)
        run_id = secrets.token_urlsafe(12)
        run = self.runs[run_id] = BlockRun(learner_id, handle=handle)
        task = asyncio.create_task(self._follow(run_id, run, job, choice, started))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return run_id

    async def _follow(self, run_id: str, run: BlockRun, job: Job, choice: MachineChoice, started: float) -> None:
        from app.grading.grader import follow

        def on_output(event: OutputEvent) -> None:
            run.live.add_line(event.stream, event.line)

        try:
            result = await follow(run.handle, on_output)
        except Exception:
            log.exception("lesson block run %s failed", run_id)
            result = Result(status="error", message=SANDBOX_FAILED)
        if not result.duration_ms:
            result.duration_ms = round((time.perf_counter() - started) * 1000)
        run.live.finish(done_event(result, choice, job), kind=DONE_ID)
        await asyncio.sleep(LINGER_S)
        self.runs.pop(run_id, None)

    async def run_to_end(self, *, code: str, choice: MachineChoice, loopback: bool = False) -> tuple[dict, dict]:
        """Run the block's job to its end, for a page without JavaScript that waits for it; return its output
        ({"stdout", "stderr"}, server paths scrubbed, as the exercise panel's no-JavaScript copy shows it) and its
        `done` event. Busy, Unavailable or Rejected when the runner did not take it; nothing is kept either way."""
        from app.grading.grader import follow

        job = block_job(code, choice, limits=self.runner.limits, loopback=loopback)
        started = time.perf_counter()
        handle = await self.runner.submit(job)
        lines: dict[str, list[str]] = {"stdout": [], "stderr": []}
        ended = False
        try:
            result = await follow(handle, lambda event: lines.setdefault(event.stream, []).append(event.line))
            ended = True
        except Exception:
            log.exception("lesson block run (without JavaScript) failed")
            result = Result(status="error", message=SANDBOX_FAILED)
        finally:
            if not ended:  # the page went away (cancelled) or following failed: the job need not run on
                await _cancel(handle)
        if not result.duration_ms:
            result.duration_ms = round((time.perf_counter() - started) * 1000)
        output = {stream: "".join(line + "\n" for line in lines.get(stream, ())) for stream in ("stdout", "stderr")}
        return output, done_event(result, choice, job)

    def owner(self, run_id: str) -> str | None:
        """Whose run this is; None when this process holds no run by that id (never one, or forgotten)."""
        run = self.runs.get(run_id)
        return run.learner_id if run is not None else None

    async def events(self, run_id: str, *, after: str | None = None) -> AsyncIterator[tuple[str, str, dict]]:
        """Yield the run's (id, kind, data) events after event `after`: output batches, then one `done`."""
        run = self.runs.get(run_id)
        if run is None:
            return
        async for kind, data in run.live.replay():
            for event in sse_events([(kind, data)], after):
                yield event

    async def close(self) -> None:
        """The app is stopping: stop every run still going (there is nothing to store)."""
        for run in list(self.runs.values()):
            if not run.live.done and run.handle is not None:
                try:
                    await run.handle.cancel()
                except Exception:
                    log.warning("could not cancel a lesson block run while stopping", exc_info=True)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


async def _cancel(handle: JobHandle) -> None:
    try:
        await asyncio.shield(handle.cancel())
    except Exception:
        log.warning("could not cancel a lesson block run", exc_info=True)


# --- `course check`: every block on the simulated H100 too ---------------------------------------------------

# blocks in the sandbox at once (the runner's queue takes more; the host's cores are the limit)
CHECK_PARALLEL = 2


async def check_blocks_on(course, runner: Runner, machine: str = "h100") -> list[ContentError]:
    """Run every runnable block of the course on a "Run on" machine in the sandbox, as a learner's Run does; return
    an error where one fails (at its failing line) or prints otherwise than its ```output block says."""
    choice = BY_ID[machine]
    outputs = outputs_of(course)
    room = asyncio.Semaphore(CHECK_PARALLEL)

    async def one(path, block) -> ContentError | None:
        async with room:
            job = block_job(block.code, choice, limits=runner.limits, loopback=block.loopback)
            result = await run_job(runner, job)
        if result.status != "ok":
            lines = [int(n) for n in re.findall(r'File "main\.py", line (\d+)', result.stderr)]
            last = (result.stderr.strip().splitlines() or [result.message or f"status {result.status}"])[-1]
            return ContentError(path, block.line + lines[-1] if lines else block.line,
                                f"runnable block failed on {choice.label} (simulated): {last}; fix the code, or drop "
                                "`runnable` from the fence if it cannot run there")
        return output_error(path, block, result.stdout, outputs.get((path, block.line), {}).get(machine), machine)

    in_page = [(lesson.path, block) for lesson in course.lessons for block in lesson.runnable_blocks]
    results = await asyncio.gather(*(one(path, block) for path, block in in_page))
    return [error for error in results if error is not None]


__all__ = ["BlockRuns", "block_job", "done_event", "check_blocks_on"]
