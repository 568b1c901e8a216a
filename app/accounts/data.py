"""What the database holds about one account: export it all, or delete the account.

Which rows are "about" an account is read from the tables themselves: the `users` row, its `learners` row, and
every row of any table with a foreign key to either (progress, submissions, comments, reset links, signed-in
sessions, and tables added later), and the rows that hang off the learner's submissions (their verdict history
after regrades). So a new table that points at a user or a learner is exported without a change here, and the
tests that compare the export with the database fail if it is not deleted as it should be.

Deleting: the user, their learner (and so, by ON DELETE CASCADE, lessons read, exercise progress and
submissions), their reset links and signed-in sessions go. Their comments stay, with no author ("deleted
user"), so replies keep their place; delete comments first to remove their text. What an instructor did as a
moderator (hiding or deleting others' comments) is stored on those comments, not on the instructor, and stays.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Table, delete, or_, select, update
from sqlalchemy.orm import Session

from app.accounts.users import require_password
from app.models import Base, Comment, Learner, Submission, User, utcnow

# columns an export leaves out, and why (the owner cannot use them, and a copy only helps an attacker)
OMITTED = {
    "users.password_hash": "an argon2 hash of your password; exported nowhere",
    "password_resets.token_hash": "a hash of a reset link's token; the link itself was never stored",
    "user_sessions.token_hash": "a hash of a signed-in browser's session token; the token is in its cookie only",
}
EXPORT_FORMAT = 1


def _owner_clause(table: Table, user_id: int, learner_id: str):
    """Return SQL selecting the rows of `table` that belong to this account, or None if none can."""
    if table.name == User.__tablename__:
        return table.c.id == user_id
    if table.name == Learner.__tablename__:
        return table.c.id == learner_id
    keys = {(User.__tablename__, "id"): user_id, (Learner.__tablename__, "id"): learner_id}
    clauses = [fk.parent == keys[(fk.column.table.name, fk.column.name)]
               for fk in table.foreign_keys if (fk.column.table.name, fk.column.name) in keys]  # fmt: skip
    # one step further for the learner's own submissions: their verdict history (regrades) is about them too
    clauses += [fk.parent.in_(select(Submission.id).where(Submission.learner_id == learner_id))
                for fk in table.foreign_keys if fk.column.table.name == Submission.__tablename__]  # fmt: skip
    return or_(*clauses) if clauses else None


def owned_tables() -> list[Table]:
    """Return every table that can hold rows about an account, in dependency order."""
    return [t for t in Base.metadata.sorted_tables if _owner_clause(t, 0, "") is not None]


def _plain(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value


def rows_about(session: Session, *, user_id: int, learner_id: str) -> dict[str, list[dict[str, Any]]]:
    """Return {table: [row as a dict of column -> value]} for every row about this account, secrets left out."""
    found = {}
    for table in owned_tables():
        columns = [c for c in table.columns if f"{table.name}.{c.name}" not in OMITTED]
        query = select(*columns).where(_owner_clause(table, user_id, learner_id))
        rows = session.execute(query.order_by(*table.primary_key.columns)).mappings()
        found[table.name] = [{key: _plain(value) for key, value in row.items()} for row in rows]
    return found


def export_account(session: Session, *, user: User) -> dict[str, Any]:
    """Return everything stored about this account as one JSON-ready object."""
    return {
        "format": EXPORT_FORMAT,
        "exported_at": utcnow().isoformat(),
        "user_id": user.id,
        "learner_id": user.learner_id,
        "tables": rows_about(session, user_id=user.id, learner_id=user.learner_id),
        "omitted": OMITTED,
    }


def delete_account(session: Session, *, user: User, password: str) -> None:
    """Delete the account after checking its password (AccountError 403); its comments stay as "deleted user"."""
    require_password(user, password)
    # explicit, not left to ON DELETE SET NULL: the comments' fate is the point of this function
    session.execute(update(Comment).where(Comment.author_id == user.id).values(author_id=None))
    learner_id = user.learner_id
    session.execute(delete(User).where(User.id == user.id))  # reset links go by ON DELETE CASCADE
    # lessons read, exercise progress and submissions go with the learner by ON DELETE CASCADE
    session.execute(delete(Learner).where(Learner.id == learner_id))


__all__ = ["OMITTED", "owned_tables", "rows_about", "export_account", "delete_account"]
