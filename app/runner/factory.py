"""One way to get a runner: `make_runner(settings)` picks the implementation, `open_runner` starts and stops it.

Every caller outside the web app (the CLI, `course check`, `course doctor`, the blocking facade for tests and
benchmarks) writes `async with open_runner(settings) as runner:`; the web app starts `make_runner(settings)` in
its lifespan. A new runner is one more branch in `make_runner` and nothing else.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from app.runner.base import Job, OnOutput, OutputEvent, Rejected, Result, Runner
from app.runner.local import LocalRunner


def make_runner(settings, **options) -> Runner:
    """Return the runner COURSE_RUNNER names, not started; `options` go to its constructor (tests, benchmarks)."""
    if settings.runner == "local":
        return LocalRunner(settings, **options)
    if settings.runner == "celery":
        from app.runner.celery_runner import CeleryRunner  # Celery and kombu load only where they are used

        return CeleryRunner(settings, **options)
    raise ValueError(f"COURSE_RUNNER={settings.runner!r} is not a runner; use 'local' or 'celery'")


@asynccontextmanager
async def open_runner(settings, **options) -> AsyncIterator[Runner]:
    """Start the configured runner for the duration of a block, and stop it however the block ends."""
    runner = make_runner(settings, **options)
    await runner.start()
    try:
        yield runner
    finally:
        await runner.stop()


async def emit(on_output: OnOutput | None, event: OutputEvent) -> None:
    """Pass one output line to a callback, awaiting it if it is a coroutine function."""
    if on_output is not None:
        value = on_output(event)
        if inspect.isawaitable(value):
            await value


async def run_job(runner: Runner, job: Job, on_output: OnOutput | None = None) -> Result:
    """Submit a job, pass each output line to on_output, and return the result; a refusal becomes a Result."""
    try:
        handle = await runner.submit(job)
    except Rejected as exc:
        return Result(status="limit" if exc.limit_hit else "error", limit_hit=exc.limit_hit, message=exc.message)
    async for event in handle.events():
        if isinstance(event, OutputEvent):
            await emit(on_output, event)
    return await handle.result()


def run_job_sync(job: Job, settings, on_output: OnOutput | None = None) -> Result:
    """Run one job on a runner started for it, then stopped; for synchronous callers such as `course run`."""

    async def main() -> Result:
        async with open_runner(settings) as runner:
            return await run_job(runner, job, on_output)

    return asyncio.run(main())


__all__ = ["make_runner", "open_runner", "emit", "run_job", "run_job_sync"]
