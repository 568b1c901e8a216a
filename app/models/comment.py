"""Comments: one thread per lesson, replies one level deep, soft delete and instructor hiding."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, ForeignKey, Index, String, Text, UniqueConstraint, false
from sqlalchemy.orm import Mapped, mapped_column, relationship

from app.models.base import Base, UTCDateTime, utcnow
from app.models.user import User


class Comment(Base):
    """A comment's body is Markdown as typed; it is rendered and sanitised on display, never stored as HTML.

    Deleting keeps the row (replies stay attached) but empties the body; `hidden` is an instructor's call and
    keeps the body for instructors to see. When the author's account is deleted the comment stays, with no
    author ("deleted user"), so threads keep their shape.
    """

    __tablename__ = "comments"
    __table_args__ = (Index(None, "lesson_slug", "parent_id", "created_at"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    lesson_slug: Mapped[str] = mapped_column(String(100))
    author_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    parent_id: Mapped[int | None] = mapped_column(ForeignKey("comments.id", ondelete="CASCADE"), index=True)
    body: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    edited_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    hidden: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    deleted: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())

    author: Mapped[User | None] = relationship(lazy="joined")


class CommentReport(Base):
    """A signed-in person's report of a comment, with their reason; one per person and comment.

    A report is open until an instructor reviews the comment (shows, hides or deletes it), which sets
    `resolved_at` and `resolution`. Open reports from COURSE_COMMENT_REPORT_HIDE_AT people hide the comment.
    """

    __tablename__ = "comment_reports"
    __table_args__ = (UniqueConstraint("comment_id", "reporter_id"), Index(None, "resolved_at", "comment_id"))

    id: Mapped[int] = mapped_column(primary_key=True)
    comment_id: Mapped[int] = mapped_column(ForeignKey("comments.id", ondelete="CASCADE"))
    reporter_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    reason: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    resolved_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    # what the reviewing instructor did: "shown", "hidden" or "deleted"
    resolution: Mapped[str | None] = mapped_column(String(16))

    reporter: Mapped[User] = relationship(lazy="joined")
