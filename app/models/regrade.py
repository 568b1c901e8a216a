"""Regrades and the verdict history they build: a stored submission's verdicts are never overwritten.

`submissions.verdict` stays what the learner's run produced. Every verdict a submission has had is a row of
`submission_verdicts`, numbered by `revision`: 0 is the run's own verdict (summarised here once, its JSON stays on
the submission row), 1, 2, ... are the regrades that graded it again. The newest revision is the submission's
current verdict, which the instructor dashboard reads. `revision` is not the worker tier's `submissions.attempt`
(the runs of one submission's job): a regrade is a later grading of stored code, never a run of a queued job.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, CheckConstraint, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base, UTCDateTime, utcnow

REGRADE_STATUSES = ("running", "finished", "failed", "interrupted")


class Regrade(Base):
    """One regrade of an exercise: which submissions, who asked, how far it got, and what changed."""

    __tablename__ = "regrades"
    __table_args__ = (
        CheckConstraint("status IN ('running', 'finished', 'failed', 'interrupted')", name="status"),
        Index(None, "exercise_slug", "started_at"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    exercise_slug: Mapped[str] = mapped_column(String(100))
    # only submissions created at or after this time (`course regrade --since`), None for all of them
    since: Mapped[datetime | None] = mapped_column(UTCDateTime())
    # the instructor who pressed the button; None from the command line
    requested_by: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    status: Mapped[str] = mapped_column(String(16), default="running")
    started_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    # submissions to grade, and graded so far (the progress bar)
    total: Mapped[int] = mapped_column(Integer, default=0)
    done: Mapped[int] = mapped_column(Integer, default=0)
    # graded submissions whose status differs from their verdict before this regrade, in each direction
    changed: Mapped[int] = mapped_column(Integer, default=0)
    now_passing: Mapped[int] = mapped_column(Integer, default=0)
    now_failing: Mapped[int] = mapped_column(Integer, default=0)
    # verdicts with status "error" (the sandbox or checks.py broke, not the learner's code)
    errors: Mapped[int] = mapped_column(Integer, default=0)
    # the progress rule's effect: learners given a pass, learners keeping a pass no current verdict supports
    passes_added: Mapped[int] = mapped_column(Integer, default=0)
    passes_kept: Mapped[int] = mapped_column(Integer, default=0)
    # why it failed or was interrupted
    message: Mapped[str | None] = mapped_column(Text)
    # the process running it ("host:pid:nonce") and its lease, renewed while it runs (app/submissions/regrade.py); a
    # running regrade whose lease ran out (its process died) is taken over by the next start of that exercise's regrade
    holder: Mapped[str | None] = mapped_column(String(200))
    heartbeat_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    # not stored: True on the row `app.submissions.regrade.start` returns when it took a stalled regrade over
    resumed = False

    @property
    def running(self) -> bool:
        return self.status == "running"


class SubmissionVerdict(Base):
    """One verdict of one stored submission: its run's own (revision 0) or a regrade's (1, 2, ...)."""

    __tablename__ = "submission_verdicts"
    __table_args__ = (
        UniqueConstraint("submission_id", "revision"),
        CheckConstraint(
            "status IN ('queued', 'running', 'passed', 'failed', 'error', 'timeout', 'rejected')", name="status"
        ),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    submission_id: Mapped[str] = mapped_column(ForeignKey("submissions.id", ondelete="CASCADE"))
    revision: Mapped[int] = mapped_column(Integer)
    regrade_id: Mapped[int | None] = mapped_column(ForeignKey("regrades.id", ondelete="CASCADE"), index=True)
    status: Mapped[str] = mapped_column(String(16))
    # what the dashboard counts, taken from the verdict once: the id of its first failing check, and the last
    # exception line of its stderr ("RuntimeError: Expected all tensors to be on the same device, ...")
    first_failed_check: Mapped[str | None] = mapped_column(String(100))
    error_line: Mapped[str | None] = mapped_column(String(300))
    # the Verdict JSON of a regrade; None for revision 0, whose JSON is the submission's own `verdict`
    verdict: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    graded_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
