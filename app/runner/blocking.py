"""A synchronous facade over a runner for callers without an event loop (`course check`, tests, benchmarks)."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from contextlib import AbstractAsyncContextManager

from app.runner.base import Job, OnOutput, Result, Runner
from app.runner.factory import open_runner, run_job

# seconds a blocking call waits at most (start-up of the fork server on a loaded machine included)
CALL_TIMEOUT_S = 300


class BlockingRunner:
    """Own a runner (from `open_runner`) on an event loop in a background thread; `run(job)` blocks until done.

    Use as a context manager so the runner is stopped: `with BlockingRunner(settings) as r: r.run(job)`.
    Keyword options go to `make_runner` (e.g. `server_options=` for the local fork server).
    """

    def __init__(self, settings, **runner_options) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="sandbox-runner", daemon=True)
        self._opened: AbstractAsyncContextManager[Runner] = open_runner(settings, **runner_options)
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
