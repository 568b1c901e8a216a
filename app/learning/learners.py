"""One learner, for instructors and teaching assistants: finding them (search by name, email or id), their page
(progress, every attempt with its code and checks, late flags, hints and solution looks), and the export of
learners' last code as a zip laid out for a similarity checker. Plain functions over the session; `visible` is
`sections.visible_learners(user)`: None for everyone, else the subquery of learner ids a TA may see.
"""

from __future__ import annotations

import io
import re
import zipfile
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from app.content.course import Course
from app.learning import reveals
from app.learning.attempts import REASONS
from app.learning.deadlines import Deadlines
from app.learning.sections import sections_of
from app.models import ExerciseProgress, Learner, Reveal, Submission, User

# learners listed per search
SEARCH_LIMIT = 50
# statuses whose code the export takes (a run the site broke or refused still holds the learner's code)
EXPORTED = ("passed", "failed", "timeout", "error")
STAFF_ROLES = ("ta", "instructor")


@dataclass
class LearnerRow:
    learner_id: str
    name: str
    email: str
    sections: list[str]


def _label(name: str | None, email: str | None, learner_id: str) -> str:
    return f"{name} <{email}>" if email else f"anonymous {learner_id[:8]}"


def search(session: Session, *, query: str = "", visible=None, limit: int = SEARCH_LIMIT) -> list[LearnerRow]:
    """Return the learners (accounts that are not staff, and anonymous learners with submissions) whose name or
    email contains `query`, or whose id starts with it, by email; at most `limit`."""
    staff = select(User.learner_id).where(User.role.in_(STAFF_ROLES))
    people = (select(Learner.id, User.display_name, User.email).outerjoin(User, User.learner_id == Learner.id)
              .where(or_(User.id.is_not(None), Learner.id.in_(select(Submission.learner_id))),
                     Learner.id.not_in(staff)))
    text = query.strip()[:100]
    if text:
        like = f"%{text.lower()}%"
        people = people.where(or_(func.lower(User.display_name).like(like), func.lower(User.email).like(like),
                                  Learner.id.like(f"{text.lower()}%")))
    if visible is not None:
        people = people.where(Learner.id.in_(visible))
    rows = session.execute(people.order_by(User.email.is_(None), User.email, Learner.id).limit(limit)).all()
    return [LearnerRow(learner_id, name or "", email or "", sections_of(session, learner_id))
            for learner_id, name, email in rows]


@dataclass
class Attempt:
    id: str
    created_at: datetime
    status: str
    code: str
    checks: list[dict[str, Any]]
    uncounted: str | None
    late: bool


@dataclass
class ExerciseView:
    slug: str
    title: str
    # when the learner first passed (their progress's passed_at; named apart from it: only progress writes a pass)
    first_pass: datetime | None = None
    deadline: datetime | None = None
    passed_late: bool = False
    hints_seen: int = 0
    solution_seen_at: datetime | None = None
    solution_before_passing: bool = False
    attempts: list[Attempt] = field(default_factory=list)  # newest first

    @property
    def last_code(self) -> str | None:
        return self.attempts[0].code if self.attempts else None


@dataclass
class LearnerView:
    learner_id: str
    name: str
    email: str
    sections: list[str]
    exercises: list[ExerciseView]
    looks: list[tuple[str, str, int | None, datetime]]  # (exercise, "hint"/"solution", hint number, when), newest first

    def as_json(self) -> dict[str, Any]:
        iso = lambda t: t.isoformat() if t else None  # noqa: E731
        return {"learner_id": self.learner_id, "name": self.name, "email": self.email, "sections": self.sections,
                "exercises": [{"slug": e.slug, "title": e.title, "passed_at": iso(e.first_pass),
                               "deadline": iso(e.deadline), "passed_late": e.passed_late,
                               "hints_seen": e.hints_seen, "solution_seen_at": iso(e.solution_seen_at),
                               "solution_seen_before_passing": e.solution_before_passing,
                               "attempts": [{"id": a.id, "created_at": iso(a.created_at), "status": a.status,
                                             "late": a.late, "uncounted": a.uncounted, "code": a.code,
                                             "checks": a.checks} for a in e.attempts]}
                              for e in self.exercises],
                "looks": [{"exercise": slug, "kind": kind, "hint": hint, "at": iso(at)}
                          for slug, kind, hint, at in self.looks]}


