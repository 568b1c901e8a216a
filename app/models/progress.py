"""Learners and their progress: lessons read and per-exercise attempts. Keyed by learner id, not user, so
anonymous visitors (a random id in their session) have progress too."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base, UTCDateTime, utcnow


class Learner(Base):
    """Someone who reads lessons and submits code: anonymous or the learner side of a User."""

    __tablename__ = "learners"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    last_activity_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    # the "Run on" choice this learner picked last (app/content/machine_choices.py); None: never picked
    machine: Mapped[str | None] = mapped_column(String(32))


class LessonRead(Base):
    """A lesson the learner opened and scrolled to the end of (first time only)."""

    __tablename__ = "lesson_reads"

    learner_id: Mapped[str] = mapped_column(ForeignKey("learners.id", ondelete="CASCADE"), primary_key=True)
    lesson_slug: Mapped[str] = mapped_column(String(100), primary_key=True)
    read_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class ExerciseProgress(Base):
    """One learner on one exercise: how many graded attempts, when, and whether (when first) it passed."""

    __tablename__ = "exercise_progress"

    learner_id: Mapped[str] = mapped_column(ForeignKey("learners.id", ondelete="CASCADE"), primary_key=True)
    exercise_slug: Mapped[str] = mapped_column(String(100), primary_key=True)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    first_attempt_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    last_attempt_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    passed_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
