"""What the instructor dashboard shows: how learners do on each exercise, who reads each lesson, recent
submissions, and the progress export. Plain functions over the session; they know nothing of HTTP.

Figures come from each submission's current verdict (`app.submissions.history`: after a regrade, the regrade's), and
leave out instructors' own submissions (trying an exercise does not make an instructor a learner). An attempt is a
run the learner's code decided: passed, failed or timeout. A run the site broke (`error`) or
refused (`rejected`) is not the learner's attempt, as for unlocking the solution. Every figure is one query
for the whole class; the medians are taken in Python over one row per learner who passed, since portable SQL
has no median.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import and_, case, distinct, false, func, or_, select
from sqlalchemy.orm import Session

from app.content.course import Course
from app.content.exercises import Exercise
from app.learning import reveals
from app.learning.deadlines import Deadlines
from app.models import (
    Comment,
    CommentReport,
    ExerciseProgress,
    Learner,
    LessonRead,
    Section,
    SectionMember,
    Submission,
    User,
)
from app.submissions.history import current_verdicts, history, instructor_learner_ids, verdict_of

ATTEMPT_STATUSES = ("passed", "failed", "timeout")
FAILED = ("failed", "timeout")
# exception lines listed per exercise, most common first
TOP_EXCEPTIONS = 5
# submissions per page of an exercise's recent submissions
PER_PAGE = 20


@dataclass
class ExerciseFigures:
    """How the class does on one exercise."""

    slug: str
    title: str
    lesson: str
    checks: list[str]
    learners: int = 0
    passed_learners: int = 0
    attempts: int = 0
    median_attempts_to_pass: float | None = None
    median_seconds_to_pass: float | None = None
    # check id -> attempts whose first failing check it was, most first
    failing_checks: dict[str, int] = field(default_factory=dict)
    # (exception line, attempts that ended with it), most first
    exceptions: list[tuple[str, int]] = field(default_factory=list)
    # failed attempts that ran nothing new, by why (app/learning/attempts.py REASONS), kept out of failing_checks
    uncounted: dict[str, int] = field(default_factory=dict)
    # learners who passed after seeing the reference solution
    solution_first: int = 0
    # learners whose first pass came after their deadline (None: the exercise has no deadline)
    late_passes: int | None = None

    @property
    def pass_rate(self) -> float | None:
        """Learners who passed over learners who tried (None when nobody tried)."""
        return round(self.passed_learners / self.learners, 4) if self.learners else None

    def as_json(self) -> dict[str, Any]:
        """Return the shape of GET /api/instructor/exercises."""
        return {"slug": self.slug, "learners": self.learners, "passed_learners": self.passed_learners,
                "pass_rate": self.pass_rate, "attempts": self.attempts,
                "median_attempts_to_pass": self.median_attempts_to_pass, "failing_checks": self.failing_checks,
                "uncounted_failures": self.uncounted, "passed_after_seeing_solution": self.solution_first,
                "late_passes": self.late_passes}


def exercises_in_order(course: Course) -> list[Exercise]:
    """Return the course's exercises in the order learners meet them (lesson by lesson), then any unplaced."""
    slugs = [slug for lesson in course.lessons for slug in lesson.meta.exercises if slug in course.exercises]
    slugs += sorted(set(course.exercises) - set(slugs))
    return [course.exercises[slug] for slug in dict.fromkeys(slugs)]