def learner_view(session: Session, *, learner_id: str, course: Course, code_query: str = "") -> LearnerView | None:
    """Return one learner's page, or None when there is no such learner. With `code_query`, only the attempts
    whose code contains it are listed."""
    learner = session.get(Learner, learner_id)
    if learner is None:
        return None
    user = session.scalar(select(User).where(User.learner_id == learner_id))
    deadlines = Deadlines(session)
    progress = {r.exercise_slug: r for r in session.scalars(
        select(ExerciseProgress).where(ExerciseProgress.learner_id == learner_id))}
    looked = reveals.looks(session, learner_ids=[learner_id])
    submissions = session.scalars(select(Submission).where(Submission.learner_id == learner_id)
                                  .order_by(Submission.created_at.desc(), Submission.id.desc())).all()
    views: dict[str, ExerciseView] = {}
    for exercise in course.exercises.values():
        row = progress.get(exercise.slug)
        seen = looked.get((learner_id, exercise.slug), {})
        passed_at = row.passed_at if row else None
        views[exercise.slug] = ExerciseView(
            slug=exercise.slug, title=exercise.title, first_pass=passed_at,
            deadline=deadlines.due(learner_id, exercise.slug),
            passed_late=deadlines.late(learner_id, exercise.slug, passed_at), hints_seen=seen.get("hints", 0),
            solution_seen_at=seen.get("solution_at"),
            solution_before_passing=reveals.seen_before_passing(seen.get("solution_at"), passed_at))
    for s in submissions:
        if s.exercise_slug not in views or (code_query and code_query not in s.code):
            continue
        views[s.exercise_slug].attempts.append(Attempt(
            id=s.id, created_at=s.created_at, status=s.status, code=s.code,
            checks=list((s.verdict or {}).get("checks") or []), uncounted=s.uncounted,
            late=deadlines.late(learner_id, s.exercise_slug, s.created_at)))
    order = [e.slug for e in _in_order(course)]
    listed = [views[slug] for slug in order if views[slug].attempts or views[slug].first_pass
              or views[slug].hints_seen or views[slug].solution_seen_at or not code_query]
    looks = [(r.exercise_slug, r.kind, r.hint, r.at) for r in session.scalars(
        select(Reveal).where(Reveal.learner_id == learner_id).order_by(Reveal.at.desc()))]
    return LearnerView(learner_id=learner_id, name=user.display_name if user else "",
                       email=user.email if user else "", sections=sections_of(session, learner_id),
                       exercises=listed, looks=looks)


def _in_order(course: Course):
    from app.learning.dashboard import exercises_in_order

    return exercises_in_order(course)


def _safe(text: str) -> str:
    """A file name part: letters, digits, dot, dash and underscore only."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._")[:60] or "learner"


def code_zip(session: Session, *, course: Course, exercise_slug: str | None = None, visible=None) -> bytes:
    """Return a zip of each learner's last submission per exercise, laid out for a similarity checker (JPlag,
    MOSS, Dolos): `EXERCISE/LEARNER/main.py`, one folder per submission; the starter as `base/EXERCISE/main.py`
    (the code everyone was given, for the checker's base-code option); a README.txt saying so."""
    staff = select(User.learner_id).where(User.role.in_(STAFF_ROLES))
    last = (select(Submission.learner_id, Submission.exercise_slug, func.max(Submission.created_at).label("at"))
            .where(Submission.status.in_(EXPORTED), Submission.learner_id.not_in(staff))
            .group_by(Submission.learner_id, Submission.exercise_slug))
    if exercise_slug is not None:
        last = last.where(Submission.exercise_slug == exercise_slug)
    if visible is not None:
        last = last.where(Submission.learner_id.in_(visible))
    last = last.subquery("last")
    query = (select(Submission.exercise_slug, Submission.learner_id, Submission.code, User.email)
             .join(last, (last.c.learner_id == Submission.learner_id)
                   & (last.c.exercise_slug == Submission.exercise_slug) & (last.c.at == Submission.created_at))
             .outerjoin(User, User.learner_id == Submission.learner_id)
             .order_by(Submission.exercise_slug, Submission.learner_id))
    out = io.BytesIO()
    taken: set[str] = set()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("README.txt", README)
        for slug, learner_id, code, email in session.execute(query):
            if slug not in course.exercises:
                continue
            folder = f"{_safe(slug)}/{_safe(email.split('@')[0] if email else 'anonymous')}-{learner_id[:8]}"
            if folder in taken:  # two submissions stored in the same instant: keep one
                continue
            taken.add(folder)
            archive.writestr(f"{folder}/main.py", code)
        for slug, exercise in sorted(course.exercises.items()):
            if exercise_slug is None or slug == exercise_slug:
                archive.writestr(f"base/{_safe(slug)}/main.py", exercise.starter)
    return out.getvalue()


README = """Learners' code, for a similarity check.

EXERCISE/LEARNER-ID/main.py  each learner's last submission of each exercise (one folder per submission)
base/EXERCISE/main.py        the starter everyone was given: pass it as base code so it is not counted as shared

JPlag:  java -jar jplag.jar -l python3 -bc ../base/EXERCISE EXERCISE
Dolos:  dolos run -l python EXERCISE/*/main.py
"""

__all__ = ["search", "learner_view", "code_zip", "LearnerRow", "LearnerView", "ExerciseView", "Attempt",
           "REASONS", "SEARCH_LIMIT"]
