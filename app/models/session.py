"""Signed-in browsers: one row per log-in, so that logging out ends that session on the server too."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, String
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base, UTCDateTime, utcnow


class UserSession(Base):
    """One signed-in browser of an account. Its cookie carries a random token; only the token's hash is stored.

    Every request from a signed-in cookie must find its row (app.web.middleware.identity), and logging out deletes
    it, so a copy of the cookie taken before the log-out no longer signs anyone in, though its signature is still good.
    """

    __tablename__ = "user_sessions"

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    # SHA-256 of the token, hex; the token has 256 random bits, so a fast hash is enough (nothing to brute-force)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
