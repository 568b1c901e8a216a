"""Run learner code: the job interface (submit, stream, result) and its embedded implementation."""

from __future__ import annotations

import asyncio

from app.runner.base import Busy, DoneEvent, Event, Job, JobHandle, OutputEvent, Rejected, Result, Runner
from app.runner.blocking import BlockingRunner
from app.runner.local import LocalJobHandle, LocalRunner


def make_runner(settings) -> Runner:
    """Return the runner the settings ask for (only 'local' exists so far)."""
    if settings.runner != "local":
        raise ValueError(f"COURSE_RUNNER={settings.runner!r} is not implemented yet; use 'local'")
    return LocalRunner(settings)


async def run_job(runner: Runner, job: Job, on_output=None) -> Result:
    """Submit a job, pass each OutputEvent to on_output, and return the result; a refusal becomes a Result."""
    try:
        handle = await runner.submit(job)
    except Rejected as exc:
        return Result(status="limit" if exc.limit_hit else "error", limit_hit=exc.limit_hit, message=exc.message)
    async for event in handle.events():
        if isinstance(event, OutputEvent) and on_output is not None:
            on_output(event)
    return await handle.result()


def run_job_sync(job: Job, settings, on_output=None) -> Result:
    """Start a LocalRunner, run one job, stop it; for synchronous callers such as the CLI."""

    async def main() -> Result:
        runner = LocalRunner(settings)
        await runner.start()
        try:
            return await run_job(runner, job, on_output)
        finally:
            await runner.stop()

    return asyncio.run(main())


__all__ = ["BlockingRunner", "Busy", "DoneEvent", "Event", "Job", "JobHandle", "LocalJobHandle", "LocalRunner",
           "OutputEvent",
           "Rejected", "Result", "Runner", "make_runner", "run_job", "run_job_sync"]
