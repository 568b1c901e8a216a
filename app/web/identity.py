"""Who is asking: every visitor gets a learner id and a CSRF token in the session; accounts sign in and out.

`IdentityMiddleware` runs inside Starlette's SessionMiddleware on every request and puts `request.state.user` (a
User or None), `request.state.learner_id`, `request.state.csrf_token` and `request.state.new_visitor` where
routes, dependencies and the first-visit page cache read them.
"""

from __future__ import annotations

import anyio.to_thread
from fastapi import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from app import security
from app.db import Database
from app.models import User

SESSION_COOKIE = "course_session"
# seconds a session cookie lives; a course is followed over weeks
SESSION_MAX_AGE = 30 * 24 * 3600


def _load_user(db: Database, user_id: int) -> User | None:
    with db.session() as session:
        return session.get(User, user_id)


class IdentityMiddleware:
    """Give every visitor a learner id and a CSRF token in the session; load the signed-in user.

    Sits inside SessionMiddleware. Static files skip the database lookup (they render no user).
    """

    def __init__(self, app: ASGIApp, db: Database) -> None:
        self.app = app
        self.db = db

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        session = scope["session"]
        # a visitor without a session has no progress and no account: lesson pages may come from page_cache
        new_visitor = "learner_id" not in session
        session.setdefault("learner_id", security.new_learner_id())
        session.setdefault("csrf", security.new_csrf_token())
        user = None
        if "uid" in session and not scope["path"].startswith("/static/"):
            user = await anyio.to_thread.run_sync(_load_user, self.db, session["uid"])
            if user is None:  # the account is gone: forget it, keep browsing anonymously
                session.pop("uid", None)
                session["learner_id"] = security.new_learner_id()
            else:
                session["learner_id"] = user.learner_id
        state = scope.setdefault("state", {})
        state["user"] = user
        state["new_visitor"] = new_visitor and user is None
        state["learner_id"] = session["learner_id"]
        state["csrf_token"] = session["csrf"]
        await self.app(scope, receive, send)


def sign_in(request: Request, user: User) -> None:
    """Put the user in the session, with a fresh CSRF token (a token seen before log-in is not reused)."""
    request.session["uid"] = user.id
    request.session["learner_id"] = user.learner_id
    request.session["csrf"] = security.new_csrf_token()
    request.state.user = user
    request.state.learner_id = user.learner_id
    request.state.csrf_token = request.session["csrf"]


def sign_out(request: Request) -> None:
    """Forget the user: a new anonymous learner id and a new CSRF token."""
    request.session.clear()
    request.session["learner_id"] = security.new_learner_id()
    request.session["csrf"] = security.new_csrf_token()
    request.state.user = None
    request.state.learner_id = request.session["learner_id"]
    request.state.csrf_token = request.session["csrf"]
