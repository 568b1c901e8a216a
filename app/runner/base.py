"""The job interface every runner implements: submit a job, stream its output, get one result.

LocalRunner (local.py) runs jobs in an embedded fork server; a Celery runner can implement the same protocol.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import AsyncIterator, Literal, Protocol, Union

from app.sandbox.limits import Limits

Status = Literal["ok", "failed", "limit", "error", "cancelled"]
LimitHit = Literal["wall", "cpu", "memory", "output", "pids", "source"]


@dataclass
class Job:
    """One program to run: its source, the name tracebacks show, and what the harness should do with it."""

    code: str
    filename: str = "main.py"
    mode: Literal["run", "grade"] = "run"
    grade: dict | None = None
    limits: Limits | None = None  # None: the runner's defaults (from Settings)

    def payload(self) -> dict:
        """Return the dict handed to app.sandbox.harness.main inside the sandbox."""
        return {"code": self.code, "filename": self.filename, "mode": self.mode, "grade": self.grade}


@dataclass
class Result:
    """How a job ended. `message` is a sentence a person can act on."""

    status: Status
    exit_code: int | None = None
    signal: int | None = None
    stdout: str = ""
    stderr: str = ""
    duration_ms: int = 0
    limit_hit: LimitHit | None = None
    report: dict | None = None
    message: str = ""

    @classmethod
    def from_dict(cls, data: dict) -> "Result":
        """Build a Result from the fork server's result message."""
        names = cls.__dataclass_fields__
        return cls(**{k: v for k, v in data.items() if k in names})

    def summary(self) -> dict:
        """Return the JSON object `course run --json` prints."""
        keys = ("status", "exit_code", "signal", "stdout", "stderr", "duration_ms", "limit_hit")
        return {k: getattr(self, k) for k in keys}


@dataclass(frozen=True)
class OutputEvent:
    """One line the job printed (without its newline)."""

    stream: Literal["stdout", "stderr"]
    line: str


@dataclass(frozen=True)
class DoneEvent:
    """The last event of every job."""

    result: Result


Event = Union[OutputEvent, DoneEvent]


class Busy(Exception):
    """The queue is full; try again in retry_after seconds (the web layer answers 429 with Retry-After)."""

    def __init__(self, retry_after: int) -> None:
        super().__init__(f"the sandbox is busy; retry in {retry_after} s")
        self.retry_after = retry_after


class Rejected(Exception):
    """The job was refused before running (source too large, not UTF-8)."""

    def __init__(self, message: str, limit_hit: LimitHit | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.limit_hit = limit_hit


class JobHandle(Protocol):
    """A submitted job."""

    id: str

    def events(self) -> AsyncIterator[Event]:
        """Yield OutputEvents as lines arrive, then exactly one DoneEvent."""
        ...

    async def result(self) -> Result:
        """Wait for and return the result."""
        ...

    async def cancel(self) -> None:
        """Stop the job (queued or running); its result has status 'cancelled'."""
        ...


class Runner(Protocol):
    """What the site, the grader and the CLI use to run code."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def submit(self, job: Job) -> JobHandle: ...


def check_source(job: Job, limits: Limits) -> None:
    """Refuse a job whose source is not UTF-8 text or is over the size limit."""
    try:
        size = len(job.code.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise Rejected(f"the code is not valid UTF-8 text ({exc.reason} at character {exc.start}); "
                       "save the file as UTF-8 and try again") from None
    if size > limits.source_bytes:
        raise Rejected(f"the code is {size / 1024:.1f} KiB; the limit is {limits.source_bytes / 1024:.0f} KiB",
                       limit_hit="source")


def new_job_id() -> str:
    """Return a fresh job id."""
    return uuid.uuid4().hex


__all__ = ["Job", "Result", "OutputEvent", "DoneEvent", "Event", "Busy", "Rejected", "JobHandle", "Runner",
           "check_source", "new_job_id"]