def exercise_figures(session: Session, *, exercises: list[Exercise]) -> list[ExerciseFigures]:
    """Return the figures of each exercise, in the order given (four queries for the whole class)."""
    figures = {e.slug: ExerciseFigures(e.slug, e.title, e.lesson, e.spec.check_ids) for e in exercises}
    current = current_verdicts(learners_only=True)
    attempt = current.c.status.in_(ATTEMPT_STATUSES)
    totals = (select(current.c.exercise_slug, func.count(distinct(current.c.learner_id)),
                     func.count(distinct(case((current.c.status == "passed", current.c.learner_id)))), func.count())
              .where(attempt).group_by(current.c.exercise_slug))
    for slug, learners, passed, attempts in session.execute(totals):
        if slug in figures:
            figures[slug].learners, figures[slug].passed_learners, figures[slug].attempts = learners, passed, attempts
    for slug, (attempts, seconds) in _paths_to_pass(session, current).items():
        if slug in figures:
            figures[slug].median_attempts_to_pass = statistics.median(attempts)
            figures[slug].median_seconds_to_pass = statistics.median(seconds)
    # an attempt that ran nothing new (unchanged starter, a repeat, a syntax error) would push its check to the
    # top for no reason: it is counted apart
    failing = (select(current.c.exercise_slug, current.c.first_failed_check, func.count())
               .where(current.c.status.in_(FAILED), current.c.first_failed_check.is_not(None),
                      current.c.uncounted.is_(None))
               .group_by(current.c.exercise_slug, current.c.first_failed_check))
    for slug, check, count in sorted(session.execute(failing), key=lambda r: (-r[2], r[1])):
        if slug in figures:
            figures[slug].failing_checks[check] = count
    junk = (select(current.c.exercise_slug, current.c.uncounted, func.count())
            .where(current.c.status.in_(FAILED), current.c.uncounted.is_not(None))
            .group_by(current.c.exercise_slug, current.c.uncounted))
    for slug, reason, count in sorted(session.execute(junk), key=lambda r: (-r[2], r[1])):
        if slug in figures:
            figures[slug].uncounted[reason] = count
    for slug, count in reveals.solution_first_by_exercise(session, learners=instructor_learner_ids()).items():
        if slug in figures:
            figures[slug].solution_first = count
    _late_passes(session, figures)
    errors = (select(current.c.exercise_slug, current.c.error_line, func.count())
              .where(attempt, current.c.error_line.is_not(None))
              .group_by(current.c.exercise_slug, current.c.error_line))
    for slug, line, count in sorted(session.execute(errors), key=lambda r: (-r[2], r[1])):
        if slug in figures and len(figures[slug].exceptions) < TOP_EXCEPTIONS:
            figures[slug].exceptions.append((line, count))
    return list(figures.values())


def _late_passes(session: Session, figures: dict[str, ExerciseFigures]) -> None:
    """Count, per exercise with a deadline, the learners whose pass came after their deadline (late, not refused)."""
    deadlines = Deadlines(session)
    dated = {slug for slug in figures if slug in deadlines.general} | {slug for slug, _ in deadlines.by_section}
    if not dated:
        return
    for slug in dated & set(figures):
        figures[slug].late_passes = 0
    passes = select(ExerciseProgress.learner_id, ExerciseProgress.exercise_slug, ExerciseProgress.passed_at).where(
        ExerciseProgress.passed_at.is_not(None), ExerciseProgress.exercise_slug.in_(dated),
        ExerciseProgress.learner_id.not_in(instructor_learner_ids()))
    for learner_id, slug, passed_at in session.execute(passes):
        if slug in figures and deadlines.late(learner_id, slug, passed_at):
            figures[slug].late_passes += 1


def _paths_to_pass(session: Session, current) -> dict[str, tuple[list[int], list[float]]]:
    """Return, per exercise, each passing learner's attempts up to their first pass and seconds from their
    first attempt to it (one row per learner who passed)."""
    attempt = current.c.status.in_(ATTEMPT_STATUSES)
    firsts = (select(current.c.exercise_slug, current.c.learner_id,
                     func.min(current.c.created_at).label("first_at"),
                     func.min(case((current.c.status == "passed", current.c.created_at))).label("passed_at"))
              .where(attempt).group_by(current.c.exercise_slug, current.c.learner_id).subquery("firsts"))
    until_pass = and_(current.c.exercise_slug == firsts.c.exercise_slug, current.c.learner_id == firsts.c.learner_id,
                      current.c.created_at <= firsts.c.passed_at, attempt)
    query = (select(firsts.c.exercise_slug, firsts.c.first_at, firsts.c.passed_at, func.count())
             .join(current, until_pass).where(firsts.c.passed_at.is_not(None))
             .group_by(firsts.c.exercise_slug, firsts.c.learner_id, firsts.c.first_at, firsts.c.passed_at))
    paths: dict[str, tuple[list[int], list[float]]] = defaultdict(lambda: ([], []))
    for slug, first_at, passed_at, attempts in session.execute(query):
        paths[slug][0].append(attempts)
        paths[slug][1].append((_aware(passed_at) - _aware(first_at)).total_seconds())
    return paths


