"""Deadlines per exercise, and per section: when each is due, and whether a submission came after it.

A deadline for everyone has no section; one for a section wins for that section's learners (a learner in several
sections with their own deadlines gets the latest of them). A submission after its learner's deadline is stored
and graded as any other, and flagged late in the dashboard, the learner page and the CSV: never refused.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from app.learning.sections import ensure_section
from app.models import Deadline, Section, SectionMember


def set_deadline(session: Session, *, exercise_slug: str, due_at: datetime, section: str | None = None) -> Deadline:
    """Set (or move) an exercise's deadline, for everyone or for one section."""
    if due_at.tzinfo is None:
        raise ValueError("a deadline needs a time zone (UTC when none is written)")
    section_id = ensure_section(session, section).id if section else None
    row = session.scalar(select(Deadline).where(Deadline.exercise_slug == exercise_slug,
                                                Deadline.section_id.is_(None) if section_id is None
                                                else Deadline.section_id == section_id))
    if row is None:
        row = Deadline(exercise_slug=exercise_slug, section_id=section_id, due_at=due_at)
        session.add(row)
    else:
        row.due_at = due_at
    session.flush()
    return row


def clear_deadline(session: Session, *, exercise_slug: str, section: str | None = None) -> bool:
    """Remove an exercise's deadline (for everyone, or one section's); say whether there was one."""
    where = [Deadline.exercise_slug == exercise_slug]
    if section:
        where.append(Deadline.section_id.in_(select(Section.id).where(Section.name == section)))
    else:
        where.append(Deadline.section_id.is_(None))
    return session.execute(delete(Deadline).where(*where)).rowcount > 0


def list_deadlines(session: Session) -> list[tuple[str, str | None, datetime]]:
    """Return every deadline as (exercise, section or None, due), by exercise then section."""
    query = (select(Deadline.exercise_slug, Section.name, Deadline.due_at)
             .outerjoin(Section, Section.id == Deadline.section_id))
    return sorted(session.execute(query).all(), key=lambda r: (r[0], r[1] or ""))


class Deadlines:
    """Every deadline, read once, answering "when is this learner's deadline for this exercise"."""

    def __init__(self, session: Session) -> None:
        self.general: dict[str, datetime] = {}
        self.by_section: dict[tuple[str, int], datetime] = {}
        for row in session.scalars(select(Deadline)):
            if row.section_id is None:
                self.general[row.exercise_slug] = row.due_at
            else:
                self.by_section[(row.exercise_slug, row.section_id)] = row.due_at
        self.sections: dict[str, list[int]] = {}
        if self.by_section:
            for learner_id, section_id in session.execute(
                    select(SectionMember.learner_id, SectionMember.section_id).where(SectionMember.role == "learner")):
                self.sections.setdefault(learner_id, []).append(section_id)

    def due(self, learner_id: str, exercise_slug: str) -> datetime | None:
        """Return the learner's deadline for the exercise (their sections' latest, else everyone's), or None."""
        own = [self.by_section[(exercise_slug, s)] for s in self.sections.get(learner_id, ())
               if (exercise_slug, s) in self.by_section]
        return max(own) if own else self.general.get(exercise_slug)

    def late(self, learner_id: str, exercise_slug: str, at: datetime | None) -> bool:
        """Say whether something done at `at` came after the learner's deadline."""
        due = self.due(learner_id, exercise_slug)
        return due is not None and at is not None and at > due


def deadline_for(session: Session, *, learner_id: str, exercise_slug: str) -> datetime | None:
    """Return one learner's deadline for one exercise, or None."""
    return Deadlines(session).due(learner_id, exercise_slug)


__all__ = ["set_deadline", "clear_deadline", "list_deadlines", "Deadlines", "deadline_for"]
