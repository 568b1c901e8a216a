"""Grades to the LMS (LTI Assignment and Grade Services): the after-verdict hook fills an outbox; a sender empties it.

**The hook** (`queue_grade`, in `app/submissions/hooks.py`'s AFTER_VERDICT) runs in the transaction that stored a
verdict, from whichever writer stored it (the web process, a worker, the sweeper, a regrade), and never touches
the network: for each LMS course (context) the learner launched from with grade services, it keeps one outbox row
per exercise (`LtiGrade`) holding the best score any verdict gave. A score only rises (PrairieLearn #12520: the
best of several attempts counts, a later worse attempt changes nothing), and a row is due only while its best is
above what the LMS has acknowledged, so a score is posted once, and again only when it rises.

**The sender** (`send_due`) posts what is due: from the site's loop (`run_sender`, every COURSE_LTI_SEND_INTERVAL_S,
started in the app's lifespan) and from `course lti send`. Each row is claimed first (its `due_at` moved on), so
two senders never post one grade at once. The line item (the LMS's gradebook column) of an exercise in a context
is found or created once and remembered (`LtiLineItem`, unique per context and exercise); before creating one the
sender asks the LMS for an item with the exercise's resource id, so a line item is never duplicated even if the
course lost its record (PrairieLearn #15643). A failure (the LMS down, a refusal) leaves the row due later, with
the wait doubling from COURSE_LTI_RETRY_S up to COURSE_LTI_RETRY_MAX_S: a score is never dropped.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread
from sqlalchemy import bindparam, func, or_, select, update
from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError
from sqlalchemy.orm import Session

from app.core.config import Settings
from app.core.db import Database
from app.lti import keys, services
from app.lti.launch import role_for
from app.models import utcnow
from app.models.lti import LtiContext, LtiGrade, LtiIdentity, LtiLineItem, LtiMember, LtiPlatform

if TYPE_CHECKING:
    from app.submissions.finish import Stored

log = logging.getLogger(__name__)

# the gradebook column's maximum: a pass is 100, a failed run the share of its checks that passed (below 100)
SCORE_MAXIMUM = 100.0
# grades one pass of the sender posts at most (the rest wait for the next pass)
BATCH = 100
# seconds a sender's claim on a row lasts: past it (the sender died), another sender may take the row
CLAIM_S = 120


def score_of(verdict: dict) -> float:
    """The verdict's score out of SCORE_MAXIMUM: 100 for a pass, else the share of checks that passed, under 100
    (a run that passed every check it reached but was not a pass still has something left to do)."""
    if verdict.get("status") == "passed":
        return SCORE_MAXIMUM
    checks = verdict.get("checks") or []
    if not checks:
        return 0.0
    share = sum(1 for check in checks if check.get("passed")) / len(checks)
    return min(round(SCORE_MAXIMUM * share, 1), SCORE_MAXIMUM - 1)


# the learner's memberships in LMS courses with grade services, the statement built once: every verdict asks,
# and most learners have none
_MEMBERS = (select(LtiMember).join(LtiContext, LtiContext.id == LtiMember.context_id)
            .where(LtiMember.learner_id == bindparam("learner_id"), LtiContext.lineitems_url.is_not(None)))


def queue_grade(session: Session, stored: Stored) -> None:
    """After-verdict hook: raise the learner's best score for this exercise in each LMS course they launched from
    (with grade services), and make it due when it rose. No network here."""
    submission = stored.submission
    members = session.scalars(_MEMBERS, {"learner_id": submission.learner_id})
    score = score_of(stored.verdict)
    for member in members:
        if role_for(member.roles) != "learner":  # the LMS's gradebook has its learners; staff trying it are not
            continue
        grade = session.scalar(select(LtiGrade).where(LtiGrade.context_id == member.context_id,
                                                      LtiGrade.member_id == member.id,
                                                      LtiGrade.exercise_slug == submission.exercise_slug))
        if grade is None:
            session.add(LtiGrade(context_id=member.context_id, member_id=member.id,
                                 exercise_slug=submission.exercise_slug, best=score, best_at=stored.at,
                                 due_at=stored.at, tries=0))
        elif score > grade.best:
            grade.best, grade.best_at, grade.due_at, grade.tries = score, stored.at, stored.at, 0
    session.flush()


@dataclass
class Sent:
    """What one pass of the sender did."""

    sent: int = 0
    failed: list[str] = field(default_factory=list)  # one sentence per grade that must wait (the LMS's answer)


@dataclass(frozen=True)
class _Job:
    grade_id: int
    best: float
    best_at: datetime
    exercise_slug: str
    context_id: int
    lineitems_url: str
    sub: str
    platform: services.Platform


def _due(session: Session, now: datetime) -> list:
    return session.execute(
        select(LtiGrade, LtiContext, LtiPlatform, LtiIdentity.sub)
        .join(LtiContext, LtiContext.id == LtiGrade.context_id)
        .join(LtiPlatform, LtiPlatform.id == LtiContext.platform_id)
        .join(LtiMember, LtiMember.id == LtiGrade.member_id)
        .join(LtiIdentity, (LtiIdentity.user_id == LtiMember.user_id) & (LtiIdentity.platform_id == LtiPlatform.id))
        .where(or_(LtiGrade.sent.is_(None), LtiGrade.best > LtiGrade.sent), LtiGrade.due_at <= now)
        .order_by(LtiGrade.due_at).limit(BATCH)).all()


def _claim(session: Session, rows: list, now: datetime) -> list[_Job]:
    jobs = []
    for grade, context, platform, sub in rows:
        # the claim: only the sender whose UPDATE moved due_at from what it read posts this grade
        claimed = session.execute(update(LtiGrade).where(LtiGrade.id == grade.id, LtiGrade.due_at == grade.due_at)
                                  .values(due_at=now + timedelta(seconds=CLAIM_S)),
                                  execution_options={"synchronize_session": False}).rowcount  # fmt: skip
        if claimed == 1:
            jobs.append(_Job(grade.id, grade.best, grade.best_at, grade.exercise_slug, context.id,
                             context.lineitems_url, sub, services.Platform.of(platform)))
    return jobs


def send_due(db: Database, settings: Settings, *, label: Callable[[str], str] = str,
             now: datetime | None = None) -> Sent:  # fmt: skip
    """Post every grade that is due (one pass); `label` names an exercise's gradebook column (its title)."""
    now = now or utcnow()
    with db.session() as session:  # a reader first: most passes find nothing, and take no write lock for it
        if not _due(session, now):
            return Sent()
    with db.session(write=True) as session:
        jobs = _claim(session, _due(session, now), now)
        key = keys.signing_key(session) if jobs else None
        session.commit()
    done = Sent()
    for job in jobs:
        try:
            token = services.access_token(job.platform, [services.LINEITEM, services.SCORE], key,
                                          settings.lti_http_timeout_s)
            url = _line_item(db, settings, job, token, label(job.exercise_slug))
            services.post_score(job.platform, token, url, {
                "userId": job.sub, "scoreGiven": job.best, "scoreMaximum": SCORE_MAXIMUM,
                "activityProgress": "Completed" if job.best >= SCORE_MAXIMUM else "Submitted",
                "gradingProgress": "FullyGraded", "timestamp": job.best_at.isoformat()}, settings.lti_http_timeout_s)
        except services.LmsError as exc:
            _failed(db, settings, job, str(exc), now)
            done.failed.append(str(exc))
            continue
        with db.session(write=True) as session:
            # best may have risen while this was in flight: then the row stays due (best > sent)
            session.execute(update(LtiGrade).where(LtiGrade.id == job.grade_id).values(
                sent=job.best, sent_at=utcnow(), tries=0, last_error=None, due_at=now))
            session.commit()
        done.sent += 1
    return done


