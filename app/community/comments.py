"""Comment threads: one per lesson, replies one level deep, Markdown rendered safely, moderation.

Rendering: markdown-it's CommonMark preset with raw HTML off, then nh3 with a small allowlist. Images are not
embedded (a remote image in a comment tracks every reader); `![alt](url)` stays plain text. Links keep only
http, https and mailto and get rel="nofollow noopener ugc". Bodies are stored exactly as typed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import nh3
from markdown_it import MarkdownIt
from sqlalchemy import ColumnElement, exists, false, func, or_, select, true, update
from sqlalchemy.orm import Session, aliased

from app.core.errors import Refusal
from app.models import Comment, CommentReport, User, utcnow

# top-level comments per page; replies always travel with their parent
PER_PAGE = 50

_md = MarkdownIt("commonmark", {"html": False, "linkify": False}).disable("image")
ALLOWED_TAGS = {
    "p", "br", "hr", "strong", "em", "code", "pre", "blockquote", "ul", "ol", "li", "a",
    "h1", "h2", "h3", "h4", "h5", "h6",
}  # fmt: skip
ALLOWED_ATTRIBUTES = {"a": {"href", "title"}, "ol": {"start"}}
URL_SCHEMES = {"http", "https", "mailto"}
LINK_REL = "nofollow noopener ugc"
# who wrote a comment whose author deleted their account
DELETED_USER = "deleted user"


class CommentError(Refusal):
    """A refusal the web layer turns into an HTTP status: `status_code` and a message a person can act on."""


def render_markdown(body: str) -> str:
    """Render a comment's Markdown to sanitised HTML."""
    html = _md.render(body)
    return nh3.clean(
        html, tags=ALLOWED_TAGS, attributes=ALLOWED_ATTRIBUTES, url_schemes=URL_SCHEMES, link_rel=LINK_REL
    )


def body_problem(body: str) -> str | None:
    """Say what makes a comment body unpostable whatever its length (blank, or a NUL), or None if nothing does."""
    if not body.strip():
        return "The comment is empty; write something before posting."
    if "\x00" in body:  # PostgreSQL text cannot hold NUL, and no person types one
        return "The comment contains a NUL character (\\x00); remove it and post again."
    return None


def check_body(body: str, max_chars: int) -> str:
    """Return the body if it is acceptable; raise CommentError 422 (blank, NUL) or 413 (too long)."""
    problem = body_problem(body)
    if problem is not None:
        raise CommentError(422, problem)
    if len(body) > max_chars:
        raise CommentError(
            413,
            f"The comment is {len(body):,} characters; the limit is {max_chars:,}. "
            f"Shorten it by {len(body) - max_chars:,} characters.",
        )
    return body


def _visible(comment, viewer: User | None) -> ColumnElement[bool]:
    """SQL for "this viewer may see this comment": instructors see hidden ones, authors see their own."""
    if viewer is not None and viewer.is_instructor:
        return true()
    if viewer is None:
        return comment.hidden == false()
    return or_(comment.hidden == false(), comment.author_id == viewer.id)


def count_comments(session: Session, *, lesson_slug: str, viewer: User | None) -> int:
    """Count the comments this viewer sees under a lesson (replies included, deleted ones not)."""
    parent = aliased(Comment)
    query = (
        select(func.count(Comment.id))
        .outerjoin(parent, Comment.parent_id == parent.id)
        .where(Comment.lesson_slug == lesson_slug, Comment.deleted == false(), _visible(Comment, viewer))
        .where(or_(Comment.parent_id.is_(None), _visible(parent, viewer)))
    )
    return session.scalar(query) or 0


@dataclass
class Thread:
    """One page of a lesson's thread: top-level comments with their replies."""

    lesson_slug: str
    count: int
    page: int
    pages: int
    comments: list[Comment]
    replies: dict[int, list[Comment]] = field(default_factory=dict)


def _top_level_query(lesson_slug: str, viewer: User | None):
    reply = aliased(Comment)
    live_reply = exists().where(reply.parent_id == Comment.id, reply.deleted == false(), _visible(reply, viewer))
    return select(Comment).where(
        Comment.lesson_slug == lesson_slug,
        Comment.parent_id.is_(None),
        _visible(Comment, viewer),
        # a deleted comment stays (as "deleted") only while replies hang under it
        or_(Comment.deleted == false(), live_reply),
    )


