"""Comment threads: the JSON API the page's script uses, form routes for browsers without JavaScript, and
`thread_view`, the page of a thread the lesson page shows.

A refusal from `app.community.comments` (CommentError) is answered by the handler `create_app` registers for it; only
the form routes catch it, to send the browser back to the thread with the message shown above it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Form, Path, Query, Request, Response
from fastapi.responses import RedirectResponse
from pydantic import AfterValidator, BaseModel, BeforeValidator, Field
from sqlalchemy.orm import Session

from app.community import comments, moderation
from app.models import Comment, User
from app.web.deps import CurrentUser, KnownLesson, OptionalUser, SessionDep, per_person_limits

router = APIRouter()

# the largest id a portable INTEGER column holds (PostgreSQL's int4); larger numbers are no id of ours
MAX_ID = 2**31 - 1
CommentId = Annotated[int, Path(ge=1, le=MAX_ID, description="A comment's id.")]


class AuthorOut(BaseModel):
    id: int | None = Field(description="null once the author deleted their account (shown as \"deleted user\").")
    display_name: str

    @classmethod
    def of(cls, author: User | None) -> "AuthorOut":
        if author is None:  # the account was deleted; the comment stays so its thread keeps its shape
            return cls(id=None, display_name=comments.DELETED_USER)
        return cls(id=author.id, display_name=author.display_name)


class CommentOut(BaseModel):
    id: int
    lesson: str
    parent_id: int | None
    author: AuthorOut
    body: str = Field(description="The Markdown exactly as typed (empty once deleted).")
    html: str = Field(description="The body rendered and sanitised; safe to insert into the page.")
    created_at: datetime
    edited_at: datetime | None
    edited: bool
    hidden: bool
    deleted: bool
    can_edit: bool
    can_delete: bool
    can_hide: bool
    can_reply: bool
    can_report: bool
    reported: bool = Field(default=False, description="This viewer has reported the comment.")
    replies: list["CommentOut"] = Field(default_factory=list)

    @classmethod
    def of(cls, c: Comment, viewer: User | None, replies: list[Comment] = (),
           reported: set[int] = frozenset()) -> "CommentOut":  # fmt: skip
        return cls(
            id=c.id,
            lesson=c.lesson_slug,
            parent_id=c.parent_id,
            author=AuthorOut.of(c.author),
            body=c.body,
            html=comments.render_markdown(c.body) if not c.deleted else "",
            created_at=c.created_at,
            edited_at=c.edited_at,
            edited=c.edited_at is not None,
            hidden=c.hidden,
            deleted=c.deleted,
            replies=[cls.of(r, viewer, reported=reported) for r in replies],
            reported=c.id in reported,
            **comments.permissions(c, viewer),
        )


class ThreadOut(BaseModel):
    lesson: str
    count: int = Field(description="Comments this viewer can see, replies included.")
    page: int
    pages: int
    per_page: int
    comments: list[CommentOut]


def _postable(body: str) -> str:
    """Refuse a blank body or one with NUL here, so the 422 has the same shape as every validation error."""
    problem = comments.body_problem(body)
    if problem is not None:
        raise ValueError(problem)
    return body


# the pattern documents the rule in the schema (some non-space character, no NUL); _postable enforces it with
# Python's idea of white space, which a pattern checked by pydantic's Rust regex engine would not share
CommentBody = Annotated[str, AfterValidator(_postable), Field(
    description="Markdown; raw HTML is shown as text. Not blank. Limit: settings.comment_max_chars.",
    json_schema_extra={"pattern": r"^[^\u0000]*[^\s\u0000][^\u0000]*$"})]  # fmt: skip


def _no_bool(value):
    """Refuse JSON true/false as an id: lax validation would read true as comment 1 (JSON Schema's integer does
    allow 10.0, which stays accepted)."""
    if isinstance(value, bool):
        raise ValueError("parent_id must be a comment id (an integer), not true or false")
    return value


class CommentIn(BaseModel):
    body: CommentBody
    parent_id: Annotated[int | None, BeforeValidator(_no_bool)] = Field(
        default=None, ge=1, le=MAX_ID, description="Reply to this top-level comment.")


class CommentEdit(BaseModel):
    body: CommentBody


class HideIn(BaseModel):
    hidden: bool = True


def _max_chars(request: Request) -> int:
    return request.app.state.settings.comment_max_chars


ERRORS = {400: {"description": "Bad reply"}, 401: {"description": "Not signed in"},
          403: {"description": "Not yours"}, 404: {"description": "No such lesson or comment"},
          413: {"description": "Comment too long"}}  # fmt: skip
POST_ERRORS = {**ERRORS, 429: {"description": "Too many comments from this learner or address (see Retry-After)"}}
CommentRateLimits = per_person_limits("comment", "comments")


@router.get("/api/lessons/{slug}/comments", response_model=ThreadOut, tags=["comments"], responses=ERRORS)
def api_thread(slug: KnownLesson, session: SessionDep, viewer: OptionalUser,
               page: Annotated[int, Query(ge=1, le=MAX_ID)] = 1) -> ThreadOut:  # fmt: skip
    """List one page (50 threads) of a lesson's comments, replies attached; anyone may read."""
    thread = comments.list_thread(session, lesson_slug=slug, viewer=viewer, page=page)
    reported = _reported(session, thread, viewer)
    return ThreadOut(
        lesson=slug,
        count=thread.count,
        page=thread.page,
        pages=thread.pages,
        per_page=comments.PER_PAGE,
        comments=[CommentOut.of(c, viewer, thread.replies.get(c.id, []), reported) for c in thread.comments],
    )


