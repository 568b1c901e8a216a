"""The Verdict: what a learner sees after a run, check by check (the Verdict JSON of docs/grading.md)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from app.grading.advice import Advice
from app.grading.placement_map import PlacementEntry, PlacementTotals

Status = Literal["passed", "failed", "error", "timeout", "rejected"]


class CheckResult(BaseModel):
    """One check's outcome; message says what happened, where, and what to change."""

    id: str
    passed: bool
    message: str = ""
    line: int | None = None
    # False when the program stopped (an exception, a non-zero sys.exit) before doing what this check looks at;
    # its message then reads "not reached: the program stopped at line N" (see facts.mark_unreached)
    reached: bool = True
    # what this finding comes down to ("returned:7:None", "host:xb@20"), set by a check that can tell; failed
    # checks with the same cause are worded once (app/grading/check_messages.py). Not part of the Verdict JSON.
    cause: str | None = Field(default=None, exclude=True)
    # passed only because what it looks for never happened; not reached when the program stopped early
    # (facts.mark_unreached). Not part of the Verdict JSON.
    vacuous: bool = Field(default=False, exclude=True)


class TimelineLine(BaseModel):
    """What one learner line cost on the simulated clock."""

    line: int
    ms: float = 0.0  # device time of its kernels and copies
    wait_ms: float = 0.0  # the host waiting there for the GPU


class TimelineRow(BaseModel):
    """One row of the drawn timeline: the host, a stream or a copy engine (app/harness/machine/chrome_trace.py)."""

    name: str
    ms: float = 0.0  # its spans' total: the host's waiting for the GPU, a stream's kernels, a copy engine's copies
    spans: int = 0
    marks: int = 0  # instants: the host's syncs, events recorded on a stream


# one event of the drawn timeline: row index, start us, duration us, kind, name, learner line (None: not the learner's)
TimelineEvent = tuple[int, float, float, str, str, int | None]


class RankTimeline(BaseModel):
    """One rank's totals on the modeled clock, in a job of several ranks."""

    rank: int
    node: int | None = None  # its simulated machine, on several machines
    modeled_ms: float = 0.0
    gpu_busy_ms: float = 0.0
    copy_ms: float = 0.0
    comm_ms: float = 0.0
    host_wait_ms: float = 0.0
    gpu_idle_ms: float = 0.0
    syncs: int = 0
    kernels: int = 0
    collectives: int = 0
    step_ms: float | None = None


class Timeline(BaseModel):
    """Where a simulated run's time went, on the modeled clock (app/harness/contract.py: Timeline)."""

    machine: str | None = None  # the machine profile the times are modeled for ("h100")
    # the machine in words, as the page labels the times ("one H100"; grader.modeled_for)
    modeled_for: str | None = None
    # the real GPU whose recordings set the launch and sync costs and check the model ("NVIDIA H200")
    calibrated_on: str | None = None
    label: str = ""  # what the times are modeled for, in words (app/grading/timeline.py)
    summary: str = ""  # the figures in one sentence
    modeled_ms: float = 0.0
    gpu_busy_ms: float = 0.0
    copy_ms: float = 0.0
    comm_ms: float = 0.0  # collectives (all_reduce, DDP's gradient buckets) on NCCL's stream
    host_wait_ms: float = 0.0
    gpu_idle_ms: float = 0.0
    syncs: int = 0
    kernels: int = 0
    collectives: int = 0
    step_ms: float | None = None  # the median modeled time between two optimizer steps
    lines: list[TimelineLine] = Field(default_factory=list)
    rows: list[TimelineRow] = Field(default_factory=list)
    events: list[TimelineEvent] = Field(default_factory=list)  # the run's first events (grade.VERDICT_EVENTS)
    events_total: int = 0  # events on the modeled timeline (more than `events` holds in a long run)
    # several ranks: each rank's totals (the figures above are rank 0's; modeled_ms the latest rank's end)
    ranks: list[RankTimeline] = Field(default_factory=list)


class Verdict(BaseModel):
    """The result of grading one submission."""

    exercise: str
    status: Status
    checks: list[CheckResult] = Field(default_factory=list)
    stdout: str = ""
    stderr: str = ""
    duration_ms: int = 0
    device: str = "cpu"
    # the machine it ran on in words (the "Run on" choice and the profile's title) and its devices, each
    # {"device": "cuda:0", "name": "NVIDIA H100 80GB HBM3"}: the placement map's legend
    machine: str = ""
    devices: list[dict[str, str]] = Field(default_factory=list)
    # per line of the learner's code, where tensors went (app/grading/placement_map.py); empty when nothing ran
    placement: list[PlacementEntry] = Field(default_factory=list)
    placement_totals: PlacementTotals | None = None
    # what costs time without failing a check: a sync on every step (app/grading/advice.py); decides nothing
    advice: list[Advice] = Field(default_factory=list)
    # where the time went on the simulated GPU's modeled clock; None on a real GPU or without a simulated one
    timeline: Timeline | None = None

    @property
    def passed(self) -> bool:
        """True when every check passed."""
        return self.status == "passed"

    def failed_ids(self) -> list[str]:
        """Ids of the checks that did not pass."""
        return [c.id for c in self.checks if not c.passed]
