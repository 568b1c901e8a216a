"""Accounts: create, authenticate, promote, rename, change passwords, end sessions. Functions take the session as a
keyword, know nothing of HTTP and leave committing to the caller.

Sessions: every session cookie carries the account's `session_version` from when it signed in; raising the
version (a password change, "log out everywhere", a password reset) ends every session that carries an older one
(`app.web.middleware.identity` compares them on each request). The browser that asked gets the new version and stays in.
Each log-in also starts a server-side session (`UserSession`, found by a hash of the token in its cookie) that
logging out deletes: a copy of the cookie is then worth nothing, though its signature is still good.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from datetime import timedelta

from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.core import security
from app.core.errors import Refusal
from app.models import Learner, PasswordReset, User, UserSession, utcnow

# a pragmatic shape check; deliverability is not our business and full RFC 5322 helps no one
EMAIL_RE = re.compile(r"^[^@\s\x00-\x1f]+@[^@\s\x00-\x1f]+\.[^@\s\x00-\x1f]+$")


class EmailTaken(Exception):
    """Sign-up with an email that already has an account."""


class UnknownUser(Exception):
    """No account with that email."""


class AccountError(Refusal):
    """A refused account change (a wrong current password): its HTTP status and what to do."""


WRONG_PASSWORD = "The password is wrong: type the password you log in with now."


def normalize_email(email: str) -> str:
    """Return the email as stored and compared: trimmed and lower-cased."""
    return email.strip().lower()


def find_by_email(session: Session, email: str) -> User | None:
    """Return the user with this email (any case), or None."""
    return session.scalar(select(User).where(User.email == normalize_email(email)))


def create_user(
    session: Session, *, email: str, password: str, display_name: str, role: str = "learner"
) -> User:
    """Create an account with its own learner id; raise EmailTaken if the email is in use."""
    email = normalize_email(email)
    if find_by_email(session, email) is not None:
        raise EmailTaken(email)
    learner = Learner(id=security.new_learner_id())
    session.add(learner)
    user = User(
        email=email,
        display_name=display_name.strip(),
        password_hash=security.hash_password(password),
        role=role,
        learner_id=learner.id,
    )
    session.add(user)
    try:
        session.flush()
    except IntegrityError as exc:  # two sign-ups racing for one email
        raise EmailTaken(email) from exc
    return user


def authenticate(session: Session, *, email: str, password: str) -> User | None:
    """Return the user if the password is right, else None; an unknown email costs as much as a wrong one."""
    user = find_by_email(session, email)
    ok = security.verify_password(user.password_hash if user else None, password)
    if not ok or user is None:
        return None
    if security.needs_rehash(user.password_hash):
        user.password_hash = security.hash_password(password)
    return user


def rename(session: Session, *, user: User, display_name: str) -> User:
    """Change the name shown beside the user's comments."""
    user.display_name = display_name.strip()
    return user


def set_password(session: Session, *, user: User, password: str) -> User:
    """Store a new password, end every session of the account and void its unused reset links."""
    user.password_hash = security.hash_password(password)
    unused = (PasswordReset.user_id == user.id) & PasswordReset.used_at.is_(None)
    session.execute(delete(PasswordReset).where(unused))
    return end_sessions(session, user=user)


def change_password(session: Session, *, user: User, current_password: str, new_password: str) -> User:
    """Replace the password after checking the current one; raise AccountError 403 if it is wrong."""
    require_password(user, current_password)
    return set_password(session, user=user, password=new_password)


def end_sessions(session: Session, *, user: User) -> User:
    """End every session of this account ("log out everywhere"); the caller re-signs the browser that asked."""
    user.session_version = (user.session_version or 0) + 1
    return user


def _token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def start_session(session: Session, *, user: User, keep_s: int) -> str:
    """Record a new signed-in session of this account and return its token (for the cookie, never stored).

    The account's sessions older than `keep_s` seconds (their cookies have expired) are deleted on the way.
    """
    session.execute(delete(UserSession).where(UserSession.user_id == user.id,
                                              UserSession.created_at < utcnow() - timedelta(seconds=keep_s)))
    token = secrets.token_urlsafe(security.TOKEN_BYTES)
    session.add(UserSession(user_id=user.id, token_hash=_token_hash(token)))
    return token


def end_session(session: Session, *, token: str) -> None:
    """End the signed-in session with this token (logging out); an unknown token ends nothing."""
    session.execute(delete(UserSession).where(UserSession.token_hash == _token_hash(token)))


def session_user(session: Session, *, user_id: int, token: str) -> User | None:
    """Return the account whose live session this token is, or None (logged out, expired, or not this account's)."""
    query = (select(User).join(UserSession, UserSession.user_id == User.id)
             .where(User.id == user_id, UserSession.token_hash == _token_hash(token)))
    return session.scalars(query).first()


def require_password(user: User, password: str) -> None:
    """Raise AccountError 403 unless this is the user's password (asked again before changing or deleting)."""
    if not security.verify_password(user.password_hash, password):
        raise AccountError(403, WRONG_PASSWORD)


def set_role(session: Session, *, email: str, role: str) -> User:
    """Give the account with this email a role; raise UnknownUser if there is none."""
    user = find_by_email(session, email)
    if user is None:
        raise UnknownUser(email)
    user.role = role
    return user


__all__ = [
    "EmailTaken",
    "UnknownUser",
    "EMAIL_RE",
    "normalize_email",
    "find_by_email",
    "create_user",
    "authenticate",
    "set_role",
    "AccountError",
    "rename",
    "set_password",
    "change_password",
    "end_sessions",
    "start_session",
    "end_session",
    "session_user",
    "require_password",
]