def _reported(session: Session, thread: comments.Thread, viewer: User | None) -> set[int]:
    """Return the ids of the page's comments this viewer has reported."""
    ids = [c.id for c in thread.comments] + [r.id for replies in thread.replies.values() for r in replies]
    return moderation.reported_by(session, viewer=viewer, comment_ids=ids)


@router.post("/api/lessons/{slug}/comments", status_code=201, response_model=CommentOut, tags=["comments"],
             responses=POST_ERRORS, dependencies=CommentRateLimits)  # fmt: skip
def api_post(slug: KnownLesson, data: CommentIn, request: Request, session: SessionDep,
             user: CurrentUser) -> CommentOut:  # fmt: skip
    """Post a comment, or a reply with parent_id; signed-in users only."""
    comment = comments.post_comment(session, author=user, lesson_slug=slug, body=data.body, parent_id=data.parent_id,
                                    max_chars=_max_chars(request))  # fmt: skip
    session.commit()
    return CommentOut.of(comment, user)


@router.patch("/api/comments/{comment_id}", response_model=CommentOut, tags=["comments"], responses=ERRORS)
def api_edit(comment_id: CommentId, data: CommentEdit, request: Request, session: SessionDep, user: CurrentUser):
    """Edit your own comment; it is marked as edited."""
    comment = comments.edit_comment(session, comment_id=comment_id, editor=user, body=data.body,
                                    max_chars=_max_chars(request))  # fmt: skip
    session.commit()
    return CommentOut.of(comment, user)


@router.delete("/api/comments/{comment_id}", status_code=204, tags=["comments"], responses=ERRORS)
def api_delete(comment_id: CommentId, session: SessionDep, user: CurrentUser) -> Response:
    """Delete your own comment (instructors: any comment)."""
    comments.delete_comment(session, comment_id=comment_id, actor=user)
    session.commit()
    return Response(status_code=204)


@router.post("/api/comments/{comment_id}/hide", response_model=CommentOut, tags=["comments"], responses=ERRORS)
def api_hide(comment_id: CommentId, session: SessionDep, user: CurrentUser, data: HideIn | None = None) -> CommentOut:
    """Hide a comment from learners (instructors only); send {"hidden": false} to show it again."""
    comment = comments.hide_comment(session, comment_id=comment_id, actor=user, hidden=data.hidden if data else True)
    session.commit()
    return CommentOut.of(comment, user)


class ReportIn(BaseModel):
    reason: str = Field(min_length=1, max_length=moderation.REASON_MAX_CHARS,
                        description="Why the comment should be looked at; shown to instructors only.")


class ReportOut(BaseModel):
    comment_id: int
    reported: bool
    hidden: bool = Field(description="Whether the comment is now hidden from learners until an instructor "
                                     "reviews it.")


REPORT_ERRORS = {**ERRORS, 400: {"description": "Your own comment"}, 409: {"description": "Reported already"}}


