"""Sections and their teaching assistants: who is in which section, and whose work a TA may see and act on.

A section is a name and its members, each a learner id with a role: "learner" or "ta" (a teaching assistant, by
the learner id of their account, whose `users.role` is "ta"). Rosters fill them (`course users import`, an LTI
roster): `set_members` makes a section's members of one role exactly the ones given, so importing the same
roster twice changes nothing. Plain functions over the session; callers commit.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from app.learning.progress import ensure_learner
from app.models import MEMBER_ROLES, Section, SectionMember, User


def ensure_section(session: Session, name: str) -> Section:
    """Return the section called `name`, creating it on first use."""
    name = name.strip()
    if not name:
        raise ValueError("A section needs a name.")
    section = session.scalar(select(Section).where(Section.name == name))
    if section is None:
        section = Section(name=name[:100])
        session.add(section)
        session.flush()
    return section


def set_members(session: Session, section_name: str, learner_ids: Iterable[str], *, role: str = "learner") -> Section:
    """Make the section's members of `role` ("learner" or "ta") exactly `learner_ids` (others of that role leave)."""
    if role not in MEMBER_ROLES:
        raise ValueError(f"role {role!r} is not one of {', '.join(MEMBER_ROLES)}")
    section = ensure_section(session, section_name)
    wanted = list(dict.fromkeys(learner_ids))
    session.execute(delete(SectionMember).where(SectionMember.section_id == section.id, SectionMember.role == role,
                                                SectionMember.learner_id.not_in(wanted)))
    present = {m.learner_id: m for m in session.scalars(select(SectionMember).where(
        SectionMember.section_id == section.id, SectionMember.learner_id.in_(wanted)))}
    for learner_id in wanted:
        if learner_id in present:
            present[learner_id].role = role
        else:
            ensure_learner(session, learner_id)
            session.add(SectionMember(section_id=section.id, learner_id=learner_id, role=role))
    session.flush()
    return section


def add_member(session: Session, section_name: str, learner_id: str, *, role: str = "learner") -> Section:
    """Put one learner (or TA) in a section, keeping its other members."""
    if role not in MEMBER_ROLES:
        raise ValueError(f"role {role!r} is not one of {', '.join(MEMBER_ROLES)}")
    section = ensure_section(session, section_name)
    ensure_learner(session, learner_id)
    member = session.get(SectionMember, (section.id, learner_id))
    if member is None:
        session.add(SectionMember(section_id=section.id, learner_id=learner_id, role=role))
    else:
        member.role = role
    session.flush()
    return section


def sections_of(session: Session, learner_id: str, *, role: str = "learner") -> list[str]:
    """Return the names of the sections this learner id is in with `role`, sorted."""
    query = (select(Section.name).join(SectionMember, SectionMember.section_id == Section.id)
             .where(SectionMember.learner_id == learner_id, SectionMember.role == role).order_by(Section.name))
    return list(session.scalars(query))


def all_sections(session: Session) -> list[tuple[str, int, int]]:
    """Return every section as (name, learners, TAs), by name."""
    rows = []
    for section in session.scalars(select(Section).order_by(Section.name)):
        members = session.scalars(select(SectionMember.role).where(SectionMember.section_id == section.id)).all()
        rows.append((section.name, members.count("learner"), members.count("ta")))
    return rows


def assisted_learners(user: User):
    """Return a subquery of the learner ids a TA assists (the learners of every section they are a TA of)."""
    mine = select(SectionMember.section_id).where(SectionMember.learner_id == user.learner_id,
                                                  SectionMember.role == "ta")
    return select(SectionMember.learner_id).where(SectionMember.section_id.in_(mine), SectionMember.role == "learner")


def visible_learners(user: User):
    """Return None when `user` sees every learner (an instructor), else a subquery of those they see (a TA: their
    sections' learners; anyone else: nobody)."""
    if user.is_instructor:
        return None
    if user.is_ta:
        return assisted_learners(user)
    return select(SectionMember.learner_id).where(False)


def may_see(session: Session, user: User, learner_id: str) -> bool:
    """Say whether `user` may see and act on this learner's work."""
    visible = visible_learners(user)
    if visible is None:
        return True
    return session.execute(visible.where(SectionMember.learner_id == learner_id).limit(1)).first() is not None


__all__ = ["ensure_section", "set_members", "add_member", "sections_of", "all_sections", "assisted_learners",
           "visible_learners", "may_see"]
