"""A synchronous facade over LocalRunner for callers without an event loop (CLI commands, tests)."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from typing import Callable

from app.runner.base import Job, OutputEvent, Result
from app.runner.local import LocalRunner

# seconds a blocking call waits at most (start-up of the fork server on a loaded machine included)
CALL_TIMEOUT_S = 300


class BlockingRunner:
    """Own a LocalRunner on an event loop in a background thread; `run(job)` blocks until the result.

    Use as a context manager so the fork server is stopped: `with BlockingRunner(settings) as r: r.run(job)`.
    """

    def __init__(self, settings, **runner_kwargs) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="sandbox-runner", daemon=True)
        self._settings = settings
        self._kwargs = runner_kwargs
        self.runner: LocalRunner | None = None

    def call(self, coro, timeout: float = CALL_TIMEOUT_S):
        """Run a coroutine on the runner's loop and return its value."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def __enter__(self) -> "BlockingRunner":
        self._thread.start()

        async def start() -> LocalRunner:
            runner = LocalRunner(self._settings, **self._kwargs)
            await runner.start()
            await runner.ready()
            return runner

        self.runner = self.call(start())
        return self

    def __exit__(self, *exc) -> None:
        try:
            if self.runner is not None:
                self.call(self.runner.stop())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._loop.close()

    def run(self, job: Job, on_output: Callable[[OutputEvent], None] | None = None) -> Result:
        """Run one job to completion; on_output is called (in the runner's thread) for each line."""
        from app.runner import run_job

        return self.call(run_job(self.runner, job, on_output))  # type: ignore[arg-type]

    def run_code(self, code: str, *, filename: str = "main.py", events: list | None = None, **limits) -> Result:
        """Run source with the default limits, some overridden by keyword (wall_s=1, memory_bytes=...)."""
        lim = dataclasses.replace(self.runner.limits, **limits) if limits else None  # type: ignore[union-attr]
        return self.run(Job(code=code, filename=filename, limits=lim), None if events is None else events.append)
