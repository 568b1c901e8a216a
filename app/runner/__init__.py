"""Run learner code: the job interface (base.py), its embedded implementation (local.py), and the one way to get
a runner (factory.py: `make_runner`, `open_runner`), plus a blocking facade for callers without an event loop."""

from __future__ import annotations

from app.runner.base import (
    Busy,
    DoneEvent,
    Event,
    Job,
    JobHandle,
    OnOutput,
    OutputEvent,
    Rejected,
    Result,
    Runner,
)
from app.runner.blocking import BlockingRunner
from app.runner.factory import make_runner, open_runner, run_job, run_job_sync
from app.runner.local import LocalJobHandle, LocalRunner

__all__ = ["BlockingRunner", "Busy", "DoneEvent", "Event", "Job", "JobHandle", "LocalJobHandle", "LocalRunner",
           "OnOutput", "OutputEvent", "Rejected", "Result", "Runner", "make_runner", "open_runner", "run_job",
           "run_job_sync"]
