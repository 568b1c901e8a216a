"""Names and Role Provisioning: an LMS course's roster into the course's accounts, roles and sections.

Each LMS course (context) is a section of the course, named by the context's title: its learners are the
section's learners and its teaching assistants (the LTI TeachingAssistant role) the section's TAs, whom the
class's pages let see that section's learners only (app/learning/sections.py). A launch puts its person in the
section at once (`place`); `sync` fetches the whole roster (`course lti roster`), so a section holds the LMS
course's learners before they first launch, and loses those the LMS no longer lists as active (`place` and
`section_name` live in app/lti/launch.py, which a launch calls).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.config import Settings
from app.core.db import Database
from app.learning import sections
from app.lti import keys, services
from app.lti.launch import account_for, member_of, role_for, section_name
from app.models import User
from app.models.lti import LtiContext, LtiPlatform


@dataclass
class Synced:
    """What one roster fetch did."""

    section: str
    learners: int
    tas: int
    new_accounts: int


def sync(db: Database, settings: Settings, context_id: int) -> Synced:
    """Fetch a context's roster from its LMS and make its section's learners and TAs exactly the active members."""
    with db.session(write=True) as session:
        context = session.get(LtiContext, context_id)
        if context is None or not context.memberships_url:
            raise services.LmsError("this LMS course gave no roster service (Names and Role Provisioning) in its "
                                    "launches: enable the service for the tool in the LMS, then launch once")
        platform = services.Platform.of(session.get(LtiPlatform, context.platform_id))
        url, key = context.memberships_url, keys.signing_key(session)
        session.commit()
    token = services.access_token(platform, [services.MEMBERSHIPS], key, settings.lti_http_timeout_s)
    members = services.memberships(platform, token, url, settings.lti_http_timeout_s)
    with db.session(write=True) as session:
        context = session.get(LtiContext, context_id)
        registration = session.get(LtiPlatform, context.platform_id)
        before = session.scalar(select(User.id).order_by(User.id.desc()).limit(1)) or 0
        by_role: dict[str, list[str]] = {"learner": [], "ta": []}
        for member in members:
            if member.get("status", "Active") != "Active" or not member.get("user_id"):
                continue
            roles = [role for role in member.get("roles") or [] if isinstance(role, str)]
            name = member.get("name") or " ".join(filter(None, [member.get("given_name"), member.get("family_name")]))
            user = account_for(session, registration, str(member["user_id"]), name=str(name or ""), roles=roles)
            member_of(session, context, user, roles)
            role = role_for(roles)
            if role in by_role:
                by_role[role].append(user.learner_id)
        name = section_name(context)
        for role, learner_ids in by_role.items():
            sections.set_members(session, name, learner_ids, role=role)
        made = len(session.scalars(select(User.id).where(User.id > before)).all())
        session.commit()
    return Synced(section=name, learners=len(by_role["learner"]), tas=len(by_role["ta"]), new_accounts=made)


def contexts(session: Session) -> list[tuple[int, str, str, bool]]:
    """Every LMS course seen in a launch: (id, platform name, title, has a roster service)."""
    query = (select(LtiContext.id, LtiPlatform.name, LtiContext.title, LtiContext.context_id,
                    LtiContext.memberships_url)
             .join(LtiPlatform, LtiPlatform.id == LtiContext.platform_id).order_by(LtiPlatform.name, LtiContext.title))
    rows = session.execute(query)
    return [(row.id, row.name, row.title or row.context_id, row.memberships_url is not None) for row in rows]
