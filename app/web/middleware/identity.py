"""Who is asking: every visitor gets a learner id and a CSRF token in the session; accounts sign in and out.

`IdentityMiddleware` runs inside Starlette's SessionMiddleware on every request and puts `request.state.user` (a
User or None), `request.state.learner_id`, `request.state.csrf_token` and `request.state.new_visitor` where
routes, dependencies and the first-visit page cache read them.

A signed-in session holds the account's id (`uid`), its session version (`sv`) from when it signed in, and the
token of its server-side session record (`sid`, a `UserSession` row). When the record is gone (this session logged
out), the account's version has moved on (a password change, "log out everywhere", a reset) or the account is
gone, the session is signed out on its next request, whatever the cookie's age: the cookie is signed, not
revocable, and these checks are what revoke it. So a copy of a cookie taken before its browser logged out signs
no one in afterwards.

A response that signs a browser out (log-out, a deleted account, a session ended elsewhere) carries
`Clear-Site-Data: "storage"`: what the page scripts kept in this browser for the learner who was signed in
(unsent drafts, hint progress) must not be shown to whoever uses the browser next. The scripts key that storage by
learner as well (static/js/exercise-store.js), for browsers that ignore the header (it needs a secure context).
"""

from __future__ import annotations

import anyio.to_thread
from fastapi import Request
from sqlalchemy.orm import Session
from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.accounts import users as accounts
from app.core import security
from app.core.db import Database
from app.models import User

SESSION_COOKIE = "course_session"
# seconds a session cookie lives; a course is followed over weeks
SESSION_MAX_AGE = 30 * 24 * 3600
# what a browser forgets of this site when it is signed out (localStorage, sessionStorage, IndexedDB; not cookies)
CLEAR_STORAGE = ("Clear-Site-Data", '"storage"')


def _load_user(db: Database, user_id: int, token: str | None) -> User | None:
    if not isinstance(token, str):  # a cookie from before server-side sessions: it signs no one in
        return None
    with db.session() as session:
        return accounts.session_user(session, user_id=user_id, token=token)


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
        if new_visitor:  # (no tokens made for a returning visitor, whose session already holds both)
            session["learner_id"] = security.new_learner_id()
        if "csrf" not in session:
            session["csrf"] = security.new_csrf_token()
        user = None
        if "uid" in session and not scope["path"].startswith("/static/"):
            user = await anyio.to_thread.run_sync(_load_user, self.db, session["uid"], session.get("sid"))
            # a cookie from before session versions existed carries none: it counts as version 0
            if user is None or user.session_version != session.get("sv", 0):
                # logged out, the account gone or the session ended elsewhere: browse on as a new anonymous learner
                _forget(session)
                user = None
                scope.setdefault("state", {})["signed_out"] = True
            else:
                session["learner_id"] = user.learner_id
        state = scope.setdefault("state", {})
        state["user"] = user
        state["new_visitor"] = new_visitor and user is None
        state["learner_id"] = session["learner_id"]
        state["csrf_token"] = session["csrf"]

        async def send_clearing_storage(message: Message) -> None:
            if message["type"] == "http.response.start" and state.get("signed_out"):
                MutableHeaders(scope=message)[CLEAR_STORAGE[0]] = CLEAR_STORAGE[1]
            await send(message)

        await self.app(scope, receive, send_clearing_storage)


def new_visitor_session() -> dict[str, str]:
    """What a visitor without a session gets in it: a learner id and a CSRF token (the first-visit page,
    app/web/middleware/page_cache.py, sets this as the cookie of a new visitor it answers)."""
    return {"learner_id": security.new_learner_id(), "csrf": security.new_csrf_token()}


def _forget(session: dict) -> None:
    session.clear()
    session.update(new_visitor_session())


def sign_in(request: Request, user: User, *, session: Session) -> None:
    """Put the user in the session, with a fresh CSRF token (a token seen before log-in is not reused), and start
    its server-side record in `session` (the caller commits)."""
    request.session["sid"] = accounts.start_session(session, user=user, keep_s=SESSION_MAX_AGE)
    request.session["uid"] = user.id
    request.session["sv"] = user.session_version
    request.session["learner_id"] = user.learner_id
    request.session["csrf"] = security.new_csrf_token()
    request.state.user = user
    request.state.learner_id = user.learner_id
    request.state.csrf_token = request.session["csrf"]


def keep_signed_in(request: Request, user: User) -> None:
    """After the account's session version moved on, keep this browser signed in (its others are ended)."""
    request.session["sv"] = user.session_version
    request.state.user = user


def sign_out(request: Request, *, session: Session | None) -> None:
    """Forget the user: end the server-side session in `session` (the caller commits; None when the account and
    its sessions are already deleted), then a new anonymous learner id and a new CSRF token."""
    token = request.session.get("sid")
    if session is not None and isinstance(token, str):
        accounts.end_session(session, token=token)
    _forget(request.session)
    request.state.signed_out = True  # the response tells the browser to forget this learner's local storage
    request.state.user = None
    request.state.learner_id = request.session["learner_id"]
    request.state.csrf_token = request.session["csrf"]
