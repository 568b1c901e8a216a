"""People with accounts. Progress belongs to a learner id; a user owns exactly one."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import CheckConstraint, ForeignKey, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base, UTCDateTime, utcnow

# a teaching assistant ("ta") sees and acts for the learners of the sections they assist (app/learning/sections.py)
ROLES = ("learner", "ta", "instructor")


class User(Base):
    """An account: display name, unique email (stored lower-case), argon2 hash, role, and its learner id."""

    __tablename__ = "users"
    __table_args__ = (CheckConstraint("role IN ('learner', 'ta', 'instructor')", name="role"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    display_name: Mapped[str] = mapped_column(String(80))
    email: Mapped[str] = mapped_column(String(254), unique=True)
    password_hash: Mapped[str] = mapped_column(String(255))
    role: Mapped[str] = mapped_column(String(16), default="learner")
    learner_id: Mapped[str] = mapped_column(ForeignKey("learners.id"), unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    # Every session cookie carries the version it was signed in under; a password change or "log out everywhere"
    # raises it, and a cookie with an older one is signed out on its next request (app.web.middleware.identity).
    session_version: Mapped[int] = mapped_column(Integer, default=0, server_default="0")

    @property
    def is_instructor(self) -> bool:
        return self.role == "instructor"

    @property
    def is_ta(self) -> bool:
        return self.role == "ta"

    @property
    def is_staff(self) -> bool:
        """An instructor or a teaching assistant: someone who sees other learners' work (a TA: their sections')."""
        return self.role in ("ta", "instructor")

    def __repr__(self) -> str:
        return f"<User {self.id} {self.email} {self.role}>"