def _aware(value) -> datetime:
    """Return an aggregate's timestamp as an aware datetime (SQLite hands MIN() of a column back as text)."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value if value.tzinfo else value.replace(tzinfo=UTC)


@dataclass
class LessonFigures:
    """Readers and comments of one lesson."""

    slug: str
    title: str
    readers: int = 0
    comments: int = 0
    hidden: int = 0
    reported: int = 0


def lesson_figures(session: Session, *, course: Course) -> list[LessonFigures]:
    """Return, per lesson in course order, its readers, comments (hidden ones too) and comments reported."""
    figures = {lesson.slug: LessonFigures(lesson.slug, lesson.title) for lesson in course.lessons}
    readers = (select(LessonRead.lesson_slug, func.count())
               .where(LessonRead.learner_id.not_in(instructor_learner_ids())).group_by(LessonRead.lesson_slug))
    for slug, count in session.execute(readers):
        if slug in figures:
            figures[slug].readers = count
    comments = (select(Comment.lesson_slug, func.count(), func.count(case((Comment.hidden, Comment.id))))
                .where(Comment.deleted == false()).group_by(Comment.lesson_slug))
    for slug, count, hidden in session.execute(comments):
        if slug in figures:
            figures[slug].comments, figures[slug].hidden = count, hidden
    reported = (select(Comment.lesson_slug, func.count(distinct(CommentReport.comment_id)))
                .join(Comment, Comment.id == CommentReport.comment_id)
                .where(CommentReport.resolved_at.is_(None), Comment.deleted == false()).group_by(Comment.lesson_slug))
    for slug, count in session.execute(reported):
        if slug in figures:
            figures[slug].reported = count
    return list(figures.values())


@dataclass
class SubmissionRow:
    """One stored submission as the exercise page lists it: who, when, the code, and every verdict it had."""

    submission: Submission
    learner: str
    status: str
    first_failed_check: str | None
    verdict: dict[str, Any] | None
    history: list[dict[str, Any]]


def learner_name(display_name: str | None, email: str | None, learner_id: str) -> str:
    """Name a learner for instructors: the account's name and email, or "anonymous" and the id's start."""
    return f"{display_name} <{email}>" if email else f"anonymous {learner_id[:8]}"


def recent_submissions(session: Session, *, exercise_slug: str, check: str | None = None,
                       page: int = 1) -> tuple[list[SubmissionRow], bool]:  # fmt: skip
    """Return one page of an exercise's graded submissions, newest first (only those whose current verdict's
    first failing check is `check`, if given), and whether an older page exists."""
    current = current_verdicts(exercise_slug=exercise_slug, learners_only=True)
    query = (select(Submission, current.c.status, current.c.first_failed_check, User.display_name, User.email)
             .join(current, current.c.submission_id == Submission.id)
             .outerjoin(User, User.learner_id == Submission.learner_id)
             .order_by(Submission.created_at.desc(), Submission.id.desc())
             .offset((page - 1) * PER_PAGE).limit(PER_PAGE + 1))
    if check:
        query = query.where(current.c.first_failed_check == check)
    found = session.execute(query).all()
    rows = found[:PER_PAGE]
    verdicts = history(session, submission_ids=[r[0].id for r in rows])
    listed = []
    for submission, status, first_failed, name, email in rows:
        past = verdicts.get(submission.id, [])
        listed.append(SubmissionRow(
            submission=submission, learner=learner_name(name, email, submission.learner_id), status=status,
            first_failed_check=first_failed, verdict=verdict_of(submission, past[-1]) if past else submission.verdict,
            history=[{"revision": v.revision, "regrade_id": v.regrade_id, "status": v.status,
                      "graded_at": v.graded_at, "first_failed_check": v.first_failed_check} for v in past]))
    return listed, len(found) > PER_PAGE


def unsupported_passes(session: Session, *, exercise_slug: str) -> list[str]:
    """Name the learners whose progress says they passed an exercise although none of their submissions passes
    under its current checks (a regrade turned their pass into a fail; they keep the pass)."""
    current = current_verdicts(exercise_slug=exercise_slug, learners_only=True)
    passing = select(current.c.learner_id).where(current.c.status == "passed")
    query = (select(ExerciseProgress.learner_id, User.display_name, User.email)
             .outerjoin(User, User.learner_id == ExerciseProgress.learner_id)
             .where(ExerciseProgress.exercise_slug == exercise_slug, ExerciseProgress.passed_at.is_not(None),
                    ExerciseProgress.learner_id.not_in(passing),
                    ExerciseProgress.learner_id.not_in(instructor_learner_ids()))
             .order_by(ExerciseProgress.learner_id))
    return [learner_name(name, email, learner) for learner, name, email in session.execute(query)]


PROGRESS_COLUMNS = ["learner_id", "name", "email", "exercise", "lesson", "attempts", "passed", "passed_at",
                    "first_attempt_at", "last_attempt_at", "passes_current_checks", "hints_seen", "solution_seen_at",
                    "solution_seen_before_passing", "sections", "deadline", "passed_late"]


def progress_rows(session: Session, *, course: Course) -> list[list[str]]:
    """Return the progress export: one row per learner and exercise of the course (PROGRESS_COLUMNS).

    Learners are those with a learner's account and anonymous ones who attempted something; `attempts` and `passed` are
    their progress as they see it, `passes_current_checks` whether a submission passes under today's checks.
    """
    people = (select(Learner.id, User.display_name, User.email).outerjoin(User, User.learner_id == Learner.id)
              .where(or_(User.id.is_not(None), Learner.id.in_(select(ExerciseProgress.learner_id))),
                     Learner.id.not_in(instructor_learner_ids())))
    learners = sorted(session.execute(people), key=lambda r: (r[2] is None, r[2] or "", r[0]))
    progress = {(r.learner_id, r.exercise_slug): r for r in session.scalars(select(ExerciseProgress))}
    current = current_verdicts(learners_only=True)
    passing = set(session.execute(select(current.c.learner_id, current.c.exercise_slug)
                                  .where(current.c.status == "passed").distinct()).all())
    looked = reveals.looks(session)
    deadlines = Deadlines(session)
    in_sections = sections_by_learner(session)
    iso = lambda t: t.isoformat() if t else ""  # noqa: E731
    rows = []
    for learner_id, name, email in learners:
        for exercise in exercises_in_order(course):
            slug = exercise.slug
            row = progress.get((learner_id, slug))
            passed_at = row.passed_at if row else None
            seen = looked.get((learner_id, slug), {})
            due = deadlines.due(learner_id, slug)
            rows.append([learner_id, name or "", email or "", slug, exercise.lesson, str(row.attempts if row else 0),
                         "yes" if passed_at else "no", iso(passed_at),
                         iso(row and row.first_attempt_at), iso(row and row.last_attempt_at),
                         "yes" if (learner_id, slug) in passing else "no", str(seen.get("hints", 0)),
                         iso(seen.get("solution_at")),
                         "yes" if reveals.seen_before_passing(seen.get("solution_at"), passed_at) else "no",
                         "; ".join(in_sections.get(learner_id, [])), iso(due),
                         "yes" if deadlines.late(learner_id, slug, passed_at) else "no"])
    return rows


def sections_by_learner(session: Session) -> dict[str, list[str]]:
    """Return each learner's sections (as a learner), by name, in one query."""
    found: dict[str, list[str]] = defaultdict(list)
    query = (select(SectionMember.learner_id, Section.name).join(Section, Section.id == SectionMember.section_id)
             .where(SectionMember.role == "learner").order_by(Section.name))
    for learner_id, name in session.execute(query):
        found[learner_id].append(name)
    return found


__all__ = ["ExerciseFigures", "LessonFigures", "SubmissionRow", "exercises_in_order", "exercise_figures",
           "lesson_figures", "recent_submissions", "unsupported_passes", "progress_rows", "learner_name",
           "PROGRESS_COLUMNS", "ATTEMPT_STATUSES", "PER_PAGE"]
