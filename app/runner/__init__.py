"""Run learner code: the job interface (base.py), its embedded implementation (local.py), the worker tier's
(celery_runner.py), and a blocking facade for callers without an event loop (blocking.py). Which runner a
deployment uses is app/main.py's choice (`make_runner`, `open_runner`), made there with the hub that goes
with it."""

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
    run_job,
)
from app.runner.blocking import BlockingRunner
from app.runner.local import LocalJobHandle, LocalRunner

__all__ = ["BlockingRunner", "Busy", "DoneEvent", "Event", "Job", "JobHandle", "LocalJobHandle", "LocalRunner",
           "OnOutput", "OutputEvent", "Rejected", "Result", "Runner", "run_job"]
