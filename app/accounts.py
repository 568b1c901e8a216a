"""Accounts: create, authenticate, promote. Functions take the session as a keyword and know nothing of HTTP."""

from __future__ import annotations

import re

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app import security
from app.models import Learner, User

# a pragmatic shape check; deliverability is not our business and full RFC 5322 helps no one
EMAIL_RE = re.compile(r"^[^@\s\x00-\x1f]+@[^@\s\x00-\x1f]+\.[^@\s\x00-\x1f]+$")


class EmailTaken(Exception):
    """Sign-up with an email that already has an account."""


class UnknownUser(Exception):
    """No account with that email."""


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
]
