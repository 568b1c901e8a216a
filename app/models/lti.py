"""LTI 1.3: the platforms (LMSs) the course is registered with, the tool's own keys, one-use login states, who
launched from where, one line item per exercise and context, and the grade outbox (app/lti/ says how they are used).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Float, ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base, UTCDateTime, utcnow


class LtiPlatform(Base):
    """An LMS registered with `course lti add-platform`: who it is (issuer + the client id it gave the course),
    where its OIDC authorization, OAuth2 token and key set endpoints are, and the deployments it may launch from."""

    __tablename__ = "lti_platforms"
    __table_args__ = (UniqueConstraint("issuer", "client_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    issuer: Mapped[str] = mapped_column(String(500))
    client_id: Mapped[str] = mapped_column(String(255))
    auth_login_url: Mapped[str] = mapped_column(String(1000))
    auth_token_url: Mapped[str] = mapped_column(String(1000))
    jwks_url: Mapped[str] = mapped_column(String(1000))
    # the deployment ids (a placement of the tool in the LMS) whose launches are accepted
    deployment_ids: Mapped[list[str]] = mapped_column(JSON, default=list)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class LtiKey(Base):
    """One RSA key of the tool: the newest signs (client assertions, deep-linking responses); the one before it
    is still published in /lti/jwks after `course lti rotate-key`, for what a platform signed-checks late."""

    __tablename__ = "lti_keys"

    kid: Mapped[str] = mapped_column(String(64), primary_key=True)
    private_jwk: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class LtiLogin(Base):
    """One OIDC login in flight: the state and nonce the course sent to the platform, used once by the launch."""

    __tablename__ = "lti_logins"

    state: Mapped[str] = mapped_column(String(64), primary_key=True)
    nonce: Mapped[str] = mapped_column(String(64), unique=True)
    platform_id: Mapped[int] = mapped_column(ForeignKey("lti_platforms.id", ondelete="CASCADE"))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    used_at: Mapped[datetime | None] = mapped_column(UTCDateTime())


class LtiContext(Base):
    """A course of the LMS (its `context`) the tool was launched from, with the grade and roster service URLs
    the last launch gave."""

    __tablename__ = "lti_contexts"
    __table_args__ = (UniqueConstraint("platform_id", "context_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    platform_id: Mapped[int] = mapped_column(ForeignKey("lti_platforms.id", ondelete="CASCADE"))
    context_id: Mapped[str] = mapped_column(String(255))
    deployment_id: Mapped[str] = mapped_column(String(255))
    title: Mapped[str] = mapped_column(String(255), default="")
    lineitems_url: Mapped[str | None] = mapped_column(String(1000))
    ags_scopes: Mapped[list[str]] = mapped_column(JSON, default=list)
    memberships_url: Mapped[str | None] = mapped_column(String(1000))


class LtiMember(Base):
    """A person of the LMS (platform + `sub`) and the account it signs in as; `roles` are the last launch's (or
    roster's) LTI role URIs in that context."""

    __tablename__ = "lti_members"
    __table_args__ = (UniqueConstraint("context_id", "user_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    context_id: Mapped[int] = mapped_column(ForeignKey("lti_contexts.id", ondelete="CASCADE"))
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    learner_id: Mapped[str] = mapped_column(ForeignKey("learners.id", ondelete="CASCADE"), index=True)
    roles: Mapped[list[str]] = mapped_column(JSON, default=list)


class LtiIdentity(Base):
    """Which account an LMS user (the platform and its `sub` for them) signs in as."""

    __tablename__ = "lti_identities"
    __table_args__ = (UniqueConstraint("platform_id", "sub"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    platform_id: Mapped[int] = mapped_column(ForeignKey("lti_platforms.id", ondelete="CASCADE"))
    sub: Mapped[str] = mapped_column(String(255))
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), unique=True)


class LtiLineItem(Base):
    """The LMS gradebook column of one exercise in one context: created once, then reused (never a second)."""

    __tablename__ = "lti_line_items"
    __table_args__ = (UniqueConstraint("context_id", "exercise_slug"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    context_id: Mapped[int] = mapped_column(ForeignKey("lti_contexts.id", ondelete="CASCADE"))
    exercise_slug: Mapped[str] = mapped_column(String(100))
    url: Mapped[str] = mapped_column(String(1000))


class LtiGrade(Base):
    """The grade outbox: one row per learner, exercise and context. `best` is the best score any verdict gave;
    `sent` what the LMS has acknowledged. The row is due while best > sent, and stays until the LMS took it."""

    __tablename__ = "lti_grades"
    __table_args__ = (UniqueConstraint("context_id", "member_id", "exercise_slug"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    context_id: Mapped[int] = mapped_column(ForeignKey("lti_contexts.id", ondelete="CASCADE"))
    member_id: Mapped[int] = mapped_column(ForeignKey("lti_members.id", ondelete="CASCADE"))
    exercise_slug: Mapped[str] = mapped_column(String(100))
    best: Mapped[float] = mapped_column(Float)
    sent: Mapped[float | None] = mapped_column(Float)
    # when the verdict that gave `best` was stored (the score's timestamp in the LMS)
    best_at: Mapped[datetime] = mapped_column(UTCDateTime())
    tries: Mapped[int] = mapped_column(Integer, default=0)
    # not before this is it sent (again): now when queued, later after a failure (back-off), or a sender's claim
    due_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, index=True)
    last_error: Mapped[str | None] = mapped_column(Text)
    sent_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
