"""The job interface every runner implements: submit a job, stream its output, get one result.

LocalRunner (local.py) runs jobs in an embedded fork server; CeleryRunner (celery_runner.py) sends them to
workers. app/main.py is the one place that picks the implementation (`make_runner`, `open_runner`), with the
submissions hub that goes with it.
"""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import AsyncIterator, Literal, Protocol, Union

from app.harness.contract import DEFAULT_HOST, GradeSpec, JobPayload, Report, SimulatedHost
from app.sandbox.job_limits import Limits

Status = Literal["ok", "failed", "limit", "error", "cancelled"]
LimitHit = Literal["wall", "cpu", "memory", "output", "pids", "source"]


@dataclass
class Job:
    """One program to run: its source, the name tracebacks show, and what the harness should do with it."""

    code: str
    filename: str = "main.py"
    mode: Literal["run", "grade"] = "run"
    grade: GradeSpec | None = None  # grading mode: the exercise and its probe
    limits: Limits | None = None  # None: the runner's defaults (from Settings)
    gpu: bool = False  # wants a real GPU: runs in a GPU slot where the host has one, else on the simulated GPU
    host: SimulatedHost = DEFAULT_HOST  # the build and GPUs simulated where the host has no GPU (harness/contract.py)
    nproc: int = 1  # rank processes in all, as torchrun starts them (1: one process); nnodes * nproc-per-node
    nnodes: int = 1  # simulated machines the ranks are spread over, nproc // nnodes on each (torchrun --nnodes)
    # who starts the process(es): None (torchrun), accelerate, accelerate-cpu (app/harness/launchers.py)
    launcher: str | None = None
    trace: bool = False  # a plain run reports the simulated clock's Chrome trace (`course run --trace`)
    # one process that talks to itself over TCP (a one-rank gloo group; DataLoader workers need only Unix sockets,
    # which every job has): the job gets the network namespace of a job of several ranks, its own loopback up and
    # nothing else (app/sandbox/jobqueue.py)
    loopback: bool = False
    # what a graded job's report must echo: it goes to the fork server beside the payload, never in it, and the
    # job's harness gets it only after the learner's code has run (app/harness/channel.py)
    key: str | None = None

    def payload(self) -> JobPayload:
        """Return the dict handed to app.harness.main inside the sandbox (never the key)."""
        return {"code": self.code, "filename": self.filename, "mode": self.mode, "grade": self.grade,
                "host": self.host.payload(), "nproc": self.nproc, "nnodes": self.nnodes, "launcher": self.launcher,
                "trace": self.trace, "loopback": self.loopback}

    @classmethod
    def from_payload(cls, payload: JobPayload, limits: Limits | None = None, gpu: bool = False) -> "Job":
        """Rebuild a Job from payload() (a worker receives jobs this way), its host and ranks included."""
        host = payload.get("host")
        return cls(code=payload["code"], filename=payload["filename"], mode=payload["mode"], grade=payload["grade"],
                   limits=limits, gpu=gpu, host=SimulatedHost.from_payload(host) if host else DEFAULT_HOST,
                   nproc=int(payload.get("nproc") or 1), nnodes=int(payload.get("nnodes") or 1),
                   launcher=payload.get("launcher"), trace=bool(payload.get("trace")),
                   loopback=bool(payload.get("loopback")))


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
    report: Report | None = None  # a graded job's facts (app/harness/contract.py)
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
# What every caller that follows a job's output passes: called once per line, in order; may be a coroutine.
OnOutput = Callable[[OutputEvent], Awaitable[object] | object]


class Busy(Exception):
    """The queue is full; try again in retry_after seconds (the web layer answers 429 with Retry-After)."""

    def __init__(self, retry_after: int) -> None:
        super().__init__(f"the sandbox is busy; retry in {retry_after} s")
        self.retry_after = retry_after


class Unavailable(Exception):
    """No job can be queued now (the broker is down, or no worker takes this queue); the web answers 503.

    `why` completes "The course cannot take code right now: ..." for a person, and names no internal host: a
    learner reads it. `detail` (the broker's address, the error) is for the operator's log and the CLI.
    """

    def __init__(self, why: str, retry_after: int = 5, *, detail: str = "") -> None:
        super().__init__(f"{why}{f' ({detail})' if detail else ''}; retry in {retry_after} s")
        self.why = why
        self.detail = detail
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
    """What the site, the grader and the CLI use to run code. Get one from app.main's `open_runner` or
    `make_runner`."""

    limits: Limits  # the per-job limits in force, which an exercise may tighten

    async def start(self) -> None:
        """Get ready to take jobs (may return before the sandbox is up; the first job then waits)."""
        ...

    async def ready(self) -> dict:
        """Wait until jobs can run; return what the sandbox reports about itself (`course doctor` shows it)."""
        ...

    async def stop(self) -> None:
        """Stop; jobs still queued or running end with status 'error'."""
        ...

    async def submit(self, job: Job) -> JobHandle:
        """Queue a job; raise Busy when the queue is full, Rejected when the source is refused."""
        ...


def check_source_text(code: str, source_bytes: int) -> None:
    """Refuse source that is not UTF-8, is over source_bytes or holds a NUL; the one place these rules are written.

    The site checks it before a submission costs an attempt (app.submissions.live.check_code); every runner checks
    it again on submit, for callers that skip the site (the CLI, bench, a worker fed by another web tier).
    """
    try:
        size = len(code.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise Rejected(f"The code is not valid UTF-8 text (character {exc.start} cannot be encoded); remove that "
                       "character, save the file as UTF-8 and run again.") from None
    if size > source_bytes:
        raise Rejected(f"The code is {size / 1024:.1f} KiB; the limit is {source_bytes / 1024:.0f} KiB. Shorten it "
                       "(an exercise needs a few dozen lines) and run again.", limit_hit="source")
    if "\x00" in code:  # Python refuses such source, and PostgreSQL cannot store it
        at = code.index("\x00")
        line, column = code.count("\n", 0, at) + 1, at - (code.rfind("\n", 0, at) + 1) + 1
        raise Rejected(f"The code contains a NUL character (\\x00) on line {line}, column {column}; Python cannot "
                       "run a program with one. Remove it (it comes from pasting binary data, or from a file saved "
                       "as UTF-16), save the file as UTF-8 and run again.")


def check_source(job: Job, limits: Limits) -> None:
    """Refuse a job whose source is not UTF-8 text, is over its limits' source_bytes or holds a NUL."""
    check_source_text(job.code, limits.source_bytes)


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


def new_job_id() -> str:
    """Return a fresh job id."""
    return uuid.uuid4().hex


__all__ = ["Job", "Result", "OutputEvent", "DoneEvent", "Event", "OnOutput", "Busy", "Unavailable", "Rejected",
           "JobHandle",
           "Runner", "check_source", "check_source_text", "emit", "new_job_id", "run_job"]
