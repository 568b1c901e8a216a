"""A class: what a learner revealed (hints, the solution), sections with their learners and teaching assistants,
and deadlines per exercise (and per section)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import CheckConstraint, ForeignKey, Index, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base, UTCDateTime, utcnow

REVEAL_KINDS = ("hint", "solution")
MEMBER_ROLES = ("learner", "ta")


class Reveal(Base):
    """One look at a hint or at the reference solution, recorded by the server when it happened.

    Every look is kept (not only the first): the dashboard and the CSV take the first solution look and compare it
    with the learner's first pass ("solution seen before passing")."""

    __tablename__ = "reveals"
    __table_args__ = (CheckConstraint("kind IN ('hint', 'solution')", name="kind"),
                      Index(None, "learner_id", "exercise_slug", "kind", "at"))

    id: Mapped[int] = mapped_column(primary_key=True)
    learner_id: Mapped[str] = mapped_column(ForeignKey("learners.id", ondelete="CASCADE"))
    exercise_slug: Mapped[str] = mapped_column(String(100))
    kind: Mapped[str] = mapped_column(String(16))
    # which hint (1 = the first); None for the solution
    hint: Mapped[int | None] = mapped_column(Integer)
    at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class Section(Base):
    """A group of learners with its teaching assistants (a lab group, an LMS course section)."""

    __tablename__ = "sections"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class SectionMember(Base):
    """A learner in a section (role "learner") or one of its teaching assistants (role "ta", by their account's
    learner id). A learner may be in several sections; a TA sees the learners of every section they assist."""

    __tablename__ = "section_members"
    __table_args__ = (CheckConstraint("role IN ('learner', 'ta')", name="role"), Index(None, "learner_id"))

    section_id: Mapped[int] = mapped_column(ForeignKey("sections.id", ondelete="CASCADE"), primary_key=True)
    learner_id: Mapped[str] = mapped_column(ForeignKey("learners.id", ondelete="CASCADE"), primary_key=True)
    role: Mapped[str] = mapped_column(String(16), default="learner")


class Deadline(Base):
    """When an exercise is due: for everyone (section_id None) or for one section, which then wins for its learners.
    A submission after it is stored and graded as any other, and flagged late (never refused)."""

    __tablename__ = "deadlines"
    __table_args__ = (UniqueConstraint("exercise_slug", "section_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    exercise_slug: Mapped[str] = mapped_column(String(100))
    section_id: Mapped[int | None] = mapped_column(ForeignKey("sections.id", ondelete="CASCADE"))
    due_at: Mapped[datetime] = mapped_column(UTCDateTime())