@router.post("/api/comments/{comment_id}/report", status_code=201, response_model=ReportOut, tags=["comments"],
             responses=REPORT_ERRORS)  # fmt: skip
def api_report(comment_id: CommentId, data: ReportIn, request: Request, session: SessionDep,
               user: CurrentUser) -> ReportOut:  # fmt: skip
    """Report a comment to the instructors, once, with a reason; signed-in users only."""
    outcome = _report(session, request, comment_id, user, data.reason)
    return ReportOut(comment_id=comment_id, reported=True, hidden=outcome.hidden)


def _report(session: Session, request: Request, comment_id: int, user: User, reason: str):
    outcome = moderation.report_comment(session, comment_id=comment_id, reporter=user, reason=reason,
                                        hide_at=request.app.state.settings.comment_report_hide_at)
    session.commit()
    return outcome


# --- forms for browsers without JavaScript: act, then go back to the lesson's thread -----------------------


def _back(slug: str, error: str | None = None) -> RedirectResponse:
    query = f"?comment_error={quote(error)}" if error else ""
    return RedirectResponse(f"/lessons/{quote(slug)}{query}#comments", status_code=303)


@router.post("/lessons/{slug}/comments", include_in_schema=False, dependencies=CommentRateLimits)
def form_post(
    slug: KnownLesson,
    request: Request,
    session: SessionDep,
    user: CurrentUser,
    body: Annotated[str, Form()] = "",
    parent_id: Annotated[int | None, Form(ge=1, le=MAX_ID)] = None,
):
    try:
        comments.post_comment(
            session, author=user, lesson_slug=slug, body=body, parent_id=parent_id, max_chars=_max_chars(request)
        )
    except comments.CommentError as exc:
        return _back(slug, exc.message)
    session.commit()
    return _back(slug)


@router.post("/comments/{comment_id}/edit", include_in_schema=False)
def form_edit(comment_id: CommentId, request: Request, session: SessionDep, user: CurrentUser,
              body: Annotated[str, Form()] = ""):  # fmt: skip
    try:
        comment = comments.edit_comment(
            session, comment_id=comment_id, editor=user, body=body, max_chars=_max_chars(request)
        )
    except comments.CommentError as exc:
        if exc.status_code in (403, 404):
            raise  # not theirs, or gone: answered like the API, not shown above the thread
        return _back(session.get(Comment, comment_id).lesson_slug, exc.message)
    session.commit()
    return _back(comment.lesson_slug)


@router.post("/comments/{comment_id}/delete", include_in_schema=False)
def form_delete(comment_id: CommentId, session: SessionDep, user: CurrentUser):
    comment = comments.delete_comment(session, comment_id=comment_id, actor=user)
    session.commit()
    return _back(comment.lesson_slug)


@router.post("/comments/{comment_id}/hide", include_in_schema=False)
def form_hide(comment_id: CommentId, session: SessionDep, user: CurrentUser, hidden: Annotated[str, Form()] = "1"):
    comment = comments.hide_comment(session, comment_id=comment_id, actor=user, hidden=hidden == "1")
    session.commit()
    return _back(comment.lesson_slug)


@router.post("/comments/{comment_id}/report", include_in_schema=False)
def form_report(comment_id: CommentId, request: Request, session: SessionDep, user: CurrentUser,
                reason: Annotated[str, Form()] = ""):  # fmt: skip
    try:
        outcome = _report(session, request, comment_id, user, reason)
    except comments.CommentError as exc:
        if exc.status_code == 404:
            raise
        return _back(session.get(Comment, comment_id).lesson_slug, exc.message)
    return _back(outcome.comment.lesson_slug)


# --- the thread under a lesson page -----------------------------------------------------------------------


def thread_view(session: Session, *, lesson_slug: str, viewer: User | None, page: int, max_chars: int,
                error: str | None = None) -> dict:  # fmt: skip
    """Return what templates/comments/_thread.html shows: one page of the thread as this viewer sees it."""
    thread = comments.list_thread(session, lesson_slug=lesson_slug, viewer=viewer, page=page)
    reported = _reported(session, thread, viewer)
    return {
        "count": thread.count,
        "page": thread.page,
        "pages": thread.pages,
        "comments": [CommentOut.of(c, viewer, thread.replies.get(c.id, []), reported) for c in thread.comments],
        "error": error,
        "max_chars": max_chars,
    }
