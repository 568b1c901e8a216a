"""The moderation queue for instructors: reported and hidden comments, with show, hide and delete.

Learners report comments through app/web/routes/comments.py; reviewing here uses the same functions as the buttons
under a lesson's thread (`app.community.comments.hide_comment`, `delete_comment`), which close the comment's open
reports.
Like every instructor route, the router's dependency refuses visitors (401 or the log-in page) and learners (403).
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import RedirectResponse

from app.community import comments, moderation
from app.web.deps import CourseDep, InstructorUser, SessionDep, instructor
from app.web.routes.comments import CommentId
from app.web.templating import render

router = APIRouter(dependencies=[Depends(instructor)], tags=["instructor"])


@router.get("/instructor/comments", include_in_schema=False)
def queue_page(request: Request, session: SessionDep, course: CourseDep):
    """Show the comments awaiting review (most reported first), then every hidden one."""
    items = moderation.queue(session)
    return render(request, "instructor/comments.html", items=items, course=course,
                  hide_at=request.app.state.settings.comment_report_hide_at,
                  html={i.comment.id: comments.render_markdown(i.comment.body) for i in items})  # fmt: skip


@router.post("/instructor/comments/{comment_id}", include_in_schema=False)
def review(comment_id: CommentId, session: SessionDep, user: InstructorUser,
           action: Annotated[Literal["show", "hide", "delete"], Form()]):  # fmt: skip
    """Show, hide or delete a comment from the queue (each closes its open reports), then back to the queue."""
    if action == "delete":
        comments.delete_comment(session, comment_id=comment_id, actor=user)
    else:
        comments.hide_comment(session, comment_id=comment_id, actor=user, hidden=action == "hide")
    session.commit()
    return RedirectResponse(f"/instructor/comments#queue-{comment_id}", status_code=303)
