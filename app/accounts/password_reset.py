"""Password reset links without an email server: a one-time token, of which only a hash is stored.

`course users reset-link EMAIL` prints a link; with COURSE_SMTP_URL set, /forgot mails the same kind of link.
A link works once, until it expires (COURSE_RESET_LINK_TTL_S), and a newer link or any password change voids it.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime, timedelta

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from app.accounts import users as accounts
from app.core.config import Settings
from app.core.db import Database
from app.core.errors import Refusal
from app.core.mail import send_mail
from app.models import PasswordReset, User, utcnow

# bytes of randomness in a reset token: as much as a session secret, far beyond guessing
TOKEN_BYTES = 32
RESET_PATH = "/reset/"


class ResetLinkInvalid(Refusal):
    """A reset link that is unknown, used, voided or expired."""


INVALID = ("This password reset link has expired or was used already. Ask for a new one at /forgot "
           "(or from the course's operator), and use the newest link you receive.")  # fmt: skip


def token_hash(token: str) -> str:
    """Return the stored form of a token: SHA-256, hex."""
    return hashlib.sha256(token.encode()).hexdigest()


def issue_token(session: Session, *, user: User, ttl_s: int, now: datetime | None = None) -> str:
    """Create a reset token for this user, voiding their older unused ones; return the token (stored hashed)."""
    now = now or utcnow()
    session.execute(delete(PasswordReset).where(PasswordReset.user_id == user.id, PasswordReset.used_at.is_(None)))
    token = secrets.token_urlsafe(TOKEN_BYTES)
    session.add(PasswordReset(user_id=user.id, token_hash=token_hash(token), created_at=now,
                              expires_at=now + timedelta(seconds=ttl_s)))  # fmt: skip
    session.flush()
    return token


def reset_url(site_url: str, token: str) -> str:
    """Return the link a person opens to choose a new password."""
    return f"{site_url.rstrip('/')}{RESET_PATH}{token}"


def valid_reset(session: Session, *, token: str) -> PasswordReset:
    """Return the unused, unexpired reset for this token; raise ResetLinkInvalid (410) otherwise."""
    reset = session.scalar(select(PasswordReset).where(PasswordReset.token_hash == token_hash(token)))
    if reset is None or reset.used_at is not None or reset.expires_at <= utcnow():
        raise ResetLinkInvalid(410, INVALID)
    return reset


def redeem(session: Session, *, token: str, new_password: str) -> User:
    """Set a new password through a reset link, once; every session of the account ends. Return the user."""
    reset = valid_reset(session, token=token)
    reset.used_at = utcnow()  # kept as a record of the reset, and so the link is never accepted again
    user = session.get(User, reset.user_id)
    accounts.set_password(session, user=user, password=new_password)  # voids every other unused link
    return user




def mail_text(url: str, ttl_s: int) -> str:
    """Return the body of a reset mail."""
    minutes = max(1, ttl_s // 60)
    return (f"Someone (hopefully you) asked to reset the password of your account on Devices and Tensor "
            f"Placement.\n\nChoose a new password here, within {minutes} minutes:\n\n{url}\n\nThe link works "
            "once. If you did not ask for it, ignore this mail: your password stays as it is.\n")


def mail_reset_link(db: Database, settings: Settings, email: str) -> bool:
    """Mail a reset link to the account with this email, if there is one; return whether a mail went out.

    Takes the database (not a session) because the link must be committed before the mail leaves.
    """
    with db.session(write=True) as session:
        user = accounts.find_by_email(session, email)
        if user is None:
            return False
        token = issue_token(session, user=user, ttl_s=settings.reset_link_ttl_s)
        session.commit()
        address = user.email
    body = mail_text(reset_url(settings.site_url(), token), settings.reset_link_ttl_s)
    send_mail(settings.smtp_url, sender=settings.mail_from, to=address, subject="Reset your password", body=body)
    return True


__all__ = ["ResetLinkInvalid", "token_hash", "issue_token", "reset_url", "valid_reset", "redeem", "RESET_PATH",
           "mail_text", "mail_reset_link"]
