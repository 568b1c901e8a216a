"""Named dependencies for routes, the identity middleware, CSRF and rate limits.

Every request passes `IdentityMiddleware`, which makes sure the session holds a learner id and a CSRF token and
puts `request.state.user` (a User or None), `request.state.learner_id` and `request.state.csrf_token` where
templates and routes can read them. `install(app, settings)` wires all of it into an app, including the CSRF
check as an app-wide dependency: every POST/PUT/PATCH/DELETE route, including ones added later by other
areas, refuses a request without the session's token (form field `csrf_token` or header `X-CSRF-Token`).
Routes may also name `CsrfProtected` explicitly; FastAPI runs the check once either way.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterator
from typing import Annotated

import anyio.to_thread
from fastapi import Depends, FastAPI, HTTPException, Request
from limits import parse
from slowapi import Limiter
from slowapi.util import get_remote_address
from sqlalchemy.orm import Session
from starlette.middleware.sessions import SessionMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send

from app import security
from app.config import Settings
from app.db import Database, pending_migrations
from app.models import User

log = logging.getLogger(__name__)
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})
SESSION_COOKIE = "course_session"
# seconds a session cookie lives; a course is followed over weeks
SESSION_MAX_AGE = 30 * 24 * 3600
CSRF_HEADER = "X-CSRF-Token"
CSRF_FIELD = "csrf_token"
FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


# --- identity -----------------------------------------------------------------------------------------------


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


# --- database -----------------------------------------------------------------------------------------------


def get_session(request: Request) -> Iterator[Session]:
    """Yield a database session; for unsafe methods a writer (BEGIN IMMEDIATE on SQLite). Routes commit."""
    db: Database = request.app.state.db
    with db.session(write=request.method not in SAFE_METHODS) as session:
        try:
            yield session
        except BaseException:
            session.rollback()
            raise


SessionDep = Annotated[Session, Depends(get_session)]


# --- who is asking ------------------------------------------------------------------------------------------


def optional_user(request: Request) -> User | None:
    """Return the signed-in user, or None."""
    return getattr(request.state, "user", None)


def current_user(request: Request) -> User:
    """Return the signed-in user; 401 if nobody is signed in."""
    user = optional_user(request)
    if user is None:
        raise HTTPException(401, "Sign in first: this needs an account (POST /api/auth/login or /login).")
    return user


def instructor_user(request: Request) -> User:
    """Return the signed-in instructor; 401 if nobody is signed in, 403 for a learner."""
    user = current_user(request)
    if not user.is_instructor:
        raise HTTPException(403, "Only instructors can do this.")
    return user


def learner_id(request: Request) -> str:
    """Return this visitor's learner id (an account's, or the anonymous one in the session)."""
    return request.state.learner_id


OptionalUser = Annotated[User | None, Depends(optional_user)]
CurrentUser = Annotated[User, Depends(current_user)]
InstructorUser = Annotated[User, Depends(instructor_user)]
LearnerId = Annotated[str, Depends(learner_id)]


# --- CSRF ---------------------------------------------------------------------------------------------------


async def require_csrf(request: Request) -> None:
    """Refuse (403) an unsafe request whose CSRF token is missing or not this session's."""
    if request.method in SAFE_METHODS:
        return
    given = request.headers.get(CSRF_HEADER)
    if given is None and request.headers.get("content-type", "").startswith(FORM_TYPES):
        given = (await request.form()).get(CSRF_FIELD)  # Starlette caches the parsed form for the route
    if not security.tokens_match(request.session.get("csrf"), given if isinstance(given, str) else None):
        raise HTTPException(
            403,
            "CSRF token missing or wrong: reload the page and try again (scripts: GET /api/auth/csrf and send "
            f"the token as the {CSRF_HEADER} header).",
        )


CsrfProtected = Annotated[None, Depends(require_csrf)]


# --- rate limits (slowapi's Limiter holds the counters; one per app so tests don't share them) ---------------


def client_address(request: Request) -> str:
    """Return the client's address, the key for per-address limits."""
    return get_remote_address(request)


def rate_limit(setting: str, scope: str, *, per: str = "address", what: str = "requests"):
    """Build a dependency enforcing `settings.<setting>` (e.g. "10/minute") per client address or learner.

    Over the limit: 429 with Retry-After (seconds) and a message naming `what` was limited.
    Example: `Depends(rate_limit("submission_rate_limit", "submit", per="learner", what="submissions"))`.
    """

    def check(request: Request) -> None:
        limiter: Limiter = request.app.state.limiter
        item = parse(getattr(request.app.state.settings, setting))
        key = request.state.learner_id if per == "learner" else client_address(request)
        if limiter.limiter.hit(item, scope, key):
            return
        reset_at, _remaining = limiter.limiter.get_window_stats(item, scope, key)
        retry = max(1, math.ceil(reset_at - time.time()))
        raise HTTPException(
            429,
            f"Too many {what}: the limit is {item.amount} per {item.multiples} {item.GRANULARITY.name}"
            f"{'s' if item.multiples > 1 else ''}. Try again in {retry} s.",
            headers={"Retry-After": str(retry)},
        )

    check.__name__ = f"rate_limit_{scope}"
    return check


# --- wiring -------------------------------------------------------------------------------------------------


def install(app: FastAPI, settings: Settings) -> None:
    """Add the database, sessions, identity, CSRF (app-wide) and the rate limiter to an app.

    Call it right after creating the app, before including routers, so the CSRF dependency covers them all.
    """
    app.state.db = Database(settings.database_url)
    if pending_migrations(settings.database_url):
        log.warning("the database at %s is not migrated to the newest revision: run `course db upgrade` "
                    "(make serve does); pages that read accounts, progress or comments fail until then",
                    settings.database_url)  # fmt: skip
    app.state.limiter = Limiter(key_func=get_remote_address, storage_uri="memory://", headers_enabled=False)
    app.router.dependencies.append(Depends(require_csrf))
    _register_template_globals()
    app.add_middleware(IdentityMiddleware, db=app.state.db)  # added first = runs inside the session middleware
    app.add_middleware(
        SessionMiddleware,
        secret_key=settings.secret_key,
        session_cookie=SESSION_COOKIE,
        max_age=SESSION_MAX_AGE,
        same_site="lax",
        https_only=settings.env == "production",
    )


def _register_template_globals() -> None:
    from app.web import comments, progress, templating

    templating.templates.env.globals.update(comments.TEMPLATE_GLOBALS, **progress.TEMPLATE_GLOBALS)


__all__ = [
    "SessionDep",
    "OptionalUser",
    "CurrentUser",
    "InstructorUser",
    "LearnerId",
    "CsrfProtected",
    "require_csrf",
    "rate_limit",
    "sign_in",
    "sign_out",
    "install",
    "IdentityMiddleware",
]