def list_thread(session: Session, *, lesson_slug: str, viewer: User | None, page: int = 1) -> Thread:
    """Return one page (1-based) of a lesson's thread as this viewer sees it, oldest first."""
    base = _top_level_query(lesson_slug, viewer)
    total_top = session.scalar(select(func.count()).select_from(base.subquery())) or 0
    pages = max(1, math.ceil(total_top / PER_PAGE))
    page = min(max(1, page), pages)
    top = list(
        session.scalars(
            base.order_by(Comment.created_at, Comment.id).offset((page - 1) * PER_PAGE).limit(PER_PAGE)
        ).unique()
    )
    replies: dict[int, list[Comment]] = {c.id: [] for c in top}
    if top:
        query = (
            select(Comment)
            .where(Comment.parent_id.in_(list(replies)), Comment.deleted == false(), _visible(Comment, viewer))
            .order_by(Comment.created_at, Comment.id)
        )
        for reply in session.scalars(query).unique():
            replies[reply.parent_id].append(reply)
    count = count_comments(session, lesson_slug=lesson_slug, viewer=viewer)
    return Thread(lesson_slug=lesson_slug, count=count, page=page, pages=pages, comments=top, replies=replies)


def get_visible(session: Session, *, comment_id: int, viewer: User | None) -> Comment:
    """Return a comment this viewer may see; raise CommentError 404 otherwise (also for deleted ones)."""
    comment = session.get(Comment, comment_id)
    hidden_from_viewer = comment is not None and comment.hidden and not _can_see_hidden(comment, viewer)
    if comment is None or comment.deleted or hidden_from_viewer:
        raise CommentError(404, f"There is no comment {comment_id}.")
    return comment


def _can_see_hidden(comment: Comment, viewer: User | None) -> bool:
    return viewer is not None and (viewer.is_instructor or viewer.id == comment.author_id)


def post_comment(
    session: Session, *, author: User, lesson_slug: str, body: str, max_chars: int, parent_id: int | None = None
) -> Comment:
    """Add a comment (or a reply to a top-level comment of the same lesson) and return it."""
    check_body(body, max_chars)
    if parent_id is not None:
        parent = get_visible(session, comment_id=parent_id, viewer=author)
        if parent.lesson_slug != lesson_slug:
            raise CommentError(400, f"Comment {parent_id} belongs to another lesson; reply under its own lesson.")
        if parent.parent_id is not None:
            raise CommentError(400, "Replies go one level deep: reply to the comment that starts the thread.")
    comment = Comment(lesson_slug=lesson_slug, author_id=author.id, parent_id=parent_id, body=body)
    session.add(comment)
    session.flush()
    session.refresh(comment)
    return comment


def edit_comment(session: Session, *, comment_id: int, editor: User, body: str, max_chars: int) -> Comment:
    """Replace the body of the editor's own comment and mark it edited."""
    comment = get_visible(session, comment_id=comment_id, viewer=editor)
    if comment.author_id != editor.id:
        raise CommentError(403, "You can edit only your own comments.")
    check_body(body, max_chars)
    comment.body = body
    comment.edited_at = utcnow()
    return comment


def delete_comment(session: Session, *, comment_id: int, actor: User) -> Comment:
    """Delete a comment: its author or an instructor may. The row stays so replies keep their place."""
    comment = get_visible(session, comment_id=comment_id, viewer=actor)
    if comment.author_id != actor.id and not actor.is_instructor:
        raise CommentError(403, "You can delete only your own comments.")
    comment.deleted = True
    comment.body = ""
    if actor.is_instructor:
        close_reports(session, comment_id=comment.id, resolution="deleted")
    return comment


def hide_comment(session: Session, *, comment_id: int, actor: User, hidden: bool = True) -> Comment:
    """Hide (or show again) a comment; instructors only. Hidden comments stay visible to instructors."""
    if not actor.is_instructor:
        raise CommentError(403, "Only instructors can hide comments.")
    comment = get_visible(session, comment_id=comment_id, viewer=actor)
    comment.hidden = hidden
    close_reports(session, comment_id=comment.id, resolution="hidden" if hidden else "shown")
    return comment


def close_reports(session: Session, *, comment_id: int, resolution: str) -> None:
    """Close a comment's open reports: an instructor showing, hiding or deleting it has reviewed it."""
    session.execute(update(CommentReport).where(CommentReport.comment_id == comment_id,
                                                CommentReport.resolved_at.is_(None))
                    .values(resolved_at=utcnow(), resolution=resolution))


def permissions(comment: Comment, viewer: User | None) -> dict[str, bool]:
    """Say what this viewer may do with this comment (the page shows only the buttons that will work)."""
    own = viewer is not None and viewer.id == comment.author_id and not comment.deleted
    instructor = viewer is not None and viewer.is_instructor and not comment.deleted
    return {
        "can_edit": own,
        "can_delete": own or instructor,
        "can_hide": instructor,
        "can_reply": viewer is not None and comment.parent_id is None and not comment.deleted,
        # instructors hide a comment instead of reporting it; authors edit or delete their own
        "can_report": viewer is not None and not viewer.is_instructor and not comment.deleted
        and viewer.id != comment.author_id,
    }


__all__ = [
    "PER_PAGE",
    "DELETED_USER",
    "CommentError",
    "Thread",
    "render_markdown",
    "body_problem",
    "check_body",
    "count_comments",
    "list_thread",
    "get_visible",
    "post_comment",
    "edit_comment",
    "delete_comment",
    "hide_comment",
    "close_reports",
    "permissions",
]