def _line_item(db: Database, settings: Settings, job: _Job, token: str, label: str) -> str:
    """The exercise's line item in the context: remembered, else the LMS's own (by resource id), else a new one."""
    with db.session() as session:
        known = session.scalar(select(LtiLineItem.url).where(LtiLineItem.context_id == job.context_id,
                                                             LtiLineItem.exercise_slug == job.exercise_slug))
    if known:
        return known
    timeout = settings.lti_http_timeout_s
    url = services.find_line_item(job.platform, token, job.lineitems_url, job.exercise_slug, timeout) or \
        services.create_line_item(job.platform, token, job.lineitems_url, resource_id=job.exercise_slug,
                                  label=label, maximum=SCORE_MAXIMUM, timeout_s=timeout)  # fmt: skip
    with db.session(write=True) as session:
        try:
            session.add(LtiLineItem(context_id=job.context_id, exercise_slug=job.exercise_slug, url=url))
            session.commit()
        except IntegrityError:  # another sender recorded it first: theirs is the one
            session.rollback()
            url = session.scalar(select(LtiLineItem.url).where(LtiLineItem.context_id == job.context_id,
                                                               LtiLineItem.exercise_slug == job.exercise_slug))
    return url


def _failed(db: Database, settings: Settings, job: _Job, error: str, now: datetime) -> None:
    with db.session(write=True) as session:
        grade = session.get(LtiGrade, job.grade_id)
        grade.tries += 1
        wait = min(settings.lti_retry_s * 2 ** (grade.tries - 1), settings.lti_retry_max_s)
        grade.due_at, grade.last_error = now + timedelta(seconds=wait), error[:2000]
        session.commit()
    log.warning("grade for %s not sent (try %d), again in %.0f s: %s", job.exercise_slug, grade.tries, wait, error)


def waiting(session: Session) -> int:
    """Grades the LMS has not acknowledged yet (what `course lti send` reports)."""
    return session.scalar(select(func.count()).select_from(LtiGrade)
                          .where(or_(LtiGrade.sent.is_(None), LtiGrade.best > LtiGrade.sent))) or 0


async def run_sender(db: Database, settings: Settings, label: Callable[[str], str]) -> None:
    """The site's sender: a pass over the outbox every COURSE_LTI_SEND_INTERVAL_S until cancelled (lifespan)."""
    while True:
        await anyio.sleep(max(settings.lti_send_interval_s, 0.05))
        try:
            await anyio.to_thread.run_sync(lambda: send_due(db, settings, label=label))
        except (OperationalError, ProgrammingError) as exc:  # not migrated yet: the site says so elsewhere
            log.debug("grade sender: %s", exc)
        except Exception:  # one bad pass must not end the loop: the next one retries what is due
            log.exception("grade sender: a pass failed; the next one retries")
