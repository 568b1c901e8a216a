"""A roster (CSV) into sections: accounts for the people on it, the "ta" role for its teaching assistants, and
each section it names holding exactly the learners and TAs it lists for it (`sections.set_members`), so importing
the same file again changes nothing and a later roster moves people between sections. Sections the file does not
name are left alone. An LTI roster (Names and Role Provisioning) fills sections through the same functions.

Columns (a header row, in any order): `email` (required), `name`, `section` (one name, or several separated by
`;`), `role` (`learner`, the default, or `ta`). An account made here gets a random password: its owner chooses
one through "Forgot your password?" or a link from `course users reset-link`, or signs in from the LMS.
"""

from __future__ import annotations

import csv
import io
import secrets
from dataclasses import dataclass, field

from sqlalchemy.orm import Session

from app.accounts import users as accounts
from app.learning.sections import set_members

ROSTER_ROLES = ("learner", "ta")


class RosterError(ValueError):
    """A roster that cannot be read: the sentence names the line and what to fix."""


@dataclass
class RosterReport:
    created: list[str] = field(default_factory=list)  # emails of accounts made
    tas: list[str] = field(default_factory=list)  # emails given the role "ta"
    sections: dict[str, tuple[int, int]] = field(default_factory=dict)  # section -> (learners, TAs)


def read_roster(text: str) -> list[dict[str, str]]:
    """Read a roster's rows (lower-case column names, values stripped); RosterError naming the line otherwise."""
    reader = csv.DictReader(io.StringIO(text.lstrip("\ufeff")))
    if not reader.fieldnames or "email" not in [f.strip().lower() for f in reader.fieldnames]:
        raise RosterError("The roster needs a header row with an `email` column (and optionally name, section, "
                          "role).")
    rows = []
    for number, raw in enumerate(reader, start=2):
        row = {(k or "").strip().lower(): (v or "").strip() for k, v in raw.items() if k is not None}
        if not any(row.values()):
            continue
        if not accounts.EMAIL_RE.match(row.get("email", "")):
            raise RosterError(f"Line {number}: {row.get('email', '')!r} is not an email address.")
        role = (row.get("role") or "learner").lower()
        if role not in ROSTER_ROLES:
            raise RosterError(f"Line {number}: role {role!r} is not one of {', '.join(ROSTER_ROLES)}.")
        row["role"] = role
        rows.append(row)
    return rows


def import_roster(session: Session, rows: list[dict[str, str]]) -> RosterReport:
    """Create missing accounts, give TAs their role, and set each named section's learners and TAs."""
    report = RosterReport()
    members: dict[str, dict[str, list[str]]] = {}
    for row in rows:
        user = accounts.find_by_email(session, row["email"])
        if user is None:
            user = accounts.create_user(session, email=row["email"], password=secrets.token_urlsafe(24),
                                        display_name=row.get("name") or row["email"].split("@")[0])
            report.created.append(user.email)
        if row["role"] == "ta" and user.role == "learner":  # an instructor stays one
            user.role = "ta"
            report.tas.append(user.email)
        for name in filter(None, (part.strip() for part in (row.get("section") or "").split(";"))):
            members.setdefault(name, {"learner": [], "ta": []})[row["role"]].append(user.learner_id)
    for name, by_role in members.items():
        for role, learner_ids in by_role.items():
            set_members(session, name, learner_ids, role=role)
        report.sections[name] = (len(set(by_role["learner"])), len(set(by_role["ta"])))
    session.flush()
    return report


__all__ = ["RosterError", "RosterReport", "read_roster", "import_roster", "ROSTER_ROLES"]
