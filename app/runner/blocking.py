"""A synchronous facade over a runner for callers without an event loop (`course check`, tests, benchmarks)."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from app.runner.base import Job, OnOutput, Result, Runner, run_job

# seconds a blocking call waits at most (start-up of the fork server on a loaded machine included)
CALL_TIMEOUT_S = 300


class BlockingRunner:
    """Own a runner on an event loop in a background thread; `run(job)` blocks until done.

    Use as a context manager so the runner is stopped: `with BlockingRunner(settings) as r: r.run(job)`. The
    runner is the one COURSE_RUNNER names (app.main's `open_runner`; keyword options go to its constructor, e.g.
    `server_options=` for the local fork server), or the one given as `runner=` (a worker's own LocalRunner).
    """

    def __init__(self, settings, *, runner: Runner | None = None, **runner_options) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="sandbox-runner", daemon=True)
        self._opened: AbstractAsyncContextManager[Runner] = (
            _started(runner) if runner is not None else _configured(settings, runner_options))
        self.runner: Runner | None = None

    def call(self, coro, timeout: float = CALL_TIMEOUT_S):
        """Run a coroutine on the runner's loop and return its value."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def __enter__(self) -> BlockingRunner:
        self._thread.start()

        async def start() -> Runner:
            runner = await self._opened.__aenter__()
            try:
                await runner.ready()
            except BaseException:
                await self._opened.__aexit__(None, None, None)
                raise
            return runner

        try:
            self.runner = self.call(start())
        except BaseException:
            self._close_loop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        try:
            if self.runner is not None:
                self.call(self._opened.__aexit__(None, None, None))
        finally:
            self._close_loop()

    def _close_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    def run(self, job: Job, on_output: OnOutput | None = None) -> Result:
        """Run one job to completion; on_output is called (in the runner's thread) for each line."""
        return self.call(run_job(self.runner, job, on_output))  # type: ignore[arg-type]

    def run_code(self, code: str, *, filename: str = "main.py", events: list | None = None, **limits) -> Result:
        """Run source with the default limits, some overridden by keyword (wall_s=1, memory_bytes=...)."""
        lim = dataclasses.replace(self.runner.limits, **limits) if limits else None  # type: ignore[union-attr]
        return self.run(Job(code=code, filename=filename, limits=lim), None if events is None else events.append)


def _configured(settings, options: dict) -> AbstractAsyncContextManager[Runner]:
    from app.main import open_runner  # the backend switch; imported late: it is the whole site

    return open_runner(settings, **options)


@asynccontextmanager
async def _started(runner: Runner):
    """Start a runner for the duration of a block, and stop it however the block ends."""
    await runner.start()
    try:
        yield runner
    finally:
        await runner.stop()
