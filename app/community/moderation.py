"""Moderation: signed-in people report comments, and instructors review them in one queue.

A person reports a comment once, with a reason. When COURSE_COMMENT_REPORT_HIDE_AT people have open reports on
a comment, it is hidden from learners (its author and instructors still see it, marked hidden) until an
instructor reviews it. Reviewing is whatever an instructor does to the comment: show it (it comes back, and its
reports are closed), hide it (it stays hidden, no longer awaiting review) or delete it; each closes the open
reports with what was done (`app.community.comments.close_reports`). A later report by someone who has not
reported it before opens the count again from zero.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from sqlalchemy import false, func, or_, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.community.comments import CommentError, get_visible
from app.models import Comment, CommentReport, User

# characters of a report's reason; it says what is wrong, the comment itself is right there
REASON_MAX_CHARS = 500


@dataclass
class ReportOutcome:
    """What a report did: the comment, and whether it is now hidden from learners."""

    comment: Comment
    hidden: bool


def check_reason(reason: str) -> str:
    """Return the reason trimmed; raise CommentError 422 when it is blank or too long."""
    reason = reason.strip()
    if not reason:
        raise CommentError(422, "Say why you report this comment (for example: rude, spam, gives away an answer).")
    if len(reason) > REASON_MAX_CHARS:
        raise CommentError(422, f"The reason is {len(reason):,} characters; keep it under {REASON_MAX_CHARS} and "
                                "let the comment speak for itself.")
    if "\x00" in reason:
        raise CommentError(422, "The reason contains a NUL character (\\x00); remove it and report again.")
    return reason


def open_reports(session: Session, *, comment_id: int) -> int:
    """Count the open (not yet reviewed) reports of a comment."""
    return session.scalar(select(func.count()).select_from(CommentReport).where(
        CommentReport.comment_id == comment_id, CommentReport.resolved_at.is_(None))) or 0


def report_comment(session: Session, *, comment_id: int, reporter: User, reason: str, hide_at: int) -> ReportOutcome:
    """Record a person's report of a comment; hide the comment once `hide_at` people have open reports on it."""
    comment = get_visible(session, comment_id=comment_id, viewer=reporter)
    if comment.author_id == reporter.id:
        raise CommentError(400, "This is your own comment: edit or delete it instead of reporting it.")
    reason = check_reason(reason)
    already = select(CommentReport.id).where(CommentReport.comment_id == comment.id,
                                             CommentReport.reporter_id == reporter.id)
    if session.scalar(already) is not None:
        raise CommentError(409, "You reported this comment already; an instructor will review it.")
    try:
        with session.begin_nested():
            session.add(CommentReport(comment_id=comment.id, reporter_id=reporter.id, reason=reason))
    except IntegrityError:  # the same person's second click, a moment after the first
        raise CommentError(409, "You reported this comment already; an instructor will review it.") from None
    if not comment.hidden and open_reports(session, comment_id=comment.id) >= hide_at:
        comment.hidden = True
    return ReportOutcome(comment=comment, hidden=comment.hidden)


def reported_by(session: Session, *, viewer: User | None, comment_ids: list[int]) -> set[int]:
    """Return which of these comments the viewer has reported (one query for a page of the thread)."""
    if viewer is None or not comment_ids:
        return set()
    query = select(CommentReport.comment_id).where(CommentReport.reporter_id == viewer.id,
                                                   CommentReport.comment_id.in_(comment_ids))
    return set(session.scalars(query))


@dataclass
class QueueItem:
    """One comment in the moderation queue, with its open reports and how many were closed before."""

    comment: Comment
    reports: list[CommentReport] = field(default_factory=list)
    closed: int = 0

    @property
    def awaiting_review(self) -> bool:
        """Hidden by reports (or reported while hidden) and no instructor has acted since."""
        return bool(self.reports)


def queue(session: Session) -> list[QueueItem]:
    """Return the comments to look at: those with open reports first (most reported first), then hidden ones."""
    has_open = select(CommentReport.comment_id).where(CommentReport.resolved_at.is_(None))
    comments = session.scalars(select(Comment).where(
        Comment.deleted == false(), or_(Comment.hidden, Comment.id.in_(has_open)))).unique().all()
    items = {c.id: QueueItem(c) for c in comments}
    if items:
        reports = session.scalars(select(CommentReport).where(CommentReport.comment_id.in_(list(items)))
                                  .order_by(CommentReport.created_at)).unique()
        counts: dict[int, int] = defaultdict(int)
        for report in reports:
            if report.resolved_at is None:
                items[report.comment_id].reports.append(report)
            else:
                counts[report.comment_id] += 1
        for comment_id, closed in counts.items():
            items[comment_id].closed = closed
    return sorted(items.values(), key=lambda i: (-len(i.reports), -i.comment.created_at.timestamp()))


def open_report_count(session: Session) -> int:
    """Count the comments awaiting review (for the dashboard's link to the queue)."""
    query = (select(func.count(func.distinct(CommentReport.comment_id))).select_from(CommentReport)
             .join(Comment, Comment.id == CommentReport.comment_id)
             .where(CommentReport.resolved_at.is_(None), Comment.deleted == false()))
    return session.scalar(query) or 0


__all__ = ["REASON_MAX_CHARS", "ReportOutcome", "QueueItem", "check_reason", "open_reports", "report_comment",
           "reported_by", "queue", "open_report_count"]
