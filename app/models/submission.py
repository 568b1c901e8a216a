"""Submitted code and its verdict, stored so learners see their history and instructors see how learners do."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, CheckConstraint, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base, UTCDateTime, utcnow

STATUSES = ("queued", "running", "passed", "failed", "error", "timeout", "rejected")
FINAL_STATUSES = ("passed", "failed", "error", "timeout", "rejected")


class Submission(Base):
    """One run of a learner's code against an exercise; `verdict` holds its Verdict JSON once done (docs/grading.md).

    The id is a random hex string, not a counter, so ids in URLs say nothing about other learners' runs.
    """

    __tablename__ = "submissions"
    __table_args__ = (
        CheckConstraint(
            "status IN ('queued', 'running', 'passed', 'failed', 'error', 'timeout', 'rejected')", name="status"
        ),
        Index(None, "learner_id", "exercise_slug", "created_at"),
        Index(None, "exercise_slug", "created_at"),
        Index(None, "status", "heartbeat_at"),  # the sweeper's question: which unfinished runs went quiet
        Index(None, "learner_id", "exercise_slug", "code_digest"),  # "the same code as an earlier attempt"
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    learner_id: Mapped[str] = mapped_column(ForeignKey("learners.id", ondelete="CASCADE"))
    exercise_slug: Mapped[str] = mapped_column(String(100))
    code: Mapped[str] = mapped_column(Text)
    # the "Run on" choice it ran on (app/content/machine_choices.py), so a regrade runs it there again; None: stored
    # before the picker, the exercise's own machine
    machine: Mapped[str | None] = mapped_column(String(32))
    status: Mapped[str] = mapped_column(String(16), default="queued")
    verdict: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    # milliseconds the sandbox spent on the run (the verdict's duration_ms), None until finished
    duration_ms: Mapped[int | None] = mapped_column(Integer)
    # The lease of a run on a worker tier (COURSE_RUNNER=celery; app/submissions/leases.py). `attempt` numbers the
    # runs of this submission: a job message carries it, and only the current attempt may start or store a verdict.
    attempt: Mapped[int] = mapped_column(Integer, default=1, server_default="1")
    # the worker holding the run while "running" (host:pid:nonce), None otherwise
    worker: Mapped[str | None] = mapped_column(String(200))
    # "running": the worker's last heartbeat; "queued": when the attempt was put on the queue (None: not yet)
    heartbeat_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    # SHA-256 of the code with trailing blanks dropped (app/learning/attempts.py): "the same code again" is one lookup
    code_digest: Mapped[str | None] = mapped_column(String(64))
    # why this attempt ran nothing new and does not count toward the solution's unlock or the failing checks:
    # "starter" (the unchanged starter), "repeat" (the same code as an earlier attempt), "syntax" (not valid
    # Python: nothing ran). None: a counted attempt
    uncounted: Mapped[str | None] = mapped_column(String(16))

    @property
    def finished(self) -> bool:
        return self.status in FINAL_STATUSES
